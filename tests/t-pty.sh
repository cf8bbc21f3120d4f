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
export SBX=$sbx CGS=$CG/sandboxes/$sbx SANDBOXCTL

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
s.c.send({"op": "pty.write", "id": "w0", "session": s.id, "data": "id -u; stat -c 'owner=%u' /dev/pts/0; echo reopen >/dev/pts/0 && echo reopened-$((2*3))\n"})
check(s.wait_for("reopened-6"), "the terminal belongs to its user, who can open it again by name", s.text()[-300:])
check("1000\r\nowner=1000" in s.text(), "the session runs as uid 1000 and owns its terminal", s.text()[-300:])
c.final("w0")
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

run_py "pipes, close, reattach" 240 <<'PYEOF'
import os, re, subprocess, time
from client import Conn, check, is_, wait_for
from ptyclient import open_session, attach, err_code
sbx, cgs = os.environ["SBX"], os.environ["CGS"]
sock = os.environ["SOCK"]
c = Conn(sock, 60)
def session_cgroups():
    return sorted(d for d in os.listdir(cgs) if d.startswith("pty-"))
def procs_in(path):
    out = []
    for d, _, files in os.walk(path):
        if "cgroup.procs" in files:
            out += open(os.path.join(d, "cgroup.procs")).read().split()
    return out

# Pipe mode: stdout and stderr apart, stdin until eof.
r, s = open_session(c, sbx, pty=False, argv=["sh", "-c", "read x; echo out:$x; echo err:$x >&2; cat; exit 3"])
is_((r.get("ok"), r.get("pty"), r.get("rows")), (True, False, None), "pty.open with pty false: pipe mode")
c.send({"op": "pty.write", "id": "p1", "session": s.id, "data": "abc\n"})
check(s.wait_for("out:abc") and s.wait_for("err:abc", stream="stderr"), "stdout and stderr arrive apart", s.out)
r = c.call({"op": "pty.write", "session": s.id, "data": "AAEC/w==", "encoding": "base64", "eof": True})
is_(r.get("ok"), True, "base64 input, then eof")
ex = s.wait_exit()
check(s.out["stdout"].endswith(b"\x00\x01\x02\xff"), "binary input came back whole (as base64 output)", s.out["stdout"])
is_(((ex or {}).get("exit_code"), (ex or {}).get("reason")), (3, "exited"), "exit event with the status")
r = c.call({"op": "pty.write", "session": s.id, "data": "x"})
is_(err_code(r), "conflict", "pipe mode: write after exit is a conflict")
r = c.call({"op": "pty.resize", "session": s.id, "rows": 10, "cols": 10})
is_(err_code(r), "conflict", "pipe mode has no terminal to resize")
c.call({"op": "pty.close", "session": s.id})
r, s = open_session(c, sbx, argv=["cat"])
r = c.call({"op": "pty.write", "session": s.id, "data": "x", "eof": True})
is_(err_code(r), "invalid_request", "eof on a terminal is refused (send ^D)")
c.call({"op": "pty.close", "session": s.id})

# pty.signal in pipe mode goes to the program's process group.
r, s = open_session(c, sbx, pty=False, argv=["sh", "-c", "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.1; done"])
s.wait_for("ready")
r = c.call({"op": "pty.signal", "session": s.id, "signal": "USR1"})
check(r.get("ok") and s.wait_for("got-usr1"), "pipe mode: pty.signal USR1 reaches the program", r, s.out)
c.call({"op": "pty.close", "session": s.id})

# Close: SIGHUP, then nothing of the session survives, not even a setsid'ed child ignoring HUP.
before = session_cgroups()
r, s = open_session(c, sbx, argv=["sh", "-c", "trap '' HUP; setsid sh -c 'trap \"\" HUP; exec sleep 1000' & echo started; exec sleep 1000"])
check(s.wait_for("started"), "a session with a setsid'ed child that ignores SIGHUP")
mine = [d for d in session_cgroups() if d not in before]
is_(len(mine), 1, "the session has its own cgroup below the sandbox's")
check(wait_for(lambda: len(procs_in(os.path.join(cgs, mine[0]))) >= 3, 20), "helper, program and child are in it",
      procs_in(os.path.join(cgs, mine[0])))
