#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# file.write by chunks against the real daemon (docs/protocol.md, "file.write by chunks"): the
# ready event, file.chunk lines in the canonical form (the fast path) and in any other form (the
# general path), ack events, zeros as holes, the window; every bad chunk of the protocol with its
# code and field, the old file intact after each; chunks of an ended transfer dropped, an unknown
# id answered once; a client killed mid-transfer and one that stops sending (request_timeout):
# the helper killed, the old file intact, no temporary name and no file-N cgroup left; the
# connection's other requests answered while a transfer waits; the daemon's memory bounded while
# 256 MiB go through it.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true}')
SB=$(jget "$r" .sandbox.id)
like "$SB" '^sbx-' "a sandbox"
CGS=$(jget "$r" .sandbox.cgroup)
export SB CGS
if daemon_is_asan; then export DAEMON_ASAN=1; fi
# A destroyed sandbox's tree is removed by a sandboxd-rm child after the reply: let it finish
# before the daemon stops, so that lib.sh finds the daemon's cgroup leaf empty.
removals_done() { [ "$(daemon_children_named sandboxd-rm)" = 0 ]; }

cat >"$T/chunks.py" <<'PYEOF'
import base64, hashlib, json, os, time
from client import Conn, check, is_, wait_for

sock, sb = os.environ["SOCK"], os.environ["SB"]

def conn(timeout=60):
    """A connection whose call() ids (runs, stats) stay clear of the small ids the writes use."""
    c = Conn(sock, timeout)
    c.next_id = 10**6
    return c

def err(r):
    return (r.get("error") or {}).get("code"), (r.get("error") or {}).get("field")

def chunk_line(rid, seq, data=None, eof=False, zeros=None, canonical=True):
    """The canonical form (what libsandbox writes) or, with canonical=False, the same fields in
    another order with spaces (the general path)."""
    if canonical and zeros is None and data is not None:
        line = '{"id":%d,"op":"file.chunk","seq":%d,"data":"%s"%s}' % (
            rid, seq, base64.b64encode(data).decode(), ',"eof":true' if eof else "")
        return line.encode() + b"\n"
    m = {"seq": seq, "op": "file.chunk", "id": rid}
    if data is not None:
        m["data"] = base64.b64encode(data).decode()
    if zeros is not None:
        m["zeros"] = zeros
    if eof:
        m["eof"] = True
    return json.dumps(m).encode() + b"\n"

class Writer:
    """One chunked file.write on conn: start() waits for ready; send() keeps within the window,
    reading acks; finish() returns the final reply."""
    def __init__(self, c, rid, path, size=None, **kw):
        self.c, self.rid, self.seq, self.acked, self.acks = c, rid, 0, 0, []
        req = {"id": rid, "op": "file.write", "sandbox": sb, "path": path}
        if size is not None:
            req["size"] = size
        req.update(kw)
        self.req = req
        self.ready = None
        self.final = None

    def start(self):
        self.c.send(self.req)
        while self.ready is None and self.final is None:
            self.take(self.recv(30))
        return self.ready

    def recv(self, timeout):
        """The next line for this write: one another writer of the connection put aside, or
        the next one read."""
        for i, m in enumerate(self.c.pending):
            if m.get("id") == self.rid:
                return self.c.pending.pop(i)
        return self.c.recv_json(timeout)

    def take(self, m):
        if m is None:
            raise Exception("connection closed")
        if m.get("id") != self.rid:
            self.c.pending.append(m)
        elif m.get("event") == "ready":
            self.ready = m
        elif m.get("event") == "ack":
            self.acks.append(m)
            self.acked = m["seq"] + 1
        elif "ok" in m:
            self.final = m

    def send(self, data=None, eof=False, zeros=None, canonical=True):
        while self.final is None and self.seq - self.acked >= self.ready["window"]:
            self.take(self.recv(30))
        if self.final is not None:
            return
        self.c.send_raw(chunk_line(self.rid, self.seq, data, eof, zeros, canonical))
        self.seq += 1

    def send_all(self, blob, canonical=True):
        n = self.ready["chunk_bytes"]
        for off in range(0, len(blob), n):
            self.send(blob[off:off + n], off + n >= len(blob), canonical=canonical)
        if not blob:
            self.send(b"", True)

    def finish(self, timeout=120):
        while self.final is None:
            self.take(self.recv(timeout))
        return self.final

