#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs in flight outlive the daemon (issue 22; docs/protocol.md "Restarts", run.attach). Under a
# service manager with an fd store (tests/fake-fdstore.py standing in for systemd's): a run
# printing for a few seconds goes on across a daemon SIGTERM and a SIGKILL, and a client that
# comes back with run.attach gets the rest of both streams and a final reply whose head, tail and
# byte counts are those of what the program wrote (it writes the same to files, compared byte for
# byte); a timeout holds across the time no daemon ran; a run that ended while no daemon ran has
# its result kept, fetched once; a capture whose header is torn is reported lost, precisely, and
# what is left of the run is killed; nothing of the ended runs stays in the store.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_under_fake_fdstore --metrics-listen "$T/metrics.sock"
export MGR
if ! check "a daemon under a service manager with an fd store answers" daemon_up; then
        kill -TERM "$MGR"
        exit 0
fi
r=$(rpc '{"op":"create","best_effort":true,"name":"keep","user":"root"}')
sid=$(jget "$r" .sandbox.id)
like "$sid" '^sbx-' "a sandbox 'keep'"
_only_init() { [ "$(cat "$T/store")" = "s.$sid.init anon_inode:[pidfd]" ]; }
check "the store holds its init's pidfd alone" wait_until 5 _only_init

# The helpers of the Python part: the daemon restarted by the manager, after SIG and DOWN seconds.
cat >"$T/restart.py" <<'PY'
import base64, json, os, signal, time
from client import Conn, ClientError, check, is_, wait_for
T = os.environ["T"]
SOCK = os.environ["SOCK"]

def daemon_pid():
    with open(T + "/daemon.pid") as f:
        return int(f.read())

