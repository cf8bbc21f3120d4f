# SPDX-License-Identifier: LGPL-2.1-or-later
"""The sandboxd Python package (python/sandboxd) against a real daemon: run by t-python.sh with
the package and tests/ on sys.path, $SOCK the daemon's socket. Prints "PASS desc"/"FAIL desc"
lines (client.check), which t-python.sh turns into TAP. Each check names one outcome and
depends on it."""
import asyncio
import hashlib
import http.client
import io
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

from client import check, is_

import sandboxd
from sandboxd import (
    AsyncClient, AsyncSandbox, Client, Conflict, ConnectionLost, InvalidRequest,
    LimitUnenforceable, NoSpace, NotFound, Output, ResourceExhausted, Sandbox, SandboxdError,
    SpawnFailed, Started, TooLarge, UnknownOp, errors,
)
from sandboxd._wire import Wire
from sandboxd import _ops

SOCK = os.environ["SOCK"]
TOP = os.environ["top_srcdir"]
RUNS_PER_CONN = int(os.environ["RUNS_PER_CONN"])
os.environ["SANDBOXD_SOCKET"] = SOCK  # the default socket of every Client below


def raises(fn, cls):
    """The exception fn raised if it is a cls, else None (printed)."""
    try:
        fn()
    except cls as e:
        return e
    except BaseException as e:  # noqa: B902 - reported
        print(f"# raised {type(e).__name__}: {e}")
        return None
    print("# raised nothing")
    return None


def until(session, needle, timeout=20):
    """Session.read_until, or b"" (printed) when it did not come."""
    try:
        return session.read_until(needle, timeout)
    except (TimeoutError, EOFError) as ex:
        print(f"# {ex}")
        return b""


c = Client()
hello = c.hello()
is_(hello.protocol, 1, "hello: protocol 1, as a Hello dataclass")
is_(hello.peer.get("uid"), 0, "hello: peer.uid is this process's (root)")
ENFORCES = all(hello.capabilities.get("cgroup", {}).get(k) for k in ("memory", "pids", "cpu"))
BE = None if ENFORCES else True
h = c.health()
is_((h.status, h.sandboxes, h.scope), ("ok", 0, "all"), "health: status ok, 0 sandboxes, scope all (root)")
is_((h.capacity or {}).get("sandboxes", {}).get("in_use"), 0, "health: capacity, as a dict (0 sandboxes in use)")

# ---- the default socket is sandboxctl's ------------------------------------------------
is_(sandboxd.DEFAULT_SOCKET, "/run/sandboxd/sandboxd.sock", "DEFAULT_SOCKET is sandboxctl's default")
is_(sandboxd.socket_path(), SOCK, "socket_path(): $SANDBOXD_SOCKET when set")
saved = os.environ.pop("SANDBOXD_SOCKET")
is_(sandboxd.socket_path(), "/run/sandboxd/sandboxd.sock", "socket_path(): the default without $SANDBOXD_SOCKET")
os.environ["SANDBOXD_SOCKET"] = saved

# ---- the one-liner of the issue ---------------------------------------------------------
if not ENFORCES:
    e = raises(lambda: Sandbox.create(memory="256M"), LimitUnenforceable)
    check(e is not None and e.code == "limit_unenforceable" and (e.field or "").startswith("limits")
          and e.message, "Sandbox.create(memory=\"256M\") on a host without the memory controller: "
          "LimitUnenforceable with code, field and message", repr(e))
    is_(len(c.list()), 0, "...and no sandbox was left by the refused create")
    check(e is not None and "pass best_effort=True " in str(e),
          "...whose text names the keyword to pass: best_effort=True", str(e))
    e = raises(lambda: Sandbox.create(), LimitUnenforceable)
    check(e is not None and e.field == "best_effort" and "default" in e.message and "limits.memory" not in str(e),
          "Sandbox.create() without a limit: the refusal names the default and best_effort, not limits.memory", repr(e))
with Sandbox.create(memory="256M", best_effort=BE) as sb:
    r = sb.run("echo hi; echo err >&2; exit 3", timeout=60)
    the_id = sb.id
    is_((r.exit_code, r.reason, r.stdout, r.stderr, r.timed_out), (3, "exited", "hi\n", "err\n", False),
        "with Sandbox.create(memory=\"256M\") as sb: sb.run(..., timeout=60): exit 3, both streams")
    check(r.run_id.startswith("run-") and r.sandbox == the_id, "RunResult names its run and sandbox", r)
    is_(sb.info.limits.get("memory"), 256 << 20, "the sandbox's limits.memory is 256M")
    owned_client = sb.client
e = raises(lambda: c.inspect(the_id), NotFound)
check(e is not None, "leaving the with block destroyed the sandbox (inspect: NotFound)")
check(owned_client.closed, "...and closed the connection Sandbox.create opened")

x = Client()
with Sandbox.create(client=x, best_effort=BE) as sb2:
    lost_id = sb2.id
    x.close()
e = raises(lambda: c.inspect(lost_id), NotFound)
check(e is not None, "a Sandbox whose connection closed inside its with block is destroyed through a new one")

# ---- every operation of the daemon's table has its request in the package -----------------
daemon_ops = set(re.findall(r'^\s*\{ "([a-z_.]+)", op_', open(os.path.join(TOP, "daemon/server/ops.c")).read(), re.M))
built = {k.op for k in (
    _ops.hello(), _ops.health(), _ops.create(), _ops.list_sandboxes(), _ops.inspect("x"), _ops.destroy("x"),
    _ops.run("x"), _ops.kill("r"), _ops.sweep(), _ops.pty_open("x"), _ops.pty_write("s"),
    _ops.pty_resize("s", 1, 1), _ops.pty_signal("s", "INT"), _ops.pty_close("s"), _ops.pty_attach("s"),
    _ops.pty_detach("s"), _ops.snapshot("x"), _ops.snapshot_list("x"), _ops.snapshot_restore("x", "s"),
    _ops.snapshot_delete("x", "s"), _ops.file_stat("x", "p"), _ops.file_list("x", "p"), _ops.file_mkdir("x", "p"),
    _ops.file_remove("x", "p"), _ops.file_read("x", "p"), _ops.file_write("x", "p", b""), _ops.file_put("x", "p", 0),
    _ops.file_get("x", "p", 1))}
built |= {k.op for k in (_ops.port_open("x", 1), _ops.port_close("x", 1))}
built |= {k.op for k in (_ops.run_attach("r"), _ops.sandbox_signal("x", "TERM"), _ops.sandbox_freeze("x"),
                         _ops.sandbox_thaw("x"), _ops.sandbox_update("x", memory="64M"))}
built |= {k.op for k in (_ops.image_import("n", "/s"), _ops.image_list(), _ops.image_inspect("n"), _ops.image_remove("n"))}
up = _ops.Upload(1, b"xy")  # file.chunk: the lines of a file.write by chunks, not a request of their own
up.take({"id": 1, "event": "ready", "chunk_bytes": 1, "window": 4})
chunk_lines = [json.loads(x) for x in up.lines()]
is_(chunk_lines, [{"id": 1, "op": "file.chunk", "seq": 0, "data": "eA=="},
                  {"id": 1, "op": "file.chunk", "seq": 1, "data": "eQ==", "eof": True}],
    "an Upload's lines: file.chunk of chunk_bytes each, the last with eof")
built |= {m["op"] for m in chunk_lines}
check(len(daemon_ops) >= 20 and daemon_ops <= built, "every operation of daemon/server/ops.c has its request in the package",
      sorted(daemon_ops - built))

