#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Security round 3, the daemon (docs/security.md DMN-14, ESC-37):
#  - a second daemon given the same cgroup subtree (another state directory and socket) refuses
#    to start, naming the first one's pid and --cgroup-root, and the first one's sandbox lives on;
#    a daemon that died does not block the next one (point 3);
#  - a sandbox's pid 1 shows nothing of the host: its command line is "sandboxd-init" and no
#    path of the host's, its environment empty (point 8).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true}')
id=$(jget "$r" '.sandbox.id')
check "a sandbox is made" [ -n "$id" ] && [ "$id" != null ]

# ---- 8: pid 1's command line and environment -------------------------------------------------
# stdout_decoded REPLY: the run's stdout as bytes, NULs made spaces (base64 when it had NULs).
stdout_decoded() {
	if [ "$(jget "$1" '.stdout_encoding')" = base64 ]; then
		jget "$1" '.stdout' | base64 -d | tr '\0' ' '
	else
		jget "$1" '.stdout' | tr '\0' ' '
	fi
}
r=$(rpc "{\"op\":\"run\",\"sandbox\":\"$id\",\"user\":\"root\",\"argv\":[\"/bin/cat\",\"/proc/1/cmdline\"]}")
out=$(stdout_decoded "$r")
is "$(printf '%s' "$out" | sed 's/ *$//')" "sandboxd-init" "pid 1's command line inside is 'sandboxd-init' only"
no_host_paths() { [ -n "$out" ] && ! printf '%s' "$out" | grep -q -e "$T" -e "$SOCK"; }
check "... and names neither the state directory nor the socket" no_host_paths
r=$(rpc "{\"op\":\"run\",\"sandbox\":\"$id\",\"user\":\"root\",\"argv\":[\"/bin/sh\",\"-c\",\"cat /proc/1/environ 2>/dev/null | tr -d '\\\\000' | wc -c\"]}")
is "$(jget "$r" '.stdout' | tr -d ' \n')" 0 "pid 1's environment inside is empty (or unreadable)"

# ---- 3: one daemon per cgroup subtree ----------------------------------------------------------
mkdir -p "$T/state2"
timeout -k 5 30 "$SANDBOXD" --listen "$T/sock2" --state-dir "$T/state2" --cgroup-root "$CG" --pool-size 0 >"$T/daemon2.log" 2>&1 &
B=$!
_b_gone() { ! kill -0 "$B" 2>/dev/null; }
if wait_until 20 _b_gone; then
	wait "$B"
	rc=$?
else
	rc=running
	kill -KILL "$B" 2>/dev/null
	wait "$B" 2>/dev/null
fi
isnt_zero() { [ "$1" != 0 ] && [ "$1" != running ]; }
check "a second daemon on the same cgroup subtree refuses to start (status $rc)" isnt_zero "$rc"
like "$(cat "$T/daemon2.log")" "another sandboxd \\(pid $DAEMON_PID\\) owns the cgroup subtree" "... naming the first daemon's pid"
like "$(cat "$T/daemon2.log")" "--cgroup-root" "... and how to give it a subtree of its own"
no_stale() { ! grep -q "stale cgroup" "$T/daemon2.log"; }
check "... and removed nothing (its log says no stale cgroup)" no_stale
r=$(rpc "{\"op\":\"run\",\"sandbox\":\"$id\",\"argv\":[\"/bin/echo\",\"alive\"]}")
is "$(jget "$r" '.stdout')" "alive" "the first daemon's sandbox still runs"
is "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$id\"}")" '.sandbox.state')" ready "... and is still ready"

# A daemon that died lets the next one have the subtree.
kill -KILL "$DAEMON_PID" && wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon || exit 0
ok "after the first daemon was SIGKILLed, the next one on the subtree starts"
rpc "{\"op\":\"destroy\",\"sandbox\":\"$id\"}" >/dev/null
stop_daemon
