#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Interactive sessions outlive the daemon (issue 22, step 4; docs/protocol.md "Restarts"). With
# an fd store (tests/fake-fdstore.py standing in for systemd's): a session printing a counter
# every 10 ms goes on through a SIGTERM and a SIGKILL of the daemon; a client that reattaches
# with from_seq gets exactly what it missed, the counter has no gap and no duplicate, seq
# continues, input, resize and close work. A torn ring header is reported as output lost with
# the exact count; what is not ours in the store is closed and removed; nothing is left in the
# store after the session ends. Without a store and without a holder (hold_timeout = 0;
# tests/t-restart-hold.sh has the holder): the sandbox's processes survive, the session is
# session_lost with the reason, and its processes are killed.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

KEEP_SANDBOXES=1
# Each line is one write(2), one thread writing at a time, and the terminal does not echo: a
# print() is two writes ("n=384", then "\n"), and the input step's line, echoed by the terminal
# or printed back by the other thread, could land between them ("n=384got:hello after"), which
# the counter check then took for a gap in the daemon's output.
cat >"$T/counter.py" <<'PY'
import os, sys, termios, threading, time
a = termios.tcgetattr(0)
a[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, a)
lock = threading.Lock()
def out(s):
    with lock:
        os.write(1, s.encode())
def echo():
    for line in sys.stdin:
        out("got:%s\n" % line.strip())
threading.Thread(target=echo, daemon=True).start()
i = 0
while True:
    i += 1
    out("n=%d\n" % i)
    time.sleep(0.01)
PY
cat >"$T/sess.py" <<'PY'
# sess.py STEP ARGS: one step of the test, a client of $SOCK; writes what later steps need to $T.
import json, os, re, sys, time
from client import Conn, check, is_
from ptyclient import open_session, attach, err_code

T = os.environ["T"]
step = sys.argv[1]
c = Conn(os.environ["SOCK"], 30)

def counters(text):
    return [int(m) for m in re.findall(r"^n=(\d+)\r?$", text, re.M)]

def no_gap(text, what):
    ms = list(re.finditer(r"^n=(\d+)\r?$", text, re.M))
    ns = [int(m.group(1)) for m in ms]
    at = [i + 1 for i, x in enumerate(ns[1:]) if x != ns[i] + 1]
    br = [ns[i] for i in at]
    # The diag: where the sequence breaks, and the output before it as it came.
    near = [text[max(0, ms[i].start() - 80):ms[i].end()] for i in at[:3]]
    check(len(ns) > 0 and not br,
          "%s: the counter runs %d..%d with no gap and no duplicate" % (what, ns[0] if ns else 0, ns[-1] if ns else 0),
          [br[:5], near])

def save(name, value):
    with open(os.path.join(T, name), "w", newline="") as f:
        f.write(str(value))

def load(name):
    with open(os.path.join(T, name), newline="") as f:
        return f.read()

def upto(s, n, what):
    check(s.wait_for("n=%d\r\n" % n, 30), "%s: the counter reaches %d" % (what, n))

if step == "open":
    sbx, argv = sys.argv[2], json.loads(sys.argv[3])
    r, s = open_session(c, sbx, argv=argv)
    check(r.get("ok"), "pty.open of the counter", r)
    upto(s, 30, "before the restart")
    save("sid", s.id)
    save("seq", s.next_seq)
    save("seen", s.text())
