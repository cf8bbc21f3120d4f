#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The wire protocol against a real daemon (docs/protocol.md; THREATS.md PRO-01..PRO-08):
# hello/health, malformed lines, envelope errors, the line cap, pipelining, disconnects,
# many connections, a client that does not read, and no fd leak.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

# The daemon refuses a bad configuration before it touches anything.
printf 'bogus_key = 1\n' >"$T/bad.conf"
"$SANDBOXD" --config "$T/bad.conf" --listen "$T/never.sock" --state-dir "$T/never" --cgroup-root "$CG" \
        >"$T/bad.out" 2>&1
rc=$?
check "sandboxd refuses a configuration with an unknown key (status $rc)" [ "$rc" != 0 ]
like "$(cat "$T/bad.out")" "bogus_key" "the refusal names the unknown key"
check "a refused start leaves no cgroup behind" [ ! -e "$CG" ]

start_daemon --max-line-bytes 64K || exit 0
FD0=$(daemon_fd_baseline)
diag "daemon pid $DAEMON_PID, $FD0 fds at rest"

# ---- hello and health -------------------------------------------------------------------
run_py "hello and health" 30 <<'EOF'
import os
from client import Conn, check, is_
sock, cg = os.environ["SOCK"], os.environ["CG"]
c = Conn(sock)
h = c.call({"id": 1, "op": "hello"})
is_(h.get("ok"), True, "hello: ok")
is_(h.get("id"), 1, "hello: the id comes back")
is_(h.get("protocol"), 1, "hello: protocol 1")
check(isinstance(h.get("version"), str) and len(h["version"]) > 0, "hello: a version string", h.get("version"))
caps = h.get("capabilities") or {}
ctrl = open(cg + "/sandboxes/cgroup.controllers").read().split()
for name in ("memory", "pids", "cpu"):
    v = (caps.get("cgroup") or {}).get(name)
    check(isinstance(v, bool), "hello: capabilities.cgroup.%s is a boolean" % name, v)
    is_(v, name in ctrl, "hello: capabilities.cgroup.%s says whether the sandboxes' parent has the controller" % name)
for name in ("clone_into_cgroup", "pidfd", "cgroup_kill", "memory_peak"):
    check(isinstance((caps.get("kernel") or {}).get(name), bool), "hello: capabilities.kernel.%s is a boolean" % name,
          caps.get("kernel"))
is_(caps.get("cgroup_root"), cg, "hello: capabilities.cgroup_root is the --cgroup-root")
peer = h.get("peer") or {}
is_(peer.get("uid"), 0, "hello: peer uid 0 (SO_PEERCRED)")
is_(peer.get("gid"), 0, "hello: peer gid 0")
is_(peer.get("pid"), os.getpid(), "hello: peer pid is the client's")
h = c.call({"id": "health-1", "op": "health"})
is_(h.get("ok"), True, "health: ok")
is_(h.get("id"), "health-1", "health: a string id comes back")
is_(h.get("status"), "ok", "health: status ok")
check(isinstance(h.get("uptime_s"), (int, float)) and h["uptime_s"] >= 0, "health: uptime_s is a number", h)
is_(h.get("sandboxes"), 0, "health: no sandboxes")
is_(h.get("runs"), 0, "health: no runs")
check(isinstance(h.get("connections"), int) and h["connections"] >= 1, "health: connections counts this one", h)
c.close()
EOF

# ---- malformed lines --------------------------------------------------------------------
run_py "malformed lines" 60 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"])
bad = [
    ("syntax error", b'{bad'),
    ("single quotes", b"{'a':1}"),
    ("an unfinished array", b'[1,2'),
    ("trailing characters", b'{"id":1,"op":"hello"} trailing'),
    ("two objects on one line", b'{"id":1,"op":"hello"}{"id":2,"op":"hello"}'),
    ("NaN", b'{"id":NaN,"op":"hello"}'),
    ("Infinity", b'{"id":1,"op":"hello","x":Infinity}'),
    ("duplicate keys", b'{"id":1,"op":"hello","op":"health"}'),
    ("duplicate keys in a nested object", b'{"id":1,"op":"create","best_effort":true,"limits":{"pids":1,"pids":2}}'),
    ("a \\u0000 escape", b'{"id":"a\\u0000b","op":"hello"}'),
    ("a raw NUL byte", b'{"id":1,"op":"hel\x00lo"}'),
    ("invalid UTF-8", b'{"id":"\xff\xfe","op":"hello"}'),
    ("an overlong UTF-8 encoding", b'{"id":"\xc0\xaf","op":"hello"}'),
    ("a UTF-8-encoded surrogate", b'{"id":"\xed\xa0\x80","op":"hello"}'),
    ("a lone surrogate escape", b'{"id":"\\ud800","op":"hello"}'),
    ("a trailing comma", b'{"id":1,"op":"hello",}'),
    ("a comment", b'/*c*/{"id":1,"op":"hello"}'),
    ("a UTF-8 BOM", b'\xef\xbb\xbf{"id":1,"op":"hello"}'),
    ("a leading zero", b'{"id":01,"op":"hello"}'),
    ("a truncated object", b'{"id":1,"op":"hello"'),
    ("a bare closing brace", b'}'),
    ("a misspelt literal", b'{"id":1,"op":"hello","x":tru}'),
    ("a raw control character in a string", b'{"id":"a\tb","op":"hello"}'),
]
for i, (what, line) in enumerate(bad):
    probe = "probe-%d" % i
    c.send_raw(line + b"\n" + b'{"id":"%s","op":"hello"}\n' % probe.encode())
    before = []
    try:
        while True:
            m = c.recv_json(10)
            if m is None:
                break
            if m.get("id") == probe:
                break
            before.append(m)
    except Exception as e:
        check(False, "%s: answered" % what, e)
        break
    else:
        ok = (len(before) == 1 and before[0].get("ok") is False and before[0].get("id", "absent") is None
              and (before[0].get("error") or {}).get("code") == "invalid_json")
        check(ok, "%s: exactly one invalid_json reply with a null id" % what, before)
        check(m is not None and m.get("ok") is True, "%s: the same connection then answers hello" % what, m)