def run(c, script):
    return c.call({"op": "run", "sandbox": sb, "argv": ["sh", "-c", script]}, 60).get("stdout", "")

def sha_in(c, path):
    return run(c, "sha256sum < %s" % path).split(" ")[0]

def write_blob(c, rid, path, blob, canonical=True, **kw):
    w = Writer(c, rid, path, size=len(blob), **kw)
    if not w.start():
        return w.final, w
    w.send_all(blob, canonical)
    return w.finish(), w
PYEOF

run_py "chunked writes" 600 <<'PYEOF'
import array, base64, hashlib, json, os, socket, time
exec(open(os.environ["T"] + "/chunks.py").read())

c = conn(60)
run(c, "mkdir -p /work/c")

# ---- round trips
text = b"".join(b"line %d of a text file\n" % i for i in range(200000))
r, w = write_blob(c, 1, "/work/c/text", text)
is_((w.ready or {}).get("chunk_bytes"), 1 << 20, "ready: chunk_bytes 1048576")
is_((w.ready or {}).get("window"), 4, "ready: window 4")
is_((r.get("ok"), r.get("bytes"), r.get("created")), (True, len(text), True), "a text file by chunks: ok, its bytes, created")
is_(sha_in(c, "/work/c/text"), hashlib.sha256(text).hexdigest(), "... the same bytes (sha256)")
is_([a["seq"] for a in w.acks], list(range(w.seq)), "... every chunk acknowledged once, in order")
is_([a["bytes"] for a in w.acks][-1], len(text), "... the last ack's bytes is the total")

allbytes = bytes(range(256)) * 8192 + bytes(range(256))[::-1]
r, w = write_blob(c, 2, "/work/c/bin", allbytes, mode=0o600)
is_(r.get("bytes"), len(allbytes), "all 256 byte values (2 MiB and 256 bytes, three chunks): ok")
is_(sha_in(c, "/work/c/bin"), hashlib.sha256(allbytes).hexdigest(), "... the same bytes")
is_(run(c, "stat -c %a /work/c/bin"), "600\n", "... with its mode")

r, w = write_blob(c, 3, "/work/c/bin2", allbytes, canonical=False)
is_(sha_in(c, "/work/c/bin2"), hashlib.sha256(allbytes).hexdigest(),
    "chunks in another form (keys reordered, spaces: the general path): the same bytes")

r, w = write_blob(c, 4, "/work/c/empty", b"")
is_((r.get("ok"), r.get("bytes"), run(c, "stat -c %s /work/c/empty")), (True, 0, "0\n"), "an empty file: one eof chunk")

w = Writer(c, 5, "/work/c/sparse", size=100 + (16 << 20) + 1 + (1 << 20))
w.start()
w.send(b"A" * 100)
w.send(zeros=16 << 20, canonical=False)
w.send(b"B")
w.send(zeros=1 << 20, eof=True, canonical=False)
r = w.finish()
want = b"A" * 100 + bytes(16 << 20) + b"B" + bytes(1 << 20)
is_((r.get("bytes"), sha_in(c, "/work/c/sparse")), (len(want), hashlib.sha256(want).hexdigest()),
    "a sparse file by zeros chunks: its bytes")
du = int(run(c, "du -k /work/c/sparse").split()[0] or 999999)
check(du <= 64, "... and holes inside (du %d KiB for 17 MiB)" % du)

