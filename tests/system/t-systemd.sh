#!/bin/bash
# sandboxd under a real systemd: socket activation, Delegate=yes, and limits the kernel enforces.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock

# -- socket activation ------------------------------------------------------------------------
check "sandboxd.socket is listening" systemctl is-active sandboxd.socket
check "sandboxd.service is not running before the first connection" bash -c '! systemctl is-active sandboxd.service'
hello=$(call '{"op":"hello"}') && [ "$(jqr .ok "$hello")" = true ]
ok $? "the first connection starts the daemon and hello answers"
check "sandboxd.service is running after it" systemctl is-active sandboxd.service
diag "hello: $hello"
for c in memory pids cpu; do
	[ "$(jqr ".capabilities.cgroup.$c" "$hello")" = true ]
	ok $? "hello reports the $c controller as enforceable"
done
[ "$(jqr '.capabilities.kernel | .cgroup_kill and .clone_into_cgroup and .pidfd and .memory_peak' "$hello")" = true ]
ok $? "hello reports cgroup.kill, clone3 into a cgroup, pidfds and memory.peak"

# -- the daemon's own leaf in the delegated subtree --------------------------------------------
pid=$(systemctl show -p MainPID --value sandboxd.service)
cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
diag "daemon pid $pid in cgroup $cg"
[ "$cg" = /system.slice/sandboxd.service/daemon ]
ok $? "the daemon sits in its own leaf of the delegated cgroup"
base=/sys/fs/cgroup/system.slice/sandboxd.service
grep -qw memory "$base/sandboxes/cgroup.subtree_control" 2>/dev/null &&
	grep -qw pids "$base/sandboxes/cgroup.subtree_control" && grep -qw cpu "$base/sandboxes/cgroup.subtree_control"
ok $? "memory, pids and cpu are enabled for the sandboxes"

# -- THREATS RES-11: the unit shields the daemon from the OOM killer, never a sandbox ------------
[ "$(cat "/proc/$pid/oom_score_adj")" = -900 ]
ok $? "the daemon runs with the unit's OOMScoreAdjust=-900"
r=$(call '{"op":"run","user":"root","command":"cat /proc/self/oom_score_adj; echo -500 > /proc/self/oom_score_adj; echo rc=$?; cat /proc/self/oom_score_adj"}')
diag "oom score in a run: $(jqr .stdout "$r" | tr '\n' ' ')$(jqr .stderr "$r" | tr '\n' ' ')"
[ "$(jqr .stdout "$r" | sed -n 1p)" = 0 ]
ok $? "a run's oom_score_adj is 0, not the daemon's -900"
[ "$(jqr .stdout "$r" | sed -n '2,3p' | tr '\n' ' ')" = "rc=1 0 " ]
ok $? "the sandbox's root cannot lower it again (-500 refused)"
r=$(call '{"op":"create"}')
osid=$(jqr .sandbox.id "$r")
r=$(call "{\"op\":\"run\",\"sandbox\":\"$osid\",\"command\":\"sleep 30 & cat /proc/\$!/oom_score_adj\"}")
[ "$(jqr .stdout "$r")" = 0 ]
ok $? "nor does anything the run starts in the background inherit the daemon's score"
call "{\"op\":\"destroy\",\"sandbox\":\"$osid\"}" >/dev/null

# -- THREATS DMN-04: without Delegate=yes the daemon does not touch systemd's cgroup ------------
exe=$(systemctl show -p ExecStart --value sandboxd.service | sed -n 's/.*path=\([^ ;]*\).*/\1/p')
diag "sandboxd binary: $exe"
# systemd-run --wait follows its unit over D-Bus: without the system bus it fails at once
# ("Failed to connect to bus"), and the checks below say nothing else. Name what is missing.
[ -S /run/dbus/system_bus_socket ] ||
	diag "no D-Bus system bus (/run/dbus/system_bus_socket): systemd-run --wait cannot work; install package dbus (scripts/deps.sh does)"
timeout 30 systemd-run --unit sbx-nodelegate --wait --quiet -p StateDirectory=sbx-nodelegate \
	"$exe" --listen /run/sbx-nodelegate.sock --state-dir /var/lib/sbx-nodelegate >/dev/null 2>/tmp/sbx-run.err
rc=$?
diag "systemd-run: $(head -c 300 /tmp/sbx-run.err)"
systemctl stop sbx-nodelegate.service 2>/dev/null
msg=$(journalctl -u sbx-nodelegate.service -o cat --no-pager 2>/dev/null | grep 'was not delegated')
diag "without Delegate=yes: status $rc; $msg"
[ "$rc" != 0 ] && [ -n "$msg" ]
ok $? "started by systemd without Delegate=yes, sandboxd refuses to start and says why"
grep -q 'Add Delegate=yes to the unit' <<<"$msg"
ok $? "the message tells what to add"
systemd-run --unit sbx-delegate --quiet -p Delegate=yes -p StateDirectory=sbx-delegate \
	"$exe" --listen /run/sbx-delegate.sock --state-dir /var/lib/sbx-delegate