elif step == "reattach":
    what, sid, seq = sys.argv[2], load("sid"), int(load("seq"))
    seen = load("seen")
    r, s = attach(c, sid, from_seq=seq)
    check(r.get("ok") and r.get("first_seq") == seq and r.get("dropped") == 0,
          "%s: pty.attach from_seq %d starts there, nothing dropped" % (what, seq), r)
    check(r.get("next_seq", 0) > seq, "%s: seq continued past %d (output of the gap is there: next_seq %s)" % (what, seq, r.get("next_seq")))
    last = counters(seen)[-1]
    upto(s, last + 60, what)
    check(not s.gaps, "%s: every event follows on from the one before" % what, s.gaps[:3])
    whole = seen + s.text()
    no_gap(whole, "%s, what the client had plus what it got after" % what)
    r2, s2 = attach(Conn(os.environ["SOCK"], 30), sid, from_seq=0)
    check(r2.get("ok") and r2.get("dropped") == 0, "%s: the ring still holds everything from seq 0" % what, r2)
    check(s2.wait_for(s.text()[-40:], 30), "%s: a second client from 0 gets the same bytes" % what)
    is_(s2.text()[:len(whole)], whole, "%s: byte for byte" % what)
    save("seq", s.next_seq)
    save("seen", whole)
elif step == "input":
    sid = load("sid")
    r, s = attach(c, sid)
    r = c.call({"op": "pty.write", "session": sid, "data": "hello after\n"})
    check(r.get("ok"), "pty.write after the restart", r)
    check(s.wait_for("got:hello after", 30), "the input reached the program after the restart")
    r = c.call({"op": "pty.resize", "session": sid, "rows": 40, "cols": 100})
    check(r.get("ok"), "pty.resize after the restart", r)
    r = c.call({"op": "pty.signal", "session": sid, "signal": "CONT"})
    check(r.get("ok"), "pty.signal after the restart", r)
elif step == "torn":
    what, sid, seq, end = sys.argv[2], load("sid"), int(load("seq")), int(sys.argv[3])
    r, s = attach(c, sid, from_seq=seq)
    check(r.get("ok") and r.get("first_seq") == end and r.get("dropped") == end - seq,
          "%s: pty.attach from_seq %d says exactly the %d bytes up to the torn ring's end %d are dropped" % (what, seq, end - seq, end), r)
    check(s.wait_for("n=", 30), "%s: the session goes on (output after the restart)" % what)
    r = c.call({"op": "inspect", "sandbox": sys.argv[4]})
    lost = [x.get("output_lost", "") for x in r["sandbox"]["sessions"] if x["id"] == sid]
    check(lost and ("the %d bytes before seq %d are lost" % (end, end)) in lost[0], "%s: inspect says what was lost" % what, lost)
    save("seq", s.next_seq)
elif step == "close":
    sid = load("sid")
    r = c.call({"op": "pty.close", "session": sid}, 30)
    check(r.get("ok") and r.get("reason") == "closed", "pty.close after the restart ends it", r)
    r = c.call({"op": "pty.attach", "session": sid})
    is_(err_code(r), "not_found", "and it is gone")
elif step == "pipes":
    sbx = sys.argv[2]
    r, s = open_session(c, sbx, argv=["sh", "-c", "echo ready; while read l; do echo got:$l; done"], pty=False)
    check(r.get("ok"), "pty.open of a pipe session", r)
    check(s.wait_for("ready"), "it runs")
    save("pid", s.id)
elif step == "pipes-after":
    pid = load("pid")
    r, s = attach(c, pid, from_seq=0)
    check(r.get("ok") and r.get("dropped") == 0, "the pipe session is taken back", r)
    r = c.call({"op": "pty.write", "session": pid, "data": "x\n"})
    check(r.get("ok"), "pty.write to it", r)
    check(s.wait_for("ready\ngot:x"), "its input and output work after the restart", s.text())
    r = c.call({"op": "pty.write", "session": pid, "data": "", "eof": True})
    check(r.get("ok"), "its stdin closed", r)
    ex = s.wait_exit(30)
    check(ex and ex.get("exit_code") == 0 and ex.get("reason") == "exited",
          "its program's exit after the restart is reported (from the helper's stored report socket)", ex)
