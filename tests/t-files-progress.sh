#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Progress events of the file transfers (docs/protocol.md "Files"): a 256 MiB file.write from a
# passed fd (with and without size, and from a pipe), file.read into a passed fd and as data
# events, file.write by chunks, file.put and file.get of a 256 MiB tree: each gets progress
# events whose bytes only grow and never pass the total, whose total is the size (null for a tar
# stream and a pipe), no more than one per 200 ms (the daemon's limiter, counted over the span they arrived in); a 4 KiB transfer
# gets none. sandboxctl cp draws its bar on a terminal only.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
SB=$(jget "$(rpc '{"op":"create","best_effort":true}')" .sandbox.id)
like "$SB" '^sbx-' "a sandbox"
export SB

run_py "progress" 600 <<'PYEOF'
import base64, io, json, os, select, socket, tarfile, threading, time
from client import Conn, check, is_

sock, sb, T = os.environ["SOCK"], os.environ["SB"], os.environ["T"]
MIB = 1 << 20
BIG = 256 * MIB
block = os.urandom(MIB)

class Raw:
    """A connection that reads fast: data events (the canonical form) are counted, not parsed,
    so that this client never lags behind the daemon and the gaps it sees are the daemon's."""
    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(sock)
        self.buf = b""
        self.data_bytes = 0

    def send(self, obj, fds=()):
        line = (json.dumps(obj) + "\n").encode()
        if fds:
            socket.send_fds(self.s, [line], list(fds))
        else:
            self.s.sendall(line)

    def send_raw(self, line):
        self.s.sendall(line)

    def lines(self, timeout=120):
        """(time, message) of each line but data events, until the final reply."""
        while True:
            while b"\n" not in self.buf:
                r, _, _ = select.select([self.s], [], [], timeout)
                if not r:
                    raise Exception("no answer in %d s" % timeout)
                b = self.s.recv(1 << 20)
                if not b:
                    raise Exception("connection closed")
                self.buf += b
            now = time.monotonic()
            parts = self.buf.split(b"\n")
            self.buf = parts.pop()
            for line in parts:
                if b'"event":"data"' in line[:64]:
                    self.data_bytes += 1
                    continue
                yield now, json.loads(line)

stamp = [time.monotonic()]

def collect(c, rid, on_event=None):
    """The progress events (time, bytes, total) and the final reply of request rid."""
    prog, final = [], None
    for t, m in c.lines():
        if m.get("id") != rid:
            continue
        if m.get("event") == "progress":
            prog.append((t, m.get("bytes"), m.get("total"), set(m)))
        elif on_event and "event" in m:
            on_event(m)
        elif "ok" in m:
            return prog, m

def check_progress(name, prog, final, total, end_bytes):
    """The rules every transfer's events keep."""
    print("%s: %.2f s" % (name, time.monotonic() - stamp[0]))
    stamp[0] = time.monotonic()
    is_(final.get("ok"), True, "%s: ok" % name)
    check(len(prog) >= 2, "%s: progress events came (%d)" % (name, len(prog)))
    if not prog:
        return
    is_(sorted(prog[0][3]), ["bytes", "event", "id", "total"], "%s: a progress event is id, event, bytes, total" % name)
    is_(sorted(set(p[2] for p in prog), key=str), [total], "%s: total is %s in each" % (name, json.dumps(total)))
    b = [p[1] for p in prog]
    check(all(isinstance(x, int) for x in b) and all(x < y for x, y in zip(b, b[1:])),
          "%s: bytes only grow" % name, b)
    lim = total if total is not None else end_bytes
    check(all(0 < x <= lim for x in b if isinstance(x, int)), "%s: bytes never pass %d" % (name, lim), b)
    # The daemon's limiter (one event per 200 ms), seen from here: arrival times jitter (two
    # events may arrive closer than they were sent), so the bound is on their number over the
    # span they arrived in, with one event of slack at each end.
    span = prog[-1][0] - prog[0][0]
    check(len(prog) <= span / 0.2 + 3, "%s: no more events than one per 200 ms (%d in %.2f s)" % (name, len(prog), span),
          [round(y[0] - x[0], 3) for x, y in zip(prog, prog[1:])])

GIB = 1 << 30
src = os.path.join(T, "huge.src")
with open(src, "wb") as f:
    for i in range(1024):
        f.write(i.to_bytes(8, "little") + block[8:])

c = Raw()

