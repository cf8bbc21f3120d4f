#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What a copy out of a sandbox may leave on the host (issue 31, points 1 and 4; docs/security.md
# ESC-21b, ESC-21c). The sandbox makes a setuid copy of id, a setgid file, setgid and sticky
# directories, and a 1 GiB file of two 4 KiB blocks and one of none. file.get's stream carries
# no setuid, setgid or sticky bit and sends only a sparse file's data; `sandboxctl cp` (GNU tar
# as root, --no-same-permissions) and the Python client's get_tree leave no such bit on the host
# and keep the holes, tree and single file alike. The host-side links of `cp` (point 9) are
# tested without a daemon in t-ctl-files.sh.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true}')
SB=$(jget "$r" .sandbox.id)
like "$SB" '^sbx-' "a sandbox"
inside() {
	jget "$(rpc '{"op":"run","sandbox":"'"$SB"'","argv":["sh","-c",'"$(printf '%s' "$1" | jq -Rs .)"']}' 120)" .exit_code
}
is "$(inside 'set -e; mkdir -p /work/d/gdir /work/d/tdir; cp /usr/bin/id /work/d/tool; chmod 4755 /work/d/tool
printf g >/work/d/sg; chmod 2755 /work/d/sg; chmod 2775 /work/d/gdir; chmod 1777 /work/d/tdir; printf x >/work/d/tdir/x
mkdir -p /work/sp; truncate -s 1G /work/sp/big /work/sp/empty
printf middle | dd of=/work/sp/big bs=1 seek=536870912 conv=notrunc 2>/dev/null
printf end | dd of=/work/sp/big bs=1 seek=1073741821 conv=notrunc 2>/dev/null
test "$(stat -c %a /work/d/tool)" = 4755')" 0 "inside: a setuid copy of id, setgid and sticky modes, two sparse 1 GiB files"

# ---- point 1: no setuid, setgid or sticky bit out of a sandbox
ctl cp "$SB:/work/d" - >"$T/d.tar" 2>"$T/cp.err"
is "$?:$(python3 -c 'import sys, tarfile
print(" ".join(sorted(m.name for m in tarfile.open(sys.argv[1]) if m.mode & 0o7000)))' "$T/d.tar")" "0:" \
	"file.get (sandboxctl cp SBX:DIR -): no entry of the stream has a setuid, setgid or sticky bit"
mkdir "$T/out1"
ctl cp "$SB:/work/d" "$T/out1/" >"$T/cp.out" 2>&1
is "$?:$(find "$T/out1" -perm /7000 | wc -l):$(stat -c %a "$T/out1/d/tool")" "0:0:755" \
	"sandboxctl cp SBX:DIR HOSTDIR/ as root: no setuid, setgid or sticky bit on the host, tool 0755"
ctl cp "$SB:/work/d/tool" "$T/tool1" >"$T/cp.out" 2>&1
is "$?:$(stat -c %a "$T/tool1")" "0:755" "sandboxctl cp SBX:FILE HOSTFILE (file.read): 0755, no setuid bit"

# ---- point 4: holes stay holes
blocks_ok() { # FILE: 1 GiB long, at most 64 KiB allocated
	[ "$(stat -c %s "$1")" = 1073741824 ] && [ "$(stat -c %b "$1")" -le 128 ]
}
data_ok() {
	[ "$(od -An -c -j 536870912 -N 6 "$1" | tr -d ' ')" = middle ] && [ "$(tail -c 3 "$1")" = end ]
}
size=$(ctl cp "$SB:/work/sp" - 2>"$T/cp.err" | wc -c)
st=${PIPESTATUS[0]}
check "file.get of two sparse 1 GiB files: a stream under 1 MiB (was $size bytes, status $st)" \
	test "$st" = 0 -a "$size" -lt 1048576
ctl cp "$SB:/work/sp" "$T/sp1" >"$T/cp.out" 2>&1
check "sandboxctl cp SBX:DIR NEW: each 1 GiB file takes at most 64 KiB on the host ($(stat -c '%b blocks' "$T/sp1/big" 2>/dev/null), $(stat -c '%b blocks' "$T/sp1/empty" 2>/dev/null))" \
	sh -c "$(declare -f blocks_ok); blocks_ok '$T/sp1/big' && blocks_ok '$T/sp1/empty'"
check "... the data where it was (middle at 512 MiB, end at the end)" sh -c "$(declare -f data_ok); data_ok '$T/sp1/big'"
rm -rf "$T/sp1"
ctl cp "$SB:/work/sp/big" "$T/big1" >"$T/cp.out" 2>&1
check "sandboxctl cp SBX:FILE HOSTFILE (file.read): at most 64 KiB on the host, the data in place" \
	sh -c "$(declare -f blocks_ok data_ok); blocks_ok '$T/big1' && data_ok '$T/big1'"
ctl cp "$SB:/work/sp/empty" "$T/empty1" >"$T/cp.out" 2>&1
check "... and a file of nothing but a hole" sh -c "$(declare -f blocks_ok); blocks_ok '$T/empty1'"
rm -f "$T/big1" "$T/empty1"
export SB

# ---- the Python client's get_tree: the same rules
run_py "get_tree" 300 <<'PYEOF'
import os, sys
sys.path.insert(0, os.path.join(os.environ["TESTS_DIR"], "..", "python"))
from sandboxd import Client
from client import check, is_
T = os.environ["T"]
F = Client(os.environ["SOCK"]).sandbox(os.environ["SB"]).files
F.get_tree("/work/d", os.path.join(T, "py-d"))
bad = [os.path.join(d, n) for d, ds, fs in os.walk(os.path.join(T, "py-d")) for n in ds + fs
       if os.lstat(os.path.join(d, n)).st_mode & 0o7000]
is_((bad, os.stat(os.path.join(T, "py-d", "tool")).st_mode & 0o7777), ([], 0o755), "get_tree: no setuid, setgid or sticky bit")
F.get_tree("/work/sp", os.path.join(T, "py-sp"))
st = os.stat(os.path.join(T, "py-sp", "big"))
with open(os.path.join(T, "py-sp", "big"), "rb") as f:
    f.seek(536870912)
    mid = f.read(6)
    f.seek(-3, os.SEEK_END)
    end = f.read()
check(st.st_size == 1 << 30 and st.st_blocks <= 128 and mid == b"middle" and end == b"end",
      "get_tree: a sparse 1 GiB file stays sparse, its data in place", (st.st_size, st.st_blocks, mid, end))
os.symlink(os.path.join(T, "py-victim"), os.path.join(T, "py-link"))
os.mkdir(os.path.join(T, "py-victim"))
try:
    F.get_tree("/work/d", os.path.join(T, "py-link"))
    refused = False
except ValueError:
    refused = True
check(refused and not os.listdir(os.path.join(T, "py-victim")), "get_tree into a symlink: refused, nothing written through it")
PYEOF
rm -rf "$T/py-sp"