# Deeper than 16: refused (as invalid_json or invalid_request), never answered twice.
for depth in (17, 20000):
    line = b'{"id":"deep","op":"hello","x":' + b"[" * depth + b"]" * depth + b"}"
    c.send_raw(line + b'\n{"id":"after-deep","op":"hello"}\n')
    before = []
    while True:
        m = c.recv_json(10)
        if m is None or m.get("id") == "after-deep":
            break
        before.append(m)
    check(len(before) == 1 and before[0].get("ok") is False
          and (before[0].get("error") or {}).get("code") in ("invalid_json", "invalid_request"),
          "nesting %d deep: exactly one error reply" % depth, before)
    check(m is not None and m.get("ok") is True, "nesting %d deep: the connection stays usable" % depth)

# JSON that is valid but not an object is not a request.
for what, line in (("a bare number", b"1"), ("a bare string", b'"hello"'), ("null", b"null"), ("true", b"true"),
                   ("a number with a space after it", b"1 "), ("an array", b'[{"id":1,"op":"hello"}]')):
    c.send_raw(line + b'\n{"id":"after","op":"hello"}\n')
    before = []
    while True:
        m = c.recv_json(10)
        if m is None or m.get("id") == "after":
            break
        before.append(m)
    check(len(before) == 1 and (before[0].get("error") or {}).get("code") == "invalid_request",
          "%s: exactly one invalid_request reply" % what, before)

# Blank lines are keep-alives (no reply); CRLF is tolerated.
c.send_raw(b'\n\n\r\n{"id":"crlf","op":"hello"}\r\n')
m = c.recv_json(10)
is_((m or {}).get("id"), "crlf", "blank lines get no reply, a CRLF-terminated request is answered")
is_((m or {}).get("ok"), True, "the CRLF-terminated hello is ok")
# A request split over many tiny writes is reassembled.
import time
for b in b'{"id":"split","op":"health"}\n':
    c.send_raw(bytes([b]))
m = c.recv_json(10)
check(m is not None and m.get("id") == "split" and m.get("ok") is True, "a request written byte by byte is answered", m)
c.close()
EOF

# ---- envelope and field errors ----------------------------------------------------------
run_py "envelope and field errors" 60 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"])
def one(line, probe="p"):
    c.send_raw(line + b'\n{"id":"%s","op":"health"}\n' % probe.encode())
    got = []
    while True:
        m = c.recv_json(10)
        if m is None or m.get("id") == probe:
            return got
        got.append(m)

r = one(b'{"id":7,"op":"frobnicate"}')
check(len(r) == 1 and r[0].get("ok") is False and r[0]["error"].get("code") == "unknown_op" and r[0].get("id") == 7,
      "unknown op: unknown_op with the id echoed", r)
r = one(b'{"id":"x-1","op":"frobnicate"}')
check(len(r) == 1 and r[0].get("id") == "x-1" and r[0]["error"].get("code") == "unknown_op",
      "unknown op: a string id is echoed", r)
r = one(b'{"id":8}')
check(len(r) == 1 and r[0]["error"].get("code") == "invalid_request" and r[0]["error"].get("field") == "op"
      and r[0].get("id") == 8, "missing op: invalid_request, field op, id echoed", r)
r = one(b'{"op":"hello"}')
check(len(r) == 1 and r[0]["error"].get("code") == "invalid_request" and r[0]["error"].get("field") == "id",
      "missing id: invalid_request, field id", r)
r = one(b'{"id":9,"op":"hello","bogus":1}')
check(len(r) == 1 and r[0]["error"].get("code") == "invalid_request" and r[0]["error"].get("field") == "bogus"
      and r[0].get("id") == 9, "unknown field: invalid_request naming it", r)
