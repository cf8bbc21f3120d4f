#!/bin/bash
# Sandbox scopes over their lifetime (issue 22; t-restart-scopes.sh for one restart of each kind):
# a throwaway sandbox's scope that a SIGKILL of the daemon left without a record is stopped by the
# next daemon; a snapshot restore (no process in the sandbox for a while) keeps the sandbox's scope;
# then a loop of `systemctl restart sandboxd` and a SIGKILL of the daemon (systemd restarts it),
# in turn, LOOPS times (20, issue 22), under load: a busy loop in the guest outside sandboxd
# (a transient unit at CPUWeight=1: it takes what the rest leaves, which is all a TCG guest has),
# a second sandbox that keeps a CPU busy, and a run in it after each start; a background HTTP server in the first is the same process after
# each, and after each nothing has leaked: the fds in the service's store, the scopes, the cgroups
# and the processes of sandboxd.slice and the service's own processes are as many as before the
# loop. Only this test's sandboxes (and its load unit) are made and destroyed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/restart-lib.sh"
LOOPS=${LOOPS:-20}

check "the daemon answers" wait_up
r=$(call "{\"op\":\"create\",\"name\":\"loop-$$\"}")
id=$(jqr .sandbox.id "$r")
unit=sandboxd-$id.scope
run_in "$id" 'cd /work && echo hello > index.txt && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > /work/srv.pid)' >/dev/null
srv=$(run_in "$id" 'cat /work/srv.pid')
SAME='test "$(tr "\0" " " < /proc/'"$srv"'/cmdline)" = "python3 -m http.server 8000 --bind 127.0.0.1 " && echo same'
[ "$(run_in "$id" "$SAME")" = same ]
ok $? "a sandbox $id with a background HTTP server (pid $srv inside)"
# A throwaway sandbox (never recorded) in flight when the daemon is killed: its scope has no
# record, and the next daemon stops it.
call '{"op":"run","argv":["sleep","1000"]}' >/dev/null 2>&1 &
client=$!
throwaway=
for _ in $(seq 100); do
	throwaway=$(systemctl list-units --all --plain --no-legend 'sandboxd-*.scope' | awk '{print $1}' |
		while read -r u; do [ -n "$(find "$slice/$u" -name cgroup.procs -exec cat {} + | xargs -r ps -o comm= -p | grep -x sleep)" ] && echo "$u"; done | head -n1)
	[ -n "$throwaway" ] && break
	sleep 0.2
done
[ -n "$throwaway" ]
ok $? "a throwaway sandbox's run is in its own scope ($throwaway)"
old=$(mainpid)
kill -9 "$old"
wait_up "$old"
wait "$client" 2>/dev/null
for _ in $(seq 50); do systemctl is-active --quiet "$throwaway" || break; sleep 0.2; done
! systemctl is-active --quiet "$throwaway" && [ ! -d "$slice/$throwaway" ]
ok $? "the next daemon stopped that scope, which no record claims ($(systemctl is-active "$throwaway" 2>&1))"

# A snapshot restore kills every process of the sandbox: its scope is kept meanwhile.
inv=$(systemctl show -p InvocationID --value "$unit")
snap=$(call "{\"op\":\"snapshot\",\"sandbox\":\"$id\"}" | jq -r .snapshot.id)
r=$(call "{\"op\":\"snapshot.restore\",\"sandbox\":\"$id\",\"snapshot\":\"$snap\"}")
[ "$(jqr .ok "$r")" = true ]
ok $? "snapshot.restore of the sandbox ($(jqr '.error.message // "ok"' "$r"))"
[ "$(systemctl show -p InvocationID --value "$unit")" = "$inv" ] && systemctl is-active --quiet "$unit"
ok $? "its scope is the same one, active (InvocationID $inv): systemd did not collect it while it was empty"
[ "$(run_in "$id" 'cat /work/index.txt')" = hello ] && [ ! -e "$slice/$unit/hold" ]
ok $? "the sandbox runs again with its workspace, its placeholder gone"
run_in "$id" 'cd /work && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > /work/srv.pid)' >/dev/null
srv=$(run_in "$id" 'cat /work/srv.pid')
SAME='test "$(tr "\0" " " < /proc/'"$srv"'/cmdline)" = "python3 -m http.server 8000 --bind 127.0.0.1 " && echo same'


# Load: a second sandbox keeps a CPU busy through the loop, and a busy loop of the guest's own
# takes whatever CPU is left (the daemon restarts on a machine with no idle time).
r=$(call "{\"op\":\"create\",\"name\":\"loop-load-$$\"}")
load=$(jqr .sandbox.id "$r")
# Builtins only: a loop that forks would make the process count move (stable() waits for it).
run_in "$load" '(setsid sh -c "while :; do :; done" >/dev/null 2>&1 &)' >/dev/null
# "whil[e]": the run's own command line holds the pattern, not what it matches
busy='pgrep -fc "whil[e] :; do"'
[ "$(run_in "$load" "$busy")" = 1 ]
ok $? "a second sandbox $load keeps a CPU busy"
hog=sandboxd-test-load-$$
trap 'systemctl stop "$hog" 2>/dev/null' EXIT
systemd-run --quiet --collect --unit="$hog" -p CPUWeight=1 -p Nice=19 sh -c 'while :; do :; done'
systemctl is-active --quiet "$hog"
ok $? "a busy loop in the guest, outside sandboxd, at CPUWeight=1 ($hog)"
stable
before=$STABLE
diag "before the loop: $before"
fails=1 leaked=
start=$SECONDS
for i in $(seq "$LOOPS"); do
	old=$(mainpid) t=$SECONDS
	if [ $((i % 2)) = 0 ]; then how="systemctl restart"; systemctl restart sandboxd.service; else how="kill -9"; kill -9 "$old"; fi
	wait_up "$old" || { diag "restart $i: the daemon did not come back"; break; }
	# a run in the loaded sandbox right after each start
	[ "$(run_in "$load" 'echo up')" = up ] || { diag "restart $i: no run in the loaded sandbox"; break; }
	[ "$(run_in "$id" "$SAME")" = same ] || { diag "restart $i: the server is not the same process"; break; }
	stable || diag "restart $i: the counts are still moving"
	now=$STABLE
	[ "$now" = "$before" ] || { leaked="restart $i: $now"; diag "after restart $i: $now (before: $before)"; break; }
	diag "restart $i ($how): back, checked and stable in $((SECONDS - t)) s"
	[ "$i" = "$LOOPS" ] && fails=0
done
diag "$LOOPS restarts in $((SECONDS - start)) s"
ok $fails "$LOOPS restarts (kill -9 and systemctl restart, in turn) under load: runs work, the server is the same process and nothing leaked after each (${leaked:-$before})"
[ "$(run_in "$load" "$busy")" = 1 ]
ok $? "the loaded sandbox's busy loop went on through every restart"
call "{\"op\":\"destroy\",\"sandbox\":\"$id\"}" "{\"op\":\"destroy\",\"sandbox\":\"$load\"}" >/dev/null
for _ in $(seq 50); do systemctl list-units --all --plain --no-legend "sandboxd-$id.scope" "sandboxd-$load.scope" | grep -q . || break; sleep 0.2; done
! systemctl list-units --all --plain --no-legend "sandboxd-$id.scope" "sandboxd-$load.scope" | grep -q .
ok $? "destroyed, both scopes are gone"
done_testing