t0 = time.monotonic()
r = c.call({"op": "pty.close", "session": s.id}, 30)
is_((r.get("ok"), r.get("reason")), (True, "closed"), "pty.close answers once it is over, reason closed")
check(not os.path.exists(os.path.join(cgs, mine[0])), "the session's cgroup is empty and removed after the close")
check(time.monotonic() - t0 < 15, "within the grace and a little (%.1f s)" % (time.monotonic() - t0))
ex = s.wait_exit(10)
is_((ex or {}).get("reason"), "closed", "the attached client got the exit event too")
check(all(p_ not in open("/proc/%s/cmdline" % p_).read() for p_ in []) and
      not any("sleep\x001000" in open("/proc/%s/cmdline" % p).read() for p in procs_in(cgs) if os.path.exists("/proc/" + p)),
      "no sleep 1000 left anywhere in the sandbox")

# Close a shell that obeys SIGHUP: quick, reason closed, signal HUP.
r, s = open_session(c, sbx)
c.send({"op": "pty.write", "id": "w", "session": s.id, "data": "echo ready\n"})
s.wait_for("ready")
t0 = time.monotonic()
r = c.call({"op": "pty.close", "session": s.id}, 30)
is_((r.get("reason"), r.get("signal"), r.get("exit_code")), ("closed", "HUP", 129), "a shell ends on the SIGHUP of pty.close")

# Reattach after a disconnect: the missed output, exactly from where the client was.
a = Conn(sock, 60)
r, s = open_session(a, sbx)
a.send({"op": "pty.write", "id": "w", "session": s.id, "data": "echo one-$((0+1))\n"})
check(s.wait_for("one-1"), "first client sees its output")
time.sleep(0.5)
while True:  # whatever else came (the prompt)
    try:
        s.pump(time.monotonic() + 0.5)
    except Exception:
        break
seen = s.next_seq
a.close()
b = Conn(sock, 60)
r = b.call({"op": "pty.write", "session": s.id, "data": "echo two-$((1+1)); echo three\n"})
is_(r.get("ok"), True, "another connection of the owner writes to the detached session")
time.sleep(1)
r, s2 = attach(b, s.id, from_seq=seen)
is_((r.get("ok"), r.get("from_seq"), r.get("first_seq"), r.get("dropped")), (True, seen, seen, 0),
    "pty.attach from_seq: nothing dropped")
check(s2.wait_for("three"), "the missed output arrives", s2.text())
check("two-2" in s2.text() and "one-1" not in s2.text(), "from exactly where the first client stopped", s2.text())
r = b.call({"op": "pty.attach", "session": s.id, "from_seq": r["next_seq"] + 10 ** 6})
is_(err_code(r), "invalid_request", "from_seq beyond the output: invalid_request")
r, s3 = attach(b, s.id)
check(r.get("ok") and r.get("first_seq") == 0 and s3.wait_for("one-1"), "attach without from_seq replays the ring", r)
def inspected(conn):
    return [x for x in conn.call({"op": "inspect", "sandbox": sbx})["sandbox"]["sessions"] if x["id"] == s.id]
i = inspected(b)
check(len(i) == 1 and i[0]["state"] == "running" and i[0]["attached"] == 1 and i[0]["output_seq"] == r["next_seq"]
      and isinstance(i[0]["argv"], list) and re.match(r"^20[0-9-]+T[0-9:]+Z$", i[0]["created"]),
      "inspect lists the session: running, one client attached, its output so far, when it was opened", i)
out = subprocess.run([os.environ["SANDBOXCTL"], "--socket", sock, "inspect", sbx], capture_output=True, text=True).stdout
check(re.search(r"sessions: +%s running, 1 attached: " % s.id, out), "sandboxctl inspect shows the session", out)
r = b.call({"op": "pty.detach", "session": s.id})
is_(r.get("ok"), True, "pty.detach")
is_([x["attached"] for x in inspected(b)], [0], "inspect: nobody attached after pty.detach")
r = b.call({"op": "pty.detach", "session": s.id})
is_(err_code(r), "conflict", "a second pty.detach: conflict (not attached)")
b.call({"op": "pty.close", "session": s.id})
is_(inspected(b), [], "inspect: the session is gone once pty.close answered")

