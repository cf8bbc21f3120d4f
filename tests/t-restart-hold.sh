#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The holder (issue 22; docs/design/restarts.md section 6; sandboxd(8) "RESTARTS"): a standalone
# daemon (no $NOTIFY_SOCKET, no fd store) hands its sessions' and runs' fds to `sandboxd --hold` at
# SIGTERM; the next daemon takes them back from RUNTIME/hold.sock. A session printing a counter and
# a run printing for a few seconds survive SIGTERM + start: the session reattaches with no gap,
# the run's client gets its final reply with head and tail of what the program wrote. Then the
# faulty and hostile cases: a client that does not acknowledge (the holder keeps everything), a
# client of another uid (refused: the socket is 0600), a stale hold.sock, a hold.sock of another
# uid and a holder of another uid (nothing taken), a holder killed and hold_timeout reached (the
# session is then lost, says why, and its processes are killed), and a SIGKILL of the daemon.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

KEEP_SANDBOXES=1
HOLDERS=()
_kill_holders() { local p; for p in "${HOLDERS[@]}"; do kill -KILL "$p" 2>/dev/null; done; }
_hold_cleanup() {
        local rc=$?
        _kill_holders
        (exit "$rc")
        _cleanup
}
trap _hold_cleanup EXIT

cat >"$T/counter.py" <<'PY'
import sys, time
i = 0
while True:
    i += 1
    print("n=%d" % i, flush=True)
    time.sleep(0.01)
PY
cat >"$T/steps.py" <<'PY'
# steps.py STEP ARGS: a client of $SOCK; what later steps need goes to $T.
import base64, json, os, re, sys, time
from client import Conn, check, is_, wait_for
from ptyclient import open_session, attach, err_code

T, SOCK = os.environ["T"], os.environ["SOCK"]
step = sys.argv[1]

def save(name, value):
    with open(os.path.join(T, name), "w", newline="") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))

def load(name, js=False):
    with open(os.path.join(T, name), newline="") as f:
        return json.loads(f.read()) if js else f.read()

def counters(text):
    return [int(m) for m in re.findall(r"^n=(\d+)\r?$", text, re.M)]

PROG = r'''
import sys, time
o = open("/work/out.txt", "w")
for i in range(250):
    s = "o%05d %s\n" % (i, "x" * 40)
    sys.stdout.write(s); sys.stdout.flush(); o.write(s); o.flush()
    time.sleep(0.02)
'''
CAP = 4096

def head_tail(b, cap):
    if len(b) <= cap:
        return b
    h, t = cap - cap // 2, cap // 2
    return b[:h] + b"\n[... %d bytes dropped ...]\n" % (len(b) - h - t) + b[len(b) - t:]