r = one(b'{"id":10,"op":"create","best_effort":true,"limits":{"bogus":1}}')
check(len(r) == 1 and r[0]["error"].get("code") == "invalid_request" and r[0]["error"].get("field") == "limits.bogus",
      "unknown field inside limits: invalid_request naming limits.bogus", r)
r = one(b'{"id":11,"op":"health","sandbox":null}')
check(len(r) == 1 and r[0]["error"].get("code") == "invalid_request" and r[0]["error"].get("field") == "sandbox",
      "a field an op does not take is refused even when null", r)

bad_ids = [b"true", b"[1]", b"{}", b"1.5", b"null", b'""', b'"' + b"a" * 129 + b'"']
for bid in bad_ids:
    r = one(b'{"id":' + bid + b',"op":"hello"}')
    check(len(r) == 1 and r[0].get("ok") is False and r[0]["error"].get("code") == "invalid_request"
          and r[0]["error"].get("field") == "id", "id %s: invalid_request, field id" % bid.decode()[:20], r)
r = one(b'{"id":"' + b"a" * 128 + b'","op":"hello"}', "p2")
check(len(r) == 1 and r[0].get("ok") is True and r[0].get("id") == "a" * 128, "a 128-byte string id is accepted", r)

typed = [
    (b'{"id":12,"op":5}', "op", "op must be a string"),
    (b'{"id":13,"op":"inspect","sandbox":5}', "sandbox", "sandbox must be a string"),
    (b'{"id":14,"op":"inspect"}', "sandbox", "inspect without sandbox"),
    (b'{"id":15,"op":"run","best_effort":true,"argv":"ls"}', "argv", "argv must be an array"),
    (b'{"id":16,"op":"run","best_effort":true,"argv":[1]}', "argv", "argv must hold strings"),
    (b'{"id":17,"op":"run","best_effort":true,"argv":[]}', "argv", "argv must not be empty"),
    (b'{"id":18,"op":"run","best_effort":true,"argv":["true"],"command":"true"}', "argv", "argv and command together"),
    (b'{"id":19,"op":"run","best_effort":true}', "argv", "run without argv or command"),
    (b'{"id":20,"op":"create","best_effort":"yes"}', "best_effort", "best_effort must be a boolean"),
    (b'{"id":21,"op":"create","best_effort":true,"limits":{"memory":-1}}', "limits.memory", "negative memory"),
    (b'{"id":22,"op":"create","best_effort":true,"limits":{"memory":"lots"}}', "limits.memory", "memory that is no size"),
    (b'{"id":23,"op":"create","best_effort":true,"limits":{"pids":0.5}}', "limits.pids", "pids that is no integer"),
    (b'{"id":24,"op":"create","best_effort":true,"limits":"big"}', "limits", "limits must be an object"),
    (b'{"id":25,"op":"create","best_effort":true,"name":"sbx-mine"}', "name", "a name shaped like an id"),
    (b'{"id":26,"op":"create","best_effort":true,"name":"a/b"}', "name", "a name with a slash"),
    (b'{"id":26,"op":"create","best_effort":true,"name":"."}', "name", "the name ."),
    (b'{"id":26,"op":"create","best_effort":true,"name":".."}', "name", "the name .."),
    (b'{"id":26,"op":"create","best_effort":true,"name":".hidden"}', "name", "a name starting with a dot"),
    (b'{"id":26,"op":"create","best_effort":true,"name":"-rf"}', "name", "a name starting with a dash"),
    (b'{"id":26,"op":"create","best_effort":true,"name":"a\\nb"}', "name", "a name with a newline"),
    (b'{"id":26,"op":"create","best_effort":true,"name":"' + b"n" * 65 + b'"}', "name", "a name of 65 bytes"),
    (b'{"id":27,"op":"create","best_effort":true,"network":"host"}', "network", "an unsupported network"),
    (b'{"id":28,"op":"run","best_effort":true,"argv":["true"],"timeout_s":"soon"}', "timeout_s", "a timeout that is no duration"),
    (b'{"id":29,"op":"run","best_effort":true,"argv":["true"],"timeout_s":0}', "timeout_s", "a zero timeout"),
    (b'{"id":29,"op":"run","best_effort":true,"argv":["true"],"cpu_s":0}', "cpu_s", "a zero cpu_s"),
    (b'{"id":29,"op":"run","best_effort":true,"argv":["true"],"output_bytes":0}', "output_bytes", "a zero output_bytes"),
    (b'{"id":29,"op":"run","best_effort":true,"argv":["true"],"memory":"0"}', "memory", "a zero memory"),
    (b'{"id":30,"op":"run","best_effort":true,"argv":["true"],"env":{"A":1}}', "env", "an env value that is no string"),
    (b'{"id":31,"op":"run","best_effort":true,"argv":["true"],"env":{"A=B":"1"}}', "env", "an env name with '='"),
    (b'{"id":32,"op":"run","best_effort":true,"argv":["true"],"stdin_encoding":"rot13","stdin":"x"}', "stdin_encoding", "an unknown stdin encoding"),
    (b'{"id":33,"op":"run","best_effort":true,"argv":["true"],"stdin_encoding":"base64","stdin":"!!!"}', "stdin", "stdin that is no base64"),
    (b'{"id":34,"op":"kill","run_id":"run-000000000000","signal":"BOGUS"}', "signal", "an unknown signal name"),
    (b'{"id":35,"op":"kill"}', "run_id", "kill without run_id"),
    (b'{"id":36,"op":"run","sandbox":"nope","best_effort":true,"argv":["true"]}', "best_effort", "best_effort with an existing sandbox"),
]
for line, field, what in typed:
    r = one(line)
    check(len(r) == 1 and r[0].get("ok") is False and r[0]["error"].get("code") == "invalid_request"
          and r[0]["error"].get("field") == field, "%s: invalid_request, field %s" % (what, field), r)