# ---- the sans-io wire (no daemon): framing and routing ----------------------------------
w = Wire()
pa, la = w.request("run", {"sandbox": "a", "stream": True, "env": None}, "A")
pb, lb = w.request("pty.open", {"sandbox": "a"}, "B")
is_(json.loads(la), {"id": pa.id, "op": "run", "sandbox": "a", "stream": True}, "Wire: a request line, None fields left out")
stream = (b'{"id":%d,"event":"started","run_id":"run-1"}\r\n{"id":%d,"ok":true,"session":"pty-1"}\n'
          b'{"id":99,"ok":true}\n{"id":%d,"event":"stdout","seq":0,"data":"x"}\n{"id":%d,"ok":true}\n'
          b'{"id":%d,"event":"exit","session":"pty-1","seq":1}\n' % (pa.id, pb.id, pb.id, pa.id, pb.id))
routed = []
for i in range(len(stream)):  # one byte at a time: lines are whole only at their newline
    routed += [(p.sink, m.get("event") or m.get("ok")) for p, m in w.feed(stream[i:i + 1])]
is_(routed, [("A", "started"), ("B", True), ("B", "stdout"), ("A", True), ("B", "exit")],
    "Wire: lines fed byte by byte are routed by id, another id's dropped, a \\r\\n tolerated")
is_(w.in_flight(), 0, "Wire: a run ends at its reply, a session subscription at its exit event")
p1, _ = w.request("pty.attach", {"session": "pty-2"}, "1")
w.feed(b'{"id":%d,"ok":true,"session":"pty-2"}\n' % p1.id)
p2, _ = w.request("pty.attach", {"session": "pty-2"}, "2")
moved = [(p.sink, m.get("event") or m.get("ok")) for p, m in w.feed(b'{"id":%d,"ok":true,"session":"pty-2"}\n' % p2.id)]
is_(moved, [("2", True), ("1", "detached")], "Wire: a second attach of a session on one connection ends the first subscription")
pd, _ = w.request("pty.detach", {"session": "pty-2"}, "d")
ended = [(p.sink, m.get("event") or m.get("ok")) for p, m in w.feed(b'{"id":%d,"ok":true}\n' % pd.id)]
is_((ended, w.in_flight()), ([("d", True), ("2", "detached")], 0), "Wire: pty.detach's ok ends the subscription")
e = raises(lambda: w.feed(b'[1]\n'), errors.ProtocolViolation)
check(e is not None, "Wire: a line that is not a JSON object is a ProtocolViolation")

# ---- error mapping: one class per code, with code, field and message --------------------
table = open(os.path.join(TOP, "docs/protocol.md")).read().split("## Error codes", 1)[1].split("\n## ", 1)[0]
codes = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
check(len(codes) >= 13, "docs/protocol.md's error table lists the codes", codes)
missing = [k for k in codes if k not in errors.ERRORS]
is_(missing, [], "every error code of docs/protocol.md has its exception class")
w = Wire()
bad = []
for k in codes:
    p, _ = w.request("inspect", {"sandbox": "x"}, None)
    [(q, msg)] = w.feed(json.dumps({"id": p.id, "ok": False, "error": {"code": k, "message": "m " + k,
                                                                        "field": "f"}}).encode() + b"\n")
    try:
        _ops.inspect("x").finish(msg)
        bad.append((k, "nothing raised"))
    except SandboxdError as ex:
        if type(ex) is not errors.ERRORS[k] or (ex.code, ex.field, ex.message) != (k, "f", "m " + k):
            bad.append((k, type(ex).__name__, ex.code, ex.field, ex.message))
is_(bad, [], "each code's reply raises its own class carrying code, field and message")
e = raises(lambda: c.inspect("sbx-000000000000"), NotFound)
check(e is not None and e.field == "sandbox" and "sbx-000000000000" in e.message,
      "inspect of an unknown id: NotFound, field sandbox, the message names it", repr(e))
EMPTY = "the sandbox argument is empty: give a sandbox's id, name or USER/NAME"
for what, fn in [("c.sandbox('')", lambda: c.sandbox("")), ("c.inspect('')", lambda: c.inspect("")),
                 ("c.destroy('')", lambda: c.destroy("")), ("c.run('true', sandbox='')", lambda: c.run("true", sandbox="")),
                 ("c.snapshot_list('')", lambda: c.snapshot_list(""))]:
    e = raises(fn, InvalidRequest)
    check(e is not None and e.field == "sandbox" and EMPTY in str(e), f"{what}: InvalidRequest, the sandbox argument is empty", repr(e))
e = raises(lambda: c.call("no.such.op"), UnknownOp)
check(e is not None and e.field == "op", "an unknown op: UnknownOp, field op", repr(e))
e = raises(lambda: c.create(limits={"bogus": 1}, best_effort=BE), InvalidRequest)
check(e is not None and (e.field or "").startswith("limits"), "an unknown limit: InvalidRequest naming it", repr(e))
e = raises(lambda: c.run(argv=["/nonexistent/prog"], best_effort=BE), SpawnFailed)
check(e is not None and (e.step, e.errno_name) == ("exec", "ENOENT"),
      "a program that does not exist: SpawnFailed with step exec, errno ENOENT", repr(e))
e = raises(lambda: c.run("cat", stdin="x" * (80 << 10), best_effort=BE), TooLarge)
check(e is not None and e.field == "stdin", "stdin over max_stdin_bytes (64K here): TooLarge, field stdin", repr(e))
small = Client(max_line_bytes=1000)
e = raises(lambda: small.run("cat", stdin="x" * 2000), TooLarge)
check(e is not None and e.field is None, "a request over the client's line cap: TooLarge before sending", repr(e))
small.close()
big = Client(max_line_bytes=16 << 20)
e = raises(lambda: big.call("health", pad="y" * (5 << 20)), TooLarge)
check(e is not None, "a line over the daemon's 4M cap: its too_large reply (null id) reaches the request", repr(e))
is_(big.health().status, "ok", "...and the connection goes on")
big.close()

# ---- sandboxes: create, list, inspect, destroy -----------------------------------------
info = c.create(name="py-a", best_effort=BE, env={"GREETING": "hey"}, pids=64)
is_((info.name, info.state, info.limits.get("pids")), ("py-a", "ready", 64), "create: SandboxInfo with name, state ready, limits")
e = raises(lambda: c.create(name="py-a", best_effort=BE), Conflict)
check(e is not None and e.field == "name", "a second create of the name: Conflict, field name", repr(e))
names = [s.name for s in c.list()]
is_(names, ["py-a"], "list: the one sandbox")
u = c.list(usage=True)
check(len(u) == 1 and u[0].usage is not None and u[0].runs_in_flight == 0, "list(usage=True): usage and runs_in_flight", u)
sb = c.sandbox("py-a")
is_((sb.id, sb.name), (info.id, "py-a"), "Client.sandbox(name): a handle on the existing sandbox")
ins = sb.inspect()
check(ins.usage is not None and ins.snapshots == [] and ins.sessions == [], "inspect: usage, no snapshots, no sessions", ins)