big = os.urandom(64 << 20)
r, w = write_blob(c, 6, "/work/c/big", big)
is_((r.get("bytes"), sha_in(c, "/work/c/big")), (64 << 20, hashlib.sha256(big).hexdigest()), "64 MiB by chunks: the same bytes")
run(c, "rm -f /work/c/big /work/c/sparse")
del big

# in place at an offset, a hole there zeroes what was there
run(c, "printf 'abcdefghij' > /work/c/inplace")
w = Writer(c, 7, "/work/c/inplace", atomic=False, offset=2)
w.start()
w.send(b"XY")
w.send(zeros=3, canonical=False)
w.send(b"Z", eof=True)
r = w.finish()
is_((r.get("bytes"), run(c, "od -An -c /work/c/inplace | tr -s ' '")), (6, " a b X Y \\0 \\0 \\0 Z i j\n"),
    "in place by chunks (atomic false, offset 2): bytes and zeros over the old ones")

# ---- another request of the connection while a transfer waits for chunks
w = Writer(c, 8, "/work/c/waits", size=3)
w.start()
r = c.call({"id": 9, "op": "file.stat", "sandbox": sb, "path": "/work/c/text"}, 10)
is_((r.get("stat") or {}).get("size"), len(text), "a file.stat answered while a transfer waits for its chunks")
w.send(b"abc", eof=True)
is_(w.finish().get("bytes"), 3, "... and the transfer goes on")
del text

# ---- bad chunks: the transfer ends with the code and field, the old file stays
OLD = "old contents\n"
def fresh():
    run(c, "printf '%s' > /work/c/old" % OLD)

def intact(desc):
    is_(run(c, "cat /work/c/old; ls -A /work/c | grep -c sbx-"), OLD + "0\n", "... " + desc)

def bad(rid, lines, code, field, desc, size=None, before_ready=False, match=None):
    fresh()
    w = Writer(c, rid, "/work/c/old", size=size)
    if before_ready:
        c.send_raw(json.dumps(w.req).encode() + b"\n" + b"".join(lines))
    else:
        w.start()
        c.send_raw(b"".join(lines))  # one send: the daemon reads them together, before any ack
    r = w.finish(30)
    check(err(r) == (code, field), desc + ": %s, field %s" % (code, field), r)
    if match:
        check(match in ((r.get("error") or {}).get("message") or ""), "... saying " + repr(match), r)
    intact("the old file intact, no temporary name")
    return r

bad(20, [chunk_line(20, 0, b"x"), chunk_line(20, 2, b"y")], "invalid_request", "seq", "a chunk out of order",
    match="expected seq 1, got 2")
bad(21, [chunk_line(21, i, b"x") for i in range(5)], "invalid_request", "seq", "a chunk beyond the window",
    match="beyond the window")
bad(22, [chunk_line(22, 0, b"x")[:-3] + b'!!"}\n'], "invalid_request", "data", "bad base64 in a canonical line")
bad(23, [b'{"id":23,"op":"file.chunk","seq":0,"data":"QQ=="}\n'.replace(b"QQ==", b"QR==")], "invalid_request", "data",
    "non-canonical padding bits")
bad(24, [chunk_line(24, 0, b"z" * ((1 << 20) + 3))], "invalid_request", "data", "a chunk over chunk_bytes")
bad(25, [chunk_line(25, 0, b"x", zeros=5)], "invalid_request", "zeros", "data and zeros in one chunk")
bad(26, [chunk_line(26, 0, b"x" * 20)], "invalid_request", "size", "more bytes than size", size=10)
bad(27, [chunk_line(27, 0, b"x" * 10, eof=True)], "invalid_request", "size", "eof short of size", size=100,
    match="ended after 10 of 100 bytes")