h = c.call({"op": "health"})
is_((h.get("sandboxes"), h.get("runs")), (0, 0), "no refused request left a sandbox or a run behind")
c.close()
EOF

# ---- numbers out of range, blank commands, signal names (issue 17, 7 and 8) -------------
run_py "numbers, blank commands and signal names" 60 <<'EOF'
import os
from client import Conn, check, is_, wait_for
c = Conn(os.environ["SOCK"])
def refused(req, field, what, has=None, hasnt="exceeds"):
    r = c.call(dict(req, id="n"))
    e = r.get("error") or {}
    msg = e.get("message", "")
    check(r.get("ok") is False and e.get("code") == "invalid_request" and e.get("field") == field
          and (has is None or has in msg) and (hasnt is None or hasnt not in msg),
          "%s: invalid_request, field %s%s" % (what, field, ", '%s'" % has if has else ""), r)

def create(limits, field, what, has):
    refused({"op": "create", "best_effort": True, "limits": limits}, field, what, has)

def run(extra, field, what, has=None):
    req = {"op": "run", "best_effort": True, "argv": ["true"]}
    req.update(extra)
    refused(req, field, what, has)

# Past INT64_MAX a size used to wrap: "18446744073709551615" became -1 (no limit).
for v in ("18446744073709551615", "9223372036854775808", "8388608T", 18446744073709551615, 9223372036854775808):
    create({"disk": v}, "limits.disk", "limits.disk %r" % (v,), "out of range")
create({"memory": 18446744073709551615}, "limits.memory", "limits.memory 2^64-1 as a number", "out of range")
create({"memory": -1}, "limits.memory", "limits.memory -1", "out of range")
create({"memory": -0.5}, "limits.memory", "limits.memory -0.5", "out of range")
create({"timeout_s": "9223372036855"}, "limits.timeout_s", "limits.timeout_s past INT64_MAX us", "out of range")
create({"pids": 18446744073709551615}, "limits.pids", "limits.pids 2^64-1", "out of range")
# Below the minimum is never "exceeds the configured maximum".
create({"output_bytes": 1.0}, "limits.output_bytes", "limits.output_bytes 1.0", "at least 2")
create({"output_bytes": -0}, "limits.output_bytes", "limits.output_bytes -0", "at least 2")
create({"output_bytes": -0.0}, "limits.output_bytes", "limits.output_bytes -0.0", "at least 2")
create({"timeout_s": -0}, "limits.timeout_s", "limits.timeout_s -0", "must be positive")
create({"timeout_s": 0.0}, "limits.timeout_s", "limits.timeout_s 0.0", "must be positive")
# Integer fields take integers only: 1.0 is a fraction to them (sizes and durations take it).
create({"pids": 1.0}, "limits.pids", "limits.pids 1.0", "integer")
run({"timeout_s": -0}, "timeout_s", "run timeout_s -0", "must be positive")
run({"output_bytes": 1.0}, "output_bytes", "run output_bytes 1.0", "between 2")
run({"output_bytes": -0}, "output_bytes", "run output_bytes -0", "at least 2")
run({"cpu_s": "9223372036855s"}, "cpu_s", "run cpu_s past INT64_MAX us", "out of range")
# -0 as written on the wire (Python writes its -0 as 0).
for line, field, has in ((b'{"id":"z","op":"create","best_effort":true,"limits":{"output_bytes":-0}}', "limits.output_bytes", "at least 2"),
                         (b'{"id":"z","op":"create","best_effort":true,"limits":{"timeout_s":-0}}', "limits.timeout_s", "must be positive"),
                         (b'{"id":"z","op":"run","best_effort":true,"argv":["true"],"timeout_s":-0}', "timeout_s", "must be positive"),
                         (b'{"id":"z","op":"run","best_effort":true,"argv":["true"],"output_bytes":-0}', "output_bytes", "at least 2")):
    c.send_raw(line + b"\n")
    r = c.final("z", 10) or {}
    e = r.get("error") or {}
    check(e.get("code") == "invalid_request" and e.get("field") == field and has in e.get("message", "")
          and "exceeds" not in e.get("message", ""), "%s: invalid_request, field %s, '%s'" % (line.decode()[30:], field, has), r)
