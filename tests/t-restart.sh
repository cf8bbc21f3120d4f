#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Nothing a user stored is lost when the daemon dies: after SIGKILL or SIGTERM, the next daemon
# lists every recorded sandbox with its workspace, says when it brought it back, and removes
# what the crash left half-done. Processes that were running do not survive (docs/protocol.md).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"keep","user":"root"}')
id=$(jget "$r" .sandbox.id)
wd=$(jget "$r" .sandbox.workdir)
r=$(rpc '{"op":"run","sandbox":"keep","command":"echo precious > /work/file; mkdir -p /work/d/e; sleep 1000 >/dev/null 2>&1 &"}')
is "$(jget "$r" .exit_code)" 0 "a file and a background process in sandbox 'keep'"
old_init=$(for p in $(cg_procs "$CG/sandboxes/$id/init"); do echo "$p"; done | head -1)

kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
# What a crash in the middle of work leaves: a workspace being removed, a sandbox never recorded.
mkdir -p "$T/state/sandboxes/.trash-sbx-0123456789ab/x" "$T/state/sandboxes/sbx-00000000abcd/work"
start_daemon || exit 0

r=$(rpc '{"op":"list"}')
is "$(jget "$r" '[.sandboxes[] | .id + "/" + (.name // "")] | join(",")')" "$id/keep" \
	"after SIGKILL, the next daemon lists the sandbox with its id and name"
r=$(rpc '{"op":"inspect","sandbox":"keep"}')
is "$(jget "$r" .sandbox.state)" ready "it is ready"
like "$(jget "$r" .sandbox.restarted_at)" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "inspect says when it was brought back"
is "$(jget "$r" .sandbox.workdir)" "$wd" "its workspace is the same directory"
is "$(jget "$r" .sandbox.user)" root "its user option (root) is kept"
r=$(rpc '{"op":"run","sandbox":"keep","command":"cat /work/file; test -d /work/d/e && echo dir; pgrep -c sleep || true"}')
is "$(jget "$r" .stdout)" $'precious\ndir\n0' "its files are intact; the background process did not survive"
# Killed, it is reaped by whoever inherited it when the daemon died (PID 1 here), so it may
# linger as a zombie for a moment: gone means no longer running.
_init_gone() { [ -z "$old_init" ] || [ "$(awk '/^State:/ { print $2 }' "/proc/$old_init/status" 2>/dev/null)" = "" ] ||
	[ "$(awk '/^State:/ { print $2 }' "/proc/$old_init/status" 2>/dev/null)" = Z ]; }
check "the old init is gone (killed; at most a zombie awaiting its new parent)" wait_until 5 _init_gone
is "$(cg_child_count)" 3 "its cgroups are new: the sandbox, its init's leaf and its next run's (made ahead)"
check "the half-removed workspace was cleaned up" [ ! -e "$T/state/sandboxes/.trash-sbx-0123456789ab" ]
check "the unrecorded sandbox directory was cleaned up" [ ! -e "$T/state/sandboxes/sbx-00000000abcd" ]
r=$(rpc '{"op":"create","best_effort":true,"name":"keep"}')
is "$(jget "$r" .error.code)" conflict "its name is still taken"

stop_daemon
start_daemon || exit 0
r=$(rpc '{"op":"run","sandbox":"keep","argv":["cat","/work/file"]}')
is "$(jget "$r" .stdout)" precious "after a clean stop and start, the sandbox and its files are back too"
r=$(rpc "{\"op\":\"destroy\",\"sandbox\":\"$id\"}")
is "$(jget "$r" .destroyed)" true "destroy"
stop_daemon
start_daemon || exit 0
is "$(jget "$(rpc '{"op":"list"}')" '.sandboxes | length')" 0 "a destroyed sandbox stays destroyed across a restart"
stop_daemon

# ---- a stop leaves nothing of the daemon running: its workspace removers are waited for --------
# A destroyed workspace is removed by a sandboxd-rm child after the reply; a stop right after
# waits for it (a while: REMOVE_STOP_WAIT_USEC) rather than leaving it in the daemon's leaf.
start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"big"}')
big=$(jget "$r" .sandbox.id)
r=$(rpc '{"op":"run","sandbox":"big","command":"mkdir -p /work/t && cd /work/t && seq 1 30000 | xargs touch && ls | wc -l"}' 120)
is "$(jget "$r" .stdout)" 30000 "30000 files in sandbox 'big'"
is "$(jget "$(rpc '{"op":"destroy","sandbox":"big"}')" .destroyed)" true "destroyed"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID"
is "$?" 0 "a SIGTERM right after: the daemon exits with status 0"
DAEMON_PID=
is "$(cat "$CG/daemon/cgroup.procs")" "" "nothing is left in the daemon's leaf as it exits (no remover outlives it)"
is "$(ls -A "$T/state/sandboxes" | grep -c -e "$big" -e '^\.trash-')" 0 "the stop waited for the removal: the workspace is gone"

