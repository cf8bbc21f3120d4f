#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Killing without cgroup.kill (Linux before 5.14; THREATS DMN-07): the daemon freezes the cgroup,
# SIGKILLs every process in it through pidfds, and thaws. The same guarantees as with
# cgroup.kill: a timeout, a kill and a destroy leave nothing of a run or a sandbox alive, a
# process that forks as fast as it can included, and nothing outside the sandbox is touched.
# SANDBOXD_TEST_NO_CGROUP_KILL makes the daemon take that path on a kernel that has the file.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

SANDBOXD_TEST_NO_CGROUP_KILL=1 start_daemon || exit 0
r=$(rpc '{"op":"hello"}')
is "$(jget "$r" .capabilities.kernel.cgroup_kill)" false "hello: cgroup_kill false (the fallback is in use)"

# A canary outside every sandbox, whose pid is what a careless kill by pid could hit.
sleep 1000 &
canary=$!

r=$(rpc '{"op":"create","best_effort":true,"name":"k"}')
cg=$(jget "$r" .sandbox.cgroup)
# Forks as fast as it can until it is killed, and goes on when a fork fails (RLIMIT_NPROC is the
# pids guard on this host): its children are in the run's cgroup too.
forker="python3 -c 'import os, time\\nwhile True:\\n try:\\n  if os.fork() == 0: time.sleep(1000); os._exit(0)\\n except OSError: time.sleep(0.01)'"
t0=$(date +%s%N)
r=$(rpc "{\"op\":\"run\",\"sandbox\":\"k\",\"command\":\"$forker\",\"timeout_s\":1}" 30)
t1=$(date +%s%N)
is "$(jget "$r" .reason)" timeout "a fork loop past its 1 s timeout: reason timeout"
check "the reply came within 10 s" [ $(((t1 - t0) / 1000000)) -lt 10000 ]
_only_init() { [ "$(cg_procs_but_warm "$cg" | wc -l)" = 1 ]; }
check "its cgroup emptied, background children and all: only the sandbox's init is left" wait_until 10 _only_init

# A kill by the client, of a run that keeps forking.
r=$(FORKER=$forker timeout 30 python3 - "$SOCK" "$cg" <<'EOF'
import json, os, sys, time
sys.path.insert(0, os.environ["TESTS_DIR"])
from client import Conn, procs_under
c = Conn(sys.argv[1], 20)
c.send({"id": 1, "op": "run", "sandbox": "k", "command": os.environ["FORKER"].replace("\\n", "\n"), "timeout_s": 60})
started = None
while started is None:
    m = json.loads(c.recv_line())
    if m.get("event") == "started":
        started = m["run_id"]
t = time.monotonic()
while len(procs_under(sys.argv[2])) <= 20 and time.monotonic() - t < 10:
    time.sleep(0.05)
n = len(procs_under(sys.argv[2]))
k = Conn(sys.argv[1], 15).call({"op": "kill", "run_id": started})
while True:
    m = json.loads(c.recv_line())
    if "event" not in m:
        print(json.dumps({"procs": n, "kill": k.get("ok"), "reason": m.get("reason")}))
        break
EOF
)
check "a fork loop in flight has many processes ($(jget "$r" .procs))" [ "$(jget "$r" .procs)" -gt 20 ]
is "$(jget "$r" '"\(.kill) \(.reason)"')" "true killed" "kill of it: ok, and it ends with reason killed"
check "its cgroup emptied: only the sandbox's init is left" wait_until 10 _only_init

# Destroy with everything still forking: nothing of the sandbox is left.
rpc "{\"op\":\"run\",\"sandbox\":\"k\",\"command\":\"($forker) >/dev/null 2>&1 & echo bg\"}" >/dev/null
check "a fork loop left running in the background" wait_until 10 bash -c "[ \$(find '$cg' -name cgroup.procs -exec cat {} + | wc -l) -gt 20 ]"
pids=$(cg_procs "$cg")
r=$(rpc '{"op":"destroy","sandbox":"k"}' 60)
is "$(jget "$r" .destroyed)" true "destroy of the sandbox with the fork loop in it"
check "its cgroup is gone" [ ! -d "$cg" ]
left=0
for p in $pids; do
	[ -d "/proc/$p" ] && [ "$(awk '/^State:/ { print $2 }' "/proc/$p/status" 2>/dev/null)" != Z ] &&
		grep -q "sandbox\|sleep\|sh" "/proc/$p/comm" 2>/dev/null && left=$((left + 1))
done
is "$left" 0 "none of the processes it had is alive"
check "the canary outside the sandbox is untouched" kill -0 "$canary"
kill "$canary"

# A throwaway run (its sandbox is destroyed by the same path) leaves nothing either.
r=$(rpc "{\"op\":\"run\",\"best_effort\":true,\"command\":\"($forker) >/dev/null 2>&1 & sleep 0.3; echo done\"}" 30)
is "$(jget "$r" .stdout)" done "a throwaway run that leaves a fork loop behind"
check "no cgroup is left under sandboxes/" wait_until 10 bash -c "[ \$(find '$CG/sandboxes' -mindepth 1 -type d | wc -l) = 0 ]"
stop_daemon