elif step == "two":
    sbx, argv = sys.argv[2], json.loads(sys.argv[3])
    for name in ("a", "b"):
        r, s = open_session(c, sbx, argv=argv)
        check(r.get("ok") and s.wait_for("n=3\r\n", 30), "session %s runs" % name, r)
        save("sid_" + name, s.id)
elif step == "two-after":
    a, b = load("sid_a"), load("sid_b")
    r, s = attach(c, a, from_seq=0)
    check(r.get("ok") and r.get("first_seq") == 0 and s.wait_for("n=", 30),
          "a session whose stored ring was no memfd goes on, in a new ring from 0", r)
    r = c.call({"op": "inspect", "sandbox": sys.argv[2]})
    lost = [x.get("output_lost", "") for x in r["sandbox"]["sessions"] if x["id"] == a]
    check(lost and "output ring was not in the fd store" in lost[0], "inspect says its output was lost, and why", lost)
    r = c.call({"op": "pty.attach", "session": b})
    msg = (r.get("error") or {}).get("message", "")
    check(err_code(r) == "session_lost" and "not in the fd store: its terminal;" in msg,
          "a session whose terminal left the store is session_lost, saying so", r)
    # Its staging pipe had left the store too, as a session of a daemon before staging pipes.
    for _ in range(50):
        st = open(sys.argv[3]).read()
        if re.search(r"^p\.%s\.stage pipe:" % re.escape(a), st, re.M):
            break
        time.sleep(0.1)
    check(re.search(r"^p\.%s\.stage pipe:" % re.escape(a), st, re.M),
          "a terminal session taken back without a staging pipe gets a new one, in the store", st)
    r = c.call({"op": "pty.close", "session": a}, 30)
    check(r.get("ok"), "pty.close", r)
elif step == "lost":
    sid = load("sid")
    r = c.call({"op": "pty.attach", "session": sid})
    msg = (r.get("error") or {}).get("message", "")
    check(err_code(r) == "session_lost" and "no fd store" in msg and "processes were killed" in msg,
          "without a store, pty.attach says session_lost, and why", r)
PY
counter=$(jq -cn --rawfile p "$T/counter.py" '["python3","-u","-c",$p]')
sess() { run_py "$1" 90 "${@:2}" <"$T/sess.py"; }
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null)" != Z ]; }

# ---- no store, no holder: the processes survive, the session is lost, saying why ------------
echo "hold_timeout = 0" >"$T/nohold.conf"
start_daemon --config "$T/nohold.conf" || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"solo","user":"root"}')
solo=$(jget "$r" .sandbox.id)
like "$solo" '^sbx-' "a sandbox without a store"
run_py "a background process" 30 <<'PY'
from client import call, check
import os
r = call(os.environ["SOCK"], {"op": "run", "sandbox": "solo", "command": "setsid sleep 1000 >/dev/null 2>&1 & echo $! > /work/bg.pid"})
check(r.get("exit_code") == 0, "a background sleep in it", r)
PY
sess "open a session (no store)" open solo "$counter"
pcg=$(basename "$(dirname "$(grep -l . "$CG/sandboxes/$solo"/pty-*/cgroup.procs | head -1)")")
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon --config "$T/nohold.conf" || exit 0
r=$(rpc '{"op":"run","sandbox":"solo","command":"kill -0 $(cat /work/bg.pid) && echo alive"}')
is "$(jget "$r" .stdout)" alive "no store, SIGKILL: the sandbox's background process survives"
sess "the session without a store" lost
r=$(rpc '{"op":"inspect","sandbox":"solo"}')
like "$(jget "$r" '.sandbox.interrupted_runs[] | select(.session) | .reason')" "no fd store" \
        "inspect lists it in interrupted_runs with the reason"
_pcg_empty() { [ ! -s "$CG/sandboxes/$solo/$pcg/cgroup.procs" ]; }
check "the session's processes were killed ($pcg empty)" wait_until 5 _pcg_empty
rpc '{"op":"destroy","sandbox":"solo"}' >/dev/null
stop_daemon