bad(28, [chunk_line(28, 0, b"x")], "invalid_request", "seq", "a chunk before the ready event", before_ready=True)
bad(29, [b'{"id":29,"op":"file.chunk","seq":"0","data":""}\n'], "invalid_request", "seq", "a seq that is a string")
bad(30, [b'{"id":30,"op":"file.chunk","seq":0,"data":"","colour":1}\n'], "invalid_request", "colour", "an unknown field")
bad(31, [b'{"id":31,"op":"file.chunk","seq":0,"data":"eA\x01="}\n'], "invalid_json", None,
    "a raw control byte in a canonical line's data (no JSON: the transfer ends)")

fresh()
w = Writer(c, 32, "/work/c/old", size=1)
w.start()
rp, wp = os.pipe()
c.s.sendmsg([b'{"id":32,"op":"file.chunk","seq":0,"data":"eA==","eof":true,"fds":1}\n'],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [rp]))])
os.close(rp)
r = w.finish(30)
check(err(r) == ("invalid_request", "fds"), "a chunk with an fd: invalid_request, field fds", r)
intact("the old file intact, no temporary name")
try:
    os.write(wp, b"x")
    closed = False
except BrokenPipeError:
    closed = True
check(closed, "... and the daemon closed the fd (its pipe has no reader left)")
os.close(wp)

# chunks of an ended transfer are dropped without a reply; an unknown id gets one reply
c.send_raw(chunk_line(29, 3, b"late") + chunk_line(30, 5, b"late", canonical=False))
r = c.call({"id": 40, "op": "health"}, 10)
m = [x for x in c.pending if x.get("id") in (29, 30)]
check(r.get("ok") and not m, "chunks of ended transfers (fast and general path): dropped, no reply", r, m)
c.send_raw(chunk_line(41, 0, b"stray"))
m = c.recv_json(10) or {}
is_((m.get("id"), err(m)), (41, ("invalid_request", "id")), "a chunk with an id no transfer has: invalid_request, field id")
check("no file.write with this id in flight" in ((m.get("error") or {}).get("message") or ""), "... saying so", m)
c.send_raw(chunk_line(42, 0, b"stray", canonical=False))
m = c.recv_json(10) or {}
is_((m.get("id"), err(m)), (42, ("invalid_request", "id")), "... the same by the general path")

# a second transfer with the id of one in flight
fresh()
w = Writer(c, 43, "/work/c/old", size=1)
w.start()
c.send({"id": 43, "op": "file.write", "sandbox": sb, "path": "/work/c/other", "size": 1})
m = c.recv_json(10) or {}
is_((m.get("id"), err(m)), (43, ("invalid_request", "id")), "a file.write by chunks with the id of one in flight: refused")
w.send(b"N", eof=True)
is_((w.finish().get("bytes"), run(c, "cat /work/c/old")), (1, "N"), "... the first goes on")
is_(err(c.call({"op": "file.write", "sandbox": sb, "path": "/work/c/x", "id": None}, 10)), ("invalid_request", "id"),
    "a file.write by chunks without an id: refused")
is_(run(c, "ls /work/c/other /work/c/x 2>&1 | grep -c 'No such'"), "2\n", "... neither made a file")

# ---- caps: 4 transfers in flight on a connection
ws = [Writer(c, 60 + i, "/work/c/cap%d" % i, size=1) for i in range(4)]
is_([bool(w.start()) for w in ws], [True] * 4, "4 transfers waiting for chunks on one connection")
r = Writer(c, 64, "/work/c/cap4", size=1)
r.start()
check(err(r.final or {}) == ("resource_exhausted", "sandbox") and "4 file transfers" in r.final["error"]["message"],
      "a 5th file.write: resource_exhausted, field sandbox", r.final)
is_(err(c.call({"id": 65, "op": "file.read", "sandbox": sb, "path": "/work/c/text"}, 10)), ("resource_exhausted", "sandbox"),
    "... a file.read too")
check(c.call({"id": 66, "op": "file.stat", "sandbox": sb, "path": "/work/c"}, 10).get("ok"), "... a file.stat is no transfer: served")
c2 = conn(30)
r, w2 = write_blob(c2, 1, "/work/c/cap-other", b"other")
is_(r.get("bytes"), 5, "... another connection's transfer is served")
for i, w in enumerate(ws):
    w.send(b"%d" % i, eof=True)