# Exact drop count: a detached session writes past its 256K ring.
d = Conn(sock, 60)
r, s = open_session(d, sbx, pty=False, argv=["sh", "-c", "read go; head -c 1000000 /dev/zero | tr '\\0' a; echo END; exec sleep 1000"])
d.close()
b.call({"op": "pty.write", "session": s.id, "data": "go\n"})
def total():
    r = b.call({"op": "pty.attach", "session": s.id, "from_seq": 0})
    b.call({"op": "pty.detach", "session": s.id})
    return r.get("next_seq") == 1000004 and r
r = wait_for(total, 30, 0.3)
check(r, "the detached session wrote 1000004 bytes", r)
r, s4 = attach(b, s.id, from_seq=100)
is_((r.get("first_seq"), r.get("dropped")), (1000004 - 262144, 1000004 - 262144 - 100),
    "attach says exactly how many bytes were dropped (the ring keeps 256K)")
check(s4.wait_for("END\n"), "then the last 256K arrive")
is_(len(s4.out["stdout"]), 262144, "all of them, and only them")
b.call({"op": "pty.close", "session": s.id})

# Idle timeout: nobody attached for 6 s closes the session.
e = Conn(sock, 60)
r, s = open_session(e, sbx, argv=["sleep", "1000"])
sid = s.id
e.close()
# (probed with a resize, which does not attach)
gone = wait_for(lambda: err_code(b.call({"op": "pty.resize", "session": sid, "rows": 24, "cols": 80})) == "not_found", 40, 1)
check(gone, "an unattached session is closed after session_idle_timeout")
check(wait_for(lambda: session_cgroups() == [], 20), "and no session cgroup is left", session_cgroups())

# A session ends with its sandbox.
r, s = open_session(b, sbx, argv=["sleep", "1000"])
s2b = b.call({"op": "create", "best_effort": True})["sandbox"]["id"]
r, s = open_session(b, s2b, argv=["sleep", "1000"])
r = b.call({"op": "destroy", "sandbox": s2b}, 30)
is_(r.get("destroyed"), True, "destroying a sandbox with a session in it")
ex = s.wait_exit(10)
is_((ex or {}).get("reason"), "destroyed", "the session's exit event says destroyed")
PYEOF
run_py "no terminal injection" 120 <<'PYEOF'
import os
from client import Conn, check, is_
from ptyclient import open_session
c = Conn(os.environ["SOCK"], 60)
prog = r"""
import errno, fcntl, os, termios
def tryioctl(name, fd, req, arg):
    try:
        fcntl.ioctl(fd, req, arg)
        print(name, "ALLOWED", flush=True)
    except OSError as e:
        print(name, errno.errorcode[e.errno], flush=True)
tty = os.open("/dev/tty", os.O_RDWR)
for fd, where in ((0, "stdin"), (tty, "dev-tty")):
    tryioctl("TIOCSTI-" + where, fd, termios.TIOCSTI, b"X")
    tryioctl("TIOCSTI-high-" + where, fd, termios.TIOCSTI | (1 << 32), b"X")
    tryioctl("TIOCLINUX-" + where, fd, 0x541C, b"\x06\x00")
os.set_blocking(0, False)
try:
    got = os.read(0, 100)
except BlockingIOError:
    got = b""
print("INPUT=%r" % got, flush=True)
print("PTS=" + ",".join(sorted(os.listdir("/dev/pts"))), "CONSOLE=%s" % os.path.exists("/dev/console"), flush=True)
"""
r, s = open_session(c, os.environ["SBX"], argv=["python3", "-c", prog])
ex = s.wait_exit(60)
out = s.text()
for name in ("TIOCSTI-stdin", "TIOCSTI-high-stdin", "TIOCLINUX-stdin", "TIOCSTI-dev-tty", "TIOCSTI-high-dev-tty", "TIOCLINUX-dev-tty"):
    check(name + " EPERM" in out, "%s is refused (EPERM) by the seccomp filter" % name, out)
check("INPUT=b''" in out, "nothing was pushed into the terminal's input", out)
pts = out.split("PTS=")[-1].split()[0].split(",")
check("ptmx" in pts and all(p == "ptmx" or p.isdigit() for p in pts) and "CONSOLE=False" in out,
      "the sandbox has its own devpts (its sessions' terminals only) and no console", out)
