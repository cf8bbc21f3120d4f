#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# limits.file_size (RLIMIT_FSIZE) and limits.open_files (RLIMIT_NOFILE, soft = hard): set on
# create and on a throwaway run, lowered by a run's own file_size and open_files, defaults and maxima from the configuration, reported in
# `limits`, kept across a daemon restart, and what a command meets: a write past file_size
# fails with EFBIG (SIGXFSZ ignored) or kills it with SIGXFSZ; open() past open_files fails with
# EMFILE. Where the memory controller is missing, a best-effort memory limit is RLIMIT_DATA:
# a PROT_NONE reservation of 4 GiB succeeds under 512M, memory really used past it fails.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

r=$(rpc '{"op":"create","best_effort":true,"name":"dflt"}')
is "$(jget "$r" '.sandbox.limits | [.open_files, .file_size] | tostring')" '[4096,null]' \
	"a sandbox without these limits reports open_files 4096 and file_size null (none)"
r=$(rpc '{"op":"run","sandbox":"dflt","command":"ulimit -Sn; ulimit -Hn; ulimit -f"}')
is "$(jget "$r" .stdout)" $'4096\n4096\nunlimited' "... and its commands run with RLIMIT_NOFILE 4096 (soft and hard), no RLIMIT_FSIZE"