for _ in $(seq 50); do [ -S /run/sbx-delegate.sock ] && break; sleep 0.1; done
r=$(SANDBOXD_SOCKET=/run/sbx-delegate.sock call '{"op":"hello"}')
[ "$(jqr '.capabilities.cgroup | .memory and .pids and .cpu' "$r")" = true ] &&
	[ "$(jqr .capabilities.cgroup_root "$r")" = /sys/fs/cgroup/system.slice/sbx-delegate.service ]
ok $? "the same unit with Delegate=yes starts, in its own cgroup, with every limit enforceable"
systemctl stop sbx-delegate.service
# Before systemd 251 there is no mark on the cgroup: the daemon asks systemd about its unit.
timeout 30 systemd-run --unit sbx-nomark --wait --quiet -E SANDBOXD_TEST_NO_DELEGATE_MARK=1 \
	-p StateDirectory=sbx-nomark "$exe" --listen /run/sbx-nomark.sock --state-dir /var/lib/sbx-nomark >/dev/null 2>/tmp/sbx-run.err
rc=$?
diag "systemd-run: $(head -c 300 /tmp/sbx-run.err)"
systemctl stop sbx-nomark.service 2>/dev/null
[ "$rc" != 0 ] && journalctl -u sbx-nomark.service -o cat --no-pager | grep -q 'was not delegated'
ok $? "without the mark (as before systemd 251), a unit without Delegate=yes is refused too: systemd says so"
systemd-run --unit sbx-nomark2 --quiet -p Delegate=yes -E SANDBOXD_TEST_NO_DELEGATE_MARK=1 \
	-p StateDirectory=sbx-nomark2 "$exe" --listen /run/sbx-nomark2.sock --state-dir /var/lib/sbx-nomark2
for _ in $(seq 50); do [ -S /run/sbx-nomark2.sock ] && break; sleep 0.1; done
r=$(SANDBOXD_SOCKET=/run/sbx-nomark2.sock call '{"op":"hello"}')
[ "$(jqr '.capabilities.cgroup | .memory and .pids and .cpu' "$r")" = true ]
ok $? "and with Delegate=yes it starts: systemd says so"
systemctl stop sbx-nomark2.service

# -- authoritative limits ----------------------------------------------------------------------
r=$(call '{"op":"create","limits":{"memory":"64M","pids":32,"cpus":0.5}}')
[ "$(jqr .ok "$r")" = true ]
ok $? "create without best_effort succeeds where the limits are enforceable"
sid=$(jqr .sandbox.id "$r")
scg=$(jqr .sandbox.cgroup "$r")
[ "$(jqr '.sandbox.enforced | .memory and .pids and .cpu' "$r")" = true ]
ok $? "the reply says every limit is enforced"
[ "$(cat "$scg/memory.max")" = 67108864 ]
ok $? "memory.max holds the requested 64M"
[ "$(cat "$scg/memory.swap.max")" = 0 ]
ok $? "memory.swap.max is 0: swap is no way around the limit"
[ "$(cat "$scg/pids.max")" = 32 ]
ok $? "pids.max holds 32"
[ "$(cat "$scg/cpu.max")" = "50000 100000" ]
ok $? "cpu.max holds half a core"

other=$(jqr .sandbox.id "$(call '{"op":"create","limits":{"memory":"32M"}}')")
r=$(call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"argv\":[\"python3\",\"-c\",\"b=[]\\nwhile True: b.append(bytearray(1<<20))\"],\"timeout_s\":60}")
diag "memory hog: $(jqr '{reason,exit_code,signal,oom_killed,memory_peak_bytes}' "$r" | tr -d '\n ')"
[ "$(jqr .reason "$r")" = oom ] && [ "$(jqr .oom_killed "$r")" = true ]
ok $? "a memory hog ends with reason oom and oom_killed true (from memory.events)"
peak=$(jqr .memory_peak_bytes "$r")
[ "$peak" != null ] && [ "$peak" -le 67108864 ]
ok $? "its memory peak is reported and within the limit"
r=$(call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"argv\":[\"echo\",\"alive\"]}")
[ "$(jqr .stdout "$r")" = alive ]
ok $? "the sandbox lives on after the OOM kill"
r=$(call "{\"op\":\"run\",\"sandbox\":\"$other\",\"argv\":[\"echo\",\"fine\"]}")
[ "$(jqr .stdout "$r")" = fine ]
ok $? "another sandbox is untouched by it"
call "{\"op\":\"destroy\",\"sandbox\":\"$other\"}" >/dev/null

