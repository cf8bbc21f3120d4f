#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Requests for a frozen sandbox (issue 17, section 1). A run's helper is started as a vfork-style
# child; born in a frozen cgroup it would be frozen before its exec and the daemon with it. Here:
# a run, a session and a new sandbox asked for while a sandbox (or all of them) is frozen by hand
# wait for the thaw while health is answered; the sandbox cannot freeze itself; and, many times,
# a run and a session sent ~50 ms into a snapshot's freeze, with a restore and a fork meanwhile:
# health answers within 5 s each time, the run and the session finish after the thaw with their
# output.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

mkdir -p "$T"
start_daemon || exit 0
f=$(jget "$(rpc '{"op":"create","best_effort":true,"name":"f","user":"root"}')" .sandbox.id)
export F=$f FCG=$CG/sandboxes/$f SBXCG=$CG/sandboxes

thawed_now() { grep -q '^frozen 0' "$1/cgroup.events"; }

# ---- the sandbox cannot freeze itself ----------------------------------------------------------
# Its /sys/fs/cgroup is a read-only cgroup2 mount of its own subtree, whose files are the host
# root's: neither its own cgroup.freeze nor its run's can be written, as root inside either.
r=$(rpc '{"op":"run","sandbox":"f","command":"for c in /sys/fs/cgroup /sys/fs/cgroup/run-*; do echo 1 > $c/cgroup.freeze && echo wrote $c; done; mkdir /sys/fs/cgroup/x && echo mkdir; true"}')
is "$(jget "$r" .stdout)" "" "the sandbox's root writes neither its cgroup.freeze nor its run's, nor makes a cgroup"
like "$(jget "$r" .stderr)" "Read-only file system|Permission denied" "... refused by the read-only mount"
check "its cgroup is not frozen after" thawed_now "$FCG"
is "$(jget "$(rpc '{"op":"run","sandbox":"f","argv":["echo","after"]}')" .stdout)" "after" "and it runs as before"

# ---- frozen by someone else: the run and the session wait for the thaw -------------------------
run_py "frozen-by-hand" 120 "$SOCK" "$F" "$FCG" "$SBXCG" <<'EOF'
import sys, time
from client import Conn, ClientError, check, is_, wait_for
from ptyclient import Session
sock, sbx, fcg, sbxcg = sys.argv[1:5]

def frozen(cg):
    with open(cg + "/cgroup.events") as f:
        return "frozen 1" in f.read()

def freeze(cg, v):
    with open(cg + "/cgroup.freeze", "w") as f:
        f.write(v)

def health(limit=5):
    t0 = time.monotonic()
    try:
        c = Conn(sock, limit)
        r = c.call({"op": "health"}, limit)
        c.close()
        return bool(r.get("ok")), time.monotonic() - t0
    except (ClientError, OSError):
        return False, time.monotonic() - t0

def answered_within(conn, rid, limit):
    try:
        conn.s.settimeout(limit)
        return conn.final(rid, limit)
    except ClientError:
        return None

import atexit
atexit.register(lambda: (freeze(fcg, "0"), freeze(sbxcg, "0")))
freeze(fcg, "1")
check(wait_for(lambda: frozen(fcg), 5, 0.01), "the sandbox's cgroup is frozen by hand")
a = Conn(sock, 60)
a.send({"id": "run", "op": "run", "sandbox": sbx, "command": "echo by-hand; id -u", "timeout_s": 60})
p = Conn(sock, 60)
p.send({"id": "open", "op": "pty.open", "sandbox": sbx, "pty": False, "argv": ["echo", "session-by-hand"]})
ok, dt = health()
check(ok, "health answers within 5 s while a run and a session wait in the frozen sandbox (%.2f s)" % dt)
early = answered_within(a, "run", 1)
is_(early, None, "the run is not answered while its sandbox is frozen")
ok, dt = health()
check(ok and frozen(fcg), "health still answers, the sandbox still frozen (%.2f s)" % dt)
# A run whose client leaves before the thaw dies with its connection: it never runs.
k = Conn(sock, 60)
k.send({"id": "gone", "op": "run", "sandbox": sbx, "command": "touch /work/ran-after-its-client-left"})
time.sleep(0.3)
k.close()
time.sleep(0.3)
freeze(fcg, "0")
r = early or answered_within(a, "run", 30)
r = r or {}
check((r.get("ok"), r.get("exit_code"), r.get("reason"), r.get("stdout")) == (True, 0, "exited", "by-hand\n0\n"),
      "after the thaw the run finishes: exit 0, its output right", r)
o = answered_within(p, "open", 30)
check(o and o.get("ok"), "the session opened during the freeze is answered after the thaw", o)
if o and o.get("ok"):
    s = Session(p, o, "open")
    check(s.wait_for("session-by-hand", 30), "... and its output comes", s.out)
    ex = s.wait_exit(30)
    check((ex or {}).get("exit_code") == 0, "... and its exit 0", ex)
def runs_gone():
    h = Conn(sock, 10).call({"op": "health"}, 10)
    return h.get("runs") == 0 and h
check(wait_for(runs_gone, 10), "no run is left in flight", runs_gone())
r = Conn(sock, 30).call({"op": "run", "sandbox": sbx, "command": "ls /work/ran-after-its-client-left 2>&1; true"})
check("No such file" in r.get("stdout", ""), "the run whose client left during the freeze never ran", r)