# ---- runs -------------------------------------------------------------------------------
r = sb.run(["sh", "-c", 'echo "$GREETING $X"; pwd; cat'], env={"GREETING": "hi", "X": "y"}, stdin=b"in\xff")
is_((r.stdout_data, r.exit_code), (b"hi y\n/work\nin\xff", 0), "run: argv, env, stdin as bytes (base64), output bytes as written")
r = sb.run('echo "$GREETING"')
is_(r.stdout, "hey\n", "run: the sandbox's env from create")
r = sb.run("mkdir -p d && cd d && pwd")
r = sb.run("pwd", cwd="/work/d")
is_(r.stdout, "/work/d\n", "run: cwd")
r = sb.run("sleep 10", timeout=0.5)
is_((r.reason, r.exit_code, r.timed_out), ("timeout", 124, True), "run: timeout: reason timeout, exit 124, timed_out")
r = sb.run("head -c 10000 /dev/zero | tr '\\0' a; printf END", output_bytes=100)
check(r.stdout_truncated and r.stdout_bytes == 10003 and r.stdout.startswith("a") and r.stdout.endswith("END")
      and "bytes dropped" in r.stdout, "run: output over output_bytes keeps head and tail", r.stdout)
r = c.run("echo throwaway", best_effort=BE)
check(r.stdout == "throwaway\n" and r.sandbox != sb.id, "Client.run without a sandbox: a throwaway one", r)

# ---- streaming --------------------------------------------------------------------------
st = sb.stream("echo one; while [ ! -e /work/go ]; do sleep 0.05; done; echo two >&2")
evs = []
for ev in st:
    evs.append(ev)
    if isinstance(ev, Output) and ev.data == b"one\n":
        sb.run("touch /work/go")  # a second run on the same connection, while this one streams
check(isinstance(evs[0], Started) and evs[0].run_id.startswith("run-"), "stream: the started event first, with the run id", evs[:1])
outs = [(e.stream, e.data) for e in evs if isinstance(e, Output)]
is_(outs, [("stdout", b"one\n"), ("stderr", b"two\n")], "stream: output events while the run goes on (it waits for a run that "
    "is sent only once 'one' came), in order")
check(st.result is not None and st.result.exit_code == 0 and st.run_id == evs[0].run_id, "stream: result set at the end", st.result)
with sb.stream("echo x; sleep 100") as st:
    for ev in st:
        if isinstance(ev, Output):
            st.kill()
is_(st.result.reason if st.result else None, "killed", "RunStream.kill: the run ends with reason killed")
st = sb.stream("sleep 100")
st.kill("TERM")
r = st.wait(10)
is_((r.reason, r.signal), ("signaled", "TERM"), "RunStream.kill(\"TERM\"): the run ends signaled TERM")
with sb.stream("sleep 100") as st:
    next(iter(st))
is_(st.result.reason if st.result else None, "killed", "leaving a RunStream's with block early kills its run")

# ---- many runs in flight on one connection: threads and the runs-per-connection cap ----
N = 8
results = {}


def worker(i):
    try:
        results[i] = sb.run(f"touch /work/t{i}; while [ $(ls /work | grep -c '^t[0-9]') -lt {N} ]; do sleep 0.05; done; echo {i}",
                            timeout=30)
    except Exception as ex:  # reported below
        results[i] = ex


threads = [threading.Thread(target=worker, args=(i,)) for i in range(N)]
for t in threads:
    t.start()
for t in threads:
    t.join(60)
got = {i: (getattr(v, "stdout", repr(v)), getattr(v, "reason", None)) for i, v in results.items()}
is_(got, {i: (f"{i}\n", "exited") for i in range(N)}, f"{N} threads, one Client: {N} runs in flight at once (each waits for "
    "all to have started), each gets its own reply")
sb.run("rm -f /work/t*")
streams = [sb.stream("sleep 100") for _ in range(RUNS_PER_CONN)]
for s in streams:
    s.next_event(20)
e = raises(lambda: sb.run("true"), ResourceExhausted)
check(e is not None, f"run {RUNS_PER_CONN + 1} on a connection with {RUNS_PER_CONN} in flight (max_runs_per_connection): "
      "ResourceExhausted", repr(e))
for s in streams:
    s.kill()
check(all(s.wait(20).reason == "killed" for s in streams), f"the {RUNS_PER_CONN} runs were killed, each answered")

# ---- snapshots, restore, fork ------------------------------------------------------------
sb.run("echo v1 > /work/f")
prog = []
snap = sb.snapshot("first", on_progress=prog.append)
nfiles = int(sb.run("find /work ! -type d | wc -l").stdout)
check(snap.id.startswith("snap-") and snap.label == "first" and snap.files == nfiles and nfiles >= 1,
      "snapshot: a Snapshot with id, label, files (as many as the workspace has)", snap, nfiles)
is_([s.id for s in sb.snapshots()], [snap.id], "snapshots(): the snapshot")
sb.run("echo v2 > /work/f")
rr = sb.restore()
is_((rr.snapshot, sb.run("cat /work/f").stdout), (snap.id, "v1\n"), "restore() with no argument: the newest snapshot is back")
with Sandbox.fork(snap, client=c, name="py-fork", best_effort=BE) as fk:
    is_(fk.run("cat /work/f").stdout, "v1\n", "Sandbox.fork(snapshot): the new sandbox starts with the snapshot's tree")
    e = raises(lambda: c.snapshot_restore(sb.id, f"py-fork/{snap.id}"), InvalidRequest)
    check(e is not None and e.field == "snapshot" and "another sandbox" in str(e),
          "snapshot_restore with another sandbox's 'SANDBOX/ID' (the fork's): InvalidRequest, field snapshot, saying so",
          repr(e))
    fork_id = fk.id
check(fork_id not in [s.id for s in c.list()], "the fork's with block destroyed the fork")
check(not c.closed, "...and left the Client it was given open")
# A snapshot argument is an id, "SANDBOX/ID" or a Snapshot (docs/python.md), for restore and delete too.
sb.run("echo v3 > /work/f")
rr = c.snapshot_restore(sb.id, f"{sb.id}/{snap.id}")
is_((rr.snapshot, sb.run("cat /work/f").stdout), (snap.id, "v1\n"), "Client.snapshot_restore(sandbox, 'SANDBOX/ID')")
is_(sb.restore(f"py-a/{snap.id}").snapshot, snap.id, "Sandbox.restore('NAME/ID')")
snap2 = sb.snapshot("second")
is_(c.snapshot_delete(sb.id, f"{sb.id}/{snap2.id}"), snap2.id, "Client.snapshot_delete(sandbox, 'SANDBOX/ID'): the id deleted")
is_(sb.delete_snapshot(snap), snap.id, "delete_snapshot: the id deleted")
is_(sb.snapshots(), [], "...and snapshots() is empty")
e = raises(lambda: sb.restore(), NotFound)
check(e is not None and e.field == "snapshot", "restore() without any snapshot: NotFound, field snapshot", repr(e))

# ---- sweep ------------------------------------------------------------------------------
sw = c.sweep(dry_run=True)
check(sw.dry_run and sb.id in [s.get("id") for s in sw.sandboxes], "sweep(dry_run=True): a SweepResult measuring the sandbox", sw)
sw = c.sweep()
check(not sw.dry_run and sw.totals.get("sandboxes") == 1, "sweep(): done, totals", sw.totals)