run({"memory": "9223372036854775808"}, "memory", "run memory 2^63", "out of range")
run({"pids": 2.0}, "pids", "run pids 2.0", "integer")

# An empty command would be "sh -c ''": nothing run, exit 0.
for cmd in ("", "   ", "\n\t "):
    refused({"op": "run", "best_effort": True, "command": cmd}, "command", "command %r" % cmd, "empty")

# One set of names: glibc's real-time numbering (RTMIN 34 .. RTMAX 64); 32 and 33 are glibc's own.
for sig in ("RTMIN", "SIGRTMIN", "RTMIN+3", "RTMAX", "SIGRTMAX-2", "34", 64):
    r = c.call({"id": "k", "op": "kill", "run_id": "run-000000000000", "signal": sig})
    check((r.get("error") or {}).get("code") == "not_found", "kill signal %r is a known name (not_found follows)" % (sig,), r)
for sig in ("32", 33, "RTMIN-1", "RTMIN+31", "RTMAX+1", "65"):
    r = c.call({"id": "k", "op": "kill", "run_id": "run-000000000000", "signal": sig})
    e = r.get("error") or {}
    check(e.get("code") == "invalid_request" and e.get("field") == "signal", "kill signal %r: invalid_request" % (sig,), r)
# A throwaway sandbox made before a refusal found in resolving goes away.
check(wait_for(lambda: (lambda h: (h.get("sandboxes"), h.get("runs")) == (0, 0))(c.call({"id": "h", "op": "health"})), 10),
      "no refused request left a sandbox or a run behind")
c.close()
EOF

# ---- the line cap -----------------------------------------------------------------------
run_py "oversized lines" 120 <<'EOF'
import os, time
from client import Conn, check, is_
pid = os.environ["DAEMON_PID"]
def rss_kb():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])
    return -1
CAP = 64 * 1024
c = Conn(os.environ["SOCK"])
def until(probe):
    got = []
    while True:
        m = c.recv_json(20)
        if m is None or m.get("id") == probe:
            return got, m
        got.append(m)

# Just below and just above the cap.
head = b'{"id":"near","op":"hello"'
line = head + b" " * (CAP - 100 - len(head)) + b"}"
c.send_raw(line + b"\n")
m = c.recv_json(10)
check(m is not None and m.get("id") == "near" and m.get("ok") is True, "a line 100 bytes below the cap is parsed", m)
line = head + b" " * (CAP + 100 - len(head)) + b"}"
c.send_raw(line + b'\n{"id":"after-above","op":"hello"}\n')
got, m = until("after-above")
check(len(got) == 1 and (got[0].get("error") or {}).get("code") == "too_large" and got[0].get("id", "absent") is None,
      "a line 100 bytes above the cap: one too_large reply with a null id", got)
check(m is not None and m.get("ok") is True, "then the connection answers hello")

# 1 MiB without a newline, in chunks; then the newline and a hello.
chunk = b"x" * 65536
for _ in range(16):
    c.send_raw(chunk)
c.send_raw(b'\n{"id":"after-1m","op":"hello"}\n')
got, m = until("after-1m")
check(len(got) == 1 and (got[0].get("error") or {}).get("code") == "too_large",
      "1 MiB in one line: exactly one too_large reply", got)
check(m is not None and m.get("ok") is True, "1 MiB in one line: the same connection then answers hello", m)

# 50 MiB in one line: the daemon must not buffer it.
time.sleep(0.2)
before = rss_kb()
peak = before
for i in range(50 * 16):
    c.send_raw(chunk)
    if i % 64 == 0:
        peak = max(peak, rss_kb())
peak = max(peak, rss_kb())
c.send_raw(b'\n{"id":"after-50m","op":"hello"}\n')
got, m = until("after-50m")
check(len(got) == 1 and (got[0].get("error") or {}).get("code") == "too_large",
      "50 MiB in one line: exactly one too_large reply", got)
check(m is not None and m.get("ok") is True, "50 MiB in one line: then hello works", m)
check(peak - before < 8 * 1024, "50 MiB in one line: the daemon's RSS grew by less than 8 MiB (%d kB -> peak %d kB)" % (before, peak))
print("# RSS before %d kB, peak %d kB" % (before, peak))
c.close()
EOF

