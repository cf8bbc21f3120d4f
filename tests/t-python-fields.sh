#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every field of the protocol's create and run is a keyword of the Python package, in both faces
# (Client and AsyncClient, Sandbox and AsyncSandbox): the field lists are read from the daemon's
# own tables (create_fields in daemon/server/ops.c, request_run_fields and request_limits_fields
# in daemon/core/request-fields.c), so that a field added there and not here fails this test.
# Needs no daemon; prints TAP, exits 0.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
export PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
exec python3 - "$top_srcdir" <<'PY'
import inspect, re, sys

top = sys.argv[1]
n = 0


def ok(cond, what):
    global n
    n += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n, what))
    return cond


def table(path, name):
    """The field names of one FieldSpec table, envelope (id, op, fds) left out."""
    src = open(top + "/" + path).read()
    m = re.search(r"FieldSpec %s\[\] = \{(.*?)\n?\};" % re.escape(name), src, re.S)
    if not m:
        return None
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    return [f for f in re.findall(r'\{\s*"([a-z_]+)"', body) if f not in ("id", "op", "fds")]


create = table("daemon/server/ops.c", "create_fields")
run = table("daemon/core/request-fields.c", "request_run_fields")
limits = table("daemon/core/request-fields.c", "request_limits_fields")
if not ok(bool(create) and bool(run) and bool(limits), "the daemon's create, run and limits field tables are found"):
    print("1..%d" % n)
    sys.exit(0)

# A field's keyword where the name differs; None: not a keyword, for the reason given.
RENAMED = {"timeout_s": "timeout", "stdin_encoding": "stdin"}  # stdin: bytes are sent as base64
NOT_KEYWORDS = {
    # tty hands the terminal's master fd back in the reply: the package receives no fds.
    "tty": "the reply's fd (a terminal master) cannot be received by this package",
    # stream is a method of its own: Client.stream / AsyncClient.stream.
    "stream": "Client.stream and AsyncClient.stream",
}
# Fields only a throwaway run has: a Sandbox's run has its own sandbox.
THROWAWAY = {"sandbox", "limits", "network", "best_effort", "workspace", "mounts", "image"}


def keywords(fn):
    return set(inspect.signature(fn).parameters) - {"self", "cls"}


def expect(fields):
    return {RENAMED.get(f, f) for f in fields if f not in NOT_KEYWORDS}


from sandboxd import AsyncClient, AsyncSandbox, Client, Sandbox  # noqa: E402
from sandboxd import _ops  # noqa: E402

want_create = expect(create) | expect(limits)
want_run = expect(run)
for face in (Client.create, AsyncClient.create, Sandbox.create, AsyncSandbox.create):
    missing = sorted(want_create - keywords(face))
    ok(not missing, "%s takes every field of create and of its limits%s"
       % (face.__qualname__, " (missing: %s)" % ", ".join(missing) if missing else ""))
missing = sorted(expect(create) - keywords(_ops.create))
ok(not missing, "_ops.create sends every field of create%s" % (" (missing: %s)" % ", ".join(missing) if missing else ""))
missing = sorted(expect(limits) - keywords(_ops.limits) - {"limits"})
ok(not missing, "_ops.limits builds every member of limits%s" % (" (missing: %s)" % ", ".join(missing) if missing else ""))
for face in (Client.run, AsyncClient.run, _ops.run):
    missing = sorted(want_run - {"command"} - keywords(face))
    ok(not missing and "command" in keywords(face), "%s takes every field of run%s"
       % (face.__qualname__, " (missing: %s)" % ", ".join(missing) if missing else ""))
for face in (Sandbox.run, AsyncSandbox.run):
    missing = sorted(want_run - THROWAWAY - {"command"} - keywords(face))
    ok(not missing, "%s takes every field of a run in a sandbox%s"
       % (face.__qualname__, " (missing: %s)" % ", ".join(missing) if missing else ""))
ok(callable(getattr(Client, "stream", None)) and callable(getattr(AsyncClient, "stream", None)),
   "run's stream is Client.stream and AsyncClient.stream")

# What is sent: each keyword lands in its field.
c = _ops.create(name="n", limits=_ops.limits(memory="1M", file_size="2M", open_files=64), image="img",
                root={"path": "/srv/r", "read_only": False}, mounts=[{"source": "/a", "target": "/b"}],
                workspace="/home/u/p", hostname="h", ephemeral=True)
ok(c.fields["workspace"] == {"source": "/home/u/p"} and c.fields["hostname"] == "h"
   and c.fields["ephemeral"] is True and c.fields["root"] == {"path": "/srv/r", "read_only": False}
   and c.fields["mounts"] == [{"source": "/a", "target": "/b"}]
   and c.fields["limits"] == {"memory": "1M", "file_size": "2M", "open_files": 64},
   "create's new keywords are sent as the protocol's fields")
r = _ops.run("true", sandbox="s", user={"uid": 5, "gid": 5}, umask=0o077, rlimits={"CORE": [0, 0]},
             no_timeout=True, file_size="1M", open_files=32, stdio=[7, None, 9], extra_fds=[11])
ok(r.fields["stdio"] == [0, None, 1] and r.fields["extra_fds"] == [2] and r.fields["fds"] == 3
   and r.fds == (7, 9, 11) and r.fields["user"] == {"uid": 5, "gid": 5} and r.fields["umask"] == 0o077
   and r.fields["no_timeout"] is True and r.fields["rlimits"] == {"CORE": [0, 0]},
   "run's new keywords are sent as the protocol's fields, stdio and extra_fds as fds of the line")
print("1..%d" % n)
PY