# ---- sessions ---------------------------------------------------------------------------
with sb.session("sh", rows=24, cols=80) as s:
    check(s.id.startswith("pty-") and s.info.pty and s.info.state == "running", "session(): a Session on a terminal, running", s.info)
    s.write("echo hel''lo\n")
    check(b"hello\r\n" in until(s, "hello\r\n"), "Session.write, then its output carries the command's")
    s.resize(30, 100)
    s.write("stty size\n")
    check(b"30 100" in until(s, "30 100"), "Session.resize: stty size says 30 100")
    s.write("sleep 100\n")
    time.sleep(0.5)
    n = s.signal("INT")
    s.write("echo after-$?\n")
    check(n >= 1 and b"after-130" in until(s, "after-130"), "Session.signal(INT): the foreground sleep got it (status 130)", n)
    before = s.next_seq
    info2 = s.attach(0)
    is_((info2.from_seq, info2.first_seq, info2.dropped), (0, 0, 0), "Session.attach(0): replay from seq 0, nothing dropped")
    replay = until(s, "after-130")
    check(b"hello" in replay and s.next_seq >= before, "...the replay has the output from the start")
    s.detach()
    check(list(s) == [], "Session.detach: the subscription ends (iteration stops)")
    with Client() as other:
        s2 = other.attach_session(s.id, before)
        check(s2.info.state == "running" and s2.info.from_seq == before, "attach_session from another connection at a seq")
        s2.write("echo second\n")
        check(b"second" in until(s2, "second"), "...which writes and reads the same session")
    sess = [x.id for x in sb.inspect().sessions]
    is_(sess, [s.id], "inspect lists the session after its clients went")
    ex = s.close()
    is_((ex.reason, ex.signal), ("closed", "HUP"), "Session.close: reason closed, signal HUP")
e = raises(lambda: c.pty_write(s.id, "x"), NotFound)
check(e is not None, "after close the session is gone (pty.write: NotFound)")
with sb.session(argv=["sh", "-c", "cat; exit 5"], pty=False) as p:
    p.write("abc")
    p.write("def", eof=True)
    data = b"".join(ev.data for ev in p if isinstance(ev, Output))
    is_((data, p.exit.exit_code if p.exit else None), (b"abcdef", 5), "a pipe session: write(eof=True), iteration to the exit event")
e = raises(lambda: p.resize(10, 10), (Conflict, NotFound))
check(e is not None, "resize of a pipe session that exited: refused")
e = raises(lambda: sb.session(argv=["/nonexistent"]), SpawnFailed)
check(e is not None and e.step == "exec", "a session whose program does not exist: SpawnFailed (exec)", repr(e))

# ---- disconnect mid-stream ---------------------------------------------------------------
a = Client()
st = a.stream("echo started; sleep 100", sandbox=sb.id)
first = [ev for ev in (st.next_event(20), st.next_event(20))]
a.close()
e = raises(lambda: st.next_event(10), ConnectionLost)
check(e is not None, "the client closes mid-stream: the stream raises ConnectionLost", first)
def _idle():
    return c.inspect(sb.id).runs_in_flight == 0
deadline = time.monotonic() + 10
while not _idle() and time.monotonic() < deadline:
    time.sleep(0.1)
check(_idle(), "...and the daemon killed the run of the closed connection")
e = raises(lambda: a.health(), ConnectionLost)
check(e is not None, "a call on a closed Client: ConnectionLost")