# ---- pipelining -------------------------------------------------------------------------
run_py "pipelining" 60 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"])
reqs = b"".join(b'{"id":%d,"op":"%s"}\n' % (i, b"hello" if i % 2 else b"health") for i in range(100))
c.send_raw(reqs)
got = [c.recv_json(20) for _ in range(100)]
ids = sorted(m["id"] for m in got if m)
is_(ids, list(range(100)), "100 pipelined requests in one write: 100 replies, one per id")
check(all(m and m.get("ok") is True for m in got), "all 100 replies are ok")
check(all(("protocol" in m) == (m["id"] % 2 == 1) for m in got if m), "each reply answers its own request")
m = c.call({"id": "last", "op": "hello"})
is_(m.get("id"), "last", "no extra reply came after the 100")
c.close()
EOF

# ---- disconnects ------------------------------------------------------------------------
run_py "disconnects" 60 <<'EOF'
import os, time
from client import Conn, check, is_, call
sock, cg = os.environ["SOCK"], os.environ["CG"]
def health():
    return call(sock, {"id": "h", "op": "health"}, 10)
def sandbox_cgroups():
    out = []
    for root, dirs, files in os.walk(cg + "/sandboxes"):
        out += [os.path.join(root, d) for d in dirs]
    return out
def procs_under(path):
    pids = []
    for root, dirs, files in os.walk(path):
        try:
            pids += [int(p) for p in open(os.path.join(root, "cgroup.procs")).read().split()]
        except OSError:
            pass
    return pids
def start_time(pid):
    """The process's start time (field 22 of /proc/PID/stat), None once it is gone: a pid alone
    may have been given to another process since (pid_max is 32768 on this kind of machine, and
    the suite forks fast)."""
    try:
        return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
def wait_for(pred, limit):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()

# Mid-line.
c = Conn(sock)
c.send_raw(b'{"id":1,"op":"hel')
c.close()
is_(health().get("status"), "ok", "a client that disconnects mid-line: others are still answered")
# A partial line that stays open does not block anyone.
idle = Conn(sock)
idle.send_raw(b'{"id":1,"op":"hea')
is_(health().get("status"), "ok", "a client idling mid-line does not block others")
idle.send_raw(b'lth"}\n')
m = idle.recv_json(10)
check(m is not None and m.get("ok") is True, "the idle client's line, once finished, is answered", m)
idle.close()
# Requests whose replies can no longer be delivered (the daemon must not die of SIGPIPE).
c = Conn(sock)
c.send_raw(b'{"id":1,"op":"hello"}\n' * 1000)
c.close()
is_(health().get("status"), "ok", "a client that closes with 1000 replies pending: the daemon lives on")

# Right after sending a run: the run is killed, its throwaway sandbox goes away.
c = Conn(sock)
c.send({"id": "r", "op": "run", "best_effort": True, "argv": ["sleep", "60"]})
started = wait_for(lambda: health().get("runs") == 1 and procs_under(cg + "/sandboxes"), 10)
check(started, "the run started (health counts it, its cgroup has processes)", health())
pids = [(p, start_time(p)) for p in procs_under(cg + "/sandboxes")]
print("# processes in the sandbox cgroups: %s" % [p for p, _ in pids])
c.close()
t0 = time.monotonic()
# sleep 60 against a bound of 30 s: the run was killed, with room for a loaded machine.
gone = wait_for(lambda: health().get("runs") == 0 and health().get("sandboxes") == 0, 30)
check(gone, "after the client left, health shows no run and no sandbox", health())
check(time.monotonic() - t0 < 30, "the run was killed, not left to finish its sleep 60")
check(wait_for(lambda: not sandbox_cgroups(), 5), "no child cgroup is left under sandboxes/", sandbox_cgroups())
alive = [p for p, t in pids if t is not None and start_time(p) == t]
is_(alive, [], "no process of the run survived")
is_(health().get("status"), "ok", "the daemon keeps answering others")
EOF

# ---- a client that shuts down its sending side ------------------------------------------
# As socat does at the end of its input: shutdown(SHUT_WR) after the requests. It is answered as
# any other (its runs finish, their replies come), and then the daemon closes.
run_py "half-close" 90 <<'EOF'
import os, socket, time
from client import Conn, check, is_, call
sock, cg = os.environ["SOCK"], os.environ["CG"]
def health():
    return call(sock, {"id": "h", "op": "health"}, 10)
def wait_for(pred, limit):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()
def until_eof(c, limit):
    """Every reply line until the daemon closes; None if it did not close within limit s."""
    out, end = [], time.monotonic() + limit
    while time.monotonic() < end:
        m = c.recv_json(max(0.1, end - time.monotonic()))
        if m is None:
            return out
        out.append(m)
    return None
def finals(msgs):
    return {m["id"]: m for m in msgs if "ok" in m}

