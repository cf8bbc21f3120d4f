#!/bin/bash
# sandboxd under a real systemd, dying and idling: SIGKILLed in the middle of a run, it comes
# back on the next connection with every sandbox and file, and the run goes on (its sandbox is a
# scope of its own and its pipes were in the fd store: issue 22; t-restart-all.sh follows one to
# its final reply);
# SIGKILLed in the middle of a snapshot, it keeps the finished snapshots and discards the cut one;
# with idle_exit_s it exits by itself once idle (a clean stop, not a failure) and the next
# connection starts it again through the socket, everything where it was.
# The daemon's state directory is the machine's (/var/lib/sandboxd): sandboxes made there before
# are restored too. Only this test's sandbox (by id) and the daemon's pool are counted, and only
# this test's sandbox is destroyed; the configuration file is put back as it was.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
conf=$(sandboxd --help | sed -n 's/.*configuration file (default \(.*\))/\1/p')
diag "configuration file: $conf"
base=/sys/fs/cgroup/system.slice/sandboxd.service/sandboxes
slice=/sys/fs/cgroup/sandboxd.slice # placement "scope": sandboxd-<id>.scope there

# The sandbox cgroups that list does not show: the daemon's pool of ready sandboxes.
pool_cgroups() {
	local listed
	listed=$(call '{"op":"list"}' | jq -r '.sandboxes[].id')
	{ find "$base" -mindepth 1 -maxdepth 1 -type d -name 'sbx-*' -printf '%f\n'
	  find "$slice" -mindepth 1 -maxdepth 1 -type d -name 'sandboxd-sbx-*.scope' -printf '%f\n' | sed 's/^sandboxd-//; s/\.scope$//'
	} 2>/dev/null | grep -vxF -f <(printf '%s\n' $listed) | sort
}

r=$(call "{\"op\":\"create\",\"name\":\"durable-$$\",\"limits\":{\"memory\":\"256M\"}}")
[ "$(jqr .ok "$r")" = true ]
ok $? "a sandbox is created"
sid=$(jqr .sandbox.id "$r")
call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"command\":\"mkdir -p /work/d && echo precious > /work/d/file\"}" >/dev/null

# -- SIGKILL in the middle of a run -------------------------------------------------------------
SID=$sid python3 - >/tmp/inflight.out 2>&1 <<'PY' &
import json, os, socket
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["SANDBOXD_SOCKET"]); f = s.makefile("rwb")
f.write(json.dumps({"id": 1, "op": "run", "sandbox": os.environ["SID"], "argv": ["sleep", "1000"]}).encode() + b"\n"); f.flush()
for line in f:
    m = json.loads(line)
    print(json.dumps(m), flush=True)
PY
client=$!
for _ in $(seq 100); do grep -q '"started"' /tmp/inflight.out && break; sleep 0.2; done
run_id=$(grep '"started"' /tmp/inflight.out | jq -r .run_id)
[ -n "$run_id" ] && [ "$run_id" != null ]
ok $? "a run is in flight ($run_id)"
pool_before=$(pool_cgroups)
old=$(systemctl show -p MainPID --value sandboxd.service)
systemctl kill -s KILL sandboxd.service
for _ in $(seq 100); do [ "$(systemctl show -p MainPID --value sandboxd.service)" != "$old" ] && break; sleep 0.1; done
wait "$client" 2>/dev/null
r=$(call "{\"op\":\"inspect\",\"sandbox\":\"$sid\"}")
new=$(systemctl show -p MainPID --value sandboxd.service)
diag "daemon pid $old -> $new; interrupted: $(jq -c .sandbox.interrupted_runs <<<"$r")"
[ "$new" != "$old" ] && [ "$(jqr .sandbox.id "$r")" = "$sid" ]
ok $? "after SIGKILL the next connection finds a new daemon with the sandbox"
[ "$(jqr '.sandbox.interrupted_runs | length' "$r")" = 0 ]
ok $? "the run in flight was not interrupted: inspect lists no interrupted run"
r=$(call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"command\":\"cat /work/d/file; pgrep -c sleep || true\"}")
[ "$(jqr .stdout "$r")" = $'precious\n1' ]
ok $? "the workspace is intact, and the run's sleep still runs ($(jqr .stdout "$r" | tr '\n' ' '))"
r=$(call "{\"op\":\"kill\",\"run_id\":\"$run_id\"}")
k=$(call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"command\":\"for i in \$(seq 50); do pgrep sleep >/dev/null || exit 0; sleep 0.1; done; exit 1\"}")
[ "$(jqr .ok "$r")" = true ] && [ "$(jqr .exit_code "$k")" = 0 ]
ok $? "the next daemon knows the run by its id: kill ends it ($(jqr .ok "$r"), the sleep gone: $(jqr .exit_code "$k"))"
# Besides it, only the new daemon's pool of ready sandboxes (pool_size, 2 by default): the
# earlier daemon's pooled cgroups are gone. Sandboxes listed besides this test's are not its own:
# they are not counted.
cgs=$({ find "$base" -mindepth 1 -maxdepth 1 -type d -printf '%f\n'
	find "$slice" -mindepth 1 -maxdepth 1 -type d -name 'sandboxd-sbx-*.scope' -printf '%f\n' | sed 's/^sandboxd-//; s/\.scope$//'; } 2>/dev/null)
pool_after=$(pool_cgroups)
diag "the pool's cgroups: before $(echo $pool_before), after $(echo $pool_after)"
[ "$(grep -cx "$sid" <<<"$cgs")" = 1 ] && [ -z "$(comm -12 <(echo "$pool_before") <(echo "$pool_after"))" ] &&
	[ "$(grep -c . <<<"$pool_after")" -le 2 ]