# THREATS RES-03: tmpfs pages are charged to the cgroup and cannot be reclaimed, so a /tmp as large
# as memory.max would end in an OOM kill. The sandbox's tmpfs holds half of it: ENOSPC instead.
kills0=$(sed -n 's/^oom_kill //p' "$scg/memory.events")
r=$(call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"command\":\"dd if=/dev/zero of=/tmp/fill bs=1M count=200; echo rc=\$?; stat -c %s /tmp/fill; rm /tmp/fill\",\"timeout_s\":60}")
diag "tmpfs fill: $(jqr '{reason,oom_killed,stdout,stderr}' "$r" | tr -d '\n')"
[ "$(jqr .reason "$r")" = exited ] && [ "$(jqr .oom_killed "$r")" = false ] && jqr .stderr "$r" | grep -q 'No space left on device'
ok $? "writing 200M to /tmp of a 64M sandbox: ENOSPC for the writer, no OOM kill"
size=$(jqr .stdout "$r" | sed -n 2p)
[ "$size" -gt $((31 << 20)) ] && [ "$size" -le $((32 << 20)) ]
ok $? "the file stopped at the tmpfs's 32M, half the memory limit ($size bytes)"
[ "$(sed -n 's/^oom_kill //p' "$scg/memory.events")" = "$kills0" ]
ok $? "memory.events counts no new OOM kill"
r=$(call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"command\":\"dd if=/dev/zero of=/dev/shm/a bs=1M count=20 2>/dev/null && python3 -c 'b=bytearray(24<<20); print(len(b))'; rm -f /dev/shm/a\",\"timeout_s\":60}")
[ "$(jqr .stdout "$r")" = $((24 << 20)) ] && [ "$(jqr .oom_killed "$r")" = false ]
ok $? "with 20M in /dev/shm, a process still gets 24M of the other half"

# A process bomb is held at pids.max while another client is answered. Its own sandbox has room
# in memory for 32 python processes, so that pids.max, not memory.max, is what stops it.
r=$(call '{"op":"create","limits":{"memory":"1G","pids":32}}')
bsid=$(jqr .sandbox.id "$r")
bcg=$(jqr .sandbox.cgroup "$r")
bomb_py='import os, time\nwhile True:\n    try:\n        if os.fork() == 0:\n            time.sleep(1000)\n            os._exit(0)\n    except OSError:\n        time.sleep(0.01)'
# Bounded waits, not a fixed sleep: under TCG on a loaded machine python may take seconds to start.
call "{\"op\":\"run\",\"sandbox\":\"$bsid\",\"argv\":[\"python3\",\"-c\",\"$bomb_py\"],\"timeout_s\":30}" >/tmp/bomb.json &
bomb=$!
for _ in $(seq 250); do [ "$(cat "$bcg/pids.current")" -ge 30 ] && break; sleep 0.1; done
h=$(SBX_TIMEOUT=5 call '{"op":"health"}')
[ "$(jqr .status "$h")" = ok ]
ok $? "the daemon answers another client during a process bomb"
cur=$(cat "$bcg/pids.current")
diag "pids.current during the bomb: $cur; pids.events: $(tr '\n' ' ' <"$bcg/pids.events")"
[ "$cur" -ge 30 ] && [ "$cur" -le 32 ]
ok $? "the process bomb fills the sandbox up to pids.max and no further"
wait $bomb
r=$(cat /tmp/bomb.json)
diag "bomb: $(jqr '{reason,exit_code,oom_killed,pids_peak,pids_limit_hit}' "$r" | tr -d '\n ')"
[ "$(jqr .reason "$r")" = timeout ] && [ "$(jqr .pids_peak "$r")" -le 32 ]
ok $? "the process bomb run ends at its timeout, its pids peak within the limit"
[ "$(jqr .pids_limit_hit "$r")" = true ]
ok $? "its result says pids_limit_hit (the sandbox's pids.events max)"
r=$(call "{\"op\":\"run\",\"sandbox\":\"$bsid\",\"argv\":[\"true\"]}")
[ "$(jqr .exit_code "$r")" = 0 ]
ok $? "the sandbox runs commands again after the bomb (its processes were killed)"
[ "$(jqr .pids_limit_hit "$r")" = false ]
ok $? "a run that forks within the limit: pids_limit_hit false"
r=$(call "{\"op\":\"run\",\"sandbox\":\"$bsid\",\"pids\":4,\"command\":\"for i in 1 2 3 4 5 6; do sleep 5 & done 2>/dev/null; echo started\"}")
diag "a run over its own pids limit of 4: $(jqr '{stdout,pids_limit_hit}' "$r" | tr -d '\n ')"
[ "$(jqr .pids_limit_hit "$r")" = true ]
ok $? "a run over its own pids limit (4, the sandbox's 32 not reached): pids_limit_hit true"
out=$(sandboxctl run --sandbox "$bsid" --pids 4 -v -- sh -c 'for i in 1 2 3 4 5 6; do sleep 5 & done' 2>&1 >/dev/null)
diag "sandboxctl run -v: $out"
grep -q ' pids_limit_hit=yes ' <<<"$out"
ok $? "sandboxctl run -v says pids_limit_hit=yes"
call "{\"op\":\"destroy\",\"sandbox\":\"$bsid\"}" >/dev/null