# ---- an fd store --------------------------------------------------------------------------
start_under_fake_fdstore
restart() { # SIGNAL
        local old=$DAEMON_PID
        kill -"$1" "$DAEMON_PID"
        wait_until 15 _daemon_gone
        sleep 0.5 # the program writes on meanwhile, into its terminal
        kill -USR1 "$MGR"
        daemon_up "$old"
}
stored() { grep -c "^p\\.$1\\." "$T/store"; }
check "a daemon under a service manager with an fd store answers" daemon_up
r=$(rpc '{"op":"create","best_effort":true,"name":"keep","user":"root"}')
sbx=$(jget "$r" .sandbox.id)
like "$sbx" '^sbx-' "a sandbox"
sess "open a session" open keep "$counter"
sid=$(cat "$T/sid")
_five() { [ "$(stored "$sid")" = 5 ]; }
check "its terminal, ring, report socket, helper and staging pipe are in the store" wait_until 5 _five
like "$(grep "^p\\.$sid\\.ring " "$T/store")" "memfd:sandboxd-ring" "the ring is a memfd"
like "$(grep "^p\\.$sid\\.stage " "$T/store")" "pipe:" "the staging pipe is a pipe"

check "SIGTERM, and a next daemon" restart TERM
sess "after SIGTERM" reattach "after SIGTERM"
is "$(stored "$sid")" 5 "after SIGTERM, the store holds the session's 5 fds, no more"
check "SIGKILL, and a next daemon" restart KILL
sess "after SIGKILL" reattach "after SIGKILL"
sess "input after the restart" input
is "$(stored "$sid")" 5 "after SIGKILL, still 5"

# A pipe session too: its three pipes instead of the terminal.
sess "a pipe session" pipes keep
psid=$(cat "$T/pid")
_six() { [ "$(stored "$psid")" = 6 ]; }
check "its pipes, ring, report socket and helper are in the store" wait_until 5 _six

# Strays: a name of no session, a part no session has.
python3 - "$T/notify" "$sid" <<'PY'
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
fd = os.open("/dev/null", os.O_RDONLY)
for name in ("p.pty-000000000000.master", "p.%s.bogus" % sys.argv[2]):
    s.sendmsg([("FDSTORE=1\nFDNAME=%s\nFDPOLL=0" % name).encode()],
               [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())], 0, sys.argv[1])
PY
_strays() { grep -q "^p.pty-000000000000.master " "$T/store" && grep -q "^p.$sid.bogus " "$T/store"; }
check "two stray fds in the store" wait_until 5 _strays
check "SIGKILL with the strays" restart KILL
sess "the pipe session after SIGKILL" pipes-after
_strays_gone() { ! grep -q "pty-000000000000\|bogus" "$T/store"; }
check "the stray fds were closed and removed from the store" wait_until 5 _strays_gone
_pipe_gone() { [ "$(stored "$psid")" = 0 ]; }
check "the ended pipe session left nothing in the store" wait_until 5 _pipe_gone
sess "after the strays" reattach "after the strays"

# A torn ring header: the daemon stopped, the header's start set past its end, then SIGKILL.
kill -STOP "$DAEMON_PID"
end=$(python3 - "$DAEMON_PID" <<'PY'
import os, struct, sys
d = "/proc/%s/fd" % sys.argv[1]
for n in os.listdir(d):
    if os.readlink(os.path.join(d, n)).startswith("/memfd:sandboxd-ring"):
        fd = os.open(os.path.join(d, n), os.O_RDWR)
        end = struct.unpack("<Q", os.pread(fd, 8, 32))[0]
        os.pwrite(fd, struct.pack("<Q", end + 1), 24)
        print(end)
        break
PY
)
like "$end" '^[0-9]+$' "the ring's header torn (start past its end $end)"
old=$DAEMON_PID
kill -KILL "$DAEMON_PID"
kill -CONT "$old" 2>/dev/null
wait_until 15 _daemon_gone
kill -USR1 "$MGR"
check "the next daemon starts" daemon_up "$old"
sess "a torn ring" torn "after a torn ring" "$end" keep
like "$(cat "$T/daemon.log")" "output ring's header was torn" "the log says so"
is "$(stored "$sid")" 5 "the new ring is in the store, in place of the torn one"

