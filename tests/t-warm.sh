#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The next run, made ahead (docs/architecture.md): a sandbox that has run keeps its next run's
# cgroup and a warm helper in it, already the sandbox's user under the filter. A run it can be is its command; a run
# it cannot be (another user, its own ids, a terminal, an argv over one message) still runs as it
# asked, the cold way; the helper killed or stopped from inside costs the sandbox nothing but
# that; sandbox.signal leaves it out; nothing of it outlives a destroy or a stop.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

run_py "warm" 180 <<'EOF'
import os, re, time
from client import Conn, check, is_, wait_for, procs_under, cgroup_dirs, warm_helper

def like(got, pattern, desc):
    return check(re.search(pattern, got) is not None, desc, "got:      %r" % (got,), "expected: /%s/" % pattern)

c = Conn(os.environ["SOCK"], 60)
sb = c.call({"op": "create", "best_effort": True, "name": "w"})["sandbox"]
cg = sb["cgroup"]

def warm_pids():
    return [p for p in procs_under(cg) if warm_helper(p)]

def status(r):
    return (r.get("ok"), r.get("exit_code"), r.get("reason"))

time.sleep(0.3)
is_(warm_pids(), [], "a sandbox never used has no warm helper")
r = c.call({"op": "run", "sandbox": "w", "command": "true"})
is_(status(r), (True, 0, "exited"), "its first run (the cold way)")
check(wait_for(lambda: len(warm_pids()) == 1, 10), "then it has one warm helper", warm_pids())
w = warm_pids()[0]
spare = [d for d in cgroup_dirs(cg) if w in procs_under(d)]
like(os.path.basename(spare[0]) if spare else "", r"^run-[0-9]+$", "it waits in a run cgroup of its own (the next run's)")
def ready(pid):
    try:
        st = open("/proc/%d/status" % pid).read()
    except OSError:
        return False
    return "NoNewPrivs:\t1" in st and re.search(r"^Seccomp:\t2$", st, re.M) and re.search(r"^Uid:\t\d+\t", st, re.M)
check(wait_for(lambda: ready(w), 10), "it is under no_new_privs and the filter already, before any run came")

# The default run: the warm helper is its command.
r = c.call({"op": "run", "sandbox": "w", "command": "echo $$; id -u; cat /proc/self/cgroup | tail -1"})
is_(status(r), (True, 0, "exited"), "a run as the sandbox's user: exit 0")
out = r.get("stdout", "").split("\n")
is_(out[1:3], ["1000", "0::/" + os.path.basename(spare[0]) if spare else ""], "it ran as uid 1000 in the cgroup made ahead")
check(not os.path.exists("/proc/%d" % w) or not warm_helper(w), "the warm helper is gone: it became that run's command")
c.send({"id": "pid", "op": "run", "sandbox": "w", "command": "echo $$"})
m = c.final("pid", 30)
started = [e for e in c.pending if e.get("id") == "pid" and e.get("event") == "started"]
c.pending = [e for e in c.pending if e.get("id") != "pid"]
is_((started[0].get("pid") if started else None), int(m.get("stdout", "0").strip() or 0),
    "the pid of its \"started\" is the command's own inside (read when the helper was made)")
check(wait_for(lambda: len(warm_pids()) == 1, 10), "the next run has its own warm helper", warm_pids())

# Runs it cannot be: each still as it asked.
r = c.call({"op": "run", "sandbox": "w", "user": "root", "command": "id -u; grep CapEff /proc/self/status"})
is_(status(r), (True, 0, "exited"), "a run as root: exit 0")
like(r.get("stdout", ""), r"^0\nCapEff:\t0*1ffffffffff\n$", "it ran as root with root's capabilities, not as the warm helper's user")
r = c.call({"op": "run", "sandbox": "w", "user": {"uid": 1234, "gid": 2345}, "command": "id -u; id -g"})
is_((status(r), r.get("stdout")), ((True, 0, "exited"), "1234\n2345\n"), "a run with its own ids: 1234:2345")
big = "x" * 40000
r = c.call({"op": "run", "sandbox": "w", "argv": ["sh", "-c", "printf %s \"$1$BIG\" | wc -c", "sh", big], "env": {"BIG": big}})
check((status(r), r.get("stdout", "").strip()) == ((True, 0, "exited"), "80000"),
      "a run whose argv and env pass 64 KiB: the cold way, right", r.get("error"), r.get("stdout", "")[:200])
check(wait_for(lambda: len(warm_pids()) == 1, 10), "after those, again one warm helper", warm_pids())

# From inside, the sandbox's user may signal it: that costs only the next run's warmth. (Each
# run finds it anew: the one seen by a run is the next run's, which is then its own command; it
# is made while the run starts, so it may come a moment after.)
FIND = ("w=; for i in $(seq 50); do for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = sandboxd-warm ] && "
        "w=${p#/proc/}; done; [ -n \"$w\" ] && break; sleep 0.1; done; ")
r = c.call({"op": "run", "sandbox": "w", "command": FIND + "echo $w"})
is_(len(r.get("stdout", "").split()), 1, "the sandbox sees the warm helper (its /proc)")
r = c.call({"op": "run", "sandbox": "w", "command": FIND +
            "[ -n \"$w\" ] || echo none; cat /proc/$w/environ >/dev/null 2>&1 && echo environ; "
            "ls /proc/$w/fd >/dev/null 2>&1 && echo fd; cat /proc/$w/mem >/dev/null 2>&1 && echo mem; echo done"})