# ---- sessions end with the daemon; a client that comes back is told so (THREATS DMN-12) -----
start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"ses"}')
ses_cg=$(jget "$r" .sandbox.cgroup)
run_py "open sessions" 60 <<'EOF'
import json, os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 30)
ids = []
for i in range(4):
    r = c.call({"op": "pty.open", "sandbox": "ses", "argv": ["sh", "-c", "sleep 1000"], "pty": i % 2 == 0})
    ids.append(r.get("session"))
check(all(i and i.startswith("pty-") for i in ids), "four sessions opened", ids)
r = c.call({"op": "pty.close", "session": ids[3]})
check(r.get("ok") is True, "the fourth is closed before the daemon dies", r)
open(os.path.join(os.environ["T"], "sessions"), "w").write(json.dumps(ids))
c.close()
EOF
n=$(cg_procs "$ses_cg" | wc -l)
check "the three open sessions' processes are in the sandbox besides its init ($n)" [ "$n" -ge 4 ]
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon || exit 0
_ses_rest() { [ "$(cg_procs_but_warm "$ses_cg" | wc -l)" = 1 ]; }
check "after SIGKILL and a new start, no session process is left: only the new init" wait_until 10 _ses_rest
run_py "lost sessions" 60 <<'EOF'
import json, os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 30)
ids = json.load(open(os.path.join(os.environ["T"], "sessions")))
for op in ("pty.attach", "pty.write", "pty.close"):
    req = {"op": op, "session": ids[0]}
    if op == "pty.write":
        req["data"] = "x"
    r = c.call(req)
    e = r.get("error", {})
    is_((e.get("code"), e.get("field")), ("session_lost", "session"), "%s of a session the daemon's death ended: session_lost" % op)
check("ended when the daemon restarted" in r.get("error", {}).get("message", ""), "the message says why", r)
codes = [c.call({"op": "pty.attach", "session": i}).get("error", {}).get("code") for i in ids]
is_(codes, ["session_lost"] * 3 + ["not_found"], "all three open ones are lost; the one closed before is not_found")
is_(c.call({"op": "pty.attach", "session": "pty-000000000000"}).get("error", {}).get("code"), "not_found",
    "an id that never was: not_found")
sb = c.call({"op": "inspect", "sandbox": "ses"})["sandbox"]
lost = sorted(e["id"] for e in sb.get("interrupted_runs", []) if e.get("session") is True)
is_(lost, sorted(ids[:3]), "inspect lists them in interrupted_runs, with session true")
r = c.call({"op": "pty.open", "sandbox": "ses", "argv": ["true"]})
check(r.get("ok") is True, "the sandbox opens new sessions", r)
c.close()
EOF
# A stop (SIGTERM) ends them the same way.
run_py "a session at a stop" 60 <<'EOF'
import os
from client import Conn, check
c = Conn(os.environ["SOCK"], 30)
r = c.call({"op": "pty.open", "sandbox": "ses", "argv": ["sleep", "1000"]})
check(r.get("ok") is True, "a session open when the daemon is stopped", r)
open(os.path.join(os.environ["T"], "session"), "w").write(r["session"])
EOF
stop_daemon
start_daemon || exit 0
r=$(rpc "{\"op\":\"pty.attach\",\"session\":\"$(cat "$T/session")\"}")
is "$(jget "$r" .error.code)" session_lost "after a stop and a start, it is session_lost too"
# Sessions that had already exited are not what a restart ended: not in interrupted_runs, and
# not session_lost (not even after the runs log was rewritten past 64 KiB meanwhile).
run_py "ended sessions" 120 <<'EOF'
import json, os
from client import Conn, check, is_, wait_for
c = Conn(os.environ["SOCK"], 30)
def states():
    sb = c.call({"op": "inspect", "sandbox": "ses"})["sandbox"]
    return {x.get("id"): x.get("state") for x in sb.get("sessions", [])}
# The start made the sandbox's init again (a stop ends it): it is ready after a while.
wait_for(lambda: c.call({"op": "inspect", "sandbox": "ses"}).get("sandbox", {}).get("state") == "ready", 60)
ended = [c.call({"op": "pty.open", "sandbox": "ses", "argv": argv, "pty": pty}).get("session")
         for argv, pty in ((["true"], True), (["sh", "-c", "exit 3"], False))]
