#!/bin/bash
# Sets sandboxd up on this machine (Debian 12, as root) and runs the main job: a command in a
# sandbox whose memory, process and CPU limits the kernel enforces.
#   - installs the build dependencies, builds, installs into /usr (units, sysusers, tmpfiles)
#   - with systemd as PID 1: enables sandboxd.socket (the daemon starts on first connection);
#     without it (a container): starts sandboxd by hand on the same socket
#   - shows what this host can enforce, then runs a memory hog, a process bomb and a timeout
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
sock=/run/sandboxd/sandboxd.sock
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

install_sandboxd() {
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
		return
	fi
	mkdir -p /run/sandboxd
	nohup sandboxd --listen "$sock" >/var/log/sandboxd.log 2>&1 &
	for _ in $(seq 50); do
		sandboxctl --socket "$sock" health >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "sandboxd did not start; see /var/log/sandboxd.log" >&2
	exit 1
}

demo() { # shows a command, runs it, never stops the script
	printf '\n$ %s\n' "$*"
	"$@" || true
}

main_job() {
	local best=()
	say "What this host lets sandboxd enforce"
	sandboxctl status
	if ! sandboxctl --json hello | jq -e '.capabilities.cgroup | .memory and .pids and .cpu' >/dev/null; then
		say "Limits are NOT enforceable on this host (no cgroup v2 memory/pids/cpu controllers here)."
		echo "Runs below are BEST-EFFORT: isolated by namespaces, guarded only by rlimits."
		echo "On a systemd host with cgroup v2 (Debian 12 default), the kernel enforces them."
		best=(--best-effort)
	fi
	say "A memory hog in a 64M sandbox"
	demo sandboxctl run "${best[@]}" -v --memory 64M --timeout 20s -- \
		python3 -c 'b=[]
while True: b.append(bytearray(1 << 20))'
	say "A process bomb in a sandbox with at most 32 processes"
	demo sandboxctl run "${best[@]}" -v --pids 32 --timeout 10s -- python3 -c 'import os, time
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
	demo sandboxctl run "${best[@]}" -v --timeout 2s -- sh -c 'setsid sleep 100 & echo started; sleep 100'
	say "An ordinary command, with its account"
	demo sandboxctl run "${best[@]}" -v --memory 256M --pids 64 --cpus 0.5 -- sh -c 'echo hello from $(hostname); id; ls /work'
}

install_sandboxd
start_sandboxd
export SANDBOXD_SOCKET=$sock
main_job
