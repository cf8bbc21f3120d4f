#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Snapshots: a round trip of a hostile tree (modes, owners, times, dangling and absolute symlinks,
# hard links, empty directories, a FIFO, 255-byte names, paths deeper than PATH_MAX, setuid bits
# dropped), restore replacing the workspace as a whole and restarting the sandbox's processes,
# fork into a new sandbox, the sandbox frozen during the copy and thawed after (also after a
# failure), progress events, the symlink-swap race against a host canary, survival across a
# daemon restart with half-made snapshots cleaned, protocol errors, and sandboxctl.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

mkdir -p "$T"
start_daemon || exit 0
chmod 0755 "$T" && chmod 0666 "$SOCK"

# The tree, made inside the sandbox, and a manifest of it as the sandbox sees it.
MAKE_TREE='set -e; cd /work
mkdir -p d/e empty deep; chmod 0751 d; echo hello > d/f; chmod 0640 d/f
chown 12:34 d/f; touch -m -d @1000000000 d/f
echo setuid > suid; chmod 4755 suid; echo setgid > sgid; chmod 2755 sgid
ln -s nowhere/at/all dangling; ln -s /etc/passwd absolute; ln -s / root
echo linked > h1; ln h1 d/h2; mkfifo fifo; chmod 0620 fifo
long=$(printf "n%.0s" $(seq 255)); echo long > "$long"
dd if=/dev/zero of=big bs=64k count=16 2>/dev/null
python3 -c "
import os
os.chdir(\"deep\")
for i in range(40):
    os.mkdir(\"x\" * 200); os.chdir(\"x\" * 200)
open(\"leaf\", \"w\").write(\"bottom\\n\")
"'
MANIFEST='cd /work && find . -printf "%p %y %m %U:%G %n %s %l %T@\n" | LC_ALL=C sort | sha256sum | cut -c1-64'
MANIFEST_TEXT='cd /work && find . -printf "%p %y %m %U:%G %n %s %l %T@\n" | LC_ALL=C sort'

runout() { # SANDBOX COMMAND: its stdout
	jget "$(rpc "$(jq -nc --arg s "$1" --arg c "$2" '{op:"run",sandbox:$s,command:$c}')")" .stdout
}

r=$(rpc '{"op":"create","best_effort":true,"name":"a","user":"root"}')
a=$(jget "$r" .sandbox.id)
r=$(rpc "$(jq -nc --arg c "$MAKE_TREE" '{op:"run",sandbox:"a",command:$c}')")
is "$(jget "$r" .exit_code)" 0 "a hostile tree is made inside sandbox a"
[ "$(jget "$r" .exit_code)" = 0 ] || diag "$(jget "$r" .stderr)"
before=$(runout a "$MANIFEST_TEXT")

# ---- snapshot -------------------------------------------------------------------------------
r=$(rpc '{"op":"snapshot","sandbox":"a","label":"first"}')
s1=$(jget "$r" .snapshot.id)
like "$s1" '^snap-[0-9a-f]{12}$' "snapshot answers with an id"
like "$(jget "$r" .snapshot.created_at)" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$' "and its time"
is "$(jget "$r" .snapshot.label)" first "and its label"
is "$(jget "$r" .snapshot.files)" 11 "11 files (files, symlinks, the FIFO; the hard link once)"
is "$(jget "$r" .snapshot.bytes)" $((6 + 7 + 7 + 7 + 5 + 1048576 + 7)) "bytes: the files' sizes, the hard link once"
is "$(jget "$r" .frozen)" true "the sandbox was frozen for it"
is "$(cat "$CG/sandboxes/$a/cgroup.events" | sed -n 's/^frozen //p')" 0 "and is thawed after"
tree=$T/state/sandboxes/$a/snapshots/$s1
check "the snapshot lives in snapshots/<id>/tree with its meta.json" [ -d "$tree/tree" -a -f "$tree/meta.json" ]
is "$(jq -r '.id + " " + .sandbox + " " + .label' "$tree/meta.json")" "$s1 $a first" "meta.json names it, its sandbox and label"
is "$(stat -c %a "$tree/tree/suid") $(stat -c %a "$tree/tree/sgid")" "755 755" "setuid and setgid bits are dropped"
is "$(readlink "$tree/tree/absolute") $(readlink "$tree/tree/root")" "/etc/passwd /" "absolute symlinks are copied, not followed"
check "the hard link is one inode in the copy" [ "$tree/tree/h1" -ef "$tree/tree/d/h2" ]
check "the FIFO is a FIFO" [ -p "$tree/tree/fifo" ]

r=$(rpc '{"op":"snapshot.list","sandbox":"a"}')
is "$(jget "$r" '[.snapshots[].id] | join(",")')" "$s1" "snapshot.list lists it"
r=$(rpc '{"op":"inspect","sandbox":"a"}')
is "$(jget "$r" '[.sandbox.snapshots[].id] | join(",")')" "$s1" "inspect lists it"

# ---- restore --------------------------------------------------------------------------------
rpc '{"op":"run","sandbox":"a","command":"rm -rf /work/* && echo other > /work/new && mkdir /work/d"}' >/dev/null
rpc '{"op":"run","sandbox":"a","command":"sleep 1000 >/dev/null 2>&1 &"}' >/dev/null
# A session and a run in flight while the workspace is restored: both end, and say so.
run_py restore-ends 120 "$SOCK" "$s1" <<'EOF'
import sys
from client import Conn
sock, snap = sys.argv[1:3]
sess = Conn(sock, timeout=100)
r = sess.call({"op": "pty.open", "sandbox": "a", "pty": False, "argv": ["sleep", "1000"]})
print(("PASS" if r.get("ok") else "FAIL") + " a session is open in sandbox a")
run = Conn(sock, timeout=100)
run.send({"id": 9, "op": "run", "sandbox": "a", "argv": ["sleep", "1000"]})
started = run.recv_json()
print(("PASS" if started.get("event") == "started" else "FAIL") + " a run is in flight")
rest = Conn(sock, timeout=100).call({"op": "snapshot.restore", "sandbox": "a", "snapshot": snap})
print(("PASS" if rest.get("ok") and rest.get("runs_killed") == 1 and rest.get("processes") == "restarted" else "FAIL")
      + " the restore restarts the processes and counts the run it killed: %s" % rest.get("runs_killed"))
while True:
    m = run.recv_json()
    if m is None or "ok" in m:
        break
print(("PASS" if m and m.get("reason") == "killed" else "FAIL") + " the run ends with reason killed")
ev = None
while True:
    m = sess.recv_json()
    if m is None or m.get("event") == "exit":
        ev = m
        break
print(("PASS" if ev and ev.get("reason") == "destroyed" else "FAIL") + " the session ends (exit event, reason %s)" % (ev or {}).get("reason"))
EOF
r=$(rpc '{"op":"inspect","sandbox":"a"}')
is "$(jget "$r" .sandbox.state)" ready "snapshot.restore: the sandbox is ready again"
after=$(runout a "$MANIFEST_TEXT")
expected=$(printf '%s\n' "$before" | sed -e 's|^\./suid f 4755|./suid f 755|' -e 's|^\./sgid f 2755|./sgid f 755|')
is "$after" "$expected" "the restored tree is the snapshot as a whole: names, types, modes, owners, links, sizes, times"
is "$(runout a 'test -e /work/new && echo left; pgrep -c sleep || true')" 0 "nothing of the replaced tree is left, nor its processes"
check "the old tree is removed" wait_until 10 sh -c "! ls '$T/state/sandboxes/$a' | grep -q '^work\.new-'"

# ---- fork -----------------------------------------------------------------------------------
r=$(rpc "{\"op\":\"create\",\"best_effort\":true,\"name\":\"b\",\"user\":\"root\",\"from_snapshot\":\"a/$s1\"}")
b=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "create from_snapshot (sandbox/snapshot) makes a ready sandbox"
is "$(runout b "$MANIFEST_TEXT")" "$expected" "its workspace is the snapshot, with the same owners as seen inside"
bu=$(stat -c %u "$T/state/sandboxes/$b/work/d/f")
au=$(stat -c %u "$T/state/sandboxes/$a/work/d/f")
bbase=$(stat -c %u "$T/state/sandboxes/$b/work")
abase=$(stat -c %u "$T/state/sandboxes/$a/work")
is "$((bu - bbase))" "$((au - abase))" "on the host, its files moved into its own uid range ($abase.. -> $bbase..)"
check "the uid ranges differ" [ "$abase" != "$bbase" ]
check "no fork marker is left" [ ! -e "$T/state/sandboxes/$b/.fork-incomplete" ]
r=$(rpc "{\"op\":\"create\",\"best_effort\":true,\"from_snapshot\":\"$s1\"}")
is "$(jget "$r" .sandbox.state)" ready "create from_snapshot with the snapshot id alone"
rpc "{\"op\":\"destroy\",\"sandbox\":\"$(jget "$r" .sandbox.id)\"}" >/dev/null

# ---- protocol errors ------------------------------------------------------------------------
for req in '{"op":"snapshot.restore","sandbox":"a","snapshot":"snap-000000000000"}' \
	'{"op":"snapshot.delete","sandbox":"a","snapshot":"snap-000000000000"}' \
	'{"op":"snapshot.delete","sandbox":"a","snapshot":"../../etc"}' \
	'{"op":"create","best_effort":true,"from_snapshot":"a/snap-000000000000"}' \
	'{"op":"create","best_effort":true,"from_snapshot":"snap-000000000000"}' \
	'{"op":"snapshot","sandbox":"nosuch"}'; do
	is "$(jget "$(rpc "$req")" .error.code)" not_found "not_found: $req"
done
r=$(rpc "{\"op\":\"snapshot\",\"sandbox\":\"a\",\"label\":\"$(printf 'l%.0s' $(seq 129))\"}")
is "$(jget "$r" .error.code)/$(jget "$r" .error.field)" invalid_request/label "a label over 128 bytes is refused"
rpc_other() { # lib.sh: as_other runs a copy of client.py, whatever the checkout's mode
	as_other 65534 --regid=65534 --clear-groups -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call "$1" --timeout 30
}
for req in '{"op":"snapshot","sandbox":"a"}' '{"op":"snapshot.list","sandbox":"a"}' \
	"{\"op\":\"snapshot.restore\",\"sandbox\":\"a\",\"snapshot\":\"$s1\"}" \
	"{\"op\":\"snapshot.delete\",\"sandbox\":\"a\",\"snapshot\":\"$s1\"}" \
	"{\"op\":\"create\",\"best_effort\":true,\"from_snapshot\":\"$a/$s1\"}" \
	"{\"op\":\"create\",\"best_effort\":true,\"from_snapshot\":\"$s1\"}"; do
	is "$(jget "$(rpc_other "$req")" .error.code)" not_found "another user's sandbox is not_found: $req"
done

# ---- freeze observed, progress events, thaw after a failure ----------------------------------
MANY='mkdir -p /work/many && cd /work/many && python3 -c "[open(str(i), \"w\").write(\"x\") for i in range(20000)]"'
r=$(rpc "$(jq -nc --arg c "$MANY" '{op:"run",sandbox:"b",timeout_s:120,command:$c}')" 130)
is "$(jget "$r" .exit_code)" 0 "20000 files are made in sandbox b"
run_py freeze 120 "$SOCK" "$CG/sandboxes/$b/cgroup.events" "$b" <<'EOF'
import sys, time
from client import Conn
sock, events, sbx = sys.argv[1:4]
def frozen():
    with open(events) as f:
        return "frozen 1" in f.read()
c = Conn(sock, timeout=120)
c.send({"id": 7, "op": "snapshot", "sandbox": sbx})
c.s.setblocking(False)
seen_frozen, progress, reply = False, [], None
deadline = time.monotonic() + 110
while reply is None and time.monotonic() < deadline:
    seen_frozen = seen_frozen or frozen()
    try:
        chunk = c.s.recv(65536)
    except BlockingIOError:
        time.sleep(0.001)
        continue
    if not chunk:
        break
    c.buf += chunk
    while b"\n" in c.buf:
        line, c.buf = c.buf.split(b"\n", 1)
        import json
        m = json.loads(line)
        if m.get("event") == "progress":
            progress.append(m)
        elif "ok" in m:
            reply = m
print(("PASS" if reply and reply.get("ok") else "FAIL") + " the snapshot of 20000 files succeeds")
print(("PASS" if seen_frozen else "FAIL") + " cgroup.events said frozen 1 while it was taken")
print(("PASS" if not frozen() else "FAIL") + " and frozen 0 once it was answered")
ok = len(progress) > 0 and all(p["id"] == 7 and p["bytes"] >= 0 and p["files"] >= 0 for p in progress)
print(("PASS" if ok else "FAIL") + " progress events came before the reply (%d)" % len(progress))
mono = all(progress[i]["files"] <= progress[i + 1]["files"] for i in range(len(progress) - 1))
print(("PASS" if mono else "FAIL") + " with counts that only grow")
print(("PASS" if reply and reply["snapshot"]["files"] >= 20000 else "FAIL") + " the reply counts every file")
EOF
# ---- timeouts stop while the sandbox is frozen ------------------------------------------------
# How long a snapshot of the 20000 files keeps the sandbox frozen is measured first (F, its
# frozen_s, the shortest seen: the first may read a cold cache); then a run of sleep 0.15 F with
# a timeout of 0.3 F goes on while another snapshot freezes the sandbox for about F. Every such
# run must end as itself, not timed out, since frozen time does not count; and one of them must
# have taken longer than its timeout in wall-clock time, which only frozen time can explain. A
# freeze varies from one snapshot to the next (twice as long under ASan at times), so up to three
# tries, each with F the shortest freeze seen so far.
run_py frozen-timeouts 400 "$SOCK" "$b" <<'EOF'
import sys, time
from client import Conn, check, is_
sock, sbx = sys.argv[1:3]
c = Conn(sock, timeout=120)
times = []

def snapshot():
    t0 = time.monotonic()
    r = c.call({"op": "snapshot", "sandbox": sbx}, 110)
    ok = r.get("ok") and 0 < r.get("frozen_s", 0) <= time.monotonic() - t0
    if ok:
        times.append(r["frozen_s"])
        c.call({"op": "snapshot.delete", "sandbox": sbx, "snapshot": r["snapshot"]["id"]})
    return ok, r

for _ in range(2):
    ok, r = snapshot()
    check(ok, "a snapshot says how long it kept the sandbox frozen (frozen_s), no longer than it took", r)
check(times and min(times) > 0.2, "a snapshot of the 20000 files keeps the sandbox frozen F = %.2f s (more than 0.2 s; %s)" %
      (min(times or [0]), ", ".join("%.2f" % x for x in times)))
tries, longer = [], None
for attempt in range(3):
    f = min(times)
    timeout_ms = int(f * 300)
    a = Conn(sock, timeout=120)
    a.send({"id": 1, "op": "run", "sandbox": sbx, "argv": ["sleep", "%.3f" % (f * 0.15)], "timeout_s": "%dms" % timeout_ms})
    start = time.monotonic()
    m = a.recv_json(30)
    ok, r = snapshot()
    res = a.final(1, 60)
    wall = time.monotonic() - start
    a.close()
    tries.append("%.2f s against %d ms (frozen %.2f s)" % (wall, timeout_ms, r.get("frozen_s", 0)))
    if not (m and m.get("event") == "started" and ok and r.get("frozen")):
        break
    ended = (res.get("ok"), res.get("exit_code"), res.get("reason"), res.get("timed_out"))
    if ended != (True, 0, "exited", False) or wall * 1000 > timeout_ms:
        longer = (ended, wall, timeout_ms)
        break
check(m and m.get("event") == "started" and ok and r.get("frozen"), "each run started, and a snapshot froze the sandbox meanwhile", m, r)
check(longer is not None, "a run took longer than its timeout in wall-clock time while a snapshot froze the sandbox (%s)" %
      "; ".join(tries))
if longer:
    is_(longer[0], (True, 0, "exited", False), "after %.2f s, more than its %d ms timeout, the run ends on its own: "
        "the frozen time did not count" % (longer[1], longer[2]))
EOF
# A snapshot that fails after the freeze: its directory cannot be made (immutable snapshots/).
chattr +i "$T/state/sandboxes/$a/snapshots"
r=$(rpc '{"op":"snapshot","sandbox":"a"}')
chattr -i "$T/state/sandboxes/$a/snapshots"
is "$(jget "$r" .ok)/$(jget "$r" .error.code)" false/internal "a snapshot whose copy fails answers an error"
like "$(jget "$r" .error.message)" "step 'open'" "naming the step that failed"
is "$(sed -n 's/^frozen //p' "$CG/sandboxes/$a/cgroup.events")" 0 "and the sandbox is thawed"
is "$(runout a 'echo alive')" alive "and runs again"

# ---- the symlink-swap race ------------------------------------------------------------------
# A canary outside the workspace: a file to read and one to write. Inside, a racer swaps a
# directory with symlinks to the host's / and to the canary, as fast as it can.
mkdir -p "$T/canary" && echo CANARY-READ >"$T/canary/secret" && echo CANARY-WRITE >"$T/canary/target"
touch -d @1000000000 "$T/canary/secret" "$T/canary/target"
canary_sum() { stat -c '%s %Y %i' "$T/canary/secret" "$T/canary/target"; cat "$T/canary/secret" "$T/canary/target"; }
canary_before=$(canary_sum)
RACE="mkdir -p /work/race/d/sub && echo mine > /work/race/d/sub/target && python3 -c '
import os, time
os.chdir(\"/work/race\")
end = time.time() + 60
while time.time() < end and not os.path.exists(\"/work/race-stop\"):
    os.rename(\"d\", \"x\"); os.symlink(\"/\", \"d\"); os.unlink(\"d\")
    os.symlink(\"$T/canary\", \"d\"); os.unlink(\"d\"); os.rename(\"x\", \"d\")
'"
python3 "$TESTS_DIR/client.py" "$SOCK" call "$(jq -nc --arg c "$RACE" '{op:"run",sandbox:"a",timeout_s:90,command:$c}')" --timeout 100 >"$T/racer.out" 2>&1 &
racer=$!
wait_until 10 test -d "$T/state/sandboxes/$a/work/race"
# One client takes the snapshots and reads each copy (fd-relative: the tree has paths deeper
# than PATH_MAX): no file in it holds CANARY, no entry of it is named secret.
run_py race 300 "$SOCK" "$T/state/sandboxes/$a/snapshots" <<'EOF'
import os, stat, sys
from client import Conn
sock, snaps = sys.argv[1:3]
def leaks(tree):
    for _, dirs, files, dfd in os.fwalk(tree):
        if "secret" in dirs or "secret" in files:
            return True
        for name in files:
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    continue
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if b"CANARY" in f.read():
                    return True
    return False
c = Conn(sock, timeout=60)
leaked = fails = 0
for i in range(10):
    r = c.call({"op": "snapshot", "sandbox": "a"}, 60)
    sid = (r.get("snapshot") or {}).get("id")
    if not sid:
        fails += 1
        continue
    if leaks(os.path.join(snaps, sid, "tree")):
        leaked += 1
    c.call({"op": "snapshot.delete", "sandbox": "a", "snapshot": sid})
print(("PASS" if fails == 0 else "FAIL") + " 10 snapshots taken while a process inside swaps directories for symlinks (%d failed)" % fails)
print(("PASS" if leaked == 0 else "FAIL") + " none of them holds anything of the canary outside the workspace (%d did)" % leaked)
EOF
# The racer stops once it sees race-stop (its 60 s bound is for a test that dies): no process
# spins through what follows; its connection closing would kill the run otherwise.
touch "$T/state/sandboxes/$a/work/race-stop"
_racer_gone() { ! kill -0 "$racer" 2>/dev/null; }
wait_until 30 _racer_gone || kill "$racer" 2>/dev/null
wait "$racer" 2>/dev/null
is "$(canary_sum)" "$canary_before" "the canary files were neither read into a snapshot nor written"

# ---- restart: snapshots survive, half-made ones go ------------------------------------------
r=$(rpc '{"op":"snapshot","sandbox":"a","label":"keep"}')
s2=$(jget "$r" .snapshot.id)
list_before=$(jget "$(rpc '{"op":"snapshot.list","sandbox":"a"}')" '[.snapshots[].id] | join(",")')
f=$(jget "$(rpc '{"op":"create","best_effort":true,"name":"f"}')" .sandbox.id)
kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null; DAEMON_PID=
mkdir -p "$T/state/sandboxes/$a/snapshots/.tmp-snap-0123456789ab/tree/x" "$T/state/sandboxes/$a/work.new-0123456789ab/y"
: >"$T/state/sandboxes/$f/.fork-incomplete" # as a crash in the middle of a fork leaves it
start_daemon || exit 0
chmod 0666 "$SOCK"
is "$(jget "$(rpc '{"op":"inspect","sandbox":"f"}')" .error.code)" not_found "a sandbox whose fork never finished is gone after the restart"
check "with its directory" [ ! -e "$T/state/sandboxes/$f" ]
check "and its cgroup (the processes an earlier daemon left in it are killed)" [ ! -e "$CG/sandboxes/$f" ]
is "$(jget "$(rpc '{"op":"snapshot.list","sandbox":"a"}')" '[.snapshots[].id] | join(",")')" "$list_before" \
	"after SIGKILL and a restart, the sandbox's snapshots are all listed, oldest first"
check "a half-made snapshot (.tmp-*) was removed at start" [ ! -e "$T/state/sandboxes/$a/snapshots/.tmp-snap-0123456789ab" ]
check "a half-made workspace (work.new-*) was removed at start" [ ! -e "$T/state/sandboxes/$a/work.new-0123456789ab" ]
wait_ready a
r=$(rpc "{\"op\":\"snapshot.restore\",\"sandbox\":\"a\",\"snapshot\":\"$s1\"}" 120)
is "$(jget "$r" .ok)" true "a snapshot from before the restart restores"
[ "$(jget "$r" .ok)" = true ] || diag "$r"
is "$(runout a "$MANIFEST_TEXT")" "$expected" "to the same tree"

# This daemon's copy processes: its children named so, and any in this test's cgroups (another
# test's daemon on the machine may be copying meanwhile).
_copies() { for p in $(cat "/proc/$DAEMON_PID/task/"*/children 2>/dev/null); do echo "$p"; done; }
_no_copy() {
	local p
	for p in $copies $(cg_procs "$CG"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = sandboxd-copy ] && return 1
	done
	return 0
}
# A snapshot interrupted by SIGKILL: the daemon dies mid-copy (the copy dies with it).
rpc "$(jq -nc --arg c "$MANY" '{op:"run",sandbox:"a",timeout_s:120,command:$c}')" 130 >/dev/null
python3 "$TESTS_DIR/client.py" "$SOCK" call '{"op":"snapshot","sandbox":"a"}' --timeout 60 >/dev/null 2>&1 &
client=$!
_copy_running() { ls -a "$T/state/sandboxes/$a/snapshots" | grep -q '^\.tmp-'; }
wait_until 20 _copy_running
copies=$(_copies)
kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null; DAEMON_PID=
wait "$client" 2>/dev/null
check "the copy process does not outlive the daemon" wait_until 10 _no_copy
start_daemon || exit 0
chmod 0666 "$SOCK"
check "the interrupted snapshot's .tmp- directory is gone after the restart" sh -c "! ls -a '$T/state/sandboxes/$a/snapshots' | grep -q '^\.tmp-'"
list_after=$(jget "$(rpc '{"op":"snapshot.list","sandbox":"a"}')" '[.snapshots[].id] | join(",")')
like "$list_after" "^$list_before(,snap-[0-9a-f]{12})?\$" "the snapshots from before are listed (and the interrupted one only if it had finished)"
is "$(sed -n 's/^frozen //p' "$CG/sandboxes/$a/cgroup.events")" 0 "the sandbox is not frozen"
wait_ready a

# ---- sandboxctl -----------------------------------------------------------------------------
out=$(ctl snapshot a --label via-ctl)
like "$out" 'snap-[0-9a-f]{12}' "sandboxctl snapshot prints the new snapshot"
s3=$(ctl --json snapshot a | jq -r .snapshot.id)
like "$s3" '^snap-' "sandboxctl --json snapshot"
out=$(ctl snapshots a)
like "$out" "ID +LABEL +CREATED +SIZE +FILES" "sandboxctl snapshots prints a table"
like "$out" "via-ctl" "with the labels"
like "$out" "[0-9.]+[KMG]" "and human sizes"
n=$(ctl --json snapshots a | jq -r '.snapshots | length')
is "$n" "$(($(echo "$list_after" | tr ',' '\n' | wc -l) + 2))" "sandboxctl --json snapshots"
like "$(ctl inspect a)" "snapshots: +[0-9]+ \(latest snap-" "sandboxctl inspect counts the snapshots"
out=$(ctl restore a "$s1")
like "$out" "restored" "sandboxctl restore"
# On a terminal (script(1) gives it one), a progress bar while the restore copies 20000 files.
svia=$(ctl --json snapshots a | jq -r '.snapshots[] | select(.label == "via-ctl") | .id')
out=$(script -qec "$SANDBOXCTL --socket $SOCK restore a $svia" /dev/null </dev/null | tr '\r' '\n')
like "$out" "\[[#.]{30}\] +[0-9]+%" "sandboxctl restore draws a progress bar on a terminal"
# From the small first snapshot: s3 holds the 20000 files, which a fork would copy for nothing.
out=$(ctl create --best-effort --name c --from-snapshot "a/$s1")
is "$(ctl --json inspect c | jq -r .sandbox.state)" ready "sandboxctl create --from-snapshot"
ctl snapshot-delete a "$s3" >/dev/null
is "$(ctl --json snapshots a | jq -r '.snapshots | length')" $((n - 1)) "sandboxctl snapshot-delete"
ctl snapshot-delete a "$s3" >/dev/null 2>&1
is "$?" 1 "deleting it again fails (not_found)"

# ---- a clean stop in the middle of a snapshot ------------------------------------------------
# Removers of big trees (deleted snapshots, replaced workspaces) finish first: stop_daemon wants
# the daemon's leaf empty.
_only_daemon_left() { [ "$(cat "$CG/daemon/cgroup.procs")" = "$DAEMON_PID" ]; }
check "the removers of deleted trees finish" wait_until 120 _only_daemon_left
python3 "$TESTS_DIR/client.py" "$SOCK" call '{"op":"snapshot","sandbox":"b"}' --timeout 60 >/dev/null 2>&1 &
client=$!
_b_copy_running() { ls -a "$T/state/sandboxes/$b/snapshots" | grep -q '^\.tmp-'; }
wait_until 20 _b_copy_running
copies=$(_copies)
stop_daemon # SIGTERM: exits 0, sandbox cgroups gone, nothing left in the daemon's leaf
wait "$client" 2>/dev/null
check "no copy process outlives a stopped daemon" wait_until 10 _no_copy
start_daemon || exit 0
chmod 0666 "$SOCK"
check "the snapshot it interrupted is cleaned at the next start" sh -c "! ls -a '$T/state/sandboxes/$b/snapshots' | grep -q '^\.tmp-'"
is "$(runout b 'ls /work/many | wc -l')" 20000 "sandbox b and its workspace are back"

# ---- destroy takes the snapshots along ------------------------------------------------------
rpc '{"op":"destroy","sandbox":"a"}' >/dev/null
check "destroy removes the sandbox's snapshots with it" wait_until 60 test ! -e "$T/state/sandboxes/$a"
check "the removers of deleted trees have finished" wait_until 120 _only_daemon_left
stop_daemon