# One run, then SHUT_WR: the run outlives the end of the input by a second.
c = Conn(sock)
c.send({"id": 1, "op": "run", "best_effort": True, "argv": ["sh", "-c", "sleep 1; echo done"]})
c.s.shutdown(socket.SHUT_WR)
got = until_eof(c, 30)
check(got is not None, "a run then SHUT_WR: the daemon closes the connection once it is answered", got)
r = finals(got or []).get(1, {})
is_(r.get("ok"), True, "the run's final reply arrives after the client's half-close")
is_((r.get("exit_code"), r.get("reason"), r.get("stdout")), (0, "exited", "done\n"),
    "the run was finished, not killed: exit 0, reason exited, its whole stdout")
check(any(m.get("event") == "started" for m in got or []), "its started event came first", got)
c.close()

# Several pipelined requests, the last one without its newline, then SHUT_WR.
c = Conn(sock)
c.send_raw(b'{"id":"a","op":"hello"}\n'
           b'{"id":"b","op":"run","best_effort":true,"argv":["sh","-c","sleep 0.5; echo b"]}\n'
           b'{"id":"c","op":"run","best_effort":true,"argv":["echo","c"]}\n'
           b'{"id":"d","op":"health"}\n'
           b'{"id":"e","op":"hello"}')
c.s.shutdown(socket.SHUT_WR)
got = until_eof(c, 30)
check(got is not None, "five pipelined requests then SHUT_WR: the daemon closes once all are answered", got)
f = finals(got or [])
is_(sorted(f), ["a", "b", "c", "d", "e"], "one final reply per request, the unended last one included")
check(all(m.get("ok") is True for m in f.values()), "all of them ok", f)
is_((f.get("b", {}).get("stdout"), f.get("c", {}).get("stdout")), ("b\n", "c\n"), "both runs finished with their output")
is_(f.get("e", {}).get("protocol"), 1, "the request without a newline was taken as ended: hello answered")
c.close()

# A session opened, then SHUT_WR: its output and exit event come, then the daemon closes.
sb = call(sock, {"id": "mk", "op": "create", "best_effort": True}, 30)["sandbox"]["id"]
c = Conn(sock)
c.send({"id": "p", "op": "pty.open", "sandbox": sb, "pty": False, "argv": ["sh", "-c", "sleep 0.5; echo bye"]})
c.s.shutdown(socket.SHUT_WR)
got = until_eof(c, 30)
check(got is not None, "pty.open then SHUT_WR: the daemon closes once the session's exit event is sent", got)
got = got or []
is_(finals(got).get("p", {}).get("ok"), True, "the session's open reply came")
is_("".join(m.get("data", "") for m in got if m.get("event") == "stdout"), "bye\n", "its output came")
is_([m.get("exit_code") for m in got if m.get("event") == "exit"], [0], "and its exit event, once")
c.close()
call(sock, {"id": "rm", "op": "destroy", "sandbox": sb}, 30)

# Half-closed, then closed for good before its run ends: the run dies with the connection.
c = Conn(sock)
c.send({"id": "s", "op": "run", "best_effort": True, "argv": ["sleep", "60"]})
c.s.shutdown(socket.SHUT_WR)
check(wait_for(lambda: health().get("runs") == 1, 10), "a half-closed client's run is running", health())
c.close()
t0 = time.monotonic()
check(wait_for(lambda: health().get("runs") == 0 and health().get("sandboxes") == 0, 30) and time.monotonic() - t0 < 30,
      "once it also closes the socket, its run is killed (not left to finish its sleep 60)", health())
is_(health().get("connections"), 1, "no half-closed connection is left behind (only this health call)")
EOF

# ---- many connections, a client that never reads ----------------------------------------
run_py "connection floods" 120 <<'EOF'
import os, threading, time
from client import Conn, check, is_, call
sock = os.environ["SOCK"]
pid = os.environ["DAEMON_PID"]
def rss_kb():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

conns = [Conn(sock, 30) for _ in range(200)]
for i, c in enumerate(conns):
    c.send({"id": i, "op": "hello"})
h = call(sock, {"id": "h", "op": "health"})
check(h.get("connections", 0) >= 201, "200 connections open at once: health counts them", h)
answered = 0
for i, c in enumerate(conns):
    try:
        m = c.recv_json(20)
        if m and m.get("id") == i and m.get("ok") is True:
            answered += 1
    except Exception as e:
        print("# connection %d: %s" % (i, e))
is_(answered, 200, "200 connections at once: each hello answered")
for c in conns:
    c.close()

# A client that never reads: 2000 hellos, then (in a thread, as the daemon may stop reading it)
# 20000 more, while another client is served.
slow = Conn(sock, 60)
slow.send_raw(b"".join(b'{"id":%d,"op":"hello"}\n' % i for i in range(2000)))
N2 = 20000
def flood():
    try:
        slow.send_raw(b"".join(b'{"id":%d,"op":"hello"}\n' % i for i in range(2000, 2000 + N2)))
    except OSError as e:
        print("# flood: %s" % e)
rss0 = rss_kb()
t = threading.Thread(target=flood)
t.start()
other = Conn(sock)
lat = []
for i in range(20):
    t0 = time.monotonic()
    m = other.call({"op": "health"}, 10)
    lat.append(time.monotonic() - t0)
    time.sleep(0.05)