def paced_feed(wfd, pieces):
    """A pipe the helper reads from, fed 1 MiB every 4 ms: over a second however fast the rest is."""
    def feed():
        with os.fdopen(wfd, "wb") as w:
            for piece in pieces:
                w.write(piece)
                time.sleep(0.004)
    threading.Thread(target=feed, daemon=True).start()

def paced_drain(rfd, box):
    """A pipe the helper writes into, read at 1 MiB per 4 ms; box gets the count."""
    def drain():
        n = 0
        with os.fdopen(rfd, "rb", buffering=0) as r:
            while True:
                b = r.read(MIB)
                if not b:
                    break
                n += len(b)
                time.sleep(0.004 * len(b) / MIB)
        box.append(n)
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    return t

# file.write from a passed pipe, paced: with size (the total), without (no total).
for rid, extra, path in ((1, {"size": BIG}, "/work/big"), (2, {}, "/work/piped")):
    rfd, wfd = os.pipe()
    paced_feed(wfd, (block for i in range(256)))
    req = {"id": rid, "op": "file.write", "sandbox": sb, "path": path, "fd": 0, "fds": 1}
    req.update(extra)
    c.send(req, [rfd])
    os.close(rfd)
    prog, final = collect(c, rid)
    name = "file.write from a pipe%s" % (" with size" if extra else ", no size")
    check_progress(name, prog, final, BIG if extra else None, BIG)
    is_(final.get("bytes"), BIG, "... 256 MiB written")

# From a passed file of 1 GiB without size (the daemon knows the file's; 256 MiB of it would
# take less than 200 ms here, copy_file_range runs at some 2 GB/s).
with open(src, "rb") as f:
    c.send({"id": 3, "op": "file.write", "sandbox": sb, "path": "/work/huge", "fd": 0, "fds": 1}, [f.fileno()])
prog, final = collect(c, 3)
is_((final.get("ok"), final.get("bytes")), (True, GIB), "file.write from a passed file of 1 GiB: ok")
check(len(prog) >= 1, "... progress events came (%d)" % len(prog))
is_(sorted(set(p[2] for p in prog)), [GIB], "... their total is the file's size, though the request has none")

# file.read into a passed pipe, drained slowly.
rfd, wfd = os.pipe()
box = []
t = paced_drain(rfd, box)
c.send({"id": 4, "op": "file.read", "sandbox": sb, "path": "/work/big", "fd": 0, "fds": 1}, [wfd])
os.close(wfd)
prog, final = collect(c, 4)
t.join(60)
check_progress("file.read into a fd", prog, final, BIG, BIG)
is_((final.get("bytes"), box), (BIG, [BIG]), "... 256 MiB read")

# As data events, from offset 1 MiB: total is what is read.
c.send({"id": 5, "op": "file.read", "sandbox": sb, "path": "/work/huge", "offset": MIB})
prog, final = collect(c, 5)
check_progress("file.read as data events (1 GiB from offset 1 MiB)", prog, final, GIB - MIB, GIB - MIB)
is_(final.get("bytes"), GIB - MIB, "... 1 GiB less 1 MiB read")

# file.write by chunks: progress beside the acks (a chunk every 4 ms at most).
chunk = base64.b64encode(block).decode()
state = {"ready": None, "acked": 0}
def take(m):
    if m.get("event") == "ready":
        state["ready"] = m
    elif m.get("event") == "ack":
        state["acked"] = m["seq"] + 1
c.send({"id": 6, "op": "file.write", "sandbox": sb, "path": "/work/chunked", "size": BIG})
gen = c.lines()
prog, final, seq = [], None, 0
def step():
    global final
    t, m = next(gen)
    if m.get("id") != 6:
        return
    if m.get("event") == "progress":
        prog.append((t, m.get("bytes"), m.get("total"), set(m)))
    elif "event" in m:
        take(m)
    elif "ok" in m:
        final = m
while state["ready"] is None and final is None:
    step()
while final is None and seq < 256:
    if seq - state["acked"] < state["ready"]["window"]:
        c.send_raw(('{"id":6,"op":"file.chunk","seq":%d,"data":"%s"%s}\n' %
                    (seq, chunk, ',"eof":true' if seq == 255 else "")).encode())
        seq += 1
        # 4 ms before the next chunk, reading what comes meanwhile (a progress event left
        # unread would be seen late, and its gap to the next one short).
        until = time.monotonic() + 0.004
        while final is None and select.select([c.s], [], [], max(0, until - time.monotonic()))[0]:
            step()
    else:
        step()