is_([w.finish().get("bytes") for w in ws], [1] * 4, "the four end")
r, w = write_blob(c, 67, "/work/c/cap4", b"again")
is_(r.get("bytes"), 5, "... and the connection may start a transfer again")
PYEOF

# ---- libsandbox (sbx_file_write of a buffer, sbx_file_write_from an fd) and sandboxctl cp - SBX:FILE
TOOL=$top_builddir/tests/file-write-tool
sha_in() { rpc '{"op":"run","sandbox":"'"$SB"'","argv":["sh","-c","sha256sum < '"$1"'"]}' 60 | jq -r .stdout | cut -d' ' -f1; }
du_in() { rpc '{"op":"run","sandbox":"'"$SB"'","argv":["du","-k","'"$1"'"]}' 60 | jq -r .stdout | cut -f1; }
head -c 3M /dev/urandom >"$T/rand"
truncate -s 20M "$T/sparse" && printf 'head' | dd of="$T/sparse" conv=notrunc status=none &&
        printf 'tail' | dd of="$T/sparse" bs=1 seek=$((20 << 20)) conv=notrunc status=none
if [ -x "$TOOL" ]; then
        "$TOOL" "$SOCK" "$SB" /work/lib-buffer buffer <"$T/rand" >"$T/tool.out" 2>&1
        is "$?" 0 "sbx_file_write of a 3 MiB buffer (by chunks): ok"
        is "$(sha_in /work/lib-buffer)" "$(sha256sum <"$T/rand" | cut -d' ' -f1)" "... the same bytes"
        "$TOOL" "$SOCK" "$SB" /work/lib-sparse from <"$T/sparse" >"$T/tool.out" 2>&1
        is "$?" 0 "sbx_file_write_from a 20 MiB sparse file (read here, sent by chunks): ok"
        is "$(sha_in /work/lib-sparse)" "$(sha256sum <"$T/sparse" | cut -d' ' -f1)" "... the same bytes"
        check "... its hole a hole inside (du $(du_in /work/lib-sparse) KiB)" [ "$(du_in /work/lib-sparse)" -le 64 ]
        cat "$T/rand" | "$TOOL" "$SOCK" "$SB" /work/lib-pipe from >"$T/tool.out" 2>&1
        is "$?" 0 "sbx_file_write_from a pipe: ok"
        is "$(sha_in /work/lib-pipe)" "$(sha256sum <"$T/rand" | cut -d' ' -f1)" "... the same bytes"
else
        nok "the test client is built at $TOOL (make check builds it)"
fi
cat "$T/rand" | ctl cp - "$SB:/work/ctl-pipe"
is "$?" 0 "cat FILE | sandboxctl cp - SBX:/work/ctl-pipe (a pipe, handed over): ok"
is "$(sha_in /work/ctl-pipe)" "$(sha256sum <"$T/rand" | cut -d' ' -f1)" "... the same bytes"
python3 - "$SANDBOXCTL" "$SOCK" "$SB" "$T/rand" <<'PYEOF'
import socket, subprocess, sys
ctl, sock, sb, src = sys.argv[1:]
a, b = socket.socketpair()
p = subprocess.Popen([ctl, "--socket", sock, "cp", "-", sb + ":/work/ctl-sock"], stdin=b)
b.close()
a.sendall(open(src, "rb").read())
a.shutdown(socket.SHUT_WR)
sys.exit(p.wait(60))
PYEOF
is "$?" 0 "sandboxctl cp - SBX:/work/ctl-sock from a socket (read by sandboxctl, sent by chunks): ok"
is "$(sha_in /work/ctl-sock)" "$(sha256sum <"$T/rand" | cut -d' ' -f1)" "... the same bytes"

