#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# 1 GiB through the file API, each way and by each path (docs/protocol.md "Files"): in from a
# passed fd, out into a passed fd and as data events; the bytes checked by sha256 inside the
# sandbox and on the host; the daemon's peak RSS grows by less than 16 MiB over all of it (its
# share of a transfer is a few chunks, never the file).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
SB=$(jget "$(rpc '{"op":"create","best_effort":true}')" .sandbox.id)
like "$SB" '^sbx-' "a sandbox"
export SB PKG=$top_srcdir/python
if daemon_is_asan; then export DAEMON_ASAN=1; fi

run_py "1 GiB" 600 <<'PYEOF'
import hashlib, os, sys
sys.path.insert(0, os.environ["PKG"])
from client import check, is_
import sandboxd

T, pid = os.environ["T"], os.environ["DAEMON_PID"]
GIB = 1 << 30

def hwm():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmHWM:"):
            return int(l.split()[1])

def rss_check(cond, desc):
    if os.environ.get("DAEMON_ASAN"):
        check(True, desc + " # SKIP an ASan build holds freed memory in quarantine")
    else:
        check(cond, desc)

# 1,024 random blocks of 1 MiB, each stamped with its number: a block lost, doubled or moved shows.
src = os.path.join(T, "big.src")
want = hashlib.sha256()
with open(src, "wb") as f:
    block = bytearray(os.urandom(1 << 20))
    for i in range(1024):
        block[:8] = i.to_bytes(8, "little")
        want.update(block)
        f.write(block)
want = want.hexdigest()

cl = sandboxd.Client(os.environ["SOCK"])
sb = cl.sandbox(os.environ["SB"])
with open("/proc/%s/clear_refs" % pid, "w") as f:
    f.write("5")  # VmHWM := VmRSS
rss0 = hwm()

with open(src, "rb") as f:
    w = sb.files.write_from("/work/big", f)
is_(w.bytes, GIB, "file.write from a passed fd: 1 GiB written")
r = sb.run(["sh", "-c", "sha256sum /work/big | cut -d' ' -f1"], timeout=300)
is_(r.stdout.strip(), want, "... and inside, sha256sum of it is the source's")

dst = os.path.join(T, "big.dst")
with open(dst, "wb") as f:
    n = sb.files.read_into("/work/big", f)
h = hashlib.sha256()
with open(dst, "rb") as f:
    for b in iter(lambda: f.read(1 << 20), b""):
        h.update(b)
is_((n, h.hexdigest()), (GIB, want), "file.read into a passed fd: 1 GiB, the same bytes")
os.unlink(dst)

class Hasher:
    def __init__(self):
        self.h, self.n = hashlib.sha256(), 0
    def write(self, b):
        self.h.update(b)
        self.n += len(b)
        return len(b)
sink = Hasher()
n = sb.files.read_into("/work/big", sink)
is_((n, sink.n, sink.h.hexdigest()), (GIB, GIB, want), "file.read as data events: 1 GiB, the same bytes")

grew = hwm() - rss0
rss_check(grew < 16 << 10, "the daemon's peak RSS grew by %d KiB over the three transfers (< 16 MiB)" % grew)
os.unlink(src)
PYEOF
stop_daemon
