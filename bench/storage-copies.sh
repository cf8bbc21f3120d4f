#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Snapshot, fork and restore of a 1 GB workspace of 10,000 files (100 KiB of random bytes each)
# on three kinds of storage, in one sitting: the state directory on the host's own filesystem
# (storage = state; ext4 here), the daemon's reflinking XFS image (storage = image:8G) and its
# btrfs image (storage = image:8G:btrfs: subvolume snapshots, O(1); a fork's workspace keeps
# its source's owners and is idmapped, no walk).
# Each is timed from the client (request to final reply), RUNS times; the snapshot's frozen
# time is the daemon's (frozen_s). Prints one Markdown table row per operation and storage.
#
#   bench/storage-copies.sh [BUILD_DIR] [RUNS] [KINDS]   (root; default build, 5, "state image btrfs")
# Needs xfsprogs (mkfs.xfs), btrfs-progs (mkfs.btrfs), python3; a free cgroup2 directory below the v2 mount; about
# 3 GB free in $TMPDIR per run on the non-reflinking storage (the copies are removed as it goes).
set -u
B=$(cd "${1:-build}" && pwd)
RUNS=${2:-5}
KINDS=${3:-state image btrfs}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CGM=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
T=$(mktemp -d "${TMPDIR:-/var/tmp}/sbx-bench-copies.XXXXXX")
PID=

finish() {
        [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
        umount -l "$T"/*/state/sandboxes 2>/dev/null
        # The daemon's leaf empties a moment after it has exited.
        for _ in $(seq 50); do
                find "$CGM/sbx-bench-copies-$$" -depth -type d -exec rmdir {} \; 2>/dev/null
                [ -d "$CGM/sbx-bench-copies-$$" ] || break
                sleep 0.1
        done
        rm -rf --one-file-system "$T"
}
trap finish EXIT

call() { python3 "$SRC/tests/client.py" "$SOCK" call "$1" --timeout 600; }

# one KIND CONF: starts a daemon, fills a workspace, times the three copies RUNS times.
one() {
        local kind=$1 conf=$2 st=$T/$1/state
        mkdir -p "$st"
        printf '%s\n' "sweep_interval = 0" "$conf" >"$T/$kind/conf"
        SOCK=$T/$kind/sock
        "$B/daemon/sandboxd" --config "$T/$kind/conf" --listen "$SOCK" --state-dir "$st" \
                --cgroup-root "$CGM/sbx-bench-copies-$$" --pool-size 0 >"$T/$kind/log" 2>&1 &
        PID=$!
        for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
        call '{"op":"create","best_effort":true,"name":"src","limits":{"memory":"2G"}}' >/dev/null
        call '{"op":"run","sandbox":"src","timeout_s":600,"argv":["python3","-c","import os\nfor d in range(100):\n os.mkdir(\"/work/d%d\" % d)\n for f in range(100):\n  open(\"/work/d%d/f%d\" % (d, f), \"wb\").write(os.urandom(102400))"]}' >/dev/null
        sync
        python3 - "$SOCK" "$kind" "$RUNS" "$(stat -f -c %T "$st/sandboxes")" <<'PY'
import json, statistics, sys, time
from client import Conn
sock, kind, runs, fs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = Conn(sock, timeout=600)
def timed(req):
    t = time.monotonic()
    r = c.call(req)
    if not r.get("ok"):
        raise SystemExit("failed: %r" % (r,))
    return time.monotonic() - t, r
res = {"snapshot": [], "frozen": [], "fork": [], "restore": []}
for i in range(runs):
    dt, r = timed({"op": "snapshot", "sandbox": "src"})
    snap = r["snapshot"]["id"]
    res["snapshot"].append(dt)
    res["frozen"].append(r.get("frozen_s", 0.0))
    dt, r = timed({"op": "create", "best_effort": True, "name": "fork%d" % i, "from_snapshot": "src/" + snap})
    res["fork"].append(dt)
    c.call({"op": "destroy", "sandbox": "fork%d" % i})
    dt, r = timed({"op": "snapshot.restore", "sandbox": "src", "snapshot": snap})
    res["restore"].append(dt)
    c.call({"op": "snapshot.delete", "sandbox": "src", "snapshot": snap})
    time.sleep(1)  # the removers of the old trees
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
for op in ("snapshot", "frozen", "fork", "restore"):
    v = res[op]
    print("| %s (%s) | %s | %.3f | %.3f | %.3f–%.3f | %d |" % (kind, fs, op, statistics.median(v), q(v, 0.99), min(v), max(v), len(v)))
PY
        # A sandbox outlives its daemon (a restart keeps it): its init would hold the image.
        call '{"op":"destroy","sandbox":"src"}' >/dev/null
        kill "$PID"
        wait "$PID" 2>/dev/null
        PID=
        umount -l "$st/sandboxes" 2>/dev/null
        rm -rf --one-file-system "$T/$kind"
}

export PYTHONPATH=$SRC/tests
echo "| storage | operation | median s | p99 s | range s | runs |"
echo "|---|---|---|---|---|---|"
for k in $KINDS; do
        case $k in
        state) one state "" ;;
        image) one image "storage = image:8G" ;;
        btrfs) one btrfs "storage = image:8G:btrfs" ;;
        *) echo "unknown storage kind $k" >&2; exit 2 ;;
        esac
done
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