# ---- a client killed mid-transfer
run_py "a client killed mid-transfer" 120 <<'PYEOF'
import os, signal, subprocess, sys, time
exec(open(os.environ["T"] + "/chunks.py").read())
c = conn(60)
run(c, "mkdir -p /work/k && printf 'kept\\n' > /work/k/f")
child = subprocess.Popen([sys.executable, "-c", r'''
import os, sys
sys.path.insert(0, os.environ["TESTS_DIR"])
exec(open(os.environ["T"] + "/chunks.py").read())
c = conn(60)
w = Writer(c, 1, "/work/k/f", size=10 << 20)
w.start()
w.send(b"x" * (1 << 20))
w.send(b"y" * (1 << 20))
while not w.acks:
    w.take(c.recv_json(30))
print("acked", flush=True)
os.kill(os.getpid(), 9)
'''], stdout=subprocess.PIPE)
out = child.stdout.readline()
child.wait()
is_((out, child.returncode), (b"acked\n", -9), "a client sent two chunks, had one acknowledged, and was killed")
cgs = os.environ["CGS"]
def helpers():
    return [d for d in os.listdir(cgs) if d.startswith("file-")]
check(wait_for(lambda: not helpers(), 10), "... its helper is gone and its file-N cgroup removed", helpers())
is_(run(c, "cat /work/k/f; ls -A /work/k | grep -c sbx-"), "kept\n0\n", "... the old file intact, no temporary name")
PYEOF

# ---- the daemon's memory while 256 MiB go through it by chunks
run_py "256 MiB by chunks, the daemon's memory bounded" 600 <<'PYEOF'
import base64, hashlib, os
exec(open(os.environ["T"] + "/chunks.py").read())
c = conn(120)
def rss():
    for l in open("/proc/%s/status" % os.environ["DAEMON_PID"]):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])
block = os.urandom(1 << 20)
b64 = base64.b64encode(block).decode()
n = 256
w = Writer(c, 1, "/work/big", size=n << 20)
w.start()
rss0 = rss()
peak = rss0
for seq in range(n):
    while w.final is None and w.seq - w.acked >= w.ready["window"]:
        w.take(c.recv_json(30))
    c.send_raw(('{"id":1,"op":"file.chunk","seq":%d,"data":"%s"%s}\n' % (seq, b64, ',"eof":true' if seq == n - 1 else "")).encode())
    w.seq += 1
    if seq % 16 == 0:
        peak = max(peak, rss())
r = w.finish(300)
peak = max(peak, rss())
h = hashlib.sha256()
for i in range(n):
    h.update(block)
is_((r.get("bytes"), sha_in(c, "/work/big")), (n << 20, h.hexdigest()), "256 MiB by chunks: the same bytes")
desc = "... the daemon's RSS grew by %d KiB at most (< 16 MiB: window x chunk_bytes and a line)" % (peak - rss0)
if os.environ.get("DAEMON_ASAN"):
    check(True, desc + " # SKIP an ASan build holds freed memory in quarantine")
else:
    check(peak - rss0 < 16 << 10, desc)
run(c, "rm -f /work/big")
PYEOF

is "$(find "$CGS" -mindepth 1 -maxdepth 1 -name 'file-*' -type d | wc -l)" 0 "no file-N cgroup left in the sandbox"
is "$(daemon_children_named sandboxd-file-h)" 0 "no file helper left"
rpc '{"op":"destroy","sandbox":"'"$SB"'"}' >/dev/null
wait_until 30 removals_done || diag "a sandboxd-rm is still running"
stop_daemon

# ---- max_file_transfers_per_uid, for a client that is not root (root is not capped)
printf 'max_file_transfers_per_uid = 5\n' >"$T/caps.conf"
start_daemon --config "$T/caps.conf" || exit 0
chmod 0755 "$T" && chmod 0666 "$SOCK"
other_user_files
cp "$T/chunks.py" "$OTHER_DIR/" && chmod a+r "$OTHER_DIR/chunks.py"
as_other 65534 --regid=65534 --clear-groups -- env SOCK="$SOCK" SB=none T="$OTHER_DIR" PYTHONPATH="$OTHER_DIR" \
        timeout -k 5 120 python3 - >"$T/py.out" 2>"$T/py.err" <<'PYEOF'