while final is None:
    step()
check_progress("file.write by chunks", prog, final, BIG, BIG)

# file.put and file.get of a tree of 64 files of 4 MiB: a tar stream, no total.
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
    for i in range(64):
        ti = tarfile.TarInfo("tree/d%d/f%d" % (i % 8, i))
        ti.size = 4 * MIB
        tf.addfile(ti, io.BytesIO(block * 4))
tar = buf.getvalue()
del buf
rfd, wfd = os.pipe()
paced_feed(wfd, (tar[o:o + MIB] for o in range(0, len(tar), MIB)))
c.send({"id": 7, "op": "file.put", "sandbox": sb, "path": "/work", "fd": 0, "fds": 1}, [rfd])
os.close(rfd)
prog, final = collect(c, 7)
check_progress("file.put of a 256 MiB tree", prog, final, None, len(tar))
is_(final.get("entries"), 64, "... its 64 files")
rfd, wfd = os.pipe()
box = []
t = paced_drain(rfd, box)
c.send({"id": 8, "op": "file.get", "sandbox": sb, "path": "/work/tree", "fd": 0, "fds": 1}, [wfd])
os.close(wfd)
prog, final = collect(c, 8)
t.join(60)
check_progress("file.get of it into a fd", prog, final, None, final.get("bytes") or 0)
check(box and box[0] == final.get("bytes") and box[0] > BIG, "... the whole stream came", box)
c.send({"id": 9, "op": "file.get", "sandbox": sb, "path": "/work/huge"})
prog, final = collect(c, 9)
check_progress("file.get of 1 GiB as data events", prog, final, None, final.get("bytes") or 0)

# 4 KiB each way: over before the first 200 ms, so no progress at all.
small = os.path.join(T, "small")
with open(small, "wb") as f:
    f.write(block[:4096])
with open(small, "rb") as f:
    c.send({"id": 10, "op": "file.write", "sandbox": sb, "path": "/work/small", "fd": 0, "fds": 1}, [f.fileno()])
prog, final = collect(c, 10)
is_((final.get("ok"), len(prog)), (True, 0), "a 4 KiB file.write by fd: no progress event")
with open(small, "wb") as f:
    c.send({"id": 11, "op": "file.read", "sandbox": sb, "path": "/work/small", "fd": 0, "fds": 1}, [f.fileno()])
prog, final = collect(c, 11)
is_((final.get("ok"), len(prog)), (True, 0), "a 4 KiB file.read into a fd: no progress event")
c.send({"id": 12, "op": "file.read", "sandbox": sb, "path": "/work/small"})
prog, final = collect(c, 12)
is_((final.get("ok"), len(prog)), (True, 0), "a 4 KiB file.read as data events: no progress event")
PYEOF

# sandboxctl cp: a bar on a terminal (stderr), nothing on stderr without one.
export SANDBOXCTL SOCK
run_py "sandboxctl cp" 300 <<'PYEOF'
import os, pty, subprocess, time
from client import check, is_

sock, sb, T, ctl = os.environ["SOCK"], os.environ["SB"], os.environ["T"], os.environ["SANDBOXCTL"]
# Out of the sandbox (a file.read into the file): 256 MiB in goes by copy_file_range in less than
# the first 200 ms here, so the bar is shown on the way out, of the 1 GiB file.
dst = os.path.join(T, "cp-out")
argv = [ctl, "--socket", sock, "cp", sb + ":/work/huge", dst]

pid, fd = pty.fork()
if pid == 0:
    # stdout away from the terminal: what the terminal shows is stderr's.
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)
    os.execv(ctl, argv)
seen = b""
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b:
        break
    seen += b
_, status = os.waitpid(pid, 0)
is_(os.waitstatus_to_exitcode(status), 0, "sandboxctl cp of 1 GiB on a terminal: exit 0")
check(b"\r[" in seen and b"%" in seen, "... a progress bar on stderr (a carriage return, a percentage)", repr(seen[:200]))

p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
is_((p.returncode, p.stderr), (0, b""), "sandboxctl cp of 1 GiB without a terminal: exit 0, stderr empty")
is_(os.path.getsize(dst), 1 << 30, "... the file came")
os.unlink(dst)
PYEOF

stop_daemon
