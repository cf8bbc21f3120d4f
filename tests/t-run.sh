#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Sandboxes and runs against a real daemon (docs/protocol.md: create, run, kill, list, inspect,
# destroy): limits on a host that cannot enforce them, exit statuses, signals, timeouts that kill
# everything, output caps, environment, cwd confinement, stdin/stdout encodings, persistence,
# spawn failures, throwaway cleanup, destroy (idempotence, background processes, symlinks).
# Everything runs with best_effort: true, as this kind of host offers no cgroup v2 controller.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

# ---- create -----------------------------------------------------------------------------
run_py "create" 60 <<'EOF'
import os, re
from client import Conn, check, is_
sock, cg = os.environ["SOCK"], os.environ["CG"]
c = Conn(sock)
caps = c.call({"op": "hello"})["capabilities"]["cgroup"]
missing = [f for f, k in (("limits.memory", "memory"), ("limits.pids", "pids"), ("limits.cpus", "cpu")) if not caps[k]]
r = c.call({"op": "create"})
if missing:
    # No limit was given: the refusal names best_effort, and the default, not limits.X.
    check(r.get("ok") is False and r["error"].get("code") == "limit_unenforceable" and r["error"].get("field") == "best_effort"
          and ("the default %s limit (default_%s)" % (missing[0][7:], missing[0][7:])) in r["error"].get("message", ""),
          "create without limits nor best_effort: limit_unenforceable, field best_effort, naming the default %s" % missing[0], r)
    r = c.call({"op": "create", "limits": {"memory": "64M", "pids": 10, "cpus": 1}})
    check(r.get("ok") is False and r["error"].get("field") == missing[0],
          "create with limits it cannot enforce: limit_unenforceable naming %s" % missing[0], r)
    r2 = c.call({"op": "run", "argv": ["true"]})
    check(r2.get("ok") is False and r2["error"].get("code") == "limit_unenforceable",
          "a throwaway run without best_effort: limit_unenforceable", r2)
else:
    check(r.get("ok") is True, "create without best_effort: ok on a host that enforces every limit", r)
    c.call({"op": "destroy", "sandbox": r["sandbox"]["id"]})
is_(c.call({"op": "health"}).get("sandboxes"), 0, "a refused create leaves no sandbox")

r = c.call({"op": "create", "best_effort": True})
is_(r.get("ok"), True, "create with best_effort: ok")
sb = r.get("sandbox") or {}
check(re.fullmatch(r"sbx-[0-9a-f]{12}", sb.get("id", "")), "the id looks like sbx-<12 hex>", sb.get("id"))
is_(sb.get("state"), "ready", "the new sandbox is ready")
is_(sb.get("owner_uid"), 0, "owner_uid is the caller's uid")
is_(sb.get("enforced"), {"memory": caps["memory"], "pids": caps["pids"], "cpu": caps["cpu"], "disk": False},
    "enforced says what the host can enforce (all false here; disk: no disk limit asked)")
is_(sb.get("network"), "none", "network none")
is_(sb.get("limits"), {"memory": 536870912, "pids": 512, "cpus": 1.0, "timeout_s": 60, "output_bytes": 1048576,
                         "file_size": None, "open_files": 4096, "disk": None, "files": None},
    "the default limits")
check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", sb.get("created", "")), "created is an RFC 3339 UTC time", sb.get("created"))
wd = sb.get("workdir", "")
check(os.path.isdir(wd), "the workdir exists on the host", wd)
st = os.stat(wd) if os.path.isdir(wd) else None
check(st is not None and st.st_uid >= 0x70000000, "the workdir belongs to a uid >= 0x70000000",
      st and st.st_uid)
is_(sb.get("user"), "sandbox", "runs are the unprivileged user by default (user: sandbox)")
r = c.call({"op": "create", "best_effort": True, "user": "admin"})
check(r.get("ok") is False and r["error"].get("code") == "invalid_request" and r["error"].get("field") == "user",
      "user \"admin\": invalid_request, field user", r)
r = c.call({"op": "create", "best_effort": True, "user": "root"})
rs = r.get("sandbox") or {}
is_(rs.get("user"), "root", "create with user root")
ids = [c.call({"op": "run", "sandbox": rs.get("id"), "argv": ["id", "-u"], "user": u}).get("stdout") for u in (None, "sandbox")]
ids.append(c.call({"op": "run", "sandbox": sb.get("id"), "argv": ["id", "-u"], "user": "root"}).get("stdout"))
ids.append(c.call({"op": "run", "argv": ["id", "-u"], "best_effort": True, "user": "root"}).get("stdout"))
is_(ids, ["0\n", "1000\n", "0\n", "0\n"], "a run is the sandbox's user unless it says otherwise (also a throwaway one)")
c.call({"op": "destroy", "sandbox": rs.get("id")})
is_(sb.get("cgroup"), cg + "/sandboxes/" + sb.get("id", ""), "the cgroup is below --cgroup-root/sandboxes")
check(os.path.isdir(sb.get("cgroup", "/nonexistent")), "the sandbox's cgroup exists")

r = c.call({"op": "create", "best_effort": True,
            "limits": {"memory": "256M", "pids": 64, "timeout_s": "30s", "output_bytes": "64K", "cpus": 0.5}})
is_((r.get("sandbox") or {}).get("limits"),
    {"memory": 268435456, "pids": 64, "cpus": 0.5, "timeout_s": 30, "output_bytes": 65536, "file_size": None, "open_files": 4096,
     "disk": None, "files": None},
    "create with limits given as strings (256M, 30s, 64K)")
r3 = c.call({"op": "create", "best_effort": True, "limits": {"cpus": "0.5"}})
is_((r3.get("sandbox") or {}).get("limits", {}).get("cpus"), 0.5,
    "limits.cpus as a numeric string (\"0.5\") is accepted (docs/protocol.md: numbers or numeric strings)")
if r3.get("ok"):
    c.call({"op": "destroy", "sandbox": r3["sandbox"]["id"]})
else:
    print("# " + str(r3))
sb2 = r.get("sandbox") or {}
st2 = os.stat(sb2["workdir"]) if sb2.get("workdir") and os.path.isdir(sb2["workdir"]) else None
check(st and st2 and abs(st.st_uid - st2.st_uid) >= 65536, "two sandboxes get disjoint uid ranges",
      st and st.st_uid, st2 and st2.st_uid)