import os
exec(open(os.environ["T"] + "/chunks.py").read())
a, b = conn(60), conn(60)
r = a.call({"op": "create", "best_effort": True}, 60)
check(r.get("ok"), "uid 65534 creates a sandbox", r)
sb = (r.get("sandbox") or {}).get("id")
def writer(c, rid, n):
    return Writer(c, rid, "/work/u%d" % n, size=1)
ws = [writer(a, 10 + i, i) for i in range(4)] + [writer(b, 10, 4)]
for w in ws:
    w.req["sandbox"] = sb
is_([bool(w.start()) for w in ws], [True] * 5, "5 transfers of uid 65534 on two connections")
x = writer(b, 11, 5)
x.req["sandbox"] = sb
x.start()
check(err(x.final or {}) == ("resource_exhausted", "sandbox") and "max_file_transfers_per_uid" in x.final["error"]["message"],
      "a 6th: resource_exhausted, field sandbox (max_file_transfers_per_uid)", x.final)
for w in ws:
    w.send(b"z", eof=True)
is_([w.finish().get("bytes") for w in ws], [1] * 5, "the five end")
y = writer(b, 12, 5)
y.req["sandbox"] = sb
y.start()
y.send(b"z", eof=True)
is_(y.finish().get("bytes"), 1, "... and a new one is served")
check(a.call({"op": "destroy", "sandbox": sb}, 60).get("ok"), "its sandbox destroyed")
PYEOF
rc=$?
while IFS= read -r line; do
        case $line in
        "PASS "*) ok "${line#PASS }" ;;
        "FAIL "*) nok "${line#FAIL }" ;;
        *) printf '# %s\n' "$line" ;;
        esac
done <"$T/py.out"
is "$rc" 0 "the checks as uid 65534 ran to the end"
[ "$rc" = 0 ] || diag "$(tail -n 20 "$T/py.err")"
wait_until 30 removals_done || diag "a sandboxd-rm is still running"
stop_daemon

# ---- a client that stops sending: abandoned after request_timeout
printf 'request_timeout = 2s\n' >"$T/timeout.conf"
start_daemon --config "$T/timeout.conf" || exit 0
r=$(rpc '{"op":"create","best_effort":true}')
SB=$(jget "$r" .sandbox.id)
CGS=$(jget "$r" .sandbox.cgroup)
export SB CGS
run_py "a transfer without progress" 60 <<'PYEOF'
import os, time
exec(open(os.environ["T"] + "/chunks.py").read())
c = conn(60)
run(c, "printf 'kept\\n' > /work/f")
w = Writer(c, 1, "/work/f", size=100)
w.start()
w.send(b"x" * 10)
t0 = time.monotonic()
r = w.finish(20)
dt = time.monotonic() - t0
check(err(r) == ("invalid_request", "seq") and "request_timeout" in r["error"].get("message", ""),
      "no chunk for request_timeout (2 s): the transfer ends, invalid_request, field seq", r)
check(1.5 < dt < 15, "... after about request_timeout (%.1f s)" % dt)
check(wait_for(lambda: not [d for d in os.listdir(os.environ["CGS"]) if d.startswith("file-")], 10),
      "... its helper is gone with its file-N cgroup")
is_(run(c, "cat /work/f; ls -A /work | grep -c sbx-"), "kept\n0\n", "... the old file intact, no temporary name")
r = c.call({"op": "health"}, 10)
check(r.get("ok"), "... and the connection is still served", r)
PYEOF
rpc '{"op":"destroy","sandbox":"'"$SB"'"}' >/dev/null
wait_until 30 removals_done || diag "a sandboxd-rm is still running"
stop_daemon