sess "close after the restarts" close

# What the store lost: one session's ring is no memfd (output lost, the session goes on), the
# other's terminal left the store (that session is lost, and says so; its processes are killed).
sess "two sessions" two keep "$counter"
a=$(cat "$T/sid_a") b=$(cat "$T/sid_b")
_ten() { [ "$(stored "$a")" = 5 ] && [ "$(stored "$b")" = 5 ]; }
check "both in the store" wait_until 5 _ten
python3 - "$T/notify" "$a" "$b" <<'PY'
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
fd = os.open("/dev/null", os.O_RDONLY)
s.sendto(("FDSTOREREMOVE=1\nFDNAME=p.%s.ring" % sys.argv[2]).encode(), sys.argv[1])
s.sendmsg([("FDSTORE=1\nFDNAME=p.%s.ring\nFDPOLL=0" % sys.argv[2]).encode()],
           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())], 0, sys.argv[1])
s.sendto(("FDSTOREREMOVE=1\nFDNAME=p.%s.master" % sys.argv[3]).encode(), sys.argv[1])
s.sendto(("FDSTOREREMOVE=1\nFDNAME=p.%s.stage" % sys.argv[2]).encode(), sys.argv[1])
PY
_changed() { grep -qx "p.$a.ring /dev/null" "$T/store" && ! grep -q "^p.$b.master " "$T/store" && ! grep -q "^p.$a.stage " "$T/store"; }
check "the store now holds /dev/null as one's ring, not the other's terminal, nor the first's staging pipe" wait_until 5 _changed
bcg=$(jq -r .cgroup "$T/state/sandboxes/$sbx/sessions/$b.json")
check "SIGKILL, and a next daemon" restart KILL
sess "what the store lost" two-after keep "$T/store"
_bcg_empty() { [ ! -s "$CG/sandboxes/$sbx/$bcg/cgroup.procs" ]; }
check "the lost session's processes were killed ($bcg empty)" wait_until 5 _bcg_empty
r=$(rpc '{"op":"inspect","sandbox":"keep"}')
like "$(jget "$r" '.sandbox.interrupted_runs[] | select(.id == "'"$b"'") | .reason')" "not in the fd store: its terminal" \
        "inspect lists the lost one in interrupted_runs with the reason"
_none() { [ "$(grep -c '^p\.' "$T/store")" = 0 ]; }
check "nothing of the sessions is left in the store" wait_until 5 _none
is "$(grep -c "^s\\.$sbx\\.init " "$T/store")" 1 "the sandbox's init is still stored, once"
is "$(find "$T/state/sandboxes/$sbx/sessions" -type f 2>/dev/null | wc -l)" 0 "no session record is left"
r=$(rpc '{"op":"inspect","sandbox":"keep"}')
is "$(jget "$r" '.sandbox.interrupted_runs | length')" 1 "no other session was reported lost"
rpc '{"op":"destroy","sandbox":"keep"}' >/dev/null
_empty() { [ ! -s "$T/store" ]; }
check "the store is empty" wait_until 5 _empty
kill -TERM "$DAEMON_PID"
check "the daemon stops on SIGTERM" wait_until 15 _daemon_gone
DAEMON_PID=
kill -TERM "$MGR"
wait "$MGR"
is "$(grep -c 'Sanitizer' "$T/daemon.log")" 0 "no sanitizer report in the daemons' log"
is "$(find "$CG/sandboxes" -mindepth 1 -type d 2>/dev/null | wc -l)" 0 "no sandbox cgroup is left"
