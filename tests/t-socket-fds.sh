#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# File descriptors on the protocol socket (SCM_RIGHTS, docs/protocol.md "File descriptors"):
# every fd the daemon receives is either taken by the request that claims it or closed at once.
# Each case sends the write end of a pipe of ours and closes our copy: the read end sees EOF only
# once the daemon has closed its copy too, so "closed" is the kernel's word, not a guess. And the
# line that owns fds is the one that holds the last byte received with them: a line without fds
# merged in front of one with fds keeps none.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
fds0=$(daemon_fd_baseline)

run_py "fds on the socket" 120 <<'PYEOF'
import array, json, os, select, socket, time
from client import Conn, check, is_

sock = os.environ["SOCK"]

def pipes(n):
    rs, ws = [], []
    for _ in range(n):
        r, w = os.pipe()
        rs.append(r)
        ws.append(w)
    return rs, ws

def send_with(c, data, fds):
    n = c.s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    if n < len(data):
        c.s.sendall(data[n:])  # a stream socket may take part of a long line: the rest follows without fds
    for fd in fds:
        os.close(fd)

def all_closed(rs, limit=5.0):
    """Every read end sees EOF: the daemon holds no copy of the write ends."""
    deadline = time.monotonic() + limit
    left = list(rs)
    while left and time.monotonic() < deadline:
        ready, _, _ = select.select(left, [], [], 0.2)
        for r in ready:
            if os.read(r, 1) == b"":
                left.remove(r)
    for r in rs:
        os.close(r)
    return not left

def err_of(reply):
    return (reply or {}).get("error") or {}

# 1. fds with a line that claims none
c = Conn(sock, 10)
rs, ws = pipes(2)
send_with(c, b'{"id":1,"op":"hello"}\n', ws)
r = c.final(1, 10)
is_(err_of(r).get("code"), "invalid_request", "fds with a line without \"fds\": invalid_request")
is_(err_of(r).get("field"), "fds", "... field fds")
check("which takes none" in err_of(r).get("message", ""), "... saying the request takes none", r)
check(all_closed(rs), "... and both fds are closed")
r = c.call({"op": "health"}, 10)
check(r and r.get("ok"), "the connection goes on after the refused line", r)

# 2. "fds" claimed by an op that takes none
rs, ws = pipes(2)
send_with(c, b'{"id":2,"op":"hello","fds":2}\n', ws)
r = c.final(2, 10)
is_(err_of(r).get("field"), "fds", "hello with \"fds\":2 and two fds: refused, field fds")
check(all_closed(rs), "... both closed")

# 3. fewer than claimed
rs, ws = pipes(1)
send_with(c, b'{"id":3,"op":"hello","fds":2}\n', ws)
r = c.final(3, 10)
check("1 of 2 file descriptors arrived" in err_of(r).get("message", ""), "one fd of two claimed: \"1 of 2 ... arrived\"", r)
check(all_closed(rs), "... closed")

# 4. a bad "fds"
rs, ws = pipes(1)
send_with(c, b'{"id":4,"op":"hello","fds":"one"}\n', ws)
r = c.final(4, 10)
is_(err_of(r).get("field"), "fds", "\"fds\" not an integer: field fds")
check(all_closed(rs), "... closed")
c.send({"id": 5, "op": "hello", "fds": 9})
r = c.final(5, 10)
is_(err_of(r).get("field"), "fds", "\"fds\":9 (more than a message carries): field fds")

# 5. a line that is not JSON
rs, ws = pipes(1)
send_with(c, b'{"id":6,"op":\n', ws)
r = c.recv_json(10)
is_(err_of(r).get("code"), "invalid_json", "fds with a line that is not JSON: invalid_json")
check(all_closed(rs), "... closed")

# 6. a line without fds in front of one with fds, in one recvmsg of the daemon: the first keeps none
rs, ws = pipes(1)
c.send_raw(b'{"id":7,"op":"health"}\n')
send_with(c, b'{"id":8,"op":"hello","fds":1}\n', ws)
r7 = c.final(7, 10)
r8 = c.final(8, 10)
check(r7 and r7.get("ok"), "the line before the one with fds is answered ok (owns no fd)", r7)
is_(err_of(r8).get("field"), "fds", "the line with the fd owns it (and hello refuses it)")
check(all_closed(rs), "... closed")

# 7. an over-long line with fds (the daemon's max_line_bytes is 4 MiB by default)
rs, ws = pipes(1)
send_with(c, b'{"id":9,"op":"hello","x":"' + b"a" * (5 << 20) + b'"}\n', ws)
r = c.recv_json(20)
check(err_of(r).get("code") == "too_large", "an over-long line with an fd: too_large", r)
check(all_closed(rs), "... its fd closed")
r = c.call({"op": "health"}, 10)
check(r and r.get("ok"), "the connection goes on", r)
c.close()

# 8. nine fds in one message: more than the daemon's control buffer (MSG_CTRUNC)
c = Conn(sock, 10)
rs, ws = pipes(9)
send_with(c, b'{"id":1,"op":"hello","fds":9}\n', ws)
r = c.recv_json(10)
is_(err_of(r).get("field"), "fds", "nine fds in one message: an error, field fds")
check(r is not None and r.get("id") is None, "... with a null id", r)
check(c.recv_line(10) is None, "... and the connection is closed")
check(all_closed(rs), "... every fd that arrived is closed")
c.close()

# 9. more than 16 held by one connection: eight fds on each of three lines in one message stream
c = Conn(sock, 10)
rs, ws = pipes(8)
send_with(c, b'{"id":1,', ws)
rs2, ws2 = pipes(8)
send_with(c, b'"op":', ws2)
rs3, ws3 = pipes(8)
send_with(c, b'"hello"', ws3)
r = c.recv_json(10)
is_(err_of(r).get("field"), "fds", "24 fds held unclaimed by one connection: an error, field fds")
check(c.recv_line(10) is None, "... and the connection is closed")
check(all_closed(rs + rs2 + rs3), "... every fd closed")
c.close()
PYEOF

wait_fds "$fds0"
is "$(daemon_fds)" "$fds0" "the daemon's fd count is back to its baseline ($fds0)"
stop_daemon
