#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What a daemon's death leaves is reported, never silent: a run in flight when the daemon was
# SIGKILLed is listed in the restored sandbox's interrupted_runs (kept across later restarts),
# a throwaway sandbox's stale cgroup and processes are removed, and meta.json is whole. With
# idle_exit_s, a socket-activated daemon exits once idle, but not while a sandbox has a process
# besides its init; the next start finds everything where it was.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

mkdir -p "$T"
printf 'sweep_interval = 0\n' >"$T/plain.conf"
start_daemon --config "$T/plain.conf" || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"dur"}')
id=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.interrupted_runs)" "[]" "a new sandbox has no interrupted runs"
rpc '{"op":"run","sandbox":"dur","command":"echo kept > /work/kept"}' >/dev/null

# Two runs in flight, one in the sandbox and one in a throwaway sandbox, then SIGKILL.
python3 - "$SOCK" >"$T/started" <<'EOF' &
import json, socket, sys, time
sys.path.insert(0, __import__("os").environ["TESTS_DIR"])
from client import Conn
c = Conn(sys.argv[1])
c.send({"id": 1, "op": "run", "sandbox": "dur", "argv": ["sleep", "1000"]})
c.send({"id": 2, "op": "run", "best_effort": True, "argv": ["sh", "-c", "sleep 1000"]})
seen = {}
while len(seen) < 2:
    m = c.recv_json(30)
    if m is None:
        break
    if m.get("event") == "started":
        seen[m["id"]] = m["run_id"] + " " + m["sandbox"]
print(seen.get(1, "-"))
print(seen.get(2, "-"))
sys.stdout.flush()
time.sleep(1000)
EOF
client=$!
_started() { [ "$(wc -l <"$T/started")" = 2 ]; }
check "two runs are in flight" wait_until 30 _started
read -r run_id _ < <(sed -n 1p "$T/started")
read -r _ eph < <(sed -n 2p "$T/started")
check "the run left a note in the state directory" grep -q "\"id\":\"$run_id\"" "$T/state/runs.log"
check "one file for all runs: no file per run" [ ! -e "$T/state/sandboxes/$id/runs" ]
check "the throwaway sandbox has its cgroup" [ -d "$CG/sandboxes/$eph" ]
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
kill "$client" 2>/dev/null
wait "$client" 2>/dev/null
DAEMON_PID=
check "after SIGKILL, meta.json is there and no temporary file is left" \
	eval "[ -s '$T/state/sandboxes/$id/meta.json' ] && [ ! -e '$T/state/sandboxes/$id/meta.json.tmp' ]"

start_daemon --config "$T/plain.conf" || exit 0
r=$(rpc '{"op":"inspect","sandbox":"dur"}')
is "$(jget "$r" '.sandbox.interrupted_runs | length')" 1 "the restored sandbox reports one interrupted run"
is "$(jget "$r" '.sandbox.interrupted_runs[0] | [.id, (.argv | join(" ")), .reason] | join("|")')" \
	"$run_id|sleep 1000|daemon restarted" "with its id, argv and the reason"