r = c.call({"op": "create", "best_effort": True, "limits": {"memory": "100G"}})
check(r.get("ok") is False and r["error"].get("code") == "invalid_request" and r["error"].get("field") == "limits.memory",
      "a memory limit above the configured maximum: invalid_request, field limits.memory", r)
r = c.call({"op": "create", "best_effort": True, "limits": {"pids": 0}})
check(r.get("ok") is False and r["error"].get("field") == "limits.pids", "pids 0 is refused", r)

# Names, list, inspect.
r = c.call({"op": "create", "best_effort": True, "name": "build"})
is_(r.get("ok"), True, "create with name build")
build_id = (r.get("sandbox") or {}).get("id")
is_((r.get("sandbox") or {}).get("name"), "build", "the reply names it")
r = c.call({"op": "create", "best_effort": True, "name": "build"})
check(r.get("ok") is False and r["error"].get("code") == "conflict" and r["error"].get("field") == "name",
      "a second sandbox named build: conflict, field name", r)
l = c.call({"op": "list"})
ids = {s["id"]: s for s in l.get("sandboxes", [])}
check(sb.get("id") in ids and build_id in ids and sb2.get("id") in ids, "list shows the three sandboxes", list(ids))
check(all(s.get("state") == "ready" for s in ids.values()), "list: all ready")
is_(len(ids), 3, "list: nothing else")
r = c.call({"op": "inspect", "sandbox": "build"})
is_((r.get("sandbox") or {}).get("id"), build_id, "inspect by name")
u = (r.get("sandbox") or {}).get("usage")
check(isinstance(u, dict) and set(u) >= {"memory_bytes", "pids", "cpu_s"}, "inspect: usage has memory_bytes, pids, cpu_s", u)
is_((r.get("sandbox") or {}).get("runs_in_flight"), 0, "inspect: runs_in_flight 0")
is_((r.get("sandbox") or {}).get("state"), "ready", "inspect: state ready")
r = c.call({"op": "inspect", "sandbox": sb.get("id")})
is_((r.get("sandbox") or {}).get("id"), sb.get("id"), "inspect by id")
r = c.call({"op": "inspect", "sandbox": "no-such-box"})
check(r.get("ok") is False and r["error"].get("code") == "not_found", "inspect of an unknown name: not_found", r)
for s in (sb, sb2, {"id": build_id}):
    r = c.call({"op": "destroy", "sandbox": s.get("id")})
    is_(r.get("destroyed"), True, "destroy %s" % s.get("id"))
is_(c.call({"op": "list"}).get("sandboxes"), [], "list is empty again")
c.close()
EOF

# ---- runs -------------------------------------------------------------------------------
run_py "runs" 90 <<'EOF'
import base64, os, re, time
from client import Conn, check, is_, wait_for, procs_under
sock, cg = os.environ["SOCK"], os.environ["CG"]
c = Conn(sock, 60)
sb = c.call({"op": "create", "best_effort": True, "name": "runs"})["sandbox"]
S, wd = sb["id"], sb["workdir"]
def run(**kw):
    global c
    req = {"op": "run", "sandbox": S}
    req.update(kw)
    try:
        return c.call(req, 30)
    except Exception as e:
        # The connection is in an unknown state: start a new one (which kills the run).
        c.close()
        c = Conn(sock, 60)
        return {"client_error": str(e)}

r = run(argv=["true"])
is_((r.get("ok"), r.get("exit_code"), r.get("reason"), r.get("signal")), (True, 0, "exited", None), "true: exit 0, reason exited")
is_((r.get("timed_out"), r.get("oom_killed")), (False, False), "true: not timed out, not OOM-killed")
check(re.fullmatch(r"run-[0-9a-f]{12}", r.get("run_id", "")), "a run id run-<12 hex>", r.get("run_id"))
is_(r.get("sandbox"), S, "the reply names the sandbox")
check(isinstance(r.get("duration_s"), float) and r["duration_s"] >= 0, "duration_s is a number", r.get("duration_s"))
check("memory_peak_bytes" in r and "pids_peak" in r, "memory_peak_bytes and pids_peak are present (null when unknown)")
is_(r.get("pids_limit_hit", "absent"), None if not sb["enforced"]["pids"] else False,
    "pids_limit_hit: null where pids is not enforced, else false for true")
r = run(command="exit 3")
is_((r.get("exit_code"), r.get("reason")), (3, "exited"), "exit 3: exit_code 3")
r = run(command="echo hi; echo err >&2")
is_((r.get("stdout"), r.get("stdout_bytes"), r.get("stdout_encoding"), r.get("stdout_truncated")), ("hi\n", 3, "utf-8", False),
    "stdout comes back")
is_((r.get("stderr"), r.get("stderr_bytes")), ("err\n", 4), "stderr comes back separately")
r = run(command="kill -TERM $$")
is_((r.get("reason"), r.get("signal"), r.get("exit_code")), ("signaled", "TERM", 143), "kill -TERM $$: signaled TERM, 143")
r = run(command="kill -KILL $$")
is_((r.get("reason"), r.get("signal"), r.get("exit_code")), ("signaled", "KILL", 137), "kill -KILL $$: signaled KILL, 137")

# Timeout: the whole run's cgroup dies, including a setsid'ed grandchild that ignores SIGTERM.
t0 = time.monotonic()
r = run(timeout_s=1, command="echo before; setsid sh -c 'trap \"\" TERM; sleep 3; touch /work/late' </dev/null >/dev/null 2>&1 & sleep 30")
el = time.monotonic() - t0
is_((r.get("reason"), r.get("exit_code"), r.get("timed_out")), ("timeout", 124, True), "timeout_s 1: reason timeout, exit 124, timed_out")
is_(r.get("stdout"), "before\n", "timeout: the output printed before is returned")
check(el < 10, "timeout: the reply came after %.1f s (limit 1 s)" % el)
replied = time.monotonic()
# CPU budget of the whole run: two busy loops share it, and both die when it is spent.
r = run(timeout_s=20, cpu_s=0.5, command="while :; do :; done & while :; do :; done")
used = (r.get("cpu_user_s") or 0) + (r.get("cpu_system_s") or 0)
is_((r.get("reason"), r.get("signal")), ("cpu_limit", "KILL"), "cpu_s 0.5: reason cpu_limit, killed")
check(0.5 <= used < 5, "cpu_s 0.5: the run used %.2f s of CPU in all" % used)
check(r.get("duration_s", 99) < 10, "cpu_s 0.5: it ended long before its timeout (%.1f s)" % r.get("duration_s", 99))
r = run(timeout_s="500ms", argv=["sleep", "30"])
is_(r.get("reason"), "timeout", "timeout_s \"500ms\" is understood")
# The grandchild of the timed-out run above would touch /work/late 3 s after it started: looked
# for 5 s after that run's reply (the runs in between count towards the wait).
time.sleep(max(0, replied + 5 - time.monotonic()))
check(not os.path.exists(os.path.join(wd, "late")), "timeout: the setsid'ed grandchild was killed (no /work/late after 5 s)")