def alive(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return "\nState:\tZ" not in f.read()
    except OSError:
        return False

def health():
    try:
        c = Conn(SOCK, 2)
        ok = c.call({"op": "health"}).get("ok")
        c.close()
        return ok
    except (OSError, ClientError):
        return False

def restart(sig, down=0.0):
    old = daemon_pid()
    os.kill(old, sig)
    wait_for(lambda: not alive(old), 15)
    time.sleep(down)
    os.kill(int(os.environ["MGR"]), signal.SIGUSR1)
    wait_for(lambda: daemon_pid() != old, 10)
    return wait_for(health, 15)

def data(ev):
    d = ev.get("data", "")
    return base64.b64decode(d) if ev.get("data_encoding") == "base64" else d.encode()

def head_tail(b, cap):
    """The run reply's view of stream b with output_bytes cap (docs/protocol.md)."""
    if len(b) <= cap:
        return b
    h, t = cap - cap // 2, cap // 2
    return b[:h] + b"\n[... %d bytes dropped ...]\n" % (len(b) - h - t) + b[len(b) - t:]

def store():
    with open(T + "/store") as f:
        return f.read()
PY

# ---- a run printing for a few seconds, across a SIGTERM and a SIGKILL -------------------------
run_py "a run across SIGTERM and SIGKILL" 90 "$sid" <<'PY'
import os, signal, sys, time
sys.path.insert(0, os.environ["T"])
from restart import *
sid = sys.argv[1]
PROG = r'''
import sys, time
o = open("/work/out.txt", "w"); e = open("/work/err.txt", "w")
for i in range(300):
    s = "o%05d %s\n" % (i, "x" * 40)
    sys.stdout.write(s); sys.stdout.flush(); o.write(s); o.flush()
    s = "e%05d\n" % i
    sys.stderr.write(s); sys.stderr.flush(); e.write(s); e.flush()
    time.sleep(0.02)
'''
CAP = 4096
c = Conn(SOCK, 30)
c.send({"id": 1, "op": "run", "sandbox": "keep", "stream": True, "output_bytes": CAP, "timeout_s": 60,
        "argv": ["python3", "-c", PROG]})
got = {"stdout": {}, "stderr": {}}  # offset -> bytes, from every connection
have = {"stdout": 0, "stderr": 0}
gaps = []  # (stream, expected offset, event offset) where they differ
m = c.recv_json()
is_(m.get("event"), "started", "the run started")
run_id = m.get("run_id")
def read_events(c, until):
    """Events until the final reply or EOF (None) or until() is true; returns the final reply."""
    while not until():
        m = c.recv_json()
        if m is None:
            return None
        ev = m.get("event")
        if ev in ("stdout", "stderr"):
            off = m.get("offset", have[ev])
            if off != have[ev]:
                gaps.append((ev, have[ev], off))
            got[ev][off] = data(m)
            have[ev] = off + len(data(m))
        elif ev == "dropped":
            have[m["stream"]] = m["offset"] + m["bytes"]
        elif ev is None:
            return m
    return False
t0 = time.monotonic()
read_events(c, lambda: time.monotonic() - t0 > 1.0)
check(have["stdout"] > 0, "the first connection got output before the daemon went (%d bytes)" % have["stdout"])
check(restart(signal.SIGTERM), "after SIGTERM, the next daemon answers")
try:
    m = read_events(c, lambda: False)
except Exception:
    m = None
check(m is None, "the first connection ended with the old daemon, without a final reply", m)
c = Conn(SOCK, 30)
c.send({"id": 2, "op": "run.attach", "run_id": run_id, "from": dict(have)})
m = c.recv_json()
is_((m or {}).get("event"), "attached", "run.attach: the run is there after SIGTERM")
t0 = time.monotonic()
read_events(c, lambda: time.monotonic() - t0 > 1.0)
check(restart(signal.SIGKILL), "after SIGKILL, the next daemon answers")
c = Conn(SOCK, 30)
c.send({"id": 3, "op": "run.attach", "run_id": run_id, "from": dict(have)})
final = read_events(c, lambda: False)
check(final is not None and final.get("ok"), "run.attach after SIGKILL: the final reply", final)
final = final or {}
r = Conn(SOCK, 30).call({"op": "run", "sandbox": "keep", "output_bytes": 1 << 20,
                         "argv": ["sh", "-c", "cat /work/out.txt; cat /work/err.txt >&2"]})
out, err = r["stdout"].encode(), r["stderr"].encode()
is_(gaps, [], "every event of each stream continued where the last one (or the 'from' of run.attach) ended")
is_(len(out), 300 * 48, "the program wrote all of its stdout (its file)")
is_(final.get("exit_code"), 0, "it exited 0")
is_(final.get("reason"), "exited", "reason: exited")
is_(final.get("stdout_bytes"), len(out), "stdout_bytes counts all it wrote, across both restarts")
is_(final.get("stderr_bytes"), len(err), "stderr_bytes too")
is_(final.get("stdout", "").encode(), head_tail(out, CAP), "the final stdout: the head and tail of what it wrote")
is_(final.get("stderr", "").encode(), head_tail(err, CAP), "the final stderr: all of it")
is_(final.get("stdout_truncated"), True, "stdout_truncated")
is_(final.get("run_id"), run_id, "the final reply names the run")
for ev, whole in (("stdout", out), ("stderr", err)):
    bad = [o for o, b in got[ev].items() if whole[o:o + len(b)] != b]
    is_(bad, [], "every %s event's bytes are the program's at their offset" % ev)
seen = sum(len(b) for b in got["stderr"].values())
is_(seen, len(err), "the streamed stderr is whole: nothing lost, nothing twice")
check(wait_for(lambda: "r." not in store(), 5), "nothing of the run is left in the fd store", store())
# This daemon took the run back and ran one more: both are its started runs (docs/metrics.md).
import metrics
sc = metrics.scrape(T + "/metrics.sock")
ended = sum(v for (name, _), v in sc.samples.items() if name == "sandboxd_runs_ended_total")
is_((sc.value("sandboxd_runs_started_total"), ended, sc.value("sandboxd_runs_in_flight")), (2.0, 2.0, 0.0),
    "metrics after the restart: started 2 (the run taken back and one more) = ended 2 + in flight 0")
PY

# ---- the timeout holds across the time no daemon ran ------------------------------------------
run_py "a timeout across a gap" 60 <<'PY'
import os, signal, sys, time
sys.path.insert(0, os.environ["T"])
from restart import *
c = Conn(SOCK, 30)
c.send({"id": 1, "op": "run", "sandbox": "keep", "timeout_s": 3, "argv": ["sleep", "100"]})
m = c.recv_json()
is_(m.get("event"), "started", "a run with timeout 3 s started")
t0 = time.monotonic()
run_id = m["run_id"]
time.sleep(0.5)
check(restart(signal.SIGKILL, down=2.0), "the daemon was killed and was down for 2 s")
c = Conn(SOCK, 30)
c.send({"id": 2, "op": "run.attach", "run_id": run_id})
final = None
while True:
    m = c.recv_json(10)
    if m is None or "event" not in m:
        final = m
        break
t = time.monotonic() - t0
final = final or {}
is_(final.get("reason"), "timeout", "it ended by its timeout")
is_(final.get("exit_code"), 124, "exit_code 124")
check(2.9 <= final.get("duration_s", 0) < 5, "at about 3 s of its start (%.2f s): the gap counted" % final.get("duration_s", 0), final)
check(t < 8, "the final reply came in time (%.1f s)" % t)
PY

# ---- a run that ended while no daemon ran: its result kept (across another restart), fetched once
run_py "a result kept" 60 <<'PY'
import os, signal, sys, time
sys.path.insert(0, os.environ["T"])
from restart import *
c = Conn(SOCK, 30)
c.send({"id": 1, "op": "run", "sandbox": "keep", "argv": ["sh", "-c", "echo begun; sleep 1; echo done; exit 3"]})
m = c.recv_json()
is_(m.get("event"), "started", "a short run started")
run_id = m["run_id"]
time.sleep(0.3)
check(restart(signal.SIGKILL, down=2.0), "the daemon was killed and was down until after the run's end")
kept = os.path.join(os.environ["T"], "state", "results", run_id + ".json")
check(wait_for(lambda: os.path.exists(kept), 5), "the next daemon kept its result on disk too (results/%s.json)" % run_id)
check(restart(signal.SIGTERM), "and the daemon restarted once more (an upgrade's second restart)")
a = Conn(SOCK, 30).call({"op": "run.attach", "run_id": run_id})
is_(a.get("ok"), True, "run.attach gets the kept final reply, across that restart")
is_(a.get("stdout"), "begun\ndone\n", "with all its output")
is_(a.get("exit_code"), 3, "and its exit status, from the helper's report that waited in the store")
is_(a.get("reason"), "exited", "reason: exited")
d = a.get("duration_s", 0)
if Conn(SOCK, 30).call({"op": "hello"})["capabilities"]["kernel"]["pidfd_exit_info"]:
    # No helper saw its end (docs/protocol.md "Restarts"): timed to when the next daemon did.
    check(2.2 <= d < 10, "duration_s runs to the next daemon's sight of its end (%.2f s): no helper saw it" % d, a)
else:
    check(0.9 <= d < 1.8, "duration_s is the command's own (%.2f s), not up to the next daemon's start" % d, a)
a = Conn(SOCK, 30).call({"op": "run.attach", "run_id": run_id})
is_((a.get("error") or {}).get("code"), "not_found", "a second run.attach finds nothing: fetched once")
check(not os.path.exists(kept), "its file went with it")
check(wait_for(lambda: "r." not in store(), 5), "nothing of the run is left in the fd store", store())
PY

# ---- killed by a signal while no daemon ran: how it ended, from its helper or its pidfd -------
run_py "a signal while no daemon ran" 60 <<'PY'
import os, signal, sys, time
sys.path.insert(0, os.environ["T"])
from restart import *
direct = Conn(SOCK, 30).call({"op": "hello"})["capabilities"]["kernel"]["pidfd_exit_info"]
c = Conn(SOCK, 30)
c.send({"id": 1, "op": "run", "sandbox": "keep", "argv": ["sh", "-c", "sleep 1; kill -TERM $$"]})
m = c.recv_json()
is_(m.get("event"), "started", "a run that kills itself in 1 s started")
run_id = m["run_id"]
# Direct (no helper), its command's pidfd is what the next daemon reads its end from.
check(wait_for(lambda: (("r.%s.pid" % run_id) in store()) == direct, 5),
      "the store holds its command's pidfd exactly where runs have no helper (pidfd_exit_info %s)" % direct, store())
check(restart(signal.SIGKILL, down=2.0), "the daemon was killed and was down until after its end")
a = Conn(SOCK, 30).call({"op": "run.attach", "run_id": run_id})
is_((a.get("reason"), a.get("signal"), a.get("exit_code")), ("signaled", "TERM", 143),
    "the next daemon knows it ended by SIGTERM: reason signaled, signal TERM, exit_code 143")
check(wait_for(lambda: "r." not in store(), 5), "nothing of the run is left in the fd store", store())
PY

# ---- sandboxctl reattach --------------------------------------------------------------------
run_py "sandboxctl reattach" 60 "$SANDBOXCTL" <<'PY'
import os, re, signal, subprocess, sys, time
sys.path.insert(0, os.environ["T"])
from restart import *
c = Conn(SOCK, 30)
c.send({"id": 1, "op": "run", "sandbox": "keep", "argv": ["sh", "-c", "echo one; sleep 2; echo two >&2; exit 5"]})
m = c.recv_json()
is_(m.get("event"), "started", "a run started")
time.sleep(0.3)
check(restart(signal.SIGKILL), "the daemon was killed and started again")
p = subprocess.run([sys.argv[1], "--socket", SOCK, "reattach", m["run_id"]], capture_output=True, timeout=20)
is_((p.stdout, p.stderr), (b"one\n", b"two\n"), "sandboxctl reattach passes its stdout and stderr through")
is_(p.returncode, 5, "and exits with its status")
# A sandboxctl run that loses its daemon says which run goes on and how to get it back.
p = subprocess.Popen([sys.argv[1], "--socket", SOCK, "run", "--sandbox", "keep", "--", "sh", "-c",
                      "sleep 1; echo back; exit 4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
time.sleep(0.5)
check(restart(signal.SIGKILL), "the daemon was killed under a sandboxctl run and started again")
out, err = p.communicate(timeout=20)
m = re.search(rb"sandboxctl reattach (run-[0-9a-f]+)", err)
check(m is not None, "sandboxctl run names the run and 'sandboxctl reattach RUN_ID'", err)
if m:
    p = subprocess.run([sys.argv[1], "--socket", SOCK, "reattach", m.group(1).decode()], capture_output=True, timeout=20)
    is_((p.stdout, p.returncode), (b"back\n", 4), "and that command gets the run's output and status")
PY

# ---- a torn capture header ------------------------------------------------------------------
r=$(rpc '{"op":"run","sandbox":"keep","command":"pgrep -cx sleep"}')
is "$(jget "$r" .stdout)" 0 "no sleep runs in the sandbox before"
run_py "a torn capture" 60 <<'PY'
import os, signal, sys, time
sys.path.insert(0, os.environ["T"])
from restart import *
c = Conn(SOCK, 30)
c.send({"id": 1, "op": "run", "sandbox": "keep", "argv": ["sh", "-c", "echo x; exec sleep 100"]})
m = c.recv_json()
is_(m.get("event"), "started", "a run started")
run_id = m["run_id"]
check(wait_for(lambda: ("r.%s.cap" % run_id) in store(), 5), "its capture is in the store", store())
old = daemon_pid()
os.kill(old, signal.SIGKILL)
wait_for(lambda: not alive(old), 10)
mgr = int(os.environ["MGR"])
caps = [f for f in os.listdir("/proc/%d/fd" % mgr) if os.readlink("/proc/%d/fd/%s" % (mgr, f)).startswith("/memfd:sandboxd-capture")]
is_(len(caps), 1, "the manager holds one capture memfd")
with open("/proc/%d/fd/%s" % (mgr, caps[0]), "r+b") as f:
    f.write(b"\0" * 8)  # its magic
os.kill(mgr, signal.SIGUSR1)
wait_for(lambda: daemon_pid() != old, 10)
check(wait_for(health, 15), "the next daemon answers")
s = Conn(SOCK, 30).call({"op": "inspect", "sandbox": "keep"})["sandbox"]
lost = [x for x in s.get("interrupted_runs", []) if x.get("id") == run_id]
is_(len(lost), 1, "the run is in interrupted_runs")
a = Conn(SOCK, 30).call({"op": "run.attach", "run_id": run_id})
check((a.get("error") or {}).get("code") == "not_found" and "was interrupted when the daemon restarted" in
      (a.get("error") or {}).get("message", ""), "run.attach of it says it was interrupted, not merely unknown", a)
lost = (lost or [{}])[0]
is_(lost.get("lost"), ["capture"], "lost: exactly its capture")
is_(lost.get("reason"), "daemon restarted: its header has no capture's magic and version", "the reason says what is torn")
a = Conn(SOCK, 30).call({"op": "run.attach", "run_id": run_id})
is_((a.get("error") or {}).get("code"), "not_found", "run.attach finds no such run")
check(wait_for(lambda: "r." not in store(), 5), "its other fds were closed and removed from the store", store())
PY
_no_sleep() { [ "$(jget "$(rpc '{"op":"run","sandbox":"keep","command":"pgrep -cx sleep"}')" .stdout)" = 0 ]; }
check "what was left of the run with the torn capture was killed" wait_until 5 _no_sleep

check "in the end the store holds the init's pidfd alone" wait_until 5 _only_init
r=$(rpc '{"op":"destroy","sandbox":"keep"}')
is "$(jget "$r" .destroyed)" true "destroy"
DAEMON_PID=$(cat "$T/daemon.pid")
kill -TERM "$DAEMON_PID"
check "the daemon stops on SIGTERM" wait_until 15 _daemon_gone
DAEMON_PID=
kill -TERM "$MGR"
wait "$MGR"
is "$(find "$CG/sandboxes" -mindepth 1 -type d | wc -l)" 0 "no sandbox cgroup is left"
_sanitizer_clean() { ! grep -Eq 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/daemon.log"; }
check "no sanitizer report in the daemons' log" _sanitizer_clean