like "$(jget "$r" '.sandbox.interrupted_runs[0].started_at')" '^20[0-9-]+T[0-9:]+Z$' "and when it started"
check "the note is gone once meta.json holds it" [ ! -s "$T/state/runs.log" ]
is "$(jget "$(rpc '{"op":"run","sandbox":"dur","argv":["cat","/work/kept"]}')" .stdout)" kept "the workspace is intact"
_stale_gone() { [ ! -d "$CG/sandboxes/$eph" ]; }
check "the throwaway sandbox's stale cgroup (and its sleep) was removed" wait_until 10 _stale_gone
check "its workspace too" [ ! -e "$T/state/sandboxes/$eph" ]
is "$(jget "$(rpc '{"op":"list"}')" '[.sandboxes[].id] | join(",")')" "$id" "only the recorded sandbox is listed"
# The run log is compacted as it grows, keeping the runs still in flight: a long run, then 600
# short ones, then SIGKILL: the long one (and only it) is reported.
PYTHONPATH=$TESTS_DIR python3 - "$SOCK" >"$T/many" <<'EOF' &
import sys, time
from client import Conn
long = Conn(sys.argv[1])
long.send({"id": 1, "op": "run", "sandbox": "dur", "argv": ["sleep", "1000"]})
m = long.recv_json(30)
print(m.get("run_id") if m and m.get("event") == "started" else "-", flush=True)
c = Conn(sys.argv[1])
print(sum(1 for i in range(600) if c.call({"op": "run", "sandbox": "dur", "argv": ["true", "%0100d" % i]}).get("ok")), flush=True)
time.sleep(1000)
EOF
client=$!
_many_done() { [ "$(wc -l <"$T/many")" = 2 ]; }
check "a long run, then 600 short ones in the same sandbox" wait_until 120 _many_done
read -r long_id < <(sed -n 1p "$T/many")
is "$(sed -n 2p "$T/many")" 600 "all 600 short runs succeeded"
size=$(stat -c %s "$T/state/runs.log")
check "runs.log was compacted on the way: $size bytes (< 65 KiB; 600 notes are about 150 KiB)" [ "$size" -lt 66560 ]
check "the long run's note survived the compaction" grep -q "\"id\":\"$long_id\"" "$T/state/runs.log"
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
kill "$client" 2>/dev/null
wait "$client" 2>/dev/null
DAEMON_PID=
start_daemon --config "$T/plain.conf" || exit 0
r=$(rpc '{"op":"inspect","sandbox":"dur"}')
is "$(jget "$r" '[.sandbox.interrupted_runs[].id] | join(",")')" "$run_id,$long_id" \
	"after the second SIGKILL, the long run is reported too, and none of the 600"
stop_daemon
start_daemon --config "$T/plain.conf" || exit 0
r=$(rpc '{"op":"inspect","sandbox":"dur"}')
is "$(jget "$r" '[.sandbox.interrupted_runs[].id] | join(",")')" "$run_id,$long_id" \
	"after another (clean) restart the interrupted runs are still reported, once each"
stop_daemon

# -- idle exit ---------------------------------------------------------------------------------
command -v systemd-socket-activate >/dev/null || { diag "no systemd-socket-activate: idle exit not tested here"; exit 0; }
printf 'sweep_interval = 0\nidle_exit_s = 1s\n' >"$T/idle.conf"
# The holder connects first, as soon as the socket is there (before the daemon's first idle
# second can pass, however slow the machine), says so, and holds until told to let go.
rm -f "$T/held" "$T/release"
python3 - "$SOCK" "$T" <<'EOF' &
import os, sys, time
sys.path.insert(0, os.environ["TESTS_DIR"])
from client import Conn
end = time.monotonic() + 30
while True:
    try:
        c = Conn(sys.argv[1])
        break
    except OSError:
        if time.monotonic() > end:
            raise
        time.sleep(0.01)
c.call({"op": "health"})
open(os.path.join(sys.argv[2], "held"), "w").close()
while not os.path.exists(os.path.join(sys.argv[2], "release")) and time.monotonic() < end:
    time.sleep(0.05)
EOF
holder=$!
start_daemon_activated --config "$T/idle.conf" || exit 0
check "the holder is connected (its health answered)" wait_until 30 test -e "$T/held"
sleep 2.5
check "an open connection keeps the idle daemon up" kill -0 "$DAEMON_PID"
# Started while the holder still holds, so that no idle second passes between the two.
r=$(rpc '{"op":"run","sandbox":"dur","command":"sleep 1000 >/dev/null 2>&1 &"}')
is "$(jget "$r" .exit_code)" 0 "a background process started in the sandbox"
touch "$T/release"
wait "$holder"
sleep 3
check "a sandbox process besides the init keeps the daemon up" kill -0 "$DAEMON_PID"
rpc '{"op":"run","sandbox":"dur","argv":["pkill","sleep"]}' >/dev/null
check "once only the inits are left, the daemon exits by itself" wait_until 20 _daemon_gone
wait "$DAEMON_PID"
is "$?" 0 "with status 0"
check "it says why in its log" grep -q "idle for" "$T/daemon.log"
DAEMON_PID=
# Started again without idle exit: on a loaded machine a second between two requests would end it.
start_daemon_activated --config "$T/plain.conf" || exit 0
r=$(rpc '{"op":"run","sandbox":"dur","argv":["cat","/work/kept"]}')
is "$(jget "$r" .stdout)" kept "started again, it has the sandbox and its files"
is "$(jget "$(rpc '{"op":"inspect","sandbox":"dur"}')" '.sandbox.interrupted_runs | length')" 2 \
	"an idle exit interrupts no run (the two from before, no more)"
stop_daemon
