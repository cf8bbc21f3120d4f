#!/bin/bash
# The file API where memory.max is real: 256 MiB go into a sandbox and come back out byte for
# byte, and what the transfers cost in memory is the file's own pages and a few chunks, never a
# copy of the file: the sandbox's memory.peak stays under 256M + 32M. Here the workspace is on
# the guest's tmpfs root, so the file's pages are shmem charged to the sandbox (on a disk they
# would be reclaimable page cache): a helper that held the file would add 256M more. The
# daemon's own cgroup leaf grows by less than 16 MiB (no byte of a transfer by fd passes
# through it). Then into a sandbox of 64M, whose memory limit stops it: resource_exhausted.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
base=/sys/fs/cgroup/system.slice/sandboxd.service

src=/var/tmp/sbx-files-$$.src
# 256 blocks of 1 MiB, each random and stamped with its number: a block lost, doubled or moved shows.
python3 - "$src" <<'PY'
import os, sys
with open(sys.argv[1], "wb") as f:
    block = bytearray(os.urandom(1 << 20))
    for i in range(256):
        block[:8] = i.to_bytes(8, "little")
        f.write(block)
PY
ok $? "a 256 MiB source file on the host"

sid=$(sandboxctl create --memory 512M --pids 64 2>&1)
[[ $sid == sbx-* ]]
ok $? "a sandbox limited to 512M ($sid)"
scg=$(call "{\"op\":\"inspect\",\"sandbox\":\"$sid\"}" | jq -r .sandbox.cgroup) # its scope's, or $base/sandboxes/$sid
[ "$(cat "$scg/memory.max")" = 536870912 ]
ok $? "its memory.max is 512M"
kills0=$(sed -n 's/^oom_kill //p' "$scg/memory.events")
echo 0 >"$base/daemon/memory.reclaim" 2>/dev/null
dpeak0=$(cat "$base/daemon/memory.current")

sandboxctl cp "$src" "$sid:/work/big"
ok $? "sandboxctl cp of 256 MiB into it exits 0"
out=$(sandboxctl run --sandbox "$sid" -- stat -c '%s %u' /work/big)
[ "$out" = "268435456 1000" ]
ok $? "inside, the file is 256 MiB and the sandbox user's ($out)"
# Out into a pipe (sandboxctl cat passes its stdout): nothing of it is charged to the sandbox.
sandboxctl cat "$sid" /work/big | cmp -s - "$src"
ok $? "sandboxctl cat of it back out gives the bytes that went in"
[ "$(sed -n 's/^oom_kill //p' "$scg/memory.events")" = "$kills0" ]
ok $? "no OOM kill in the sandbox"
peak=$(cat "$scg/memory.peak")
[ "$peak" -lt $(((256 + 32) << 20)) ]
ok $? "the sandbox's memory.peak stayed under the file's 256M + 32M ($peak bytes)"
dcur=$(cat "$base/daemon/memory.current")
[ $((dcur - dpeak0)) -lt $((16 << 20)) ]
ok $? "the daemon's cgroup leaf grew by less than 16 MiB over the transfers ($dpeak0 -> $dcur bytes)"

sandboxctl destroy "$sid" >/dev/null

# The same 256 MiB into a sandbox of 64M: here its workspace is in memory (the guest's root is a
# tmpfs overlay), so the file's own pages pass memory.max and the kernel kills the helper. The
# reply says so (from the helper's memory.events), and the file it was replacing is as it was.
sid=$(sandboxctl create --memory 64M --pids 64 2>&1)
diag "state directory on $(stat -f -c %T /var/lib/sandboxd)"
printf 'old\n' | sandboxctl cp - "$sid:/work/big"
out=$(sandboxctl cp "$src" "$sid:/work/big" 2>&1)
st=$?
[ "$st" != 0 ] && grep -q 'resource_exhausted' <<<"$out" && grep -q "memory limit ended the file helper" <<<"$out"
ok $? "256 MiB into a sandbox of 64M with its workspace in memory: resource_exhausted, the memory limit named (status $st: $out)"
# Read on the host side: a helper killed before it could unlink its temporary file (a named one
# here: overlayfs has no O_TMPFILE before 6.6) leaves it, and its pages fill the sandbox's memory,
# so a new helper could meet the same limit.
work=$(jqr .sandbox.workdir "$(call '{"op":"inspect","sandbox":"'"$sid"'"}')")
got=$(cat "$work/big" 2>&1)
[ "$got" = old ]
ok $? "... and the file it was replacing is as it was ($(head -c 200 <<<"$got"))"
diag "left in /work: $(ls -a "$work" | tr '\n' ' ')"
sandboxctl destroy "$sid" >/dev/null
rm -f "$src"
done_testing