ok $? "one cgroup for the sandbox, the earlier daemon's pool replaced, none left behind (at most the new pool's 2)"

# -- SIGKILL in the middle of a snapshot ----------------------------------------------------------
r=$(call '{"op":"snapshot","sandbox":"'"$sid"'","label":"before"}')
snap1=$(jqr .snapshot.id "$r")
[ "$(jqr .ok "$r")" = true ]
ok $? "a finished snapshot ($snap1)"
call '{"op":"run","sandbox":"'"$sid"'","timeout_s":600,"command":"mkdir -p /work/many && cd /work/many && seq 40000 | xargs touch && echo made"}' >/dev/null
SID=$sid python3 - >/tmp/snap.out 2>&1 <<'PY' &
import json, os, socket
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["SANDBOXD_SOCKET"]); f = s.makefile("rwb")
f.write(json.dumps({"id": 1, "op": "snapshot", "sandbox": os.environ["SID"], "label": "cut"}).encode() + b"\n"); f.flush()
for line in f:
    print(line.decode().strip(), flush=True)
PY
client=$!
for _ in $(seq 300); do grep -q '"progress"' /tmp/snap.out && break; sleep 0.1; done
grep -q '"progress"' /tmp/snap.out && ! grep -q '"ok"' /tmp/snap.out
ok $? "a snapshot of 40,000 files is in flight (progress events, no reply yet)"
old=$(systemctl show -p MainPID --value sandboxd.service)
systemctl kill -s KILL sandboxd.service
for _ in $(seq 100); do [ "$(systemctl show -p MainPID --value sandboxd.service)" != "$old" ] && break; sleep 0.1; done
wait "$client" 2>/dev/null
r=$(call '{"op":"snapshot.list","sandbox":"'"$sid"'"}')
diag "after SIGKILL mid-snapshot: $(jq -c '[.snapshots[] | [.id, .label]]' <<<"$r" 2>&1)"
[ "$(jqr '[.snapshots[].id] | join(",")' "$r")" = "$snap1" ]
ok $? "the next daemon lists the finished snapshot, and only it (the cut one is discarded)"
sdir=$(dirname "$(jqr .sandbox.workdir "$(call '{"op":"inspect","sandbox":"'"$sid"'"}')")")
[ -z "$(find "$sdir/snapshots" -mindepth 1 -maxdepth 1 -name '.tmp-*' 2>/dev/null)" ]
ok $? "no half-made snapshot is left on disk"
r=$(call '{"op":"run","sandbox":"'"$sid"'","command":"cat /work/d/file; ls /work/many | wc -l"}')
[ "$(jqr .stdout "$r")" = $'precious\n40000' ]
ok $? "the sandbox runs again (thawed, new init) with every file in place"
r=$(call '{"op":"snapshot.restore","sandbox":"'"$sid"'","snapshot":"'"$snap1"'"}')
[ "$(jqr .ok "$r")" = true ] && [ "$(jqr .stdout "$(call '{"op":"run","sandbox":"'"$sid"'","command":"cat /work/d/file; ls /work/many 2>/dev/null | wc -l"}')")" = $'precious\n0' ]
ok $? "the finished snapshot restores whole"

# -- idle exit, and the socket brings it back ---------------------------------------------------
systemctl stop sandboxd.service
mkdir -p "$(dirname "$conf")"
conf_saved=
if [ -e "$conf" ]; then
	conf_saved=$(mktemp) && cp -a "$conf" "$conf_saved"
fi
restore_conf() {
	if [ -n "$conf_saved" ]; then
		cp -a "$conf_saved" "$conf" && rm -f "$conf_saved"
	else
		rm -f "$conf"
	fi
}
trap restore_conf EXIT
printf 'idle_exit_s = 2s\n' >"$conf"
r=$(call '{"op":"health"}')
[ "$(jqr .status "$r")" = ok ]
ok $? "with idle_exit_s = 2s the next connection starts the daemon"
first=$(systemctl show -p MainPID --value sandboxd.service)
for _ in $(seq 150); do systemctl is-active -q sandboxd.service || break; sleep 0.2; done
state=$(systemctl show -p ActiveState --value sandboxd.service)
result=$(systemctl show -p Result --value sandboxd.service)
diag "after idling: ActiveState=$state Result=$result"
[ "$state" = inactive ] && [ "$result" = success ]
ok $? "idle, the daemon exits by itself, cleanly (inactive, result success)"
check "the socket is still listening" systemctl is-active sandboxd.socket
check "no sandbox process is left in the service's cgroup" bash -c "[ -z \"\$(find $base -name cgroup.procs -exec cat {} + 2>/dev/null)\" ]"
# Placement "scope": the recorded sandbox outlives the daemon in its own scope (its init goes on).
if [ -d "$slice/sandboxd-$sid.scope" ]; then
	check "the sandbox's init still runs in its scope" bash -c "[ -n \"\$(cat $slice/sandboxd-$sid.scope/sandbox/init/cgroup.procs)\" ]"
fi
r=$(call '{"op":"run","sandbox":"'"$sid"'","argv":["cat","/work/d/file"]}')
second=$(systemctl show -p MainPID --value sandboxd.service)
diag "daemon pid $first -> $second"
[ "$(jqr .stdout "$r")" = precious ] && [ "$second" != "$first" ] && [ "$second" != 0 ]
ok $? "the next connection starts it again through the socket; the sandbox and its files are there"
r=$(call '{"op":"inspect","sandbox":"'"$sid"'"}')
[ "$(jqr '.sandbox.interrupted_runs | length' "$r")" = 0 ]
ok $? "the idle exit interrupted no run"

restore_conf
trap - EXIT
call '{"op":"destroy","sandbox":"'"$sid"'"}' >/dev/null
systemctl stop sandboxd.service
done_testing