running = c.call({"op": "pty.open", "sandbox": "ses", "argv": ["sleep", "1000"]}).get("session")
check(wait_for(lambda: all(states().get(i) == "exited" for i in ended), 10),
      "two sessions have exited (inspect says exited) and stay to be read", states())
is_(states().get(running), "running", "a third is still running")
# Each note holds the run's argv (up to 1 KiB an argument, 2 KiB in all): 40 of 2 KiB pass
# 64 KiB, and the log is rewritten with what is in flight.
rs = [c.call({"op": "run", "sandbox": "ses", "argv": ["true", "x" * 1000, "y" * 1000]}).get("ok") for _ in range(40)]
is_(rs, [True] * 40, "40 runs with long argvs (the runs log is compacted meanwhile)")
json.dump({"ended": ended, "running": running}, open(os.path.join(os.environ["T"], "ended"), "w"))
c.close()
EOF
ended_check() { # HOW: how the daemon went
        run_py "ended sessions after $1" 60 "$1" <<'EOF'
import json, os, sys
from client import Conn, check, is_
how = sys.argv[1]
c = Conn(os.environ["SOCK"], 30)
d = json.load(open(os.path.join(os.environ["T"], "ended")))
sb = c.call({"op": "inspect", "sandbox": "ses"})["sandbox"]
lost = [e.get("id") for e in sb.get("interrupted_runs", []) if e.get("session") is True]
is_([i for i in d["ended"] if i in lost], [], "after %s: the sessions that had exited are not in interrupted_runs" % how)
if d["running"]:
    check(d["running"] in lost, "after %s: the one that was running is" % how, lost)
codes = [c.call({"op": "pty.attach", "session": i}).get("error", {}).get("code") for i in d["ended"]]
is_(codes, ["not_found"] * len(d["ended"]), "after %s: an exited session is not_found, not session_lost" % how)
c.close()
EOF
}
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon || exit 0
ended_check SIGKILL
run_py "an ended session at a stop" 60 <<'EOF'
import json, os
from client import Conn, check, wait_for
c = Conn(os.environ["SOCK"], 30)
sid = c.call({"op": "pty.open", "sandbox": "ses", "argv": ["true"]}).get("session")
def state():
    sb = c.call({"op": "inspect", "sandbox": "ses"})["sandbox"]
    return {x.get("id"): x.get("state") for x in sb.get("sessions", [])}.get(sid)
check(wait_for(lambda: state() == "exited", 10), "a session has exited when the daemon is stopped", state())
json.dump({"ended": [sid], "running": None}, open(os.path.join(os.environ["T"], "ended"), "w"))
c.close()
EOF
stop_daemon
start_daemon || exit 0
ended_check "a stop"
rpc '{"op":"destroy","sandbox":"ses"}' >/dev/null
stop_daemon