# -- the daemon is SIGKILLed: systemd restarts it, and the sandbox comes back --------------------
call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"command\":\"echo kept > /work/kept\"}" >/dev/null
old=$(systemctl show -p MainPID --value sandboxd.service)
systemctl kill -s KILL sandboxd.service
for _ in $(seq 100); do
	new=$(systemctl show -p MainPID --value sandboxd.service)
	[ "$new" != 0 ] && [ "$new" != "$old" ] && break
	sleep 0.2
done
r=$(call "{\"op\":\"run\",\"sandbox\":\"$sid\",\"argv\":[\"cat\",\"/work/kept\"]}")
diag "after SIGKILL: daemon pid $old -> $new; $(jqr '{ok,stdout}' "$r" | tr -d '\n ')"
[ "$(jqr .stdout "$r")" = kept ]
ok $? "after the daemon is SIGKILLed, the restarted daemon has the sandbox and its files"
r=$(call "{\"op\":\"inspect\",\"sandbox\":\"$sid\"}")
[ "$(jqr .sandbox.restarted_at "$r")" != null ]
ok $? "inspect reports that the sandbox was brought back after a restart"
[ "$(cat "$scg/memory.max")" = 67108864 ]
ok $? "its memory.max holds the same limit in its new cgroup"

# -- THREATS DMN-09: a step of the wall clock expires nothing and stretches no timeout ------------
# The sandbox and the sweep are nobody's (in group sandboxd): a sweep sees only its caller's
# sandboxes, so that the jump expires none a user made before (root's sweep would see them all).
as_owner() { setpriv --reuid=65534 --regid=65534 --groups="$(getent group sandboxd | cut -d: -f3)" "$@"; }
trap 'date -s "@$(($(date +%s) - shift))" >/dev/null' EXIT
shift=0
clock=$(as_owner sandboxctl create --name "clock-$$" --ttl 1h 2>&1)
[[ $clock =~ ^sbx-[0-9a-f]{12}$ ]]
ok $? "a sandbox with a ttl of 1h ($clock)"
date -s '+2 hours' >/dev/null && shift=7200
r=$(as_owner sandboxctl --json sweep)
diag "sweep after the clock jumped 2h ahead: $(jqr '[.actions[] | .action + " " + (.sandbox // "")]' "$r" | tr -d '\n ')"
[ "$(jqr '[.actions[] | select(.action == "destroy")] | length' "$r")" = 0 ] && [ "$(jqr .sandbox.state "$(call '{"op":"inspect","sandbox":"'"$clock"'"}')")" = ready ]
ok $? "the clock jumps 2 hours ahead: the sweep destroys nothing, the sandbox is still there"
call '{"op":"run","sandbox":"'"$clock"'","argv":["sleep","10"],"timeout_s":2}' >/tmp/clock-run.json &
crun=$!
sleep 0.5
date -s '-3 hours' >/dev/null && shift=-3600
wait "$crun"
r=$(cat /tmp/clock-run.json)
diag "run across a 3 hour step back: $(jqr '{reason,duration_s}' "$r" | tr -d '\n ')"
[ "$(jqr .reason "$r")" = timeout ] && jqr '.duration_s < 5' "$r" | grep -qx true
ok $? "a run with a 2 s timeout, the clock stepped 3 hours back: timed out after about 2 s"
date -s '+1 hour' >/dev/null && shift=0
trap - EXIT
call '{"op":"destroy","sandbox":"'"$clock"'"}' >/dev/null

r=$(call "{\"op\":\"destroy\",\"sandbox\":\"$sid\"}")
[ "$(jqr .destroyed "$r")" = true ] && [ ! -d "$scg" ]
ok $? "destroy removes the sandbox's cgroup"
check "the daemon is still running" systemctl is-active sandboxd.service
done_testing