# Output caps: head and tail, the drop marker, exact counts; stderr capped on its own.
r = run(output_bytes=1000, command="printf HEAD; head -c 99992 /dev/zero | tr '\\0' x; printf TAIL; printf 'e%.0s' $(seq 3000) >&2")
exp = "HEAD" + "x" * 496 + "\n[... 99000 bytes dropped ...]\n" + "x" * 496 + "TAIL"
is_((r.get("stdout_bytes"), r.get("stdout_truncated")), (100000, True), "100 KB with output_bytes 1000: stdout_bytes 100000, truncated")
is_(r.get("stdout"), exp, "head and tail kept, joined by [... 99000 bytes dropped ...]")
is_((r.get("stderr_bytes"), r.get("stderr_truncated")), (3000, True), "stderr counted and capped on its own")
is_(r.get("stderr"), "e" * 500 + "\n[... 2000 bytes dropped ...]\n" + "e" * 500, "stderr: head, marker, tail")
# A cut through a character: the stream is no longer UTF-8, so it comes back base64, marker and all.
r = run(output_bytes=10, command="printf '\\303\\251%.0s' $(seq 20)")
raw = "\u00e9".encode() * 20
is_((r.get("stdout_encoding"), base64.b64decode(r.get("stdout", "")), r.get("stdout_truncated")),
    ("base64", raw[:5] + b"\n[... 30 bytes dropped ...]\n" + raw[-5:], True),
    "a cap that cuts through a character: base64, head and tail bytes exact, the marker between")
r = run(output_bytes=1000, command="printf 'x%.0s' $(seq 1000)")
is_((r.get("stdout_bytes"), r.get("stdout_truncated"), len(r.get("stdout", ""))), (1000, False, 1000), "exactly output_bytes is not truncated")