def take_all():
    """What a daemon does with hold.sock: every message until the end marker. (socket, fds got)"""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(os.path.join(T, "hold.sock"))
    n = 0
    while True:
        msg, anc, flags, _ = s.recvmsg(1 << 16, socket.CMSG_SPACE(253 * 4))
        if not msg or msg[8] & 1:
            break
        n += sum(len(d) // 4 for (_, _, d) in anc)
    return s, n

def data(ev):
    d = ev.get("data", "")
    return base64.b64decode(d) if ev.get("data_encoding") == "base64" else d.encode()

if step == "open":
    sbx, argv = sys.argv[2], json.loads(sys.argv[3])
    r, s = open_session(Conn(SOCK, 30), sbx, argv=argv)
    check(r.get("ok"), "pty.open of the counter", r)
    check(s.wait_for("n=30\r\n", 30), "the counter reaches 30")
    save("sid", s.id)
    save("seq", str(s.next_seq))
    save("seen", s.text())
elif step == "run":
    # Starts the run, reads a second of it, then holds the connection until the daemon is gone
    # (a run whose client goes is killed: this one's goes with the daemon).
    c = Conn(SOCK, 30)
    c.send({"id": 1, "op": "run", "sandbox": sys.argv[2], "stream": True, "output_bytes": CAP, "timeout_s": 60,
            "argv": ["python3", "-c", PROG]})
    m = c.recv_json()
    is_(m.get("event"), "started", "the run started")
    run_id = m.get("run_id")
    have, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 1.0:
        m = c.recv_json(5)
        if m and m.get("event") == "stdout":
            have = m.get("offset", have) + len(data(m))
    check(have > 0, "it printed before the stop (%d bytes)" % have)
    save("run_id", run_id)
    while True:
        try:
            m = c.recv_json(60)
        except Exception:
            m = None
        if m is None or "event" not in m:
            break
    check(m is None, "its connection ended with the daemon, without a final reply", m)
elif step == "reattach":
    what, sid, seq, seen = sys.argv[2], load("sid"), int(load("seq")), load("seen")
    r, s = attach(Conn(SOCK, 30), sid, from_seq=seq)
    check(r.get("ok") and r.get("first_seq") == seq and r.get("dropped") == 0,
          "%s: pty.attach from_seq %d starts there, nothing dropped" % (what, seq), r)
    last = counters(seen)[-1]
    check(s.wait_for("n=%d\r\n" % (last + 60), 30), "%s: the counter goes on past %d" % (what, last + 60))
    ns = counters(seen + s.text())
    check(ns == list(range(ns[0], ns[0] + len(ns))), "%s: the counter runs %d..%d with no gap and no duplicate" %
          (what, ns[0], ns[-1]))
    save("seq", str(s.next_seq))
    save("seen", seen + s.text())
elif step == "run-after":
    run_id = load("run_id")
    c = Conn(SOCK, 30)
    c.send({"id": 2, "op": "run.attach", "run_id": run_id})
    final = None
    while True:
        m = c.recv_json(30)
        if m is None or "event" not in m:
            final = m
            break
    final = final or {}
    check(final.get("ok"), "run.attach after the holder: the final reply", final)
    out = Conn(SOCK, 30).call({"op": "run", "sandbox": sys.argv[2], "output_bytes": 1 << 20,
                               "argv": ["cat", "/work/out.txt"]})["stdout"].encode()
    is_(len(out), 250 * 48, "the program wrote all of its stdout (its file)")
    is_((final.get("exit_code"), final.get("reason")), (0, "exited"), "it exited 0")
    is_(final.get("stdout_bytes"), len(out), "stdout_bytes counts all it wrote, across the stop")
    is_(final.get("stdout", "").encode(), head_tail(out, CAP), "the final stdout: the head and tail of what it wrote")
elif step == "lost":
    sid, why = load("sid"), sys.argv[2]
    r = Conn(SOCK, 30).call({"op": "pty.attach", "session": sid})
    msg = (r.get("error") or {}).get("message", "")
    check(err_code(r) == "session_lost" and why in msg and "processes were killed" in msg,
          "pty.attach says session_lost: %s" % why, r)
elif step == "taker":
    # Another daemon: takes everything, acknowledges a few seconds later.
    s, n = take_all()
    save("taken", str(n))
    time.sleep(3)
    s.send(b"K")
    time.sleep(0.5)
elif step == "nack":
    # A client of the holder's uid that takes the fds and goes without its 'K'.
    s, n = take_all()
    check(n > 0, "a client got %d fd(s) from the holder" % n)
    s.close()
PY
counter=$(jq -cn --rawfile p "$T/counter.py" '["python3","-u","-c",$p]')
step() { run_py "$1" 90 "${@:2}" <"$T/steps.py"; }
holder_pid() { pgrep -f -- "--hold $T/hold.sock" | head -1; }
_holder_up() { [ -S "$T/hold.sock" ] && [ -n "$(holder_pid)" ]; }
_holder_gone() { [ -z "$(holder_pid)" ]; }
sigterm() {
        kill -TERM "$DAEMON_PID"
        wait_until 15 _daemon_gone && wait "$DAEMON_PID" 2>/dev/null
        DAEMON_PID=
}
conf() { printf '%s\n' "$@" >"$T/sandboxd.conf"; }
conf "hold_timeout = 1h"

# ---- a session and a run survive SIGTERM + start, through the holder ---------------------------
start_daemon --config "$T/sandboxd.conf" || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"keep","user":"root"}')
sbx=$(jget "$r" .sandbox.id)
like "$sbx" '^sbx-' "a sandbox 'keep' (standalone: no fd store)"
step "open a session" open keep "$counter"
DAEMON_PID=$DAEMON_PID PYTHONPATH=$TESTS_DIR timeout -k 5 90 python3 -u - run keep <"$T/steps.py" >"$T/run.out" 2>"$T/run.err" &
runner=$!
_run_started() { [ -s "$T/run_id" ]; }
check "a run printing, its client connected" wait_until 20 _run_started
sigterm
wait "$runner"
while IFS= read -r line; do
        case $line in "PASS "*) ok "${line#PASS }" ;; "FAIL "*) nok "${line#FAIL }" ;; *) diag "$line" ;; esac