# The daemon's side going away mid-stream: a socket that answers a stream's started event and
# one line of output, then closes.
fake_path = os.path.join(os.environ["T"], "fake.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(fake_path)
srv.listen(1)


def fake():
    conn, _ = srv.accept()
    buf = b""
    while buf.count(b"\n") < 2:
        buf += conn.recv(4096)
    ids = [json.loads(line)["id"] for line in buf.splitlines()]
    conn.sendall(json.dumps({"id": ids[0], "event": "started", "run_id": "run-1", "sandbox": "sbx-1"}).encode() + b"\n")
    conn.sendall(json.dumps({"id": ids[0], "event": "stdout", "seq": 0, "data": "part", "data_encoding": "utf-8"}).encode() + b"\n{\"id\":")
    time.sleep(0.2)
    conn.close()


ft = threading.Thread(target=fake)
ft.start()
fc = Client(fake_path)
st = fc.stream("x", sandbox="sbx-1")
other_result = []
ot = threading.Thread(target=lambda: other_result.append(raises(lambda: fc.call("health"), ConnectionLost)))
ot.start()
got = []
e = raises(lambda: [got.append(ev) for ev in st], ConnectionLost)
ot.join(10)
ft.join(10)
check(e is not None and [type(x).__name__ for x in got] == ["Started", "Output"],
      "the daemon's side closes mid-stream: the events that came, then ConnectionLost", got)
check(other_result and other_result[0] is not None, "...and another thread's request in flight gets ConnectionLost too")
fc.close()
srv.close()

# ---- files (sb.files) ----------------------------------------------------------------------
F = sb.files


def sha_in(sbx, path):
    """sha256 of a sandbox's file as a run computes it (not through the file operations)."""
    r = sbx.run(["sha256sum", path])
    return r.stdout.split()[0] if r.exit_code == 0 else f"exit {r.exit_code}: {r.stderr}"


TEXT = "héllo, wörld\nline 2\n"
w1 = F.write("ft/a/hello.txt", TEXT, parents=True)
is_((w1.path, w1.bytes, w1.created), ("/work/ft/a/hello.txt", len(TEXT.encode()), True),
    "files.write of text with parents: FileWritten with the path, UTF-8 byte count, created")
is_(sb.run("cat /work/ft/a/hello.txt").stdout, TEXT, "...a run reads the text written")
is_(F.read("ft/a/hello.txt"), TEXT.encode(), "files.read: the text's bytes back")
is_(F.read_text("/work/ft/a/hello.txt"), TEXT, "files.read_text, by absolute path")
ALL = bytes(range(256)) * 17
w2 = F.write("ft/all.bin", ALL)
is_((w2.bytes, sha_in(sb, "/work/ft/all.bin")), (len(ALL), hashlib.sha256(ALL).hexdigest()),
    "files.write of every byte value: a run's sha256sum agrees")
is_(F.read("ft/all.bin"), ALL, "files.read: every byte value back")
is_(F.read("ft/all.bin", 300, 10), ALL[300:310], "files.read with offset and length")
is_(F.read("ft/all.bin", len(ALL) - 3), ALL[-3:], "files.read from an offset to the end")
w3 = F.write("ft/empty", b"")
is_((w3.bytes, F.read("ft/empty"), F.stat("ft/empty").size), (0, b"", 0), "an empty file: written, read back empty, size 0")
BIG = os.urandom(3 << 20) + b"tail"
CHUNK_LINES = []
_lines = _ops.Upload.lines
_ops.Upload.lines = lambda self: CHUNK_LINES.extend(ls := _lines(self)) or ls  # type: ignore[method-assign]
w4 = F.write("ft/big.bin", BIG)
is_((w4.bytes, sha_in(sb, "/work/ft/big.bin")), (len(BIG), hashlib.sha256(BIG).hexdigest()),
    "files.write of 3 MiB (by file.chunk lines): a run's sha256sum agrees")
is_([(l.startswith(b'{"id":'), b'"op":"file.chunk"' in l) for l in CHUNK_LINES], [(True, True)] * 4,
    "...sent as 4 file.chunk lines of at most 1 MiB (the daemon's chunk_bytes)")
HUGE = os.urandom(9 << 20)
w4h = F.write("ft/huge.bin", HUGE)
is_((w4h.bytes, sha_in(sb, "/work/ft/huge.bin")), (len(HUGE), hashlib.sha256(HUGE).hexdigest()),
    "files.write of 9 MiB, more than a request line may hold: the same bytes")
del HUGE
got = F.read("ft/big.bin")
is_((len(got), got == BIG), (len(BIG), True), "files.read of 3 MiB (several data events): the same bytes")
w5 = F.write("ft/all.bin", b"new", mode=0o600)
st = F.stat("ft/all.bin")
is_((w5.created, st.type, st.size, st.mode, st.uid, st.name, st.path), (False, "file", 3, 0o600, 1000, "all.bin", "/work/ft/all.bin"),
    "files.write over a file: created false; stat: FileStat with type, size, mode, uid, name, path")
check(st.mtime_ns > 0 and st.mtime.endswith("Z") and st.nlink == 1 and st.target is None, "stat: mtime, mtime_ns, nlink, no target", st)

# by fd: a temporary file passed both ways, a pipe, and objects without a descriptor
with tempfile.TemporaryFile() as src:
    src.write(BIG)
    src.seek(0)
    w6 = F.write_from("ft/fd.bin", src)
is_((w6.bytes, sha_in(sb, "/work/ft/fd.bin")), (len(BIG), hashlib.sha256(BIG).hexdigest()),
    "files.write_from a file object (its fd passed): a run's sha256sum agrees")
with tempfile.TemporaryFile() as src:
    src.write(b"skip" + ALL)
    src.seek(4)
    w7 = F.write_from("ft/fd2.bin", src.fileno())
is_((w7.bytes, F.read("ft/fd2.bin")), (len(ALL), ALL), "files.write_from a raw fd: read from its offset to its end")
with tempfile.TemporaryFile() as dst:
    n = F.read_into("ft/big.bin", dst)
    dst.seek(0)
    back = dst.read()
is_((n, back == BIG), (len(BIG), True), "files.read_into a file object (its fd passed, the helper writes): the 3 MiB back")
with tempfile.TemporaryFile() as dst:
    n = F.read_into("ft/all.bin", dst.fileno())
    is_((n, os.pread(dst.fileno(), 100, 0)), (3, b"new"), "files.read_into a raw fd")
rfd, wfd = os.pipe()
try:
    n = F.read_into("ft/fd2.bin", wfd, 0, 1000)
    os.close(wfd)
    wfd = -1
    piped = b""
    while chunk := os.read(rfd, 65536):
        piped += chunk
finally:
    os.close(rfd)
    if wfd >= 0:
        os.close(wfd)
is_((n, piped), (1000, ALL[:1000]), "files.read_into a pipe with a length: the bytes there")
bio = io.BytesIO()
n = F.read_into("ft/big.bin", bio)
is_((n, bio.getvalue() == BIG), (len(BIG), True), "files.read_into an io.BytesIO: streamed from the data events")
w8 = F.write_from("ft/bio.bin", io.BytesIO(ALL))
is_((w8.bytes, F.read("ft/bio.bin")), (len(ALL), ALL), "files.write_from an io.BytesIO (no fd: read here, sent by chunks)")
with tempfile.TemporaryFile() as src:
    src.write(b"short")
    src.seek(0)
    e = raises(lambda: F.write_from("ft/short", src, size=100), InvalidRequest)
check(e is not None and e.field == "size", "files.write_from with a size the fd falls short of: InvalidRequest, field size", repr(e))
check(not F.exists("ft/short"), "...and no file was left")

# trees: put_tree / get_tree (file.put / file.get, tar by stdlib tarfile, fds passed)
with tempfile.TemporaryDirectory() as tdir:
    src = os.path.join(tdir, "src")
    os.makedirs(os.path.join(src, "sub", "empty"))
    with open(os.path.join(src, "sub", "data.bin"), "wb") as f:
        f.write(ALL)
    with open(os.path.join(src, "ünï"), "w") as f:
        f.write("u\n")
    os.chmod(os.path.join(src, "ünï"), 0o600)
    os.symlink("/etc/passwd", os.path.join(src, "abs"))
    os.link(os.path.join(src, "sub", "data.bin"), os.path.join(src, "hard"))
    pt = F.put_tree(src, "ft/tree")
    check(isinstance(pt, sandboxd.TreeCopied) and pt.entries == 7 and pt.bytes > len(ALL),
          "files.put_tree of a host directory: TreeCopied with entries and bytes", pt)
    is_((F.read("ft/tree/sub/data.bin") == ALL, F.stat("ft/tree/abs").target, F.stat("ft/tree/ünï").mode,
         F.stat("ft/tree/hard").nlink),
        (True, "/etc/passwd", 0o600, 2), "...the tree inside: data, a symlink as a link, modes, a hard link")
    out = os.path.join(tdir, "out")
    gt = F.get_tree("ft/tree", out)
    check(gt.entries == 7 and gt.skipped == 0, "files.get_tree back to a new host directory: TreeCopied", gt)
    same = (open(os.path.join(out, "sub", "data.bin"), "rb").read() == ALL and os.readlink(os.path.join(out, "abs")) == "/etc/passwd"
            and os.stat(os.path.join(out, "ünï")).st_mode & 0o777 == 0o600 and os.path.isdir(os.path.join(out, "sub", "empty"))
            and os.stat(os.path.join(out, "hard")).st_ino == os.stat(os.path.join(out, "sub", "data.bin")).st_ino)
    check(same, "...the same tree on the host: data, link, mode, empty directory, hard link")
    e = raises(lambda: F.get_tree("ft/no-such-tree", out), NotFound)
    check(e is not None, "files.get_tree of a missing path: NotFound", repr(e))
    F.write("ft/evil/x", "x", parents=True)
    sb.run(["sh", "-c", "ln -s /tmp /work/ft/evil/l"])
    evil = os.path.join(tdir, "evil")
    gt = F.get_tree("ft/evil", evil)
    check(os.path.islink(os.path.join(evil, "l")) and os.readlink(os.path.join(evil, "l")) == "/tmp",
          "files.get_tree: a symlink stays a link on the host (never followed there)")

# mkdir, list, remove
is_(F.mkdir("ft/m/x/y", parents=True), 3, "files.mkdir(parents=True): 3 directories made")
is_(F.mkdir("ft/m/z", mode=0o700), 1, "files.mkdir with a mode")
is_(F.stat("ft/m/z").mode, 0o700, "...whose mode is as given")
e = raises(lambda: F.mkdir("ft/m/z"), Conflict)
check(e is not None and e.field == "path", "files.mkdir of an existing directory: Conflict, field path", repr(e))
sb.run("ln -s /etc /work/ft/m/link")
lst = F.list("ft/m")
is_([(x.name, x.type) for x in lst], [("link", "symlink"), ("x", "dir"), ("z", "dir")],
    "files.list: the entries, sorted, with their types")
is_((lst.truncated, [x.target for x in lst][:1]), (False, ["/etc"]), "files.list: not truncated, a symlink's target")
st = F.stat("ft/m/link")
is_((st.type, st.target), ("symlink", "/etc"), "files.stat of a symlink: the link itself")
is_(F.stat("ft/m/link", follow=True).type, "dir", "files.stat(follow=True): its target")
rec = F.list("ft/m", recursive=True)
is_(sorted(x.path for x in rec), ["/work/ft/m/link", "/work/ft/m/x", "/work/ft/m/x/y", "/work/ft/m/z"],
    "files.list(recursive=True): every level, the symlink not entered")
is_(len(F.list("ft/m", recursive=True, max_entries=2)), 2, "files.list with max_entries: that many")
check(F.list("ft/m", recursive=True, max_entries=2).truncated, "...and truncated")
e = raises(lambda: F.remove("ft/m"), Conflict)
check(e is not None and e.field == "path", "files.remove of a directory that is not empty: Conflict", repr(e))
is_(F.remove("ft/m/link"), 1, "files.remove of a symlink: 1")
check(sb.run("test -d /etc").exit_code == 0, "...its target is still there")
is_(F.remove("ft/m", recursive=True), 4, "files.remove(recursive=True): the 4 entries of the tree")
e = raises(lambda: F.stat("ft/m"), NotFound)
check(e is not None and e.field == "path", "...gone: stat is NotFound, field path", repr(e))
is_(F.remove("ft/m", missing_ok=True), 0, "files.remove(missing_ok=True) of a missing path: 0")

# errors
e = raises(lambda: F.read("ft/nope"), NotFound)
check(e is not None and e.field == "path" and e.op == "file.read", "files.read of a missing file: NotFound, field path", repr(e))
e = raises(lambda: F.read("ft/a\0b"), InvalidRequest)
check(e is not None and e.field == "path", "a path with a NUL: InvalidRequest, field path (sent as base64)", repr(e))
e = raises(lambda: F.write("ft/a\0b", b"x"), InvalidRequest)
check(e is not None and e.field == "path", "files.write to a path with a NUL: InvalidRequest, field path", repr(e))
e = raises(lambda: F.read("ft/a"), InvalidRequest)
check(e is not None and e.field == "path", "files.read of a directory: InvalidRequest", repr(e))
e = raises(lambda: F.write("ft/a/hello.txt", b"x", exclusive=True), Conflict)
check(e is not None and F.read("ft/a/hello.txt") == TEXT.encode(), "files.write(exclusive=True) over a file: Conflict, the old content kept", repr(e))
other = sandboxd.Files(c, "sbx-000000000000")
e = raises(lambda: other.read("ft/a/hello.txt"), NotFound)
check(e is not None and e.field == "sandbox", "files of another sandbox id: NotFound, field sandbox", repr(e))
e = raises(lambda: other.write("x", ALL), NotFound)
check(e is not None and e.field == "sandbox", "files.write to another sandbox id: NotFound, field sandbox", repr(e))
with tempfile.TemporaryFile() as src:
    src.write(b"some")
    src.seek(0)
    e = raises(lambda: F.write_from("ft/a/hello.txt", src, size="100T"), NoSpace)
check(e is not None and e.code == "no_space" and e.field == "size" and F.read("ft/a/hello.txt") == TEXT.encode(),
      "files.write_from with a size over the free space: NoSpace, field size, the old file kept", repr(e))
is_(c.health().status, "ok", "the connection goes on after the file errors")

# the request lines: an fd goes as "fds":1 / "fd":0 with the descriptor in the Call, never in the line
cr = _ops.file_read("sbx-x", "p", fd=7)
cw = _ops.file_write("sbx-x", "p", fd=9, size=3)
cd = _ops.file_write("sbx-x", b"\xff", b"\x00\x01")
is_([(k.fields.get("fds"), k.fields.get("fd"), k.fds) for k in (cr, cw)], [(1, 0, (7,)), (1, 0, (9,))],
    "_ops: file.read/file.write with an fd: \"fds\":1, \"fd\":0, the fd in Call.fds")
is_((cd.fields["path"], cd.fields["path_encoding"], cd.fields["data"], cd.fields["encoding"], cd.fds),
    ("/w==", "base64", "AAE=", "base64", ()), "_ops: bytes path and data as base64, no fds")

# threads sharing one Client: lines with fds and lines without, interleaved, each with its own
def fworker(i, out):
    try:
        if i % 2:
            with tempfile.TemporaryFile() as src:
                src.write(bytes([i]) * (70000 + i))
                src.seek(0)
                F.write_from(f"ft/t{i}", src)
        else:
            F.write(f"ft/t{i}", bytes([i]) * (70000 + i))
        out[i] = F.read(f"ft/t{i}") == bytes([i]) * (70000 + i)
    except Exception as ex:  # noqa: BLE001 - reported
        out[i] = repr(ex)
res = {}
ths = [threading.Thread(target=fworker, args=(i, res)) for i in range(8)]
[t.start() for t in ths]
[t.join(60) for t in ths]
is_(res, {i: True for i in range(8)}, "8 threads on one Client, by fd and by data: each file has its own bytes")
nb = os.fsdecode(b"ft/n\xffx")
wn = F.write(nb, b"raw name")
names = [x.name for x in F.list("ft")]
check(wn.path == os.fsdecode(b"/work/ft/n\xffx") and os.fsdecode(b"n\xffx") in names and F.read(b"ft/n\xffx") == b"raw name",
      "a name that is not UTF-8: written, listed and read back (base64 on the wire), as os.fsdecode names it", (wn.path, names))
F.remove("ft", recursive=True)

# ---- published ports (sb.ports) --------------------------------------------------------------
r = sb.run("cd /work && echo from-python > port.html && setsid python3 -m http.server 8000 --bind 127.0.0.1 "
           "</dev/null >/dev/null 2>&1 & for i in $(seq 100); do python3 -c 'import socket; "
           "socket.create_connection((\"127.0.0.1\", 8000))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1")
is_(r.exit_code, 0, "ports: an HTTP server listens on the sandbox's 127.0.0.1:8000")
path = sb.ports.open(8000)
check(isinstance(path, str) and path.endswith("/ports/%s-8000.sock" % sb.id) and os.path.exists(path),
      "sb.ports.open(8000): the socket's path", path)
us = socket.socket(socket.AF_UNIX)
us.settimeout(30)
us.connect(path)
us.sendall(b"GET /port.html HTTP/1.0\r\n\r\n")
got = b""
while True:
    b = us.recv(65536)
    if not b:
        break
    got += b
us.close()
check(got.endswith(b"\r\n\r\nfrom-python\n"), "... reaches the sandbox's server", got[:200])
addr = sb.ports.open(8001, tcp=True)
check(re.fullmatch(r"127\.0\.0\.1:[0-9]+", addr) is not None, "sb.ports.open(8001, tcp=True): an address on the host's loopback", addr)
is_([(p.port, p.listen, p.target) for p in sb.ports.list()], [(8000, "unix", path), (8001, "tcp", addr)],
    "sb.ports.list(): both, oldest first (PublishedPort)")
e = raises(lambda: sb.ports.open(8000), Conflict)
check(e is not None and e.field == "port", "the same port again: Conflict, field port", repr(e))
sb.ports.close(8000)
sb.ports.close(8001)
check(not os.path.exists(path) and sb.ports.list() == [], "sb.ports.close: the socket gone, none listed")
e = raises(lambda: sb.ports.close(8000), NotFound)
check(e is not None, "closing it again: NotFound", repr(e))

# ---- asyncio -----------------------------------------------------------------------------


async def async_checks():
    async with AsyncSandbox.create(memory="256M", best_effort=BE, name="py-async") as asb:
        r = await asb.run("echo async", timeout=60)
        is_(r.stdout, "async\n", "async with AsyncSandbox.create(...) as sb: await sb.run(...)")
        aid = asb.id
        cl = asb.client

        async def one(i):
            return await asb.run(f"touch /work/a{i}; while [ $(ls /work | grep -c '^a[0-9]') -lt {N} ]; do sleep 0.05; done; echo {i}",
                                 timeout=30)
        rs = await asyncio.gather(*(one(i) for i in range(N)))
        is_([x.stdout for x in rs], [f"{i}\n" for i in range(N)], f"{N} asyncio tasks, one AsyncClient: {N} runs in flight at once")
        evs = [ev async for ev in asb.stream("echo a; echo b >&2")]
        is_([(type(e).__name__, getattr(e, "data", None)) for e in evs],
            [("Started", None), ("Output", b"a\n"), ("Output", b"b\n")], "async for ev in sb.stream(...): started, then the output")
        snap = await asb.snapshot("s")
        await asb.run("rm -f /work/a*; echo changed > /work/g")
        await asb.restore(snap)
        is_((await asb.run("ls /work | wc -l")).stdout.strip(), str(N), "await sb.snapshot(), sb.restore(snap)")
        rr = await asb.client.snapshot_restore(asb.id, f"{asb.id}/{snap.id}")
        is_(rr.snapshot, snap.id, "await AsyncClient.snapshot_restore(sandbox, 'SANDBOX/ID')")
        snap2 = await asb.snapshot("second")
        is_(await asb.delete_snapshot(f"py-async/{snap2.id}"), snap2.id, "await AsyncSandbox.delete_snapshot('NAME/ID')")
        fork = await AsyncSandbox.fork(snap, client=cl, best_effort=BE)
        is_((await fork.run("ls /work | wc -l")).stdout.strip(), str(N), "await AsyncSandbox.fork(snapshot)")
        is_((await fork.destroy()).destroyed, True, "await sb.destroy()")
        s = await asb.session(argv=["cat"], pty=False)
        await s.write("ping", eof=True)
        out = b"".join([ev.data async for ev in s if isinstance(ev, Output)])
        is_((out, s.exit.reason if s.exit else None), (b"ping", "exited"), "AsyncSession: write, async iteration to its exit")
        await s.close()
        try:
            await cl.inspect("sbx-000000000000")
            check(False, "async: NotFound for an unknown id")
        except NotFound as ex:
            check(ex.field == "sandbox", "async: NotFound for an unknown id, field sandbox")
        # files, asyncio
        AF = asb.files
        BIN = bytes(range(256)) * 9
        wa = await AF.write("af/b.bin", BIN, parents=True)
        is_((wa.bytes, wa.created, await AF.read("af/b.bin")), (len(BIN), True, BIN), "async files.write, read: every byte value")
        BIGA = os.urandom(2 << 20)
        await AF.write("af/big", BIGA)
        is_((await AF.read("af/big")) == BIGA, True, "async files: 2 MiB by file.chunk lines and back by data events")
        wio = await AF.write_from("af/bio", io.BytesIO(BIGA))
        is_((wio.bytes, (await AF.read("af/bio")) == BIGA), (len(BIGA), True),
            "async files.write_from an io.BytesIO: by chunks")
        with tempfile.TemporaryFile() as src:
            src.write(BIGA[::-1])
            src.seek(0)
            wb = await AF.write_from("af/fd", src)
        with tempfile.TemporaryFile() as dst:
            n = await AF.read_into("af/fd", dst)
            dst.seek(0)
            back = dst.read()
        is_((wb.bytes, n, back == BIGA[::-1]), (len(BIGA), len(BIGA), True), "async files.write_from, read_into: 2 MiB by fd")
        await AF.write("af/e", b"")
        is_(await AF.read("af/e"), b"", "async files: an empty file")
        is_(await AF.mkdir("af/d/e", parents=True), 2, "async files.mkdir")
        is_([x.name for x in await AF.list("af")], ["b.bin", "big", "bio", "d", "e", "fd"], "async files.list")
        is_((await AF.stat("af/d")).type, "dir", "async files.stat")
        with tempfile.TemporaryDirectory() as tdir:
            with open(os.path.join(tdir, "f"), "w") as f:
                f.write("async tree\n")
            pt = await AF.put_tree(tdir, "atree")
            gt = await AF.get_tree("atree", os.path.join(tdir, "back"))
            is_((pt.entries, gt.entries, open(os.path.join(tdir, "back", "f")).read()), (2, 2, "async tree\n"),
                "async files.put_tree, get_tree: the tree there and back")
        is_(await AF.remove("af", recursive=True), 8, "async files.remove(recursive=True)")
        try:
            await AF.stat("af")
            check(False, "async files: NotFound after the removal")
        except NotFound as ex:
            check(ex.field == "path", "async files: NotFound after the removal, field path")
        try:
            await AF.read("x\0y")
            check(False, "async files: a NUL in a path is InvalidRequest")
        except InvalidRequest as ex:
            check(ex.field == "path", "async files: a NUL in a path is InvalidRequest")
        writes = await asyncio.gather(*(AF.write_from(f"p{i}", io.BytesIO(bytes([i]) * 1000)) for i in range(4)),
                                      *(AF.write(f"q{i}", bytes([i]) * 100) for i in range(4)))
        reads = await asyncio.gather(*(AF.read(f"p{i}") for i in range(4)), *(AF.read(f"q{i}") for i in range(4)))
        is_(([w.bytes for w in writes], reads), ([1000] * 4 + [100] * 4, [bytes([i]) * 1000 for i in range(4)] + [bytes([i]) * 100 for i in range(4)]),
            "async files: writes by fd and by data from concurrent tasks, each to its file")
        # published ports, asyncio
        pp = await asb.ports.publish(7999)
        is_((pp.port, pp.listen, os.path.exists(pp.target)), (7999, "unix", True),
            "async sb.ports.publish: a PublishedPort, its socket there")
        rd, wr = await asyncio.open_unix_connection(pp.target)
        is_(await asyncio.wait_for(rd.read(), 10), b"", "async: a connection to a port nobody listens on ends at once")
        wr.close()
        is_([x.port for x in await asb.ports.list()], [7999], "async sb.ports.list")
        await asb.ports.close(7999)
        check(not os.path.exists(pp.target), "async sb.ports.close removes the socket")
        h = await cl.health()
        is_(h.status, "ok", "AsyncClient.health")
    try:
        await c2.inspect(aid)
        check(False, "async with destroyed the sandbox")
    except NotFound:
        check(True, "async with destroyed the sandbox")
    check(cl.closed, "...and closed the connection it opened")
    # the daemon's side gone mid-stream, asyncio: a client whose connection is closed
    ac = await AsyncClient.connect()
    st = ac.stream("echo x; sleep 100", sandbox=sb.id)
    ev = await st.next_event(20)
    await st.next_event(20)  # x: the run goes on
    await ac.close()
    try:
        got = await st.next_event(10)
        check(False, "async: the client closes mid-stream: ConnectionLost", f"got {got!r}")
    except ConnectionLost:
        check(isinstance(ev, Started), "async: the client closes mid-stream: ConnectionLost", f"first event {ev!r}")


async def async_empty_and_connect():
    out = []
    for fn in (lambda: c2.sandbox(""), lambda: c2.destroy(""), lambda: c2.run("true", sandbox="")):
        try:
            await fn()
            out.append("nothing raised")
        except InvalidRequest as ex:
            out.append(ex.field == "sandbox" and str(ex).endswith(EMPTY + " (field sandbox)"))
    is_(out, [True] * 3, "async: await c.sandbox(''), c.destroy(''), c.run(..., sandbox=''): the sandbox argument is empty")
    async with AsyncClient.connect() as ac:
        h = await ac.hello()
    check(h.protocol >= 1 and ac.closed, "async with AsyncClient.connect() as c: (no await) connects, and closes at the end", ac.closed)
    async with await AsyncClient.connect() as ac:
        await ac.hello()
    check(ac.closed, "async with await AsyncClient.connect() as c: still works")


async def async_main():
    global c2
    c2 = await AsyncClient.connect()
    await async_empty_and_connect()
    await async_checks()
    await c2.close()

c2 = None
asyncio.run(asyncio.wait_for(async_main(), 120))

# ---- the other designs' faces: the backend object and the terminal -----------------------
from sandboxd.backend import AsyncSandboxBackend, ExecResult, SandboxBackend
from sandboxd.terminal import AsyncTerminal, Terminal

with SandboxBackend(best_effort=BE) as bk:
    sid = bk.spawn(memory_bytes=256 << 20, cpu_seconds=1, file_size_bytes=4096)
    r = bk.exec(sid, "echo hi; echo err >&2; exit 2")
    is_((r.returncode, r.stdout, r.stderr, isinstance(r, ExecResult), r.duration_s >= 0),
        (2, "hi\n", "err\n", True, True), "SandboxBackend.exec: an ExecResult of returncode, stdout, stderr, duration_s")
    r = bk.exec(sid, "head -c 10000 /dev/zero > big; echo $? $(stat -c %s big)")
    check(r.stdout.split()[1:] == ["4096"] and r.stdout.split()[0] != "0",
          "SandboxBackend.spawn(file_size_bytes=4096): a write past it fails, the file stops at 4096", r)
    r = bk.exec(sid, ["sh", "-c", "while :; do :; done"], timeout_s=30)
    check(r.returncode not in (0, 124) and r.duration_s < 30,
          "SandboxBackend.spawn(cpu_seconds=1): a busy loop is ended by its CPU time, not the timeout", r)
    bk.exec(sid, "echo v1 > f")
    snap = bk.snapshot(sid, "one")
    check(snap in [x.id for x in c.snapshot_list(sid)], "SandboxBackend.snapshot: the snapshot's id", snap)
    bk.destroy(sid)
    check(sid not in [x.id for x in c.list()], "SandboxBackend.destroy: the sandbox is gone")


async def backend_async():
    async with await AsyncSandboxBackend.connect(best_effort=BE) as ab:
        sid = await ab.spawn(memory_bytes=128 << 20)
        r = await ab.exec(sid, ["sh", "-c", "echo async; exit 5"])
        is_((r.returncode, r.stdout), (5, "async\n"), "AsyncSandboxBackend.exec")
        snap = await ab.snapshot(sid)
        await ab.destroy(sid)
        return sid, snap
sid, snap = asyncio.run(asyncio.wait_for(backend_async(), 60))
check(snap and sid not in [x.id for x in c.list()], "AsyncSandboxBackend: snapshot, then destroy leaves no sandbox", snap)
# Made like SandboxBackend, without a client: a TypeError that says how to make one.
for args, kw in (((), {"best_effort": True}), ((SOCK,), {})):
    try:
        AsyncSandboxBackend(*args, **kw)
        e = None
    except TypeError as err:
        e = err
    check(e is not None and "await AsyncSandboxBackend.connect(" in str(e),
          f"AsyncSandboxBackend({', '.join([repr(a) for a in args] + [f'{k}={v!r}' for k, v in kw.items()])}): "
          "a TypeError naming await AsyncSandboxBackend.connect(...)", repr(e))


async def backend_async_client():
    async with await AsyncClient.connect() as ac:
        ab = AsyncSandboxBackend(ac, best_effort=BE)
        sid = await ab.spawn()
        r = await ab.exec(sid, "echo own")
        await ab.destroy(sid)
        await ab.close()
        return r.stdout, ac.closed
is_(asyncio.run(asyncio.wait_for(backend_async_client(), 60)), ("own\n", False),
    "AsyncSandboxBackend(client) over the caller's AsyncClient: works, and close() leaves the client open")

t = Terminal.open("sh", rows=30, cols=100, best_effort=BE)
t.write("stty size\n")
check(b"30 100" in t.read_until("30 100", 20), "Terminal.open(rows=30, cols=100): the terminal's size")
t.resize(40, 120)
t.write("stty size\n")
check(b"40 120" in t.read_until("40 120", 20), "Terminal.resize(40, 120)")
t.write("sleep 100; echo slept\n")
time.sleep(0.5)
n = t.signal("INT")
t.write("echo back$((1+1))\n")
got = t.read_until("back2", 20)
check(n >= 1 and b"\nslept" not in got, "Terminal.signal(INT): the foreground command is interrupted, the shell goes on", n, got)
t.write("exit 7\n")
is_(t.wait(20), 7, "Terminal.wait: the exit code")
tsb = t.sandbox
t.close()
check(tsb not in [x.id for x in c.list()], "Terminal.close: the sandbox it made is gone")
with Terminal.open(["cat"], pty=False, best_effort=BE) as t:
    t.write("abc", eof=True)
    is_((t.read_until("abc", 20), t.wait(20)), (b"abc", 0), "Terminal.open(pty=False): on pipes, write with eof, read, wait")
is_(Terminal.run("echo one; exit 3", best_effort=BE, timeout=30), (3, b"one\n"), "Terminal.run: one command to its end")
n_before = len(c.list())


async def terminal_async():
    t = await AsyncTerminal.open(["sh"], best_effort=BE)
    await t.write("echo hello-$((6*7))\n")
    got = await t.read_until("hello-42", 20)
    await t.write("exit 4\n")
    code = await t.wait(20)
    await t.close()
    return got, code, await AsyncTerminal.run(["sh", "-c", "echo two; exit 1"], best_effort=BE, timeout=30)
got, code, ran = asyncio.run(asyncio.wait_for(terminal_async(), 90))
is_((got.endswith(b"hello-42"), code, ran, len(c.list())), (True, 4, (1, b"two\n"), n_before),
    "AsyncTerminal: open, write, read_until, wait, close, run; no sandbox left")

# The runner-sidecar adapter (sandboxd.sidecar) has its own test: t-sidecar.sh.

# ---- a sandbox's processes as a whole: freeze, thaw, signal, update ---------------------
is_(c.freeze(sb.id), True, "Client.freeze: sandbox.freeze answers frozen")
is_(c.thaw(sb.id), False, "Client.thaw: sandbox.thaw answers not frozen")
check(c.signal_all(sb.id, "CONT") >= 0, "Client.signal_all: sandbox.signal answers how many it signalled")
is_(c.update_limits(sb.id, pids=50, best_effort=True).limits.get("pids"), 50, "Client.update_limits: the SANDBOX with pids 50")

# ---- the protocol's create and run fields as keywords (t-python-fields.sh: all of them) ---
with tempfile.TemporaryDirectory() as ws:
    with open(os.path.join(ws, "marker"), "w") as f:
        f.write("from-the-host")
    os.chmod(ws, 0o755)
    try:
        with Sandbox.create(client=c, best_effort=BE, hostname="pyhost", workspace=ws, open_files=100) as kw:
            r = kw.run("hostname; cat /work/marker; echo; ulimit -n")
            is_(r.stdout.split(), ["pyhost", "from-the-host", "100"],
                "create(hostname=, workspace=, open_files=): the sandbox's hostname, the caller's directory as /work, its limit")
    except sandboxd.Error as e:
        check(False, "create(hostname=, workspace=, open_files=)", repr(e))
r = c.run("umask; id -u", sandbox=sb.id, umask=0o027, user={"uid": 0, "gid": 0})
is_(r.stdout.split(), ["0027", "0"], "run(umask=, user={uid, gid}): as asked")
rfd, wfd = os.pipe()
try:
    r = c.run(["echo", "through-my-fd"], sandbox=sb.id, stdio=[None, wfd, None])
    os.close(wfd)
    wfd = -1
    with os.fdopen(rfd, "rb") as f:
        rfd = -1
        got = f.read()
    is_((r.exit_code, got), (0, b"through-my-fd\n"), "run(stdio=[None, fd, None]): the command wrote to the caller's own fd")
finally:
    for fd in (rfd, wfd):
        if fd >= 0:
            os.close(fd)
sw = c.sweep(sandbox=sb.id)
is_([s.get("id") for s in sw.sandboxes], [sb.id], "sweep(sandbox=): that sandbox only")

# ---- the end: the sandbox and the connection ---------------------------------------------
d = sb.destroy()
is_((d.destroyed, d.already_gone), (True, False), "destroy: destroyed")
d = c.destroy(sb.id)
is_((d.destroyed, d.already_gone), (False, True), "destroy again: already_gone")
is_(c.list(), [], "no sandbox left")
c.close()