PYEOF

run_py "flood" 240 <<'PYEOF'
import os, time
from client import Conn, check, is_, wait_for
from ptyclient import open_session, attach
sock, pid = os.environ["SOCK"], int(os.environ["DAEMON_PID"])
def rss_kb():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
c = Conn(sock, 120)
sbx = os.environ["SBX"]
# An attached client that does not read: the program is made to wait, nothing is lost.
base = rss_kb()
r, s = open_session(c, sbx, pty=False, argv=["sh", "-c", "head -c 200000000 /dev/zero | tr '\\0' a; echo done >&2"])
s.keep = False
time.sleep(3)
held = rss_kb()
check(held - base < 16384, "RSS grew by %d kB while the attached client did not read (bound: 16 MiB)" % (held - base))
t0 = time.monotonic()
ex = s.wait_exit(180)
is_(s.count["stdout"], 200000000, "then all 200 MB arrived")
check(not s.gaps and not any(e["event"] == "dropped" for e in s.events), "in order, nothing dropped", s.gaps)
is_((s.out["stderr"], (ex or {}).get("seq")), (b"done\n", 200000005), "and the program ended normally")
s.out = {"stdout": b"", "stderr": b""}
c.call({"op": "pty.close", "session": s.id})
# Nobody attached: the ring keeps the latest output, the rest is counted.
d = Conn(sock, 60)
base = rss_kb()
r, s = open_session(d, sbx, argv=["sh", "-c", "stty -onlcr; head -c 50000000 /dev/zero | tr '\\0' b; echo; echo END; exec sleep 1000"])
d.close()
peak = base
def done():
    global peak
    peak = max(peak, rss_kb())
    r = c.call({"op": "pty.resize", "session": s.id, "rows": 24, "cols": 80})
    r, s2 = attach(c, s.id, from_seq=0)
    c.call({"op": "pty.detach", "session": s.id})
    return r.get("next_seq", 0) >= 50000005 and r
r = wait_for(done, 120, 0.5)
check(peak - base < 16384, "RSS grew by %d kB while a detached terminal wrote 50 MB (bound: 16 MiB)" % (peak - base))
check(r and r["dropped"] == r["first_seq"] > 0 and r["next_seq"] - r["first_seq"] == 262144,
      "a reattach is told exactly how much was dropped", r)
c.call({"op": "pty.close", "session": s.id})
PYEOF
stop_daemon

# A ring of 4K for the start of a session's output.
cat >"$T/sandboxd.conf" <<'EOF'
session_ring_bytes = 4K
EOF
start_daemon --config "$T/sandboxd.conf" || exit 0
SBX=$(jget "$(rpc '{"op":"create","best_effort":true}')" .sandbox.id)
export SBX
run_py "the first bytes" 240 <<'PYEOF'
import os
from client import Conn, check, is_
from ptyclient import Session
sock, sbx = os.environ["SOCK"], os.environ["SBX"]
# A program may write before the daemon has learnt that it started, and so before pty.open is
# answered: its opener counts as attached from byte 0, and nothing of that is dropped. Twelve
# at once on their own connections, each writing 2 MB into a ring of 4K (a pipe's first read
# alone would overrun it), keep the daemon busy.
conns = [Conn(sock, 120) for _ in range(12)]
for i, c in enumerate(conns):
    c.send({"op": "pty.open", "id": "first", "sandbox": sbx, "pty": False,
            "argv": ["sh", "-c", "head -c 2000000 /dev/zero | tr '\\0' x"]})
got = []
for c in conns:
    r = c.final("first")
    s = Session(c, r, "first") if r.get("ok") else None
    if s:
        s.keep = False
        ex = s.wait_exit(120)
    got.append((r.get("ok"), s and s.count["stdout"], s and not s.gaps and not any(e["event"] == "dropped" for e in s.events),
                s and (ex or {}).get("seq")))
    c.close()
bad = [g for g in got if g != (True, 2000000, True, 2000000)]
check(not bad, "12 sessions opened at once: each client got its program's 2 MB from the first byte, none dropped", bad)
PYEOF
stop_daemon