done <"$T/run.out"
check "SIGTERM: a holder listens on $T/hold.sock" wait_until 10 _holder_up
hp=$(holder_pid)
HOLDERS+=("$hp")
is "$(stat -c '%a %u %F' "$T/hold.sock")" "600 0 socket" "hold.sock is a socket of root's, mode 0600"
like "$(tr '\0' ' ' <"/proc/$hp/cmdline")" "^sandboxd --hold $T/hold.sock 3600000000 " "the holder is sandboxd --hold, with hold_timeout"
is "$(cat "/proc/$hp/comm")" sandboxd-hold "its name is sandboxd-hold (ps, pgrep sandboxd), not exe"
like "$(cat "$CG/hold/cgroup.procs" 2>/dev/null)" "^$hp\$" "standalone, it is in the daemon's subtree, a leaf of its own ($CG/hold)"
like "$(cat "$T/daemon.log")" "handed [0-9]+ fd\\(s\\) to the holder \\(pid $hp\\)" "the daemon's log says it handed the fds over"
n=$(grep -o 'handed [0-9]* fd' "$T/daemon.log" | tail -1 | grep -o '[0-9]*')
is "$(find /proc/"$hp"/fd -mindepth 1 | wc -l)" "$((n + 4))" "the holder holds those $n fds, its listening socket and stdio, no more"

# Another uid cannot even connect (0600).
other=$(as_other 65534 -- /usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1]); print("connected")
except OSError as e: print(e.errno)' "$T/hold.sock")
is "$other" 13 "uid 65534 cannot connect to hold.sock (EACCES)"
# A client of root's that takes the fds and goes without acknowledging: the holder keeps them.
step "a client without its acknowledgement" nack
sleep 0.3
check "the holder is still there for the next daemon" _holder_up
like "$(cat "$T/daemon.log")" "did not take the fds" "the holder's log says the client did not take them"

sleep 0.5 # the session writes on meanwhile, into its terminal
start_daemon --config "$T/sandboxd.conf" || exit 0
like "$(cat "$T/daemon.log")" "took [0-9]+ fd\\(s\\) back from the holder \\(pid $hp\\)" "the next daemon took the fds back from the holder"
check "the holder exited" wait_until 5 _holder_gone
check "hold.sock is gone" test ! -e "$T/hold.sock"
check "its cgroup leaf is gone" test ! -e "$CG/hold"
step "the session after the holder" reattach "after SIGTERM + start"
step "the run after the holder" run-after keep
r=$(rpc '{"op":"inspect","sandbox":"keep"}')
is "$(jget "$r" '.sandbox.interrupted_runs | length')" 0 "nothing was reported lost"

# Twice more (the holder's fds are the next holder's too).
sigterm
check "SIGTERM again: a holder" wait_until 10 _holder_up
HOLDERS+=("$(holder_pid)")
start_daemon --config "$T/sandboxd.conf" || exit 0
check "the holder exited" wait_until 5 _holder_gone
step "the session after a second holder" reattach "after a second SIGTERM + start"

# ---- a holder of another uid; a stale hold.sock; a hold.sock of another uid ----------------------
# A listener of uid 65534 behind a socket file of root's: the daemon checks the peer, not the file.
sigterm
check "a holder" wait_until 10 _holder_up
kill -KILL "$(holder_pid)"
wait_until 5 _holder_gone
rm -f "$T/hold.sock"
mkdir -p "$T/other" && chown 65534 "$T/other"
python3 - "$T" <<'PY' &
import os, socket, sys, time
T = sys.argv[1]
os.setresuid(65534, 65534, 0)  # the listening socket's credentials are uid 65534's
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(T + "/other/hold.sock")
s.listen(1)
open(T + "/other/ready", "w").close()
c, _ = s.accept()
time.sleep(5)
PY
fake=$!
_ready() { [ -e "$T/other/ready" ]; }
wait_until 5 _ready
ln "$T/other/hold.sock" "$T/hold.sock"
chown 0 "$T/hold.sock"
start_daemon --config "$T/sandboxd.conf" || exit 0
like "$(cat "$T/daemon.log")" "the holder at $T/hold.sock runs as uid 65534, not 0: nothing taken from it" \
        "a holder of another uid: nothing taken, said in the log"