# Every sandbox frozen (their parent): a new one waits for the thaw too (its init's helper).
freeze(sbxcg, "1")
check(wait_for(lambda: frozen(sbxcg), 5, 0.01), "the cgroup of all sandboxes is frozen by hand")
c = Conn(sock, 60)
c.send({"id": "create", "op": "create", "best_effort": True})
b = Conn(sock, 60)
b.send({"id": "run", "op": "run", "best_effort": True, "argv": ["echo", "throwaway"]})
ok, dt = health()
check(ok, "health answers within 5 s while a create and a throwaway run wait (%.2f s)" % dt)
early = answered_within(c, "create", 1)
freeze(sbxcg, "0")
r = early or answered_within(c, "create", 30)
check(r and r.get("ok") and r["sandbox"].get("state") == "ready", "after the thaw the new sandbox is ready", r)
if r and r.get("ok"):
    x = Conn(sock, 30).call({"op": "run", "sandbox": r["sandbox"]["id"], "argv": ["echo", "in-new"]})
    is_(x.get("stdout"), "in-new\n", "... and runs")
    Conn(sock, 30).call({"op": "destroy", "sandbox": r["sandbox"]["id"]})
r = answered_within(b, "run", 30)
check(r and r.get("ok") and r.get("stdout") == "throwaway\n", "and the throwaway run finishes", r)
EOF

# ---- a snapshot's freeze, many times ----------------------------------------------------------
MANY='mkdir -p /work/many && cd /work/many && python3 -c "[open(str(i), \"w\").write(\"x\") for i in range(20000)]"'
r=$(rpc "$(jq -nc --arg c "$MANY" '{op:"run",sandbox:"f",timeout_s:120,command:$c}')" 130)
is "$(jget "$r" .exit_code)" 0 "20000 files are made in sandbox f"
snap0=$(jget "$(rpc '{"op":"snapshot","sandbox":"f","label":"base"}' 120)" .snapshot.id)
like "$snap0" '^snap-' "a first snapshot to restore and fork from"
export SNAP0=$snap0

run_py "snapshot-race" 600 "$SOCK" "$F" "$FCG" "$SNAP0" <<'EOF'
import sys, time
from client import Conn, ClientError, check, is_, wait_for
from ptyclient import Session
sock, sbx, fcg, snap0 = sys.argv[1:5]
ROUNDS = 8

def frozen():
    with open(fcg + "/cgroup.events") as f:
        return "frozen 1" in f.read()

def call(req, limit):
    try:
        c = Conn(sock, limit)
        r = c.call(req, limit)
        c.close()
        return r
    except (ClientError, OSError) as e:
        return {"client_error": str(e)}

raced = health_frozen = 0
failures, slow, refused = [], [], []
for i in range(ROUNDS):
    a = Conn(sock, 120)
    a.send({"id": "snap", "op": "snapshot", "sandbox": sbx})
    wait_for(frozen, 5, 0.002)
    time.sleep(0.05)
    b = Conn(sock, 120)
    b.send({"id": "run", "op": "run", "sandbox": sbx, "command": "echo round-%d; ls /work/many | wc -l" % i})
    p = Conn(sock, 120)
    p.send({"id": "open", "op": "pty.open", "sandbox": sbx, "pty": False, "argv": ["echo", "session-%d" % i]})
    sent_frozen = frozen()
    t0 = time.monotonic()
    h = call({"op": "health"}, 5)
    dt = time.monotonic() - t0
    if not h.get("ok"):
        slow.append((i, dt, h))
        break
    if frozen():
        health_frozen += 1
    # Others meanwhile: a restore of the busy sandbox is refused at once, a fork of it is made.
    if i % 4 == 0:
        r = call({"op": "snapshot.restore", "sandbox": sbx, "snapshot": snap0}, 5)
        if (r.get("error") or {}).get("code") != "conflict":
            refused.append((i, r))
        r = call({"op": "create", "best_effort": True, "from_snapshot": "%s/%s" % (sbx, snap0)}, 60)
        if not r.get("ok"):
            refused.append((i, r))
        else:
            call({"op": "destroy", "sandbox": r["sandbox"]["id"]}, 30)
    s = a.final("snap", 120)
    r = b.final("run", 60)
    if sent_frozen and s.get("ok"):
        raced += 1
    want = (True, 0, "round-%d\n20000\n" % i)
    if (r.get("ok"), r.get("exit_code"), r.get("stdout")) != want:
        failures.append((i, "run", r))
    o = p.final("open", 60)
    if not o.get("ok"):
        failures.append((i, "pty.open", o))
    else:
        ss = Session(p, o, "open")
        if not ss.wait_for("session-%d" % i, 30) or (ss.wait_exit(30) or {}).get("exit_code") != 0:
            failures.append((i, "session", ss.out, ss.exit))
    if s.get("ok"):
        call({"op": "snapshot.delete", "sandbox": sbx, "snapshot": s["snapshot"]["id"]}, 30)
    for c in (a, b, p):
        c.close()
check(not slow, "health answered within 5 s in every round (a run and a session sent during the freeze)", slow)
check(raced >= ROUNDS // 2, "the run and the session were sent while the snapshot froze the sandbox in %d of %d rounds" %
      (raced, ROUNDS))
check(health_frozen >= 1, "health was answered while the sandbox was still frozen in %d rounds" % health_frozen)
check(not failures and not slow, "every run and session finished after the thaw, exit 0 and their output right", *failures)
check(not refused and not slow, "meanwhile a restore was refused (conflict) and a fork made at once", *refused)
EOF
check "after it all the sandbox is thawed" thawed_now "$FCG"
# The deleted snapshots' trees are removed in the background (sandboxd-rm in the daemon's leaf).
only_daemon_left() { [ "$(cat "$CG/daemon/cgroup.procs")" = "$DAEMON_PID" ]; }
wait_until 120 only_daemon_left
stop_daemon
