#!/bin/bash
# Sets sandboxd up on this machine (Debian 12, as root) and runs the main job: a command in a
# sandbox whose memory, process and CPU limits the kernel enforces.
#   - installs the build dependencies, builds, installs into /usr (units, sysusers, tmpfiles)
#   - with systemd as PID 1: enables sandboxd.socket (the daemon starts on first connection);
#     without it (a container): starts sandboxd by hand on the same socket
#   - shows what this host can enforce, then runs a memory hog, a process bomb and a timeout
# Exits non-zero when a step failed or a demo did not show what it is there to show (each demo
# says what that is: the memory hog is expected to end non-zero, stopped by its limit).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
sock=/run/sandboxd/sandboxd.sock
pidfile=${QUICKSTART_PIDFILE:-/run/sandboxd/quickstart.pid} # the sandboxd started by hand
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# usr_local_note [ROOT]: an earlier `make install` with configure's default prefix left a copy
# in /usr/local, which comes before /usr in PATH: say so before installing over /usr beside it.
usr_local_note() {
	local root=${1:-} f found=()
	for f in /usr/local/bin/sandboxctl /usr/local/sbin/sandboxd /usr/local/bin/sandboxd; do
		[ -e "$root$f" ] && found+=("$f")
	done
	[ ${#found[@]} -eq 0 ] && return 0
	say "An earlier install is in /usr/local: ${found[*]}"
	echo "This script installs into /usr (--prefix=/usr), beside it, not over it. /usr/local/bin comes"
	echo "first in PATH, so 'sandboxctl' would still be the old one: remove the old copy ('make"
	echo "uninstall' in the build it came from, or delete those files), or call /usr/bin/sandboxctl."
}

install_sandboxd() {
	usr_local_note
	say "Installing dependencies and building"
	"$top/scripts/deps.sh"
	cd "$top"
	[ -x configure ] || autoreconf -fi >/dev/null 2>&1
	mkdir -p _build && cd _build
	[ -f Makefile ] || ../configure -q --prefix=/usr --sysconfdir=/etc --localstatedir=/var
	make -j"$(nproc)" >/dev/null
	make install >/dev/null
	ldconfig
	systemd-sysusers >/dev/null 2>&1 || groupadd -f sandboxd
	systemd-tmpfiles --create /usr/lib/tmpfiles.d/sandboxd.conf >/dev/null 2>&1 || true
}

start_sandboxd() {
	if [ "$(readlink /proc/1/exe 2>/dev/null)" = /usr/lib/systemd/systemd ] ||
		[ "$(readlink /proc/1/exe 2>/dev/null)" = /lib/systemd/systemd ]; then
		say "Enabling sandboxd.socket (systemd starts sandboxd on the first connection)"
		systemctl daemon-reload
		systemctl enable --now sandboxd.socket
		return
	fi
	say "No systemd as PID 1 here: starting sandboxd by hand on $sock"
	if sandboxctl --socket "$sock" health >/dev/null 2>&1; then
		echo "sandboxd is already running"
		echo already >"$pidfile"
		return
	fi
	mkdir -p /run/sandboxd
	# From /: a daemon keeps no directory of the checkout busy.
	(cd / && exec nohup sandboxd --listen "$sock" >/var/log/sandboxd.log 2>&1) &
	echo $! >"$pidfile"
	for _ in $(seq 50); do
		sandboxctl --socket "$sock" health >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "sandboxd did not start; see /var/log/sandboxd.log" >&2
	exit 1
}

failed=()
out=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-quickstart.XXXXXX")
trap 'rm -rf "$out"' EXIT

# demo WHAT-IT-SHOWS EXPECTATION COMMAND...: shows the command, runs it (its output is printed
# when it is done), and judges it by EXPECTATION, a function that reads $rc, $out/stdout and
# $out/stderr (with sandboxctl -v's "reason=... exit=..." line); never stops the script.
demo() {
	local what=$1 expect=$2
	shift 2
	# Quoted as a shell needs it, so that the line can be pasted back.
	printf '\n$'
	local a
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then printf ' %s' "$a"; else printf " '%s'" "${a//\'/\'\\\'\'}"; fi
	done
	printf '\n'
	rc=0
	"$@" >"$out/stdout" 2>"$out/stderr" || rc=$?
	cat "$out/stdout"
	cat "$out/stderr" >&2
	if "$expect"; then
		printf '\033[1m-> as expected: %s\033[0m\n' "$what"
	else
		printf '\033[1m-> FAILED: expected %s (exit status %s)\033[0m\n' "$what" "$rc"
		failed+=("$what")
	fi
}
verdict() { grep -qE "^sandboxctl: reason=$1 " "$out/stderr"; }

# Enforced: the kernel kills it (reason=oom). Best-effort: RLIMIT_DATA makes Python's allocation
# fail (MemoryError, exit 1). Anything else (its timeout, exit 0, 125) means the limit did not hold.
hog_stopped() {
	if [ ${#best[@]} -eq 0 ]; then
		verdict oom
	else
		verdict 'exited exit=1' && grep -q MemoryError "$out/stderr"
	fi
}
# The fork loop hits the 32-process limit (pids.max, or RLIMIT_NPROC best-effort) well before 1000.
bomb_stopped() {
	local n
	n=$(sed -n 's/^started \([0-9]*\) processes, then: .*/\1/p' "$out/stdout")
	[ "$rc" = 0 ] && verdict 'exited exit=0' && [ -n "$n" ] && [ "$n" -lt 32 ]
}
# Killed at its 2 s timeout (exit 124), with its setsid grandchild, not after the sleeps' 100 s.
timed_out() { [ "$rc" = 124 ] && verdict timeout && grep -qx started "$out/stdout"; }
ran_fine() { [ "$rc" = 0 ] && grep -q '^hello from ' "$out/stdout" && grep -q '^uid=1000(' "$out/stdout"; }

main_job() {
	best=()
	say "What this host lets sandboxd enforce"
	sandboxctl status
	if ! sandboxctl --json hello | jq -e '.capabilities.cgroup | .memory and .pids and .cpu' >/dev/null; then
		say "Limits are NOT enforceable on this host (no cgroup v2 memory/pids/cpu controllers here)."
		echo "Runs below are BEST-EFFORT: isolated by namespaces, guarded only by rlimits."
		echo "On a systemd host with cgroup v2 (Debian 12 default), the kernel enforces them."
		best=(--best-effort)
	fi
	say "A memory hog in a 64M sandbox"
	demo "the hog stopped by its memory limit (reason=oom; best-effort: MemoryError, exit 1)" hog_stopped \
		sandboxctl run "${best[@]}" -v --memory 64M --timeout 20s -- python3 -c 'b=[]
while True: b.append(bytearray(1 << 20))'
	say "A process bomb in a sandbox with at most 32 processes"
	demo "the bomb stopped below 32 processes, then exit 0" bomb_stopped \
		sandboxctl run "${best[@]}" -v --pids 32 --timeout 10s -- python3 -c 'import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("started", n, "processes, then:", e)'
	say "A command that outlives its 2 second timeout, with a grandchild that called setsid"
	demo "reason=timeout, exit 124" timed_out \
		sandboxctl run "${best[@]}" -v --timeout 2s -- sh -c 'setsid sleep 100 & echo started; sleep 100'
	say "An ordinary command, with its account"
	demo "exit 0, its output, uid 1000 inside" ran_fine \
		sandboxctl run "${best[@]}" -v --memory 256M --pids 64 --cpus 0.5 -- sh -c 'echo hello from $(hostname); id; ls /work'
	if [ ${#failed[@]} -gt 0 ]; then
		say "${#failed[@]} of 4 demos FAILED:"
		printf '  - %s\n' "${failed[@]}"
		return 1
	fi
	say "All 4 demos showed what they should"
}

# listener_pids SOCK: the processes holding the listening socket at SOCK (/proc/net/unix: its
# path, flag __SO_ACCEPTCON), not every process whose command line looks like a daemon's (a
# session's helper keeps the daemon's).
listener_pids() {
	local inodes p fd pids=()
	# Flags are 8 hex digits; __SO_ACCEPTCON (0x10000) is the low bit of the fourth (mawk has no and()).
	inodes=$(awk -v s="$1" '$8 == s && index("13579bdfBDF", substr($4, 4, 1)) { print $7 }' /proc/net/unix 2>/dev/null)
	[ -n "$inodes" ] || return 0
	for p in /proc/[0-9]*; do
		for fd in "$p"/fd/*; do
			case " $(echo $inodes) " in
			*" $(readlink "$fd" 2>/dev/null | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p') "*)
				pids+=("${p#/proc/}")
				break
				;;
			esac
		done 2>/dev/null
	done
	echo "${pids[*]}"
}

# closing_note: how to stop the daemon this script started, and where its log is.
closing_note() {
	say "The daemon"
	if [ "$(readlink /proc/1/exe 2>/dev/null)" = /usr/lib/systemd/systemd ] ||
		[ "$(readlink /proc/1/exe 2>/dev/null)" = /lib/systemd/systemd ]; then
		echo "Log:  journalctl -u sandboxd.service"
		echo "Stop: systemctl disable --now sandboxd.socket sandboxd.service"
	elif [ -s "$pidfile" ] && [ "$(cat "$pidfile")" != already ]; then
		echo "Log:  /var/log/sandboxd.log"
		echo "Stop: kill $(cat "$pidfile")   (the sandboxd this script started on $sock)"
		echo "Start it again: (cd / && nohup sandboxd --listen $sock >>/var/log/sandboxd.log 2>&1 &)"
	else
		echo "Log:  /var/log/sandboxd.log if an earlier run of this script started it, else wherever its starter put it"
		local pids
		pids=$(listener_pids "$sock")
		echo "Stop: kill ${pids:-PID}   (the sandboxd listening on $sock, running before this script)"
	fi
}

# Sourced (tests/t-quickstart.sh): only the functions.
[[ "${BASH_SOURCE[0]}" != "$0" ]] && return 0
install_sandboxd
start_sandboxd
export SANDBOXD_SOCKET=$sock
rc=0
main_job || rc=$?
closing_note
exit "$rc"