step "the session (its holder was killed, another uid's was refused)" lost "not in the fd store"
kill "$fake" 2>/dev/null
wait "$fake" 2>/dev/null
rm -f "$T/hold.sock"
rpc '{"op":"destroy","sandbox":"keep"}' >/dev/null

# A stale socket (nobody listens) is removed; a socket file of another uid is left alone.
sigterm
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.bind(sys.argv[1])' "$T/hold.sock"
start_daemon --config "$T/sandboxd.conf" || exit 0
like "$(cat "$T/daemon.log")" "$T/hold.sock: no holder listens there \\(it was killed, or gave up\\): removed" "a stale hold.sock: said, and removed"
check "it is gone" test ! -e "$T/hold.sock"
sigterm
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.bind(sys.argv[1])' "$T/hold.sock"
chown 65534 "$T/hold.sock"
start_daemon --config "$T/sandboxd.conf" || exit 0
like "$(cat "$T/daemon.log")" "$T/hold.sock is not a socket of uid 0: no holder asked, the file left alone" "a hold.sock of another uid: not used"
check "and left alone" test -S "$T/hold.sock"
rm -f "$T/hold.sock"

# ---- a holder killed; hold_timeout reached: the session is lost, saying why -----------------------
lost_case() { # WHAT, after the daemon was stopped with a session open: the next one reports it lost
        start_daemon --config "$T/sandboxd.conf" || return 1
        step "$1: the session" lost "not in the fd store"
        local pcg
        pcg=$(jq -r .cgroup "$T/state/sandboxes/$sbx/sessions/$(cat "$T/sid").json" 2>/dev/null)
        _pcg_empty() { [ ! -s "$CG/sandboxes/$sbx/$pcg/cgroup.procs" ]; }
        check "$1: the session's processes were killed" wait_until 5 _pcg_empty
}
r=$(rpc '{"op":"create","best_effort":true,"name":"keep2","user":"root"}')
sbx=$(jget "$r" .sandbox.id)
step "open a session" open keep2 "$counter"
sigterm
check "a holder" wait_until 10 _holder_up
hp=$(holder_pid)
kill -KILL "$hp"
check "the holder killed" wait_until 5 _holder_gone
lost_case "a holder killed"
like "$(cat "$T/daemon.log")" "no holder listens there" "the next daemon says no holder listens"

conf "hold_timeout = 2s"
sigterm
start_daemon --config "$T/sandboxd.conf" || exit 0
step "open a session" open keep2 "$counter"
sigterm
check "a holder" wait_until 10 _holder_up
HOLDERS+=("$(holder_pid)")
check "hold_timeout (2 s): the holder exits by itself" wait_until 10 _holder_gone
like "$(cat "$T/daemon.log")" "holder: no daemon came for the [0-9]+ fd\\(s\\) within hold_timeout; closing them" "and says so"
check "and removes hold.sock" test ! -e "$T/hold.sock"
lost_case "hold_timeout reached"
r=$(rpc '{"op":"run","sandbox":"keep2","command":"echo alive"}')
is "$(jget "$r" .stdout)" alive "the sandbox itself goes on"

# ---- two daemons: the first takes everything, the second gets nothing and says so ---------------
step "open a session" open keep2 "$counter"
sigterm
check "a holder" wait_until 10 _holder_up
HOLDERS+=("$(holder_pid)")
PYTHONPATH=$TESTS_DIR python3 - taker <"$T/steps.py" >"$T/taker.out" 2>&1 &
taker=$!
_taken() { [ -s "$T/taken" ]; }
check "a first daemon (a stand-in) took the fds" wait_until 10 _taken
start_daemon --config "$T/sandboxd.conf" || exit 0
wait "$taker"
like "$(cat "$T/daemon.log")" "the holder at $T/hold.sock \(pid [0-9]+\) gave nothing: another daemon took its fds\?" \
        "the second daemon got nothing from the holder, and says so"
check "the holder is gone" _holder_gone
step "the session (another daemon took its fds)" lost "not in the fd store"

# ---- a SIGKILL of a standalone daemon: nothing to hand over ---------------------------------------
step "open a session" open keep2 "$counter"
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
check "no holder after a SIGKILL" _holder_gone
lost_case "SIGKILL, standalone"

rpc '{"op":"destroy","sandbox":"keep2"}' >/dev/null
stop_daemon
is "$(grep -c 'Sanitizer' "$T/daemon.log")" 0 "no sanitizer report in the daemons' log"
