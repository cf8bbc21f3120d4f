#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An attacker inside the sandbox racing file.get and file.put (docs/design/files.md, 5.3): a
# process swaps a directory for a symlink to /etc, to a directory of the sandbox outside the
# target, and to a host path, in a loop, while 150 file.get and 150 file.put run through it. The
# walk never follows a link (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS from each parent's fd): no entry
# of /etc and no byte of the host canary is ever archived, nothing is written outside, and every
# reply is ok or a clean error.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true}')
SB=$(jget "$r" .sandbox.id)
like "$SB" '^sbx-' "a sandbox"
mkdir -p "$T/hostdir" && echo "host canary $$ $RANDOM" >"$T/hostdir/canary"
export SB

run_py "file.get and file.put raced" 600 <<'PYEOF'
import array, io, json, os, socket, tarfile, time
from client import Conn, check, is_

sock, sb, T = os.environ["SOCK"], os.environ["SB"], os.environ["T"]
host = open(os.path.join(T, "hostdir", "canary"), "rb").read()
c = Conn(sock, 60)
c.next_id = 10**6

def call(op, conn=None, **kw):
    req = {"op": op, "sandbox": sb}
    req.update(kw)
    return (conn or c).call(req, 120) or {}

call("run", argv=["sh", "-c", "mkdir -p /work/race/d /work/put/d /work/outside && echo inside > /work/race/d/f && "
                  "touch /work/go"])
# The swapper: d is a directory, then a symlink to /etc, to /work/outside, to the host's
# directory (which does not exist inside), and a directory again; until /work/go is removed.
swap = r"""cd /work/$1 || exit 1
while [ -e /work/go ]; do
  mv -T d d.x 2>/dev/null
  ln -sT /etc d 2>/dev/null; rm -f d 2>/dev/null
  ln -sT /work/outside d 2>/dev/null; rm -f d 2>/dev/null
  ln -sT %s/hostdir d 2>/dev/null; rm -f d 2>/dev/null
  mv -T d.x d 2>/dev/null || rm -rf d.x
done""" % T
swappers = []
for where in ("race", "put"):
    s = Conn(sock, 300)
    # The default 60 s timeout is shorter than 300 copies take under ASan on a loaded machine: the
    # swapper runs until the test removes /work/go (and 600 s at most).
    s.send({"id": 1, "op": "run", "sandbox": sb, "argv": ["sh", "-c", swap, "swap", where], "timeout_s": 600})
    swappers.append(s)
time.sleep(0.5)

def get(path):
    out = os.path.join(T, "get.tar")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    rid = c.next_id
    c.next_id += 1
    req = {"id": rid, "op": "file.get", "sandbox": sb, "path": path, "fd": 0, "fds": 1}
    c.s.sendmsg([json.dumps(req).encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    os.close(fd)
    return c.final(rid, 120) or {}, open(out, "rb").read()

N = 150
bad_names, leaks, get_errors, oks, kinds = [], 0, set(), 0, set()
for i in range(N):
    r, data = get("/work/race")
    if not r.get("ok"):
        get_errors.add((r.get("error") or {}).get("code"))
        continue
    oks += 1
    if host in data:
        leaks += 1
    for m in tarfile.open(fileobj=io.BytesIO(data)):
        if m.name.startswith("race/d/") and m.name != "race/d/f" or m.name.startswith("race/d.x/") and m.name != "race/d.x/f":
            bad_names.append(m.name)
        if m.name == "race/d":
            kinds.add("dir" if m.isdir() else "symlink" if m.issym() else "other")
is_(leaks, 0, "%d file.get raced by swaps to the host's directory: no byte of the host canary archived" % N)
is_(bad_names[:5], [], "... no entry of /etc (or anything but the sandbox's own file) below the swapped directory")
check(oks > N // 2 and get_errors <= {"not_found", "invalid_request"}, "... every reply ok (%d) or a clean error %s" % (oks, sorted(map(str, get_errors))))
check("symlink" in kinds, "... the swapped name was caught as a symlink (archived as the link)", kinds)

def tar_of(i):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as tf:
        ti = tarfile.TarInfo("d/x%d" % i)
        ti.size = 4
        tf.addfile(ti, io.BytesIO(b"evil"))
    return b.getvalue()

put_errors, put_oks = set(), 0
src = os.path.join(T, "put.tar")
for i in range(N):
    with open(src, "wb") as f:
        f.write(tar_of(i))
    fd = os.open(src, os.O_RDONLY)
    rid = c.next_id
    c.next_id += 1
    req = {"id": rid, "op": "file.put", "sandbox": sb, "path": "/work/put", "fd": 0, "fds": 1}
    c.s.sendmsg([json.dumps(req).encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    os.close(fd)
    r = c.final(rid, 120) or {}
    if r.get("ok"):
        put_oks += 1
    else:
        put_errors.add(((r.get("error") or {}).get("code"), (r.get("error") or {}).get("field")))
call("file.remove", path="/work/go")
for s in swappers:
    fin = s.final(1, 300) or {}
    check(fin.get("ok") and fin.get("exit_code") == 0, "a swapper ran until told to stop", fin)
    s.close()
outside = call("run", argv=["sh", "-c", "ls -A /work/outside; ls -A /etc | grep -c '^x[0-9]'"]).get("stdout")
is_(outside, "0\n", "%d file.put raced by swaps to /etc and /work/outside: nothing written outside the target" % N)
is_(sorted(os.listdir(os.path.join(T, "hostdir"))), ["canary"], "... nothing written on the host")
check(put_oks > 0 and put_errors <= {("invalid_request", "tar"), ("not_found", "tar")},
      "... every reply ok (%d) or a clean error %s" % (put_oks, sorted(map(str, put_errors))))
PYEOF

rpc '{"op":"destroy","sandbox":"'"$SB"'"}' >/dev/null
stop_daemon