check(all(l < 5 for l in lat), "another client is served while one never reads (max %.3f s)" % max(lat))
rss1 = rss_kb()
check(rss1 - rss0 < 64 * 1024, "the daemon's RSS stays bounded while a client does not read (%d -> %d kB)" % (rss0, rss1))
other.close()
got = set()
try:
    while len(got) < 2000 + N2:
        m = slow.recv_json(30)
        if m is None:
            break
        got.add(m.get("id"))
except Exception as e:
    print("# slow reader: %s" % e)
t.join(30)
is_(len(got), 2000 + N2, "the client that did not read gets every reply once it reads")
slow.close()
EOF

check "the daemon is still alive after the connection tests" kill -0 "$DAEMON_PID"
if wait_fds "$FD0"; then
        ok "the daemon's fd count is back to $FD0 after the connection tests"
else
        nok "the daemon's fd count is back to $FD0 after the connection tests (now $(daemon_fds))"
        diag "$(ls -l /proc/$DAEMON_PID/fd 2>/dev/null)"
fi

# ---- sandboxctl: status -----------------------------------------------------------------
if [ -x "$SANDBOXCTL" ]; then
        out=$(ctl --json status 2>"$T/ctl.err")
        rc=$?
        is "$rc" 0 "sandboxctl --json status exits 0"
        is "$(jget "$out" '.hello.protocol')" 1 "sandboxctl --json status: hello.protocol 1"
        is "$(jget "$out" '.health.status')" ok "sandboxctl --json status: health.status ok"
        out=$(ctl status 2>&1)
        is "$?" 0 "sandboxctl status exits 0"
        like "$out" "0\.1|version|Version" "sandboxctl status prints the daemon's version"
        like "$out" "placement: +subtree" "sandboxctl status prints the placement (subtree: no systemd here)"
        out=$(timeout 10 "$SANDBOXCTL" --socket "$T/nonexistent.sock" status 2>&1)
        rc=$?
        check "sandboxctl status without a daemon fails (status $rc)" [ "$rc" != 0 ]
else
        nok "sandboxctl is built ($SANDBOXCTL)"
fi

# ---- sandboxctl call: requests as given, replies as JSON lines ---------------------------
out=$(ctl call '{"op":"hello"}' '{"op":"nosuch"}' '{"id":"mine","op":"health"}' 2>"$T/call.err")
rc=$?
is "$rc" 0 "sandboxctl call of three requests exits 0, one of them refused ($(cat "$T/call.err"))"
is "$(printf '%s\n' "$out" | wc -l)" 3 "sandboxctl call prints one line a request"
is "$(printf '%s\n' "$out" | jq -rs '[.[0].protocol, .[1].error.code, .[2].id, .[2].status] | join(" ")' 2>&1)" \
        "1 unknown_op mine ok" "each line is the reply to its request, in order: hello, the refusal, health with the caller's id"
out=$(ctl call '{"op":"hello"' 2>&1)
rc=$?
check "sandboxctl call of a request that is not JSON fails before it connects (status $rc)" [ "$rc" = 1 ]
like "$out" "request 1 is not a JSON object" "and says which request"
out=$(ctl call --timeout 1 '{"op":"run","best_effort":true,"argv":["sleep","30"]}' 2>&1)
rc=$?
check "sandboxctl call --timeout 1 of a 30 s run gives up with status 1 (status $rc)" [ "$rc" = 1 ]
like "$out" "no reply within the --timeout" "and says why"
out=$(timeout 10 "$SANDBOXCTL" --socket "$T/nonexistent.sock" call '{"op":"hello"}' 2>&1)
rc=$?
check "sandboxctl call without a daemon fails (status $rc)" [ "$rc" = 1 ]
like "$out" "no sandboxd socket" "and names the missing socket"

stop_daemon

# ---- the partial-line timeout (request_timeout) ------------------------------------------
printf 'request_timeout = 1s\n' >"$T/short.conf"
start_daemon --config "$T/short.conf" || exit 0
run_py "request timeout" 30 <<'EOF'
import os, time
from client import Conn, check, is_, call
sock = os.environ["SOCK"]
c = Conn(sock)
c.send_raw(b'{"id":1,"op":"hel')
t0 = time.monotonic()
try:
    m = c.recv_line(15)
except Exception as e:
    m = e
el = time.monotonic() - t0
check(m is None, "a partial line left for request_timeout (1 s) closes the connection", m)
check(0.5 < el < 10, "it is closed after about request_timeout (%.2f s)" % el)
quiet = Conn(sock)
time.sleep(2)
m = quiet.call({"id": 1, "op": "hello"}, 5)
is_(m.get("ok"), True, "a connection without a partial line is not closed by request_timeout")
quiet.close()
EOF
stop_daemon