is_(r.get("stdout"), "done\n", "its environ, fds and memory are not readable from inside")
r = c.call({"op": "run", "sandbox": "w", "command": FIND + "kill -KILL $w && echo killed"})
is_(r.get("stdout"), "killed\n", "the sandbox's user may kill it")
r = c.call({"op": "run", "sandbox": "w", "command": "echo after"})
is_((status(r), r.get("stdout")), ((True, 0, "exited"), "after\n"), "the next run still runs")
check(wait_for(lambda: len(warm_pids()) == 1, 10), "and a warm helper is back", warm_pids())
dpid = int(os.environ["DAEMON_PID"])
def zombies():
    return [l for l in os.popen("ps -o stat=,comm= --ppid %d" % dpid).read().splitlines() if l.startswith("Z") and "sandboxd-warm" in l]
check(wait_for(lambda: not zombies(), 5), "no warm helper of the daemon's is left a zombie", zombies())
r = c.call({"op": "run", "sandbox": "w", "command":
            FIND + "kill -STOP $w && echo stopped"})
is_(r.get("stdout"), "stopped\n", "the sandbox's user may stop it")
r = c.call({"op": "run", "sandbox": "w", "command": "echo never", "timeout_s": 1}, 30)
is_((r.get("ok"), r.get("reason"), r.get("stdout")), (True, "timeout", ""), "the run sent to the stopped helper ends at its timeout")
r = c.call({"op": "run", "sandbox": "w", "command": "echo again"})
is_((status(r), r.get("stdout")), ((True, 0, "exited"), "again\n"), "the run after it runs")

# sandbox.signal: the processes of runs, not the warm helper.
a = Conn(os.environ["SOCK"], 60)
a.send({"id": "bg", "op": "run", "sandbox": "w", "command": "exec sleep 100"})
check(wait_for(lambda: c.call({"op": "inspect", "sandbox": "w"})["sandbox"]["runs_in_flight"] == 1, 10), "a sleep in flight")
check(wait_for(lambda: len(warm_pids()) == 1, 10), "beside it, the next run's warm helper", warm_pids())
w = warm_pids()[0]
r = c.call({"op": "sandbox.signal", "sandbox": "w", "signal": "TERM"})
is_(r.get("signalled"), 1, "sandbox.signal TERM signals the sleep alone")
m = a.final("bg", 30)
is_((m.get("ok"), m.get("signal")), (True, "TERM"), "the sleep ended by TERM")
check(warm_helper(w), "the warm helper was not signalled")
a.close()

# A sandbox with few pids gives none to a warm helper.
few = c.call({"op": "create", "best_effort": True, "name": "few", "limits": {"pids": 10}})["sandbox"]
r = c.call({"op": "run", "sandbox": "few", "command": "echo ok"})
is_((status(r), r.get("stdout")), ((True, 0, "exited"), "ok\n"), "a run in a sandbox of 10 pids")
time.sleep(0.5)
is_([p for p in procs_under(few["cgroup"]) if warm_helper(p)], [], "and no warm helper takes one of its 10 pids")
c.call({"op": "destroy", "sandbox": "few"}, 30)

# Destroy: nothing of it is left.
pids = warm_pids()
is_(c.call({"op": "destroy", "sandbox": "w"}, 30).get("destroyed"), True, "destroyed")
check(wait_for(lambda: not [p for p in pids if os.path.exists("/proc/%d" % p)], 10), "its warm helper is gone, reaped", pids)
c.close()
EOF

sb=$(jget "$(rpc '{"op":"create","best_effort":true,"name":"s"}')" .sandbox.id)
rpc '{"op":"run","sandbox":"s","argv":["true"]}' >/dev/null
_warm() { for p in $(cg_procs "$CG/sandboxes/$sb"); do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sandboxd-warm ] && echo "$p"; done; }
_warm_in() { [ "$(_warm | wc -l)" = 1 ]; }
check "a sandbox has its warm helper" wait_until 10 _warm_in
warm=$(_warm)
stop_daemon
_warm_gone() { [ ! -e "/proc/$warm" ] || [ "$(cat "/proc/$warm/comm" 2>/dev/null)" != sandboxd-warm ]; }
check "after the daemon's stop its warm helper is gone" wait_until 5 _warm_gone
is "$(find "$CG/sandboxes" -mindepth 1 -maxdepth 2 -type d -name 'run-*' 2>/dev/null | wc -l)" 0 "nor a cgroup made ahead"

# A daemon killed with its next run's cgroup made ahead: the next daemon, which takes the
# sandbox back, removes that cgroup (no run claims it) rather than leave one per crash.
KEEP_SANDBOXES=1
echo "hold_timeout = 0" >"$T/nohold.conf"
start_daemon --config "$T/nohold.conf" || exit 0
sb=$(jget "$(rpc '{"op":"create","best_effort":true,"name":"k"}')" .sandbox.id)
rpc '{"op":"run","sandbox":"k","argv":["true"]}' >/dev/null
made_ahead() { find "$CG/sandboxes/$sb" -mindepth 1 -maxdepth 1 -type d -name 'run-*' | wc -l; }
_one() { [ "$(made_ahead)" = 1 ]; }
check "its next run's cgroup is made ahead" wait_until 5 _one
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
is "$(made_ahead)" 1 "the killed daemon left it"
start_daemon --config "$T/nohold.conf" || exit 0
is "$(jget "$(rpc '{"op":"inspect","sandbox":"k"}')" .sandbox.restored_processes)" kept "the next daemon took the sandbox back"
is "$(made_ahead)" 0 "and removed that cgroup, which no run claims"
is "$(jget "$(rpc '{"op":"run","sandbox":"k","command":"echo again"}')" .stdout)" again "a run works"
check "and the next one is made ahead again" wait_until 5 _one
rpc '{"op":"destroy","sandbox":"k"}' >/dev/null