# Environment.
r = run(argv=["env"], env={"FOO": "bar"})
is_(sorted(r.get("stdout", "").splitlines()), ["FOO=bar", "HOME=/work", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"],
    "env {FOO: bar}: only FOO, the default PATH and HOME=/work")
r = run(argv=["env"])
is_(r.get("stdout"), "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin\nHOME=/work\n", "no env: the default PATH and HOME only")
r = run(argv=["env"], env={"PATH": "/bin", "HOME": "/tmp"})
is_(r.get("stdout"), "PATH=/bin\nHOME=/tmp\n", "env with PATH and HOME replaces the defaults")
r = run(argv=["env"], env={"V": "a b\nc=d"})
check("V=a b\nc=d" in r.get("stdout", ""), "env values are passed verbatim", r.get("stdout"))

# cwd.
r = run(command="mkdir -p /work/sub && cd /work/sub && pwd")
r = run(argv=["pwd"], cwd="/work/sub")
is_((r.get("ok"), r.get("stdout")), (True, "/work/sub\n"), "cwd /work/sub")
r = run(argv=["pwd"], cwd="/work/sub/../sub/.")
is_(r.get("stdout"), "/work/sub\n", "cwd /work/sub/../sub/. is normalised")
r = run(argv=["pwd"])
is_(r.get("stdout"), "/work\n", "the default cwd is /work")
for bad in ("/work/../etc", "/work/../../..", "/etc", "sub", "/", "/workx", "/work/sub/../../tmp"):
    r = run(command="pwd > /work/where", cwd=bad)
    check(r.get("ok") is False and r["error"].get("code") == "invalid_request" and r["error"].get("field") == "cwd",
          "cwd %s: invalid_request, field cwd" % bad, r)
run(command="ln -s /etc /work/etclink; ln -s ../.. /work/sub/up; ln -s sub /work/sublink; ln -s /work/sub /work/abslink")
for bad in ("/work/etclink", "/work/sub/up", "/work/nonexistent"):
    r = run(command="pwd > /work/where", cwd=bad)
    check(r.get("ok") is False and r["error"].get("code") == "invalid_request" and r["error"].get("field") == "cwd",
          "cwd %s (a symlink out, or missing): invalid_request, field cwd" % bad, r)
check(not os.path.exists(os.path.join(wd, "where")), "no refused cwd ran the command")
r = run(argv=["pwd"], cwd="/work/sublink")
check(r.get("ok") is True and r.get("exit_code") == 0, "a relative symlink that stays inside /work is fine as cwd", r)
r = run(argv=["pwd"], cwd="/work/abslink")
check(r.get("ok") is True and r.get("exit_code") == 0 and r.get("stdout") == "/work/sub\n",
      "an absolute symlink to /work/sub as cwd is fine: it resolves inside /work", r)

# stdin and encodings.
# Each bounded by timeout_s 3: a command waiting for an EOF that never comes fails fast.
r = run(argv=["cat"], stdin="hello\nwörld\n", timeout_s=3)
is_(r.get("reason"), "exited", "cat with stdin ends by itself (it sees EOF)")
is_((r.get("stdout"), r.get("stdout_encoding")), ("hello\nwörld\n", "utf-8"), "stdin text round trip through cat")
blob = bytes(range(256)) * 4 + b"\x00end"
r = run(argv=["cat"], stdin=base64.b64encode(blob).decode(), stdin_encoding="base64", timeout_s=3)
is_(r.get("stdout_encoding"), "base64", "binary output (with NUL) comes back as base64")
is_(base64.b64decode(r.get("stdout", "")), blob, "stdin base64 round trip through cat, byte for byte")
is_(r.get("stdout_bytes"), len(blob), "stdout_bytes counts raw bytes")
r = run(command="printf '\\377\\376'")
is_((r.get("stdout"), r.get("stdout_encoding")), ("//4=", "base64"), "non-UTF-8 stdout comes back base64")
big = "y" * (1 << 20)
r = run(argv=["wc", "-c"], stdin=big, timeout_s=3)
is_(r.get("stdout", "").strip(), str(1 << 20), "1 MiB of stdin arrives whole")
r = run(argv=["cat"], timeout_s=3)
is_((r.get("stdout"), r.get("exit_code"), r.get("reason")), ("", 0, "exited"), "no stdin: cat sees EOF at once")

# Persistence between runs of one sandbox.
run(command="echo data > /tmp/x; echo w > /work/w")
r = run(command="cat /tmp/x /work/w")
is_(r.get("stdout"), "data\nw\n", "/tmp and /work persist from one run to the next")
r = run(command="sh -c 'sleep 1000 >/dev/null 2>&1 &'; sh -c 'while :; do date +%s.%N > /tmp/tick; sleep 0.2; done' >/dev/null 2>&1 &")
is_(r.get("exit_code"), 0, "a run can leave background processes")
# The background sleep may not have exec'd yet when the next run starts (its sh forked and left):
# that run waits for it, bounded (5 s). comm alone would not tell it from the loop's sleep 0.2;
# the pattern's [p] keeps grep and this shell from matching themselves.
r = run(command="for i in $(seq 50); do grep -alq 'slee[p].1000' /proc/[0-9]*/cmdline && echo alive && exit; "
                "sleep 0.1; done; cat /proc/[0-9]*/comm")
is_(r.get("stdout"), "alive\n", "the background sleep 1000 is alive in the next run")
# The loop writes a new tick every 0.2 s: seen once, then seen to change (bounded, 5 s each: on
# a loaded machine its first tick may come late).
r = run(command="for i in $(seq 50); do [ -s /tmp/tick ] && break; sleep 0.1; done; a=$(cat /tmp/tick); "
                "for i in $(seq 50); do sleep 0.1; b=$(cat /tmp/tick); [ -n \"$b\" ] && [ \"$b\" != \"$a\" ] && exit 0; done; exit 1")
is_(r.get("exit_code"), 0, "the background loop keeps running between runs")
t0 = time.monotonic()
r = run(command="sleep 1000 & echo started")
is_(r.get("stdout"), "started\n", "a background process holding stdout does not hold the reply")
check(time.monotonic() - t0 < 10, "the run ended with its main process (%.1f s)" % (time.monotonic() - t0))
r = c.call({"op": "inspect", "sandbox": S})
is_((r.get("sandbox") or {}).get("runs_in_flight"), 0, "runs_in_flight 0 once the runs are answered")

# Spawn failures are errors, not exit codes.
r = run(argv=["/nonexistent/binary"])
check(r.get("ok") is False and r["error"].get("code") == "spawn_failed" and r["error"].get("step") == "exec"
      and r["error"].get("errno") == "ENOENT", "a missing program: spawn_failed, step exec, ENOENT", r)
r = run(argv=["no-such-command-xyz"])
check(r.get("ok") is False and r["error"].get("errno") == "ENOENT", "a program not on PATH: ENOENT", r)
run(command="printf '#!/bin/sh\\necho no\\n' > /work/noexec; chmod 644 /work/noexec")
r = run(argv=["/work/noexec"])
check(r.get("ok") is False and r["error"].get("code") == "spawn_failed" and r["error"].get("step") == "exec"
      and r["error"].get("errno") == "EACCES", "a file without x permission: spawn_failed, exec, EACCES", r)
r = run(argv=["/work"])
check(r.get("ok") is False and r["error"].get("errno") == "EACCES", "a directory as argv[0]: EACCES", r)
r = run(command="echo still fine")
is_(r.get("stdout"), "still fine\n", "the sandbox still runs commands after spawn failures")

# The sandbox's default environment.
r2 = c.call({"op": "create", "best_effort": True, "env": {"A": "1"}})
S2 = r2["sandbox"]["id"]
r = c.call({"op": "run", "sandbox": S2, "argv": ["env"]})
is_(sorted(r.get("stdout", "").splitlines()), ["A=1", "HOME=/work", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"],
    "create's env is the runs' default environment")
r = c.call({"op": "run", "sandbox": S2, "argv": ["env"], "env": {"B": "2"}})
is_(sorted(r.get("stdout", "").splitlines()), ["B=2", "HOME=/work", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"],
    "a run's env replaces the sandbox's")
c.call({"op": "destroy", "sandbox": S2})

# kill: the "started" event names the run while it is in flight; another connection kills it.
S3 = c.call({"op": "create", "best_effort": True})["sandbox"]["id"]
k = Conn(sock, 30)
for sig, reason, code, name in (("TERM", "signaled", 143, "TERM"), (None, "killed", 137, "KILL")):
    c.send({"id": "victim", "op": "run", "sandbox": S3, "command": "trap '' HUP; sleep 100"})
    ev = c.recv_json(10)
    check(ev and ev.get("event") == "started" and ev.get("id") == "victim" and ev.get("sandbox") == S3
          and ev.get("run_id", "").startswith("run-"), "a run announces itself with a started event naming it", ev)
    req = {"op": "kill", "run_id": ev.get("run_id", "")}
    if sig:
        req["signal"] = sig
    r = k.call(req)
    is_(r.get("ok"), True, "kill (signal %s) from another connection: ok" % (sig or "default"))
    m = c.final("victim", 10)
    is_((m.get("reason"), m.get("exit_code"), m.get("signal")), (reason, code, name),
        "the killed run reports reason %s, exit %d, signal %s" % (reason, code, name))
r = k.call({"op": "kill", "run_id": m.get("run_id", "x")})
check(r.get("ok") is False and r["error"].get("code") == "not_found", "kill of a run that has ended: not_found", r)
k.close()
c.call({"op": "destroy", "sandbox": S3})

for sig in (None, "TERM", 9):
    req = {"op": "kill", "run_id": "run-000000000000"}
    if sig is not None:
        req["signal"] = sig
    r = c.call(req)
    check(r.get("ok") is False and r["error"].get("code") == "not_found", "kill of an unknown run (signal %s): not_found" % sig, r)
r = c.call({"op": "kill", "run_id": "run-000000000000", "signal": "NOPE"})
check(r.get("ok") is False and r["error"].get("code") == "invalid_request" and r["error"].get("field") == "signal",
      "kill with an invalid signal name: invalid_request, field signal", r)
c.close()
EOF

# ---- CPU budgets in whole seconds, real-time signals (issue 17, 7 and 8) -----------------
run_py "cpu budgets and signal names" 240 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)
S = c.call({"op": "create", "best_effort": True})["sandbox"]["id"]
def run(**kw):
    req = {"op": "run", "sandbox": S, "timeout_s": 30}
    req.update(kw)
    return c.call(req, 60)

# RLIMIT_CPU used to fire at the budget itself when it was whole seconds: "signaled", XCPU, 152
# (or "exited" 152 under a shell) instead of cpu_limit.
for cpu_s, n in ((1, 4), (2, 2)):
    for i in range(n):
        r = run(cpu_s=cpu_s, command="while :; do :; done")
        used = (r.get("cpu_user_s") or 0) + (r.get("cpu_system_s") or 0)
        check(r.get("reason") == "cpu_limit" and used >= cpu_s,
              "cpu_s %d, try %d: reason cpu_limit after %.2f s of CPU" % (cpu_s, i + 1, used),
              {k: r.get(k) for k in ("reason", "signal", "exit_code", "cpu_user_s", "cpu_system_s", "error")})
for i in range(2):
    r = run(cpu_s=1, command="sh -c 'while :; do :; done'; exit $?")
    check(r.get("reason") == "cpu_limit", "cpu_s 1 under a shell, try %d: reason cpu_limit" % (i + 1),
          {k: r.get(k) for k in ("reason", "signal", "exit_code", "error")})
# A run that signals itself with XCPU well within its budget is not said to have spent it.
r = run(cpu_s=10, command="kill -XCPU $$")
is_((r.get("reason"), r.get("signal"), r.get("exit_code")), ("signaled", "XCPU", 152),
    "kill -XCPU $$ within the budget: signaled XCPU, 152")
r = run(cpu_s=10, command="exit 152")
is_((r.get("reason"), r.get("exit_code")), ("exited", 152), "exit 152 within the budget: exited 152")

# Real-time signals are named as glibc and `kill -l` number them (RTMIN 34); 32 and 33 by number.
for num, name in ((34, "RTMIN"), (35, "RTMIN+1"), (49, "RTMIN+15"), (50, "RTMAX-14"), (64, "RTMAX"), (32, "32")):
    r = run(command="kill -%d $$" % num)
    is_((r.get("reason"), r.get("signal"), r.get("exit_code")), ("signaled", name, 128 + num),
        "killed by signal %d: signaled, signal %s, exit %d" % (num, name, 128 + num))
# Sent by name: the program's handler sees the number glibc's SIGRTMIN+2 is.
c.send({"id": "rt", "op": "run", "sandbox": S, "timeout_s": 30,
        "command": "trap 'echo got36; exit 0' 36; echo ready; while :; do sleep 0.1; done"})
ev = c.recv_json(10)
check(ev and ev.get("event") == "started", "a run trapping signal 36 starts", ev)
import time
time.sleep(1)
k = Conn(os.environ["SOCK"], 30)
r = k.call({"op": "kill", "run_id": (ev or {}).get("run_id", ""), "signal": "SIGRTMIN+2"})
is_(r.get("ok"), True, "kill with signal SIGRTMIN+2: ok")
m = c.final("rt", 20)
is_((m.get("reason"), m.get("exit_code"), m.get("stdout")), ("exited", 0, "ready\ngot36\n"),
    "SIGRTMIN+2 arrives as signal 36, which the program trapped")
k.close()
c.call({"op": "destroy", "sandbox": S})
c.close()
EOF

# ---- runs in flight: destroy and disconnect ---------------------------------------------
run_py "runs in flight" 60 <<'EOF'
import os, threading, time
from client import Conn, check, is_, wait_for, procs_under, cgroup_dirs, warm_helper
sock, cg = os.environ["SOCK"], os.environ["CG"]
a, b = Conn(sock, 60), Conn(sock, 60)
sb = a.call({"op": "create", "best_effort": True})["sandbox"]
a.send({"id": "long", "op": "run", "sandbox": sb["id"], "argv": ["sleep", "100"]})
check(wait_for(lambda: b.call({"op": "inspect", "sandbox": sb["id"]})["sandbox"]["runs_in_flight"] == 1, 10),
      "inspect shows the run in flight")
t0 = time.monotonic()
r = b.call({"op": "destroy", "sandbox": sb["id"]}, 30)
is_(r.get("destroyed"), True, "destroy with a run in flight: destroyed")
m = a.final("long", 30)
is_((m.get("ok"), m.get("reason")), (True, "destroyed"), "the run in flight ends with reason destroyed")
check(time.monotonic() - t0 < 10, "it did not wait for the sleep")
is_(os.path.exists(sb["cgroup"]), False, "the sandbox's cgroup is gone")
a.close()

# The client of a run in a named sandbox goes away: the run dies, the sandbox stays usable.
sb = b.call({"op": "create", "best_effort": True, "name": "keeper"})["sandbox"]
a = Conn(sock, 60)
a.send({"id": "orphan", "op": "run", "sandbox": "keeper", "command": "echo $$ > /work/orphan.pid; exec sleep 100"})
check(wait_for(lambda: b.call({"op": "inspect", "sandbox": "keeper"})["sandbox"]["runs_in_flight"] == 1
               and os.path.exists(os.path.join(sb["workdir"], "orphan.pid")), 10), "the run in the named sandbox started")
# The next run's warm helper is made as the run starts: named once it runs, so wait for it.
wait_for(lambda: any(warm_helper(p) for p in procs_under(sb["cgroup"])), 5)
run_pids = [p for d in cgroup_dirs(sb["cgroup"]) if os.path.basename(d).startswith("run-") for p in procs_under(d)
            if not warm_helper(p)]
a.close()
check(wait_for(lambda: b.call({"op": "inspect", "sandbox": "keeper"})["sandbox"]["runs_in_flight"] == 0, 5),
      "its client left: runs_in_flight drops to 0 within 5 s")
check(wait_for(lambda: not [p for p in run_pids if os.path.exists("/proc/%d" % p)], 5),
      "the run's processes are gone", run_pids)
r = b.call({"op": "run", "sandbox": "keeper", "command": "cat /proc/[0-9]*/comm"})
check(r.get("ok") is True and "sleep" not in r.get("stdout", "").split(), "the sandbox is still usable, the sleep is not in it",
      r.get("stdout"))
b.call({"op": "destroy", "sandbox": "keeper"})
b.close()
EOF

# ---- the sandbox's own tmpfs: capped (THREATS RES-03) -----------------------------------
run_py "tmpfs cap" 90 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)
r = c.call({"op": "create", "best_effort": True, "name": "tmpcap", "limits": {"memory": "64M"}})
is_(r.get("ok"), True, "create with a 64M memory limit")
sizes = "for d in /tmp /run /dev/shm; do stat -f -c '%S %b %c' $d/; done"
r = c.call({"op": "run", "sandbox": "tmpcap", "command": sizes})
fs = [tuple(int(x) for x in l.split()) for l in r.get("stdout", "").splitlines()]
is_([f[0] * f[1] for f in fs], [32 << 20] * 3, "/tmp, /run and /dev/shm: a tmpfs of half the memory limit (32M)")
is_([f[2] for f in fs], [8192] * 3, "... with one inode per page of it (8192)")
# Twice the limit, as the sandbox's user and as its root: the writer gets ENOSPC, nothing more.
for user in ("sandbox", "root"):
    r = c.call({"op": "run", "sandbox": "tmpcap", "user": user,
                "command": "head -c 128M /dev/zero > /tmp/big; echo rc=$?; stat -c %s /tmp/big; rm /tmp/big"}, 60)
    out = r.get("stdout", "").split()
    check(r.get("ok") is True and out[:1] == ["rc=1"] and "No space left on device" in r.get("stderr", ""),
          "as %s: 128M into /tmp fails with ENOSPC" % user, r)
    check(len(out) == 2 and 31 << 20 <= int(out[1]) <= 32 << 20, "as %s: the file stopped at the cap (%s bytes)" % (user, out[1:]), r)
r = c.call({"op": "run", "sandbox": "tmpcap",
            "command": "head -c 20M /dev/zero > /tmp/a; head -c 20M /dev/zero > /dev/shm/b; echo rc=$?; rm -f /tmp/a /dev/shm/b"}, 60)
is_(r.get("stdout"), "rc=1\n", "/tmp and /dev/shm share the one cap: 20M + 20M does not fit in 32M")
# Made by the shell's own redirection (true is a builtin): no process per file, which took
# longer than the call's 60 s on a loaded machine.
r = c.call({"op": "run", "sandbox": "tmpcap", "command": "i=0; while [ $i -lt 9000 ] && true 2>/dev/null >/tmp/f$i; do i=$((i+1)); done; echo $i; rm -f /tmp/f*"}, 60)
n = int(r.get("stdout", "0").strip() or 0)
check(8000 < n < 8192, "empty files in /tmp stop at the inode cap (%d made)" % n, r)
r = c.call({"op": "run", "sandbox": "tmpcap", "command": "head -c 48M /dev/zero > /work/big && stat -c %s /work/big && rm /work/big"}, 60)
is_(r.get("stdout"), "%d\n" % (48 << 20), "/work is not that tmpfs: 48M into /work succeed")
r = c.call({"op": "run", "best_effort": True, "command": "stat -f -c '%S %b' /tmp/"})
is_(r.get("stdout"), "4096 %d\n" % ((256 << 20) // 4096), "a throwaway sandbox with the default 512M gets a 256M tmpfs")
c.call({"op": "destroy", "sandbox": "tmpcap"})
c.close()
EOF

# ---- a throwaway sandbox's workspace: in memory unless "workspace":"disk" --------------
run_py "throwaway workspace" 90 <<'EOF'
import os
from client import Conn, check, is_, wait_for
c = Conn(os.environ["SOCK"], 60)
state = os.path.join(os.environ["T"], "state", "sandboxes")
# What backs /work, from the sandbox's own mount table: the filesystem type and the path below it.
where = ("awk '$5 == \"/work\" {for (i = 7; $i != \"-\"; i++); print $(i + 1), $4}' /proc/self/mountinfo; "
         "stat -c '%u %a' /work/")
r = c.call({"op": "run", "best_effort": True, "command": where + "; echo x > /work/f && cat /work/f"})
out = r.get("stdout", "").splitlines()
is_(out[:1], ["tmpfs /work"], "a throwaway sandbox's /work is a directory of its own tmpfs")
is_(out[1:3], ["1000 755", "x"], "... owned by the sandbox's user (uid 1000, 0755), who writes there")
before = set(os.listdir(state))
r = c.call({"op": "run", "best_effort": True, "command": "sleep 0.3; ls -A /work | wc -l"})
is_(r.get("stdout"), "0\n", "the next throwaway sandbox's /work starts empty")
is_(set(os.listdir(state)), before, "nothing of a throwaway sandbox was made in the state directory")
r = c.call({"op": "run", "best_effort": True, "limits": {"memory": "64M"},
            "command": "head -c 20M /dev/zero > /work/a; head -c 20M /dev/zero > /tmp/b; echo rc=$?"}, 60)
is_((r.get("stdout"), "No space left on device" in r.get("stderr", "")), ("rc=1\n", True),
    "/work shares the tmpfs's cap (half of limits.memory: 32M) with /tmp: 20M + 20M is ENOSPC")
r = c.call({"op": "run", "best_effort": True, "workspace": "disk", "limits": {"memory": "64M"},
            "command": where + "; head -c 48M /dev/zero > /work/big && stat -c %s /work/big"}, 60)
out = r.get("stdout", "").splitlines()
sb = r.get("sandbox", "")
check(len(out) == 3 and out[0].split()[0] != "tmpfs" and out[0].endswith("/sandboxes/%s/work" % sb) and out[1] == "1000 755",
      "with \"workspace\":\"disk\", /work is <state>/<id>/work on the state directory's filesystem", r)
is_(out[2:], [str(48 << 20)], "... and holds more than the tmpfs would (48M with a 64M limit)")
check(wait_for(lambda: not os.path.exists(os.path.join(state, sb)), 10), "... and is removed with the sandbox", sb)
for req, what in (({"workspace": "tmpfs"}, "a workspace other than memory or disk"),
                  ({"workspace": 1}, "a workspace that is not a string"),
                  ({"sandbox": "nope", "workspace": "disk"}, "workspace with 'sandbox'")):
    req.update({"op": "run", "argv": ["true"]})
    req.setdefault("best_effort", True) if "sandbox" not in req else None
    r = c.call(req)
    e = r.get("error") or {}
    is_((e.get("code"), e.get("field")), ("invalid_request", "workspace"), "%s: invalid_request naming the field" % what)
r = c.call({"op": "create", "best_effort": True, "workspace": "memory"})
e = r.get("error") or {}
is_((e.get("code"), e.get("field")), ("invalid_request", "workspace"),
    "create has no workspace field: a sandbox of one's own keeps its workspace on disk")
c.close()
EOF

# ---- throwaway cleanup ------------------------------------------------------------------
FD0=$(daemon_fd_baseline)
INIT0=$(daemon_children_named sandbox-init)
CGN0=$(cg_child_count)
STATE0=$(ls -A "$T/state/sandboxes" | sort | tr '\n' ' ')
SB0=$(jget "$(rpc '{"id":1,"op":"health"}')" '.sandboxes')
run_py "50 throwaway runs" 90 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)
n_ok = 0
sandboxes = set()
for i in range(50):
    r = c.call({"op": "run", "best_effort": True, "argv": ["true"]}, 60)
    if r.get("ok") is True and r.get("exit_code") == 0:
        n_ok += 1
    sandboxes.add(r.get("sandbox"))
is_(n_ok, 50, "50 throwaway runs of true: all exit 0")
is_(len(sandboxes), 50, "each ran in its own throwaway sandbox")
c.close()
EOF
_no_trash() { ! ls -A "$T/state/sandboxes" | grep -q .; }
_back_to_rest() {
        [ "$(ls -A "$T/state/sandboxes" | sort | tr '\n' ' ')" = "$STATE0" ] &&
                [ "$(cg_child_count)" = "$CGN0" ] && [ "$(daemon_children_named sandbox-init)" = "$INIT0" ] &&
                [ "$(daemon_fds)" = "$FD0" ]
}
wait_until 10 _back_to_rest
is "$(cg_child_count)" "$CGN0" "after 50 throwaway runs: no child cgroup left under sandboxes/"
is "$(ls -A "$T/state/sandboxes" | sort | tr '\n' ' ')" "$STATE0" "after 50 throwaway runs: no workspace (nor .trash-*) left in the state dir"
is "$(daemon_children_named sandbox-init)" "$INIT0" "after 50 throwaway runs: no sandbox-init left"
is "$(daemon_children_named sandboxd-rm)" 0 "after 50 throwaway runs: no workspace remover left"
is "$(daemon_fds)" "$FD0" "after 50 throwaway runs: the daemon's fd count is back to its baseline"
is "$(jget "$(rpc '{"id":1,"op":"health"}')" '"\(.sandboxes) \(.runs)"')" "$SB0 0" "after 50 throwaway runs: health counts no new sandbox, no run"

# ---- destroy ----------------------------------------------------------------------------
mkdir -p "$T/canary/dir"
echo precious >"$T/canary/file"
echo precious >"$T/canary/dir/inner"
run_py "destroy" 60 "$T/canary" <<'EOF'
import os, sys, time
from client import Conn, check, is_, wait_for, procs_under, cgroup_dirs, warm_helper
sock, cg, T = os.environ["SOCK"], os.environ["CG"], os.environ["T"]
canary = sys.argv[1]
c = Conn(sock, 60)
sb = c.call({"op": "create", "best_effort": True, "name": "doomed"})["sandbox"]
S, wd = sb["id"], sb["workdir"]
r = c.call({"op": "run", "sandbox": S, "command": "sh -c 'sleep 1000 >/dev/null 2>&1 &'; nohup sleep 999 >/dev/null 2>&1 &"})
is_(r.get("exit_code"), 0, "background processes started")
r = c.call({"op": "run", "sandbox": S, "command":
            "ln -s / /work/root; ln -s %s /work/escape; ln -s %s/file /work/escape-file; "
            "mkdir -p /work/d/e; echo x > /work/d/e/x; ln -s %s/dir /work/d/e/deep" % (canary, canary, canary)})
is_(r.get("exit_code"), 0, "symlinks to host paths made inside the workspace")
pids = procs_under(sb["cgroup"])
check(len(pids) >= 3, "the sandbox's cgroup holds init and the background processes", pids)
r = c.call({"op": "destroy", "sandbox": "doomed"}, 30)
is_((r.get("ok"), r.get("destroyed")), (True, True), "destroy by name: destroyed")
is_(os.path.exists(sb["cgroup"]), False, "after destroy the sandbox's cgroup is gone")
def alive(p):
    try:
        return open("/proc/%d/stat" % p).read().split(") ")[1][0] != "Z"
    except OSError:
        return False
left = [p for p in pids if alive(p)]
is_(left, [], "after destroy none of its processes is alive")
for p in left:
    print("# %d: %s" % (p, open("/proc/%d/stat" % p).read()[:100]))
is_(os.path.exists(wd), False, "after destroy the workdir is gone")
state = os.path.join(T, "state", "sandboxes")
check(wait_for(lambda: not [e for e in os.listdir(state) if S in e], 10), "the workspace (and its .trash-) is removed",
      os.listdir(state))
is_(open(os.path.join(canary, "file")).read(), "precious\n", "a symlink to a host file was not followed")
is_(open(os.path.join(canary, "dir", "inner")).read(), "precious\n", "a symlink to a host directory was not followed")
check(os.path.isdir("/etc") and os.path.exists("/etc/passwd"), "a symlink to / was not followed")
r = c.call({"op": "destroy", "sandbox": S})
is_((r.get("ok"), r.get("destroyed"), r.get("already_gone")), (True, False, True), "a second destroy: ok, already_gone")
r = c.call({"op": "destroy", "sandbox": "no-such-name"})
check(r.get("ok") is False and r["error"].get("code") == "not_found", "destroy of an unknown name: not_found", r)
r = c.call({"op": "destroy", "sandbox": "sbx-0123456789ab"})
check(r.get("ok") is False and r["error"].get("code") == "not_found",
      "destroy of an id-shaped sandbox that never existed: not_found (docs/protocol.md)", r)
r = c.call({"op": "inspect", "sandbox": S})
check(r.get("ok") is False and r["error"].get("code") == "not_found", "inspect after destroy: not_found", r)
r = c.call({"op": "run", "sandbox": S, "argv": ["true"]})
check(r.get("ok") is False and r["error"].get("code") == "not_found", "run in a destroyed sandbox: not_found", r)
r = c.call({"op": "create", "best_effort": True, "name": "doomed"})
is_(r.get("ok"), True, "the name is free again after destroy")
c.call({"op": "destroy", "sandbox": "doomed"})
c.close()
EOF

# ---- sandboxctl -------------------------------------------------------------------------
if [ -x "$SANDBOXCTL" ]; then
        ctl run --best-effort -- sh -c 'exit 3' >/dev/null 2>&1
        is "$?" 3 "sandboxctl run --best-effort -- sh -c 'exit 3' exits 3"
        out=$(ctl run --best-effort -- sh -c 'echo out; echo err >&2' 2>"$T/err")
        is "$?/$out/$(cat "$T/err")" "0/out/err" "sandboxctl run passes stdout and stderr through"
        ctl run --best-effort -- sh -c 'kill -TERM $$' >/dev/null 2>&1
        is "$?" 143 "sandboxctl run: a command killed by SIGTERM exits 143"
        ctl run --best-effort --timeout 1 -- sleep 30 >/dev/null 2>&1
        is "$?" 124 "sandboxctl run --timeout 1: exits 124"
        ctl run --best-effort -- /nonexistent >/dev/null 2>&1
        is "$?" 125 "sandboxctl run of a missing program exits 125"
        ctl run -- true >/dev/null 2>"$T/err"
        rc=$?
        if [ "$(jget "$(rpc '{"id":1,"op":"hello"}')" '.capabilities.cgroup.memory')" = false ]; then
                is "$rc" 125 "sandboxctl run without --best-effort on this host exits 125 (limit_unenforceable)"
                # The daemon's hint names the protocol field; sandboxctl's user needs the option.
                err=$(cat "$T/err")
                like "$err" "limit_unenforceable: .*pass --best-effort to run anyway" \
                        "sandboxctl run's refusal names the option to add: --best-effort"
                check "...and not the protocol field best_effort" [ "${err/pass best_effort/}" = "$err" ]
                ctl run --timeout 30s -- python3 -c 'print(2 + 2)' >/dev/null 2>"$T/err"
                err=$(cat "$T/err")
                like "$err" "not even the default memory limit \(default_memory\) can be enforced; pass --best-effort" \
                        "sandboxctl run --timeout 30s (no limit given): the refusal says it is the default, names --best-effort"
                check "...and does not name limits.memory, which the user never set" [ "${err/limits.memory/}" = "$err" ]
                ctl create --memory 64M >/dev/null 2>"$T/err"
                is "$?" 1 "sandboxctl create --memory 64M on this host fails"
                like "$(cat "$T/err")" "memory.*pass --best-effort to run anyway" \
                        "sandboxctl create's refusal names --best-effort too"
                ctl --json run -- true >"$T/out" 2>/dev/null
                is "$(jget "$(cat "$T/out")" .error.message | grep -c 'pass best_effort')" 1 \
                        "sandboxctl --json prints the daemon's reply as it came"
        else
                diag "this host enforces memory: the refusal without --best-effort is not seen here"
        fi
        out=$(printf 'piped\n' | ctl run --best-effort --timeout 3 --stdin -- cat)
        is "$?/$out" 0/piped "sandboxctl run --stdin -- cat: the input comes out, cat ends (status 0, not 124)"
        # 5M of binary input is a request line past max_line_bytes (as base64): the refusal says why.
        out=$(head -c 5M /dev/urandom | ctl run --best-effort --stdin -- wc -c 2>&1)
        like "$? $out" "^125 .*too_large.*because of --stdin: .*max_stdin_bytes.*sandboxctl cp" \
                "sandboxctl run --stdin of 5M binary: exit 125, the refusal says the stdin made it too long and what to do"
        id=$(ctl create --best-effort --name cli-box)
        like "$id" '^sbx-[0-9a-f]{12}$' "sandboxctl create prints the id"
        out=$(ctl run -s cli-box -- sh -c 'echo in-box > /work/f; cat /work/f')
        is "$out" in-box "sandboxctl run -s NAME"
        is "$(ctl run -s cli-box -- id -u) $(ctl run -s cli-box --user root -- id -u)" "1000 0" \
                "sandboxctl run runs as uid 1000 inside; --user root as root of the sandbox's user namespace"
        like "$(ctl list -q)" "$id" "sandboxctl list -q shows it"
        is "$(jget "$(ctl --json inspect cli-box)" '.sandbox.id // .id')" "$id" "sandboxctl --json inspect"
        # What the sweep applies is shown, also where the sandbox has none of it.
        out=$(ctl inspect cli-box)
        like "$out" $'\n''disk limit: +none'$'\n''disk used: +not measured yet \(the next sweep does\)'$'\n''ttl: +none'$'\n''idle: +none'$'\n' \
                "sandboxctl inspect shows disk limit, disk used, ttl and idle as none when there are none"
        sw=$(ctl create --best-effort --disk 2G --ttl 24h --idle 90m)
        out=$(ctl inspect "$sw")
        like "$out" $'\n''disk limit: +2G'$'\n' "sandboxctl inspect shows --disk 2G"
        like "$out" $'\n''ttl: +24h \(expires at 20[0-9-]+T[0-9:]+Z\)'$'\n' "...--ttl 24h with when it expires"
        like "$out" $'\n''idle: +90m without a run, then destroyed'$'\n' "...and --idle 90m"
        ctl sweep >/dev/null
        like "$(ctl inspect "$sw")" $'\n''disk used: +[0-9.]+[KMG]?i?B? \(at the last sweep\)'$'\n' \
                "after a sweep, inspect shows the disk use it measured"
        ctl destroy "$sw" >/dev/null
        ctl destroy cli-box >/dev/null
        is "$?" 0 "sandboxctl destroy"
        ctl destroy "$id" >/dev/null 2>&1
        is "$?" 0 "sandboxctl destroy of a sandbox already gone is not an error"
        out=$(ctl list -q)
        check "sandboxctl list -q no longer shows it" [ "${out/$id/}" = "$out" ]
        # run -v says the run's id as it starts, which sandboxctl kill takes while it runs.
        kv=$(ctl create --best-effort)
        ctl run --sandbox "$kv" -v -- sleep 60 2>"$T/v.err" &
        vpid=$!
        check "sandboxctl run -v says 'run=ID started' on stderr while the run goes on" \
                wait_until 10 grep -q '^sandboxctl: run=run-[0-9a-f]* started$' "$T/v.err"
        rid=$(sed -n 's/^sandboxctl: run=\(run-[0-9a-f]*\) started$/\1/p' "$T/v.err")
        check "sandboxctl kill of that id" ctl kill "$rid"
        wait "$vpid"
        is "$?" 137 "... ends the run (kill's default, SIGKILL: 137)"
        ctl destroy "$kv" >/dev/null
else
        nok "sandboxctl is built ($SANDBOXCTL)"
fi

stop_daemon
