#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Interactive sessions (pty.*): a terminal that belongs to the sandbox, input, resize, signals,
# exit, close (nothing of the session survives), reattach with the missed output, exact drop
# counts, bounded memory under a flood, the idle timeout, and no terminal injection.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

cat >"$T/sandboxd.conf" <<'EOF'
session_ring_bytes = 256K
session_idle_timeout = 6s
EOF
start_daemon --config "$T/sandboxd.conf" || exit 0
sbx=$(jget "$(rpc '{"op":"create","best_effort":true}')" .sandbox.id)
export SBX=$sbx CGS=$CG/sandboxes/$sbx

run_py "terminal" 180 <<'PYEOF'
import os, time
from client import Conn, check, is_
from ptyclient import open_session, err_code
sbx = os.environ["SBX"]
c = Conn(os.environ["SOCK"], 60)

r, s = open_session(c, sbx)
check(r.get("ok") and r["session"].startswith("pty-"), "pty.open with defaults answers with a session id", r)
is_((r.get("pty"), r.get("rows"), r.get("cols"), r.get("state")), (True, 24, 80, "running"), "a 24x80 terminal, running")
s.c.send({"op": "pty.write", "id": "w1", "session": s.id, "data": "echo hi-$((6*7)); tty; stty size; echo $TERM\n"})
check(s.wait_for("hi-42"), "input typed into the shell runs", s.text())
check(s.wait_for("80\r\nxterm-256color"), "stdin is the sandbox's own terminal, 24x80, TERM set", s.text())
like = s.text()
check("/dev/pts/0" in like, "the terminal is /dev/pts/0 of the sandbox's own devpts", like)
w = c.final("w1")
check(w.get("ok") and w.get("written", 0) > 0, "pty.write is answered once its bytes are in", w)
check(all(e["seq"] <= e2["seq"] for e, e2 in zip(s.events, s.events[1:])) and not s.gaps,
      "seq numbers are byte offsets, one event following on the other", s.gaps)

# Resize: the program sees the size and gets SIGWINCH.
r = c.call({"op": "pty.resize", "session": s.id, "rows": 40, "cols": 100})
is_(r.get("ok"), True, "pty.resize 40x100")
c.send({"op": "pty.write", "id": "w2", "session": s.id, "data": "stty size\n"})
check(s.wait_for("40 100"), "stty size inside says 40 100", s.text()[-200:])
for bad in ({"rows": 0, "cols": 80}, {"rows": 24, "cols": 0}, {"rows": 100000, "cols": 80},
            {"rows": 24, "cols": 1 << 40}, {"rows": 24}, {"rows": -1, "cols": 5}, {"rows": "24", "cols": 80}):
    r = c.call(dict(bad, op="pty.resize", session=s.id))
    is_(err_code(r), "invalid_request", "pty.resize %s is refused" % (bad,))

# Signals, by name and by number, to the terminal's foreground process group.
def fg_sleeping():
    # the sleep is the terminal's foreground job once it runs (its own process group)
    return any("sleep\x001000" in open("/proc/%s/cmdline" % p).read() for p in procs())
def procs():
    out = []
    for d, _, files in os.walk(os.environ["CGS"]):
        if "cgroup.procs" in files:
            out += open(os.path.join(d, "cgroup.procs")).read().split()
    return out
from client import wait_for
for sig in ("INT", 2, "SIGINT", "2"):
    mark = "back-%s" % sig
    c.send({"op": "pty.write", "id": "w", "session": s.id, "data": "sleep 1000\n"})
    check(wait_for(fg_sleeping, 20), "sleep 1000 runs in the session")
    r = c.call({"op": "pty.signal", "session": s.id, "signal": sig})
    check(r.get("ok") and r.get("processes", 0) >= 1, "pty.signal %r reaches the foreground job" % (sig,), r)
    c.send({"op": "pty.write", "id": "w", "session": s.id, "data": "echo %s-$?\n" % mark})
    check(s.wait_for("%s-130" % mark, 20), "sleep 1000 is interrupted by %r (status 130)" % (sig,), s.text()[-300:])
for bad in ("NOPE", 0, 999, "", -3):
    r = c.call({"op": "pty.signal", "session": s.id, "signal": bad})
    is_(err_code(r), "invalid_request", "pty.signal %r is refused" % (bad,))

# Exit: the exit event comes after the output, with the status; then the session refuses input.
c.send({"op": "pty.write", "id": "w", "session": s.id, "data": "echo bye; exit 7\n"})
ex = s.wait_exit(30)
check(ex is not None and "bye" in s.text(), "the last output arrives before the exit event", s.text()[-200:])
is_((ex or {}).get("exit_code"), 7, "exit event: exit_code 7")
is_(((ex or {}).get("reason"), (ex or {}).get("signal")), ("exited", None), "exit event: reason exited, no signal")
is_((ex or {}).get("seq"), s.next_seq, "the exit event's seq is the total of the output")
r = c.call({"op": "pty.write", "session": s.id, "data": "x"})
is_(err_code(r), "conflict", "pty.write after the exit: conflict")
r = c.call({"op": "pty.resize", "session": s.id, "rows": 5, "cols": 5})
is_(err_code(r), "conflict", "pty.resize after the exit: conflict")
r = c.call({"op": "pty.signal", "session": s.id, "signal": "INT"})
is_(err_code(r), "conflict", "pty.signal after the exit: conflict")
r = c.call({"op": "pty.close", "session": s.id})
is_((r.get("ok"), r.get("exit_code"), r.get("reason")), (True, 7, "exited"), "pty.close of an exited session: its outcome")
for op in ("pty.write", "pty.close", "pty.attach", "pty.signal", "pty.resize", "pty.detach"):
    req = {"op": op, "session": s.id, "data": "x", "signal": "INT", "rows": 1, "cols": 1}
    req = {k: v for k, v in req.items() if k in {"op", "session"} | {"pty.write": {"data"}, "pty.signal": {"signal"}, "pty.resize": {"rows", "cols"}}.get(op, set())}
    r = c.call(req)
    is_(err_code(r), "not_found", "%s of a closed session: not_found" % op)
r = c.call({"op": "pty.attach", "session": "pty-000000000000"})
is_(err_code(r), "not_found", "an unknown session: not_found")

# Argument checks.
for bad, field in (({"sandbox": "sbx-nope"}, "sandbox"), ({"term": "x y"}, "term"), ({"rows": 0}, "rows"),
                   ({"cols": 5000}, "cols"), ({"pty": False, "rows": 10}, "rows"), ({"cwd": "/etc"}, "cwd"),
                   ({"bogus": 1}, "bogus"), ({"argv": []}, "argv")):
    req = dict({"op": "pty.open", "sandbox": sbx}, **bad)
    r = c.call(req)
    check(not r.get("ok") and (r["error"].get("field") == field), "pty.open %s is refused naming '%s'" % (bad, field), r)

# A program that cannot start: an error with step and errno, never an exit code.
r, _ = open_session(c, sbx, argv=["/nonexistent/prog"])
e = r.get("error") or {}
is_((r.get("ok"), e.get("code"), e.get("step"), e.get("errno")), (False, "spawn_failed", "exec", "ENOENT"),
    "pty.open of a missing program: spawn_failed at exec with ENOENT")
check("exit_code" not in r, "and no exit code", r)
r, _ = open_session(c, sbx, argv=["/etc/passwd"])
e = r.get("error") or {}
is_((e.get("code"), e.get("errno")), ("spawn_failed", "EACCES"), "a file that is not executable: spawn_failed with EACCES")
PYEOF
stop_daemon