# ---- a record that cannot be read: set aside whole, never removed (THREATS DMN-02) --------
start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"torn"}')
torn=$(jget "$r" .sandbox.id)
rpc '{"op":"run","sandbox":"torn","command":"echo mine > /work/file"}' >/dev/null
r=$(rpc '{"op":"snapshot","sandbox":"torn"}' 60)
snap=$(jget "$r" .snapshot.id)
like "$snap" '^snap-' "a sandbox 'torn' with a file and a snapshot"
r=$(rpc '{"op":"create","best_effort":true,"name":"fat"}')
fat=$(jget "$r" .sandbox.id)
r=$(rpc '{"op":"create","best_effort":true,"name":"fine"}')
fine=$(jget "$r" .sandbox.id)
stop_daemon
S=$T/state/sandboxes
cp "$S/$torn/meta.json" "$T/torn-meta.json"
# Torn in the middle by a disk fault; and a valid record grown past the 1 MiB a record may have.
head -c 40 "$T/torn-meta.json" > "$S/$torn/meta.json"
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m["pad"] = "x" * (1 << 20); json.dump(m, open(sys.argv[1], "w"))' "$S/$fat/meta.json"
start_daemon || exit 0
is "$(jget "$(rpc '{"op":"list"}')" '[.sandboxes[].name] | join(",")')" fine "the next start brings back the sandbox whose record is sound"
is "$(jget "$(rpc '{"op":"health"}')" .quarantined)" 2 "health counts the two it set aside"
check "the torn one's directory is kept as .quarantine-<id>" [ -d "$S/.quarantine-$torn" ] && [ ! -e "$S/$torn" ]
is "$(cat "$S/.quarantine-$torn/work/file" 2>/dev/null)" mine "its workspace file is intact"
check "its snapshot is intact" [ -d "$S/.quarantine-$torn/snapshots/$snap" ]
check "the oversized record's sandbox is kept too" [ -s "$S/.quarantine-$fat/meta.json" ]
like "$(cat "$T/daemon.log")" "sandbox $torn: its record \\(meta.json\\) is unreadable" "the daemon's log says which and why"
stop_daemon
start_daemon || exit 0
check "another start leaves the quarantined directories alone" [ -d "$S/.quarantine-$torn/work" ] && [ -d "$S/.quarantine-$fat/work" ]
is "$(jget "$(rpc '{"op":"health"}')" .quarantined)" 2 "and still counts them"
stop_daemon
# What docs/protocol.md tells a person to do: mend the record, move the directory back.
cp "$T/torn-meta.json" "$S/.quarantine-$torn/meta.json" && mv "$S/.quarantine-$torn" "$S/$torn"
start_daemon || exit 0
r=$(rpc '{"op":"run","sandbox":"torn","argv":["cat","/work/file"]}')
is "$(jget "$r" .stdout)" mine "with its record mended and moved back, the sandbox returns with its file"
is "$(jget "$(rpc '{"op":"snapshot.list","sandbox":"torn"}')" '[.snapshots[].id] | join(",")')" "$snap" "and its snapshot"
is "$(jget "$(rpc '{"op":"health"}')" .quarantined)" 1 "one left set aside"
# The environment a record holds is capped, so that create can never write one too large.
run_py "env cap" 60 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 30)
big = "x" * (80 * 1024)
r = c.call({"op": "create", "best_effort": True, "env": {"BIG": big}})
is_((r.get("ok"), r.get("error", {}).get("code"), r.get("error", {}).get("field")), (False, "invalid_request", "env"),
    "create with 80K of environment: invalid_request, field env")
r = c.call({"op": "run", "sandbox": "fine", "env": {"BIG": big}, "argv": ["true"]})
is_((r.get("ok"), r.get("error", {}).get("code"), r.get("error", {}).get("field")), (False, "invalid_request", "env"),
    "a run with 80K of environment: the same")
r = c.call({"op": "run", "sandbox": "fine", "env": {"BIG": big[:60000]}, "command": "echo ${#BIG}"})
is_(r.get("stdout"), "60000\n", "60K of environment is fine")
c.close()
EOF
# The largest record a sandbox can have still fits: 60K of environment and 32 interrupted runs
# of 64 arguments, all control characters, which JSON writes 6 bytes for 1.
run_py "worst record" 120 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)
r = c.call({"op": "create", "best_effort": True, "name": "worst", "env": {"E": "\x01" * 60000}})
is_(r.get("ok"), True, "create with 60K of environment made of control characters")
args = ["\x02" * 1024] * 64
for i in range(40):
    c.send({"id": 100 + i, "op": "run", "sandbox": "worst", "argv": ["sh", "-c", "sleep 1000", "x"] + args})
runs = 0
while runs < 40:
    m = c.recv_json()
    if m.get("event") == "started":
        runs += 1
    elif "event" not in m:
        check(False, "a run ended early", m)
        break
is_(runs, 40, "40 runs in flight, each with 64 arguments of 1K of control characters")
# The daemon dies while this connection is open: were it closed first, the daemon would end
# the runs of a client that left, and some of them would not be interrupted.
os.kill(int(os.environ["DAEMON_PID"]), 9)
EOF
kill -KILL "$DAEMON_PID" 2>/dev/null
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon || exit 0
r=$(rpc '{"op":"inspect","sandbox":"worst"}')
is "$(jget "$r" '.sandbox.interrupted_runs | length')" 32 "after SIGKILL, the sandbox is back with its last 32 interrupted runs"
size=$(stat -c %s "$T/state/sandboxes/$(jget "$r" .sandbox.id)/meta.json")
check "its record was saved and stays under 1 MiB ($size bytes)" [ "$size" -lt 1048576 ] && [ "$size" -gt 300000 ]
is "$(stat -c %s "$T/state/runs.log")" 0 "and the run log was emptied: every note reached a record"
stop_daemon
start_daemon || exit 0
is "$(jget "$(rpc '{"op":"inspect","sandbox":"worst"}')" '.sandbox.interrupted_runs | length')" 32 "a further start reads that record back"
rpc "{\"op\":\"destroy\",\"sandbox\":\"torn\"}" >/dev/null
rpc "{\"op\":\"destroy\",\"sandbox\":\"worst\"}" >/dev/null
rpc "{\"op\":\"destroy\",\"sandbox\":\"fine\"}" >/dev/null
stop_daemon