# A best-effort memory limit (no cgroup v2 memory controller) is RLIMIT_DATA of each command: what
# it writes is bounded, what it merely reserves is not (Go's runtime reserves hundreds of MB with
# PROT_NONE at start, and died under the RLIMIT_AS this used to be).
pyrun() { rpc "$(jq -nc --arg s "$2" --arg sb "$1" '{op:"run",sandbox:$sb,argv:["python3","-c",$s]}')" 60; }
if [ "$(jget "$(rpc '{"op":"hello"}')" .capabilities.cgroup.memory)" != true ]; then
	r=$(pyrun dflt 'import resource as r; print(r.getrlimit(r.RLIMIT_DATA), r.getrlimit(r.RLIMIT_AS))')
	is "$(jget "$r" .stdout)" '(536870912, 536870912) (-1, -1)' \
		"best effort: the default 512M memory limit is each command's RLIMIT_DATA; RLIMIT_AS is left alone"
	r=$(pyrun dflt '
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
p = libc.mmap(None, 4 << 30, mmap.PROT_NONE if hasattr(mmap, "PROT_NONE") else 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
if p in (None, ctypes.c_void_p(-1).value):
    print("reserve", ctypes.get_errno()); raise SystemExit(0)
print("reserved")
rw = mmap.PROT_READ | mmap.PROT_WRITE
print("commit-64M", libc.mprotect(p, 64 << 20, rw))
print("commit-1G", libc.mprotect(p + (1 << 30), 1 << 30, rw), ctypes.get_errno())
')
	out=$(jget "$r" .stdout)
	is "$(printf '%s\n' "$out" | head -1)" reserved "... a 4 GiB PROT_NONE reservation (as Go's and Java's runtimes make) succeeds under it"
	is "$(printf '%s\n' "$out" | sed -n 2p)" "commit-64M 0" "... 64M of it made writable (used) is within the limit"
	is "$(printf '%s\n' "$out" | sed -n 3p)" "commit-1G -1 12" "... 1G of it made writable is past the limit: ENOMEM"
	[ -n "$out" ] || diag "$r"
	r=$(pyrun dflt '
for n in (256, 768):
    try:
        b = bytearray(n << 20); del b; print(n, "allocated")
    except MemoryError:
        print(n, "MemoryError")
')
	is "$(echo $(jget "$r" .stdout))" "256 allocated 768 MemoryError" \
		"memory really allocated: 256M fits under the 512M limit, 768M fails with MemoryError"
	# A real Go binary, where the host has one (under RLIMIT_AS 512M: "fatal error: failed to
	# reserve page summary memory").
	for gobin in ctr containerd podman ""; do command -v "$gobin" >/dev/null 2>&1 && break; done
	if [ -n "$gobin" ]; then
		r=$(rpc "$(jq -nc --arg b "$(command -v "$gobin")" '{op:"run",sandbox:"dflt",argv:[$b,"--version"]}')" 60)
		is "$(jget "$r" '[.exit_code, (.stderr | test("failed to reserve"))] | tostring')" '[0,false]' \
			"a Go program ($gobin --version) starts under it"
	fi
fi

r=$(rpc '{"op":"create","best_effort":true,"name":"lim","limits":{"file_size":"1M","open_files":64}}')
is "$(jget "$r" '.sandbox.limits | [.open_files, .file_size] | tostring')" '[64,1048576]' \
	"create with limits.file_size 1M and open_files 64: reported in limits"
r=$(rpc '{"op":"list"}')
is "$(jget "$r" '.sandboxes[] | select(.name == "lim") | .limits | [.open_files, .file_size] | tostring')" '[64,1048576]' \
	"list reports them too"
r=$(rpc '{"op":"run","sandbox":"lim","command":"ulimit -Sn; ulimit -Hn; ulimit -f"}')
# ulimit -f counts 1024-byte blocks in bash, 512 in dash: ask for bytes through the kernel instead.
is "$(jget "$r" .stdout | head -2 | tr '\n' ' ')" '64 64 ' "a run's RLIMIT_NOFILE is 64, soft and hard"
r=$(rpc '{"op":"run","sandbox":"lim","argv":["python3","-c","import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE))"]}')
is "$(jget "$r" .stdout)" '(1048576, 1048576)' "a run's RLIMIT_FSIZE is 1048576, soft and hard"

r=$(rpc '{"op":"run","sandbox":"lim","command":"trap \"\" XFSZ; head -c 2097152 /dev/zero > /work/big; echo status=$?; stat -c %s /work/big"}')
like "$(jget "$r" .stderr)" 'File too large' "a write past file_size, SIGXFSZ ignored, fails with EFBIG (File too large)"
is "$(jget "$r" .stdout)" $'status=1\n1048576' "... and the file stops at exactly 1M"
r=$(rpc '{"op":"run","sandbox":"lim","argv":["dd","if=/dev/zero","of=/work/big2","bs=1M","count=2"]}')
is "$(jget "$r" '[.reason, .signal] | tostring')" '["signaled","XFSZ"]' \
	"a write past file_size without the signal ignored: the command ends by SIGXFSZ"
r=$(rpc '{"op":"run","sandbox":"lim","argv":["python3","-c","import os, errno\nn = 0\ntry:\n    while True:\n        os.open(\"/dev/null\", os.O_RDONLY); n += 1\nexcept OSError as e:\n    print(n + 3, errno.errorcode[e.errno])"]}')
is "$(jget "$r" .stdout)" '64 EMFILE' "open_files 64: the 65th fd (3 stdio + 61 opened) fails with EMFILE"

r=$(rpc '{"op":"run","sandbox":"lim","file_size":"512K","open_files":32,"argv":["python3","-c","import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_FSIZE))"]}')
is "$(jget "$r" .stdout)" '(32, 32) (524288, 524288)' "a run's own file_size and open_files lower its sandbox's"
r=$(rpc '{"op":"run","sandbox":"lim","open_files":65,"argv":["true"]}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","open_files"]' "a run may not raise open_files above its sandbox's"
r=$(rpc '{"op":"run","sandbox":"lim","file_size":"2M","argv":["true"]}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","file_size"]' "... nor file_size"
r=$(rpc '{"op":"run","sandbox":"dflt","file_size":"100K","command":"trap \"\" XFSZ; head -c 200000 /dev/zero > /work/f; stat -c %s /work/f"}')
is "$(jget "$r" .stdout)" 102400 "a run's file_size in a sandbox without one caps its writes (102400 bytes)"
r=$(rpc '{"op":"run","best_effort":true,"limits":{"open_files":100,"file_size":"64K"},"argv":["python3","-c","import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_FSIZE))"]}')
is "$(jget "$r" .stdout)" '(100, 100) (65536, 65536)' "a throwaway run's limits.open_files and limits.file_size apply to its command"

id=$(ctl create --best-effort --file-size 2M --open-files 128)
is "$(ctl --json inspect "$id" | jq -c '.sandbox.limits | [.open_files, .file_size]')" '[128,2097152]' \
	"sandboxctl create --file-size 2M --open-files 128"
is "$(ctl run -s "$id" --open-files 20 --file-size 1K -- python3 -c 'import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_FSIZE))')" \
	'(20, 20) (1024, 1024)' "sandboxctl run --open-files 20 --file-size 1K"
ctl destroy "$id" >/dev/null
r=$(rpc '{"op":"create","best_effort":true,"limits":{"open_files":8}}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","limits.open_files"]' "open_files below 16 is refused, naming the field"
r=$(rpc '{"op":"create","best_effort":true,"limits":{"open_files":65537}}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","limits.open_files"]' "open_files above max_open_files (65536) is refused"
r=$(rpc '{"op":"create","best_effort":true,"limits":{"file_size":"lots"}}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","limits.file_size"]' "a file_size that is not a size is refused"

# Kept across a restart (meta.json).
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon || exit 0
r=$(rpc '{"op":"inspect","sandbox":"lim"}')
is "$(jget "$r" '.sandbox.limits | [.open_files, .file_size] | tostring')" '[64,1048576]' "after a restart the limits are those of the create"
r=$(rpc '{"op":"run","sandbox":"lim","argv":["python3","-c","import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_FSIZE))"]}')
is "$(jget "$r" .stdout)" '(64, 64) (1048576, 1048576)' "... and its commands still run with them"
stop_daemon

# Defaults and maxima from the configuration.
cat >"$T/sandboxd.conf" <<'CONF'
default_open_files = 256
max_open_files = 512
default_file_size = 4M
max_file_size = 8M
CONF
rm -rf "$T/state"
start_daemon --config "$T/sandboxd.conf" || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"conf"}')
is "$(jget "$r" '.sandbox.limits | [.open_files, .file_size] | tostring')" '[256,4194304]' \
	"default_open_files 256 and default_file_size 4M are a create's defaults"
r=$(rpc '{"op":"run","sandbox":"conf","argv":["python3","-c","import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_FSIZE))"]}')
is "$(jget "$r" .stdout)" '(256, 256) (4194304, 4194304)' "... and its commands run with them"
r=$(rpc '{"op":"create","best_effort":true,"limits":{"open_files":513}}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","limits.open_files"]' "open_files above max_open_files 512 is refused"
r=$(rpc '{"op":"create","best_effort":true,"limits":{"file_size":"9M"}}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","limits.file_size"]' "file_size above max_file_size 8M is refused"
r=$(rpc '{"op":"create","best_effort":true,"limits":{"file_size":0}}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","limits.file_size"]' "with max_file_size set, file_size 0 (none) is refused"
printf 'default_open_files = 1024\nmax_open_files = 512\n' >"$T/bad.conf"
out=$("$SANDBOXD" --config "$T/bad.conf" --check-config 2>&1)
like "$out" 'default_open_files.*exceeds max_open_files' "a configuration with default_open_files above max_open_files is refused"
