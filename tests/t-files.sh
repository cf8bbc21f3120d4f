#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The file operations against the real daemon (docs/protocol.md "Files"): file.stat, file.list,
# file.mkdir, file.remove, done inside the sandbox by sandboxd-file-helper as the sandbox's user.
# What each finds is checked against what a run in the same sandbox sees; paths that try to leave
# the sandbox (.., a symlink, a /proc magic link, a host path) reach only the sandbox's own view;
# FIFOs and devices never block; bad input gets its code and field before any helper; another
# uid's client gets exactly what an unknown sandbox gets; no helper and no file-N cgroup is left.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
chmod 0755 "$T" && chmod 0666 "$SOCK"
r=$(rpc '{"op":"create","best_effort":true}')
SB=$(jget "$r" .sandbox.id)
like "$SB" '^sbx-' "a sandbox"
WORK=$(jget "$r" .sandbox.workdir)
CGS=$(jget "$r" .sandbox.cgroup)
echo "host canary $$" >"$T/canary"
# A second sandbox whose own tmpfs (/tmp) is small: 64M of memory gives it 32M (sandbox_tmpfs_size()).
SB2=$(jget "$(rpc '{"op":"create","best_effort":true,"limits":{"memory":"64M"}}')" .sandbox.id)
export SB WORK CGS SB2
# An ASan build's quarantine keeps freed memory resident: its RSS says nothing (lib.sh).
if daemon_is_asan; then export DAEMON_ASAN=1; fi

run_py "file operations" 400 <<'PYEOF'
import base64, json, os, time
from client import Conn, check, is_

sock, sb, T = os.environ["SOCK"], os.environ["SB"], os.environ["T"]
c = Conn(sock, 30)
c.next_id = 10**6  # call()'s ids; the explicit ids below stay under them

def call(op, **kw):
    req = {"op": op, "sandbox": sb}
    req.update(kw)
    return c.call(req, 30) or {}

def run(script, user=None):
    req = {"argv": ["sh", "-c", script]}
    if user:
        req["user"] = user
    r = call("run", **req)
    return r.get("stdout", "")

def err(r):
    return (r.get("error") or {}).get("code"), (r.get("error") or {}).get("field")

run("mkdir -p /work/d/e /work/keep && printf 'hi\\n' > /work/d/a.txt && echo k > /work/keep/k && "
    "ln -s /etc /work/d/l && ln -s /work/keep /work/lnk && ln -s /nowhere /work/d/dangling && "
    "mkfifo /work/d/f && : > /work/d/b && mkdir /work/d/e/deep")

# ---- file.stat
r = call("file.stat", path="/work/d/a.txt")
st = r.get("stat") or {}
check(r.get("ok"), "file.stat of a file: ok", r)
is_((st.get("type"), st.get("size"), st.get("mode"), st.get("uid"), st.get("nlink")), ("file", 3, 0o644, 1000, 1),
    "... type, size, mode, owner (1000 inside) and nlink as written")
is_(st.get("mtime_ns") // 10**9, int(run("stat -c %Y /work/d/a.txt").strip() or 0), "... mtime as a run sees it")
r = call("file.stat", path="d/a.txt")
is_((r.get("stat") or {}).get("path"), "/work/d/a.txt", "a relative path is relative to /work")
r = call("file.stat", path="/work/d/l")
is_(((r.get("stat") or {}).get("type"), (r.get("stat") or {}).get("target")), ("symlink", "/etc"),
    "a symlink is reported as one, with its target")
r = call("file.stat", path="/work/d/l", follow=True)
is_((r.get("stat") or {}).get("type"), "dir", "... and followed (inside the sandbox) with follow")
is_(err(call("file.stat", path="/work/nope")), ("not_found", "path"), "a missing path: not_found, field path")
is_(err(call("file.stat", path="/work/d/a.txt/x")), ("not_found", "path"), "a file used as a directory: not_found")
r = call("file.stat", path="/dev/null")
is_((r.get("stat") or {}).get("type"), "char", "a device node is stat'ed (type char), never opened")
t0 = time.monotonic()
r = call("file.stat", path="/work/d/f")
is_((r.get("stat") or {}).get("type"), "fifo", "a FIFO is stat'ed (type fifo)")
check(time.monotonic() - t0 < 5, "... without blocking")

# ---- escapes: everything resolves inside the sandbox
r = call("file.stat", path="/../../../../work/d/a.txt")
is_((r.get("stat") or {}).get("size"), 3, ".. at / stays at /: /../../../../work/d/a.txt is the sandbox's file")
is_(err(call("file.stat", path=T + "/canary")), ("not_found", "path"), "a host path (the test's canary) is not found inside")
run("ln -s %s/canary /work/hostlink && ln -s ../../../../../../%s/canary /work/hostlink2" % (T, T))
is_(err(call("file.stat", path="/work/hostlink", follow=True)), ("not_found", "path"),
    "a symlink to the host's canary, followed: not found (followed inside the sandbox)")
r = call("file.stat", path="/work/hostlink2", follow=True)
check(err(r) == ("not_found", "path"), "... nor with ../ in it", r)
for p in ("/proc/self/root/etc", "/proc/self/cwd/x", "/proc/self/fd/0"):
    is_(err(call("file.stat", path=p, follow=True)), ("invalid_request", "path"),
        "%s (through a /proc magic link) is refused, field path" % p)

# ---- file.list
def listing(rid, **kw):
    req = {"id": rid, "op": "file.list", "sandbox": sb}
    req.update(kw)
    c.send(req)
    entries, final = [], None
    while final is None:
        m = c.recv_json(30)
        if m is None:
            break
        if m.get("event") == "entries":
            entries += m["entries"]
        elif m.get("id") == rid and "ok" in m:
            final = m
    return entries, final or {}

entries, final = listing(100, path="/work/d")
names = [e["name"] for e in entries]
is_(names, sorted(run("ls -A /work/d").split()), "file.list: the names a run's ls sees, sorted")
is_(final.get("entries"), len(names), "... the final reply counts them")
types = {e["name"]: e["type"] for e in entries}
is_((types.get("f"), types.get("l"), types.get("e"), types.get("b")), ("fifo", "symlink", "dir", "file"), "... with their types")
is_({e["name"]: e.get("target") for e in entries if e["type"] == "symlink"}, {"l": "/etc", "dangling": "/nowhere"},
    "... and the symlinks' targets (a dangling one too)")
entries, final = listing(101, path="/work", recursive=True)
paths = [e["path"] for e in entries]
check("/work/d/e/deep" in paths and "/work/keep/k" in paths, "a recursive list walks the tree", paths)
check(not any(p.startswith("/work/d/l/") or p.startswith("/work/lnk/") for p in paths),
      "... and never through a symlink (to /etc, to /work/keep)")
r = call("file.list", path="/work/d", max_entries=2)
is_((r.get("entries"), r.get("truncated")), (2, True), "max_entries 2: two entries, truncated")
entries, final = listing(102, path="/")
mounts = {e["name"]: e.get("mount", False) for e in entries}
check(mounts.get("proc") is True, "a mount below the listed directory is marked (proc)", mounts)
is_(err(call("file.list", path="/work/d/a.txt")), ("invalid_request", "path"), "file.list of a file: invalid_request")
is_(err(call("file.list", path="/work/d", max_entries=0)), ("invalid_request", "max_entries"), "max_entries 0 refused")

# ---- file.mkdir
r = call("file.mkdir", path="/work/m/n/o", parents=True, mode=0o700)
is_(r.get("created"), 3, "file.mkdir with parents: three directories made")
is_(run("stat -c '%a %u' /work/m /work/m/n/o").split("\n")[:2], ["755 1000", "700 1000"],
    "... parents 0755, the last with its mode, all the sandbox user's (as a run sees them)")
is_(call("file.mkdir", path="/work/m/n/o", parents=True).get("created"), 0, "... again: ok, nothing made")
is_(err(call("file.mkdir", path="/work/m")), ("conflict", "path"), "without parents, an existing path: conflict")
is_(err(call("file.mkdir", path="/work/zz/y")), ("not_found", "path"), "without parents, a missing parent: not_found")
is_(err(call("file.mkdir", path="/work/q", mode=0o4755)), ("invalid_request", "mode"), "a setuid mode: invalid_request")
is_(err(call("file.mkdir", path="/etc/x")), ("permission_denied", "path"), "in /etc (read-only inside): permission_denied")
r = call("file.mkdir", path="/work/byroot", user="root")
check(r.get("ok"), "as root of the sandbox", r)
is_(run("stat -c %u /work/byroot").strip(), "0", "... owned by root inside")

# ---- file.remove
is_(call("file.remove", path="/work/d/b").get("removed"), 1, "file.remove of a file")
is_(call("file.remove", path="/work/lnk", recursive=True).get("removed"), 1, "of a symlink to a directory, recursive: the link")
is_(run("cat /work/keep/k; test -e /work/lnk || echo gone").split(), ["k", "gone"], "... its target untouched")
is_(err(call("file.remove", path="/work/d/e")), ("conflict", "path"), "a directory that is not empty: conflict")
is_(call("file.remove", path="/work/d/e", recursive=True).get("removed"), 2, "... recursive: the tree (2)")
is_(err(call("file.remove", path="/work/d/e")), ("not_found", "path"), "missing: not_found")
is_(call("file.remove", path="/work/d/e", missing_ok=True).get("removed"), 0, "... missing_ok: removed 0")
for p in ("/", "/work", "/work/", "/work/d/..", "/work/.", "/../work"):
    is_(err(call("file.remove", path=p, recursive=True))[0], "invalid_request", "%s is never removed" % p)
is_(run("test -f /work/keep/k && echo here").strip(), "here", "... and the workspace is all there")
is_(err(call("file.remove", path="/usr/bin/env")), ("permission_denied", "path"), "/usr/bin/env: permission_denied")

# ---- file.read
run("printf 'hello, world\\n' > /work/t.txt && : > /work/empty && "
    "python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4099)' > /work/bin.dat && "
    "truncate -s 5M /work/sparse && printf X | dd of=/work/sparse bs=1 seek=3M conv=notrunc 2>/dev/null")

def read(rid, path, **kw):
    """The bytes of a file.read by events (holes as zeros), its size event and final reply."""
    req = {"id": rid, "op": "file.read", "sandbox": sb, "path": path}
    req.update(kw)
    c.send(req)
    size, final, out, start = None, None, bytearray(), None
    while final is None:
        m = c.recv_json(60)
        if m is None:
            break
        if m.get("event") == "size":
            size = m
            start = m["offset"]
        elif m.get("event") == "data":
            d = base64.b64decode(m["data"])
            rel = m["offset"] - (start or 0)
            if rel > len(out):
                out += b"\0" * (rel - len(out))
            out += d
        elif m.get("id") == rid and "ok" in m:  # not a progress event: a slow read has them
            final = m
    if final and final.get("ok") and final["bytes"] > len(out):
        out += b"\0" * (final["bytes"] - len(out))
    return bytes(out), size or {}, final or {}

def sha_in(path):
    return run("sha256sum %s" % path).split()[0]

import hashlib
data, size, final = read(300, "/work/t.txt")
is_(data, b"hello, world\n", "file.read of a text file: its bytes")
is_((size.get("size"), size.get("offset"), size.get("length")), (13, 0, 13), "... the size event first")
is_((final.get("bytes"), final.get("changed")), (13, False), "... and the reply: bytes, changed false")
data, size, final = read(301, "/work/bin.dat")
is_(hashlib.sha256(data).hexdigest(), sha_in("/work/bin.dat"), "a binary file (every byte value, 1 MiB + 1 KiB: two events) reads back exactly")
data, size, final = read(302, "/work/empty")
is_((data, size.get("length"), final.get("bytes")), (b"", 0, 0), "an empty file: length 0, no data, bytes 0")
data, size, final = read(303, "/work/sparse")
is_(hashlib.sha256(data).hexdigest(), sha_in("/work/sparse"), "a sparse file reads back exactly")
data, size, final = read(304, "/work/bin.dat", offset=1000, length=300)
is_(data, (bytes(range(256)) * 4099)[1000:1300], "offset 1000, length 300: those bytes")
data, size, final = read(305, "/work/t.txt", offset=100)
is_((size.get("length"), final.get("bytes")), (0, 0), "an offset past the end: length 0, bytes 0")
is_(err(call("file.read", path="/work/d/l", nofollow=True)), ("invalid_request", "path"), "nofollow on a symlink: invalid_request")
t0 = time.monotonic()
is_(err(call("file.read", path="/work/d/f")), ("invalid_request", "path"), "a FIFO: invalid_request (never opened)")
is_(err(call("file.read", path="/dev/zero")), ("invalid_request", "path"), "/dev/zero: invalid_request (never opened)")
check(time.monotonic() - t0 < 10, "... neither blocks")
is_(err(call("file.read", path="/work/d")), ("invalid_request", "path"), "a directory: invalid_request")
is_(err(call("file.read", path="/work/t.txt", offset=-1)), ("invalid_request", "offset"), "a negative offset")

# into a passed fd: the daemon hands it to the helper, which writes it
import array, socket, subprocess
def read_fd(rid, path, fd, **kw):
    req = {"id": rid, "op": "file.read", "sandbox": sb, "path": path, "fd": 0, "fds": 1}
    req.update(kw)
    line = json.dumps(req).encode() + b"\n"
    c.s.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    return c.final(rid, 60) or {}
out = os.path.join(T, "out.sparse")
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
r = read_fd(310, "/work/sparse", fd)
os.close(fd)
is_(r.get("bytes"), 5 << 20, "file.read into a passed regular fd: ok, bytes")
is_(hashlib.sha256(open(out, "rb").read()).hexdigest(), sha_in("/work/sparse"), "... the same bytes")
check(os.stat(out).st_blocks * 512 <= 64 << 10, "... and it stays sparse (%d bytes allocated)" % (os.stat(out).st_blocks * 512))
rp, wp = os.pipe()
r = read_fd(311, "/work/t.txt", wp)
os.close(wp)
is_(os.read(rp, 100), b"hello, world\n", "into a passed pipe: the bytes")
os.close(rp)
dfd = os.open(T, os.O_RDONLY | os.O_DIRECTORY)
r = read_fd(312, "/work/t.txt", dfd)
is_(err(r), ("invalid_request", "fd"), "a directory fd: invalid_request, field fd")
check("directory" in (r.get("error") or {}).get("message", ""), "... saying it is a directory", r)
os.close(dfd)
pfd = os.open(out, os.O_PATH)
is_(err(read_fd(313, "/work/t.txt", pfd)), ("invalid_request", "fd"), "an O_PATH fd: refused")
os.close(pfd)
rfd = os.open(out, os.O_RDONLY)
is_(err(read_fd(314, "/work/t.txt", rfd)), ("invalid_request", "fd"), "an fd open only for reading, as a sink: refused")
os.close(rfd)
s1, s2 = socket.socketpair()
is_(err(read_fd(315, "/work/t.txt", s1.fileno())), ("invalid_request", "fd"), "a socket: refused")
s1.close(); s2.close()

# 64 MiB: by events, the daemon's memory stays bounded; by fd, no byte passes through it
def hwm():
    for l in open("/proc/%s/status" % os.environ["DAEMON_PID"]):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])
run("head -c 64M /dev/urandom > /work/big")
big_sha = sha_in("/work/big")
def rss_check(cond, desc):
    if os.environ.get("DAEMON_ASAN"):
        check(True, desc + " # SKIP an ASan build holds freed memory in quarantine")
    else:
        check(cond, desc)

rss0 = hwm()
peak = rss0
c.send({"id": 320, "op": "file.read", "sandbox": sb, "path": "/work/big"})
h = hashlib.sha256()
final = None
while final is None:
    m = c.recv_json(120)
    if m is None:
        break
    if m.get("event") == "data":
        h.update(base64.b64decode(m["data"]))
        peak = max(peak, hwm())
    elif m.get("id") == 320 and "ok" in m:
        final = m
is_(h.hexdigest(), big_sha, "64 MiB by events: the same bytes")
rss_check(peak - rss0 < 16 << 10, "... the daemon's RSS grew by %d KiB at most (< 16 MiB)" % (peak - rss0))
fd = os.open(os.path.join(T, "big"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
r = read_fd(321, "/work/big", fd)
os.close(fd)
is_(hashlib.sha256(open(os.path.join(T, "big"), "rb").read()).hexdigest(), big_sha, "64 MiB into a passed fd: the same bytes")
os.unlink(os.path.join(T, "big"))

# a client that goes away mid-read: its helper is killed, the daemon goes on
c2 = Conn(sock, 30)
c2.send({"id": 1, "op": "file.read", "sandbox": sb, "path": "/work/big"})
while True:
    m = c2.recv_json(30)
    if m is None or m.get("event") == "data":
        break
c2.close()
r = call("file.stat", path="/work/big")
is_((r.get("stat") or {}).get("size"), 64 << 20, "a client gone mid-read: the daemon answers, the file is intact")

# an attacker swapping a directory for a symlink to a host path while reads run
run("mkdir -p /work/sw && echo inside > /work/sw/canary")
c3 = Conn(sock, 120)
c3.send({"id": 1, "op": "run", "sandbox": sb, "argv": ["sh", "-c",
         "end=$(($(date +%%s) + 8)); while [ $(date +%%s) -lt $end ]; do mv /work/sw /work/sw.d; ln -s %s /work/sw; rm /work/sw; mv /work/sw.d /work/sw; done" % T]})
host = open(os.path.join(T, "canary"), "rb").read()
seen, errors = set(), set()
t_end = time.monotonic() + 6
while time.monotonic() < t_end:
    data, size, final = read(400, "/work/sw/canary")
    if final.get("ok"):
        seen.add(data)
    else:
        errors.add((final.get("error") or {}).get("code"))
check(host not in seen, "racing swaps of /work/sw for a symlink to the host's directory: the host canary is never read")
check(seen <= {b"inside\n"}, "... every ok read is the sandbox's own file", seen)
check(errors <= {"not_found"}, "... and every failure a clean not_found", errors)
c3.final(1, 60)
c3.close()
is_(call("file.remove", path="/work/big").get("removed"), 1, "file.remove of the 64 MiB file")

# ---- file.write
def write_fd(rid, path, fd, conn=None, **kw):
    conn = conn or c
    req = {"id": rid, "op": "file.write", "sandbox": sb, "path": path, "fd": 0, "fds": 1}
    req.update(kw)
    conn.s.sendmsg([json.dumps(req).encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    return conn.final(rid, 120) or {}

r = call("file.write", path="/work/w/t.txt", data="hello, file\n", parents=True)
is_((r.get("ok"), r.get("bytes"), r.get("created"), r.get("path")), (True, 12, True, "/work/w/t.txt"),
    "file.write of inline text with parents: ok, bytes, created")
is_(run("cat /work/w/t.txt; stat -c '%a %u' /work/w/t.txt /work/w"), "hello, file\n644 1000\n755 1000\n",
    "... the content, 0644 and 0755, the sandbox user's")
allbytes = bytes(range(256)) * 64
r = call("file.write", path="/work/w/bin", data=base64.b64encode(allbytes).decode(), encoding="base64", mode=0o600)
is_(sha_in("/work/w/bin"), hashlib.sha256(allbytes).hexdigest(), "inline base64: every byte value as sent")
is_(run("stat -c %a /work/w/bin").strip(), "600", "... with its mode")
r = call("file.write", path="/work/w/bin", data="new")
is_((r.get("created"), run("cat /work/w/bin; stat -c ' %a' /work/w/bin")), (False, "new 600\n"),
    "replacing a file: created false, the old file's mode kept")
is_(call("file.write", path="/work/w/empty", data="").get("bytes"), 0, "an empty file")
r = call("file.write", path="/work/nodir/x.csv", data="a,b\n")
is_((err(r), (r.get("error") or {}).get("message")),
    (("not_found", "path"), "/work/nodir/x.csv: the directory /work/nodir does not exist"),
    "file.write beneath a missing directory: not_found, naming the directory")
r = call("file.mkdir", path="nodir/y")
is_((r.get("error") or {}).get("message"), "/work/nodir/y: the directory /work/nodir does not exist",
    "file.mkdir beneath a missing directory (relative path): the message names the directory")
is_(run("stat -c %s /work/w/empty").strip(), "0", "... is empty")
is_(err(call("file.write", path="/work/w/t.txt", data="x", exclusive=True)), ("conflict", "path"), "exclusive over an existing file: conflict")
r = call("file.write", path="/work/w/t.txt", data="J", atomic=False, offset=7)
is_(run("cat /work/w/t.txt"), "hello, Jile\n", "atomic false with offset 7: written in place")
is_(err(call("file.write", path="/work/w/t.txt", data="x", size=5)), ("invalid_request", "size"), "size not matching data")
is_(err(call("file.write", path="/work/w/t.txt", data="!!", encoding="base64")), ("invalid_request", "data"), "bad base64")
is_(err(call("file.write", path="/work/w/t.txt", data="x", mode=0o2755)), ("invalid_request", "mode"), "a setgid mode")
is_(err(call("file.write", path="/work/w", data="x")), ("invalid_request", "path"), "over a directory: invalid_request")
is_(err(call("file.write", path="/etc/passwd", data="x")), ("permission_denied", "path"), "/etc/passwd: permission_denied")
is_(run("cat /work/w/t.txt"), "hello, Jile\n", "... every refused write left the file as it was")

# by fd: a sparse file, a pipe, 64 MiB
src = os.path.join(T, "src.sparse")
with open(src, "wb") as fh:
    fh.truncate(6 << 20)
    fh.seek(4 << 20)
    fh.write(b"Y" * 100)
fd = os.open(src, os.O_RDONLY)
r = write_fd(500, "/work/w/sparse", fd)
os.close(fd)
is_(sha_in("/work/w/sparse"), hashlib.sha256(open(src, "rb").read()).hexdigest(), "file.write from a passed sparse file: the same bytes")
check(int(run("du -k /work/w/sparse").split()[0]) <= 64, "... and it stays sparse inside", run("du -k /work/w/sparse"))
rp, wp = os.pipe()
os.write(wp, b"through a pipe\n")
os.close(wp)
r = write_fd(501, "/work/w/pipe", rp)
os.close(rp)
is_(run("cat /work/w/pipe"), "through a pipe\n", "from a passed pipe: its bytes")
dfd = os.open(T, os.O_RDONLY | os.O_DIRECTORY)
is_(err(write_fd(502, "/work/w/x", dfd)), ("invalid_request", "fd"), "a directory fd as the source: refused")
os.close(dfd)
wfd = os.open(src, os.O_WRONLY)
is_(err(write_fd(503, "/work/w/x", wfd)), ("invalid_request", "fd"), "an fd open only for writing, as a source: refused")
os.close(wfd)
fd = os.open(src, os.O_RDONLY)
is_(err(write_fd(504, "/work/w/huge", fd, size="100T")), ("no_space", "size"), "a size larger than the free space: no_space before any data")
os.close(fd)
big = os.path.join(T, "big.src")
with open(big, "wb") as fh:
    for i in range(64):
        fh.write(os.urandom(1 << 20))
want = hashlib.sha256(open(big, "rb").read()).hexdigest()
rss0 = hwm()
fd = os.open(big, os.O_RDONLY)
r = write_fd(505, "/work/w/big", fd, size=64 << 20)
os.close(fd)
is_((r.get("bytes"), sha_in("/work/w/big")), (64 << 20, want), "64 MiB from a passed fd: the same bytes")
rss_check(hwm() - rss0 < 16 << 10, "... the daemon's RSS grew by %d KiB (< 16 MiB)" % (hwm() - rss0))
fd = os.open(src, os.O_RDONLY)
is_(err(write_fd(506, "/work/w/t.txt", fd, size=10 << 20)), ("invalid_request", "size"), "a source shorter than size: invalid_request, field size")
os.close(fd)
is_(run("cat /work/w/t.txt"), "hello, Jile\n", "... the old file as it was")

# a full disk: a sandbox's small tmpfs (/tmp); the old file stays
sb2 = os.environ["SB2"]
c.call({"op": "file.write", "sandbox": sb2, "path": "/tmp/full", "data": "old\n"})
fd = os.open(big, os.O_RDONLY)
req = {"id": 507, "op": "file.write", "sandbox": sb2, "path": "/tmp/full", "fd": 0, "fds": 1}
c.s.sendmsg([json.dumps(req).encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
r = c.final(507, 120) or {}
os.close(fd)
check(err(r) == ("no_space", "data"), "64 MiB into a sandbox's 32M tmpfs: no_space, field data", r)
r = c.call({"op": "run", "sandbox": sb2, "argv": ["sh", "-c", "cat /tmp/full; ls -A /tmp | grep -c sbx-"]})
is_(r.get("stdout"), "old\n0\n", "... the old file intact, no temporary name left")
os.unlink(big)

# a client that goes away mid-write: the helper is killed, the old file stays, nothing is left
c4 = Conn(sock, 30)
rp, wp = os.pipe()
os.write(wp, b"partial " * 1000)
c4.s.sendmsg([json.dumps({"id": 1, "op": "file.write", "sandbox": sb, "path": "/work/w/t.txt", "fd": 0, "fds": 1}).encode() + b"\n"],
             [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [rp]))])
os.close(rp)
time.sleep(1)
c4.close()
time.sleep(1)
os.close(wp)
is_(run("cat /work/w/t.txt; ls -A /work/w | grep -c sbx-"), "hello, Jile\n0\n", "a client gone mid-write: the old file intact, no temporary name")

# an attacker swapping the target's directory for a symlink to a host directory during writes
run("mkdir -p /work/sw2")
c5 = Conn(sock, 120)
c5.send({"id": 1, "op": "run", "sandbox": sb, "argv": ["sh", "-c",
         "end=$(($(date +%%s) + 8)); while [ $(date +%%s) -lt $end ]; do mv /work/sw2 /work/sw2.d; ln -s %s /work/sw2; rm /work/sw2; mv /work/sw2.d /work/sw2; done" % T]})
codes = set()
t_end = time.monotonic() + 6
while time.monotonic() < t_end:
    r = call("file.write", path="/work/sw2/out", data="x")
    codes.add("ok" if r.get("ok") else (r.get("error") or {}).get("code"))
c5.final(1, 60)
c5.close()
check(not os.path.exists(os.path.join(T, "out")), "racing swaps for a symlink to the host's directory: nothing written on the host")
check(codes <= {"ok", "not_found"}, "... every write ok or a clean not_found", codes)
is_(run("ls -A /work/sw2 /work | grep -c sbx-"), "0\n", "... and no temporary name left")

# ---- bad input, refused before any helper
is_(err(call("file.stat", path="")), ("invalid_request", "path"), "an empty path: invalid_request")
is_(err(call("file.stat", path="/" + "a/" * 2048)), ("invalid_request", "path"), "a path over PATH_MAX")
is_(err(call("file.stat", path="/work/" + "n" * 256)), ("invalid_request", "path"), "a component over NAME_MAX")
is_(err(call("file.stat", path=base64.b64encode(b"/work/a\0b").decode(), path_encoding="base64")),
    ("invalid_request", "path"), "a NUL in a base64 path")
c.send_raw(b'{"id":200,"op":"file.stat","sandbox":"%s","path":"/work/a\\u0000b"}\n' % sb.encode())
is_(err(c.recv_json(10) or {})[0], "invalid_json", "\\u0000 in a path: invalid_json")
is_(err(call("file.stat", path="/work", follow="yes")), ("invalid_request", "follow"), "follow not a bool")
is_(err(call("file.stat", path="/work", user="nobody")), ("invalid_request", "user"), "an unknown user")
r = call("file.stat", path=base64.b64encode("/work/d/a.txt".encode()).decode(), path_encoding="base64")
is_((r.get("stat") or {}).get("size"), 3, "a base64 path")
raw = b"/work/n\xffx"
r = call("file.write", path=base64.b64encode(raw).decode(), path_encoding="base64", data="x")
is_((r.get("ok"), r.get("path_encoding"), r.get("path")), (True, "base64", base64.b64encode(raw).decode()),
    "file.write of a name that is not UTF-8: its reply's path is base64, with path_encoding")
c.close()
PYEOF

ok_if() { if [ "$1" != 0 ]; then ok "$2"; else nok "$2"; fi; } # status $1 is not 0

# sandboxctl ls end to end (file.list through libsandbox).
ctl_run() { rpc '{"op":"run","sandbox":"'"$SB"'","argv":["sh","-c","'"$1"'"]}' | jq -r .stdout; }
is "$(ctl ls "$SB" /work/keep)" "k" "sandboxctl ls SBX /work/keep lists its file"
is "$(ctl ls "$SB" keep)" "k" "... a relative path is beneath /work"
is "$(ctl ls "$SB" /work/keep/k)" "/work/keep/k" "sandboxctl ls SBX FILE lists that file, as ls(1) does"
like "$(ctl ls -l "$SB" /work/keep/k)" '^[-dl][-rwx]{9} +[0-9]+.* /work/keep/k$' "... and with -l its mode and size"
like "$(ctl ls -l "$SB" /work/d)" 'l.* l -> /etc' "sandboxctl ls -l shows a symlink with its target"
is "$(ctl ls -R "$SB" /work/m | sort)" "$(printf '/work/m/n\n/work/m/n/o')" "sandboxctl ls -R walks the tree"
ctl ls "$SB" /work/nope >/dev/null 2>"$T/ls.err"
rc=$?
ok_if "$rc" "sandboxctl ls of a missing path fails (status $rc)"
like "$(cat "$T/ls.err")" 'not_found|No such' "... saying not found"

# sandboxctl rm end to end (file.remove through libsandbox).
ctl_run 'mkdir -p /work/rmt/d/e && echo x >/work/rmt/f && echo y >/work/rmt/d/e/g' >/dev/null
out=$(ctl rm "$SB" /work/rmt/f 2>&1)
is "$? $out $(ctl_run 'test -e /work/rmt/f && echo still')" "0  " "sandboxctl rm SBX FILE removes it"
out=$(ctl rm "$SB" rmt/d 2>&1)
like "$? $out" '^1 .*conflict.*\(rm -r removes a tree\)' "sandboxctl rm of a directory that is not empty, without -r: exit 1, conflict, naming -r"
out=$(ctl rm -r "$SB" rmt/d 2>&1)
is "$? $out $(ctl_run 'ls /work/rmt')" "0  " "sandboxctl rm -r removes the tree (a relative path is beneath /work)"
out=$(ctl rm "$SB" /work/rmt/nope 2>&1)
like "$? $out" '^1 .*not_found.*/work/rmt/nope' "sandboxctl rm of a missing path: exit 1, not_found naming it"
out=$(ctl rm -f "$SB" /work/rmt/nope 2>&1)
is "$? $out" "0 " "sandboxctl rm -f of a missing path: exit 0, silent"
out=$(ctl rm -f sbx-000000000000 /work/x 2>&1)
like "$? $out" '^1 .*not_found.*sbx-000000000000' "sandboxctl rm -f in a sandbox that does not exist still fails, naming it"
out=$(ctl rm "$SB" /work 2>&1)
like "$? $out" '^1 .*invalid_request' "sandboxctl rm of /work itself is refused"

# sandboxctl cat and cp out of the sandbox, end to end (file.read into the fd sandboxctl passes).
want=$(rpc '{"op":"run","sandbox":"'"$SB"'","argv":["sha256sum","/work/bin.dat"]}' | jq -r .stdout | cut -d' ' -f1)
is "$(ctl cat "$SB" /work/bin.dat | sha256sum | cut -d' ' -f1)" "$want" "sandboxctl cat SBX /work/bin.dat | ...: the same bytes (a pipe)"
ctl cat "$SB" /work/bin.dat >"$T/cat.out"
is "$(sha256sum <"$T/cat.out" | cut -d' ' -f1)" "$want" "sandboxctl cat > file: the same bytes (a regular file)"
ctl cp "$SB:/work/sparse" "$T/cp.sparse" 2>"$T/cp.err"
is "$(sha256sum <"$T/cp.sparse" | cut -d' ' -f1)" \
	"$(rpc '{"op":"run","sandbox":"'"$SB"'","argv":["sha256sum","/work/sparse"]}' | jq -r .stdout | cut -d' ' -f1)" \
	"sandboxctl cp SBX:/work/sparse LOCAL: the same bytes"
[ -s "$T/cp.err" ] && diag "$(cat "$T/cp.err")"
ok_if "$([ "$(du -k "$T/cp.sparse" | cut -f1)" -le 64 ] && echo 1 || echo 0)" "... and the copy stays sparse ($(du -k "$T/cp.sparse" | cut -f1) KiB)"
ctl cat "$SB" /work/d/f >/dev/null 2>"$T/cat.err"
ok_if "$?" "sandboxctl cat of a FIFO fails at once"
like "$(cat "$T/cat.err")" 'FIFO' "... saying it is a FIFO"

# Another uid's client: the same bytes as for a sandbox that never existed.
other_stat() {
	printf '{"id":1,"op":"file.stat","sandbox":"%s","path":"/work"}\n' "$1" |
		as_other 65534 --regid=65534 --clear-groups -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" raw --count 1 --timeout 30
}
unknown=sbx-000000000000
a=$(other_stat "$SB")
b=$(other_stat "$unknown")
is "${a//$SB/@}" "${b//$unknown/@}" "another uid's file.stat gets what an unknown sandbox gets"
like "$a" '"not_found"' "... not_found"

is "$(find "$CGS" -mindepth 1 -maxdepth 1 -name 'file-*' -type d | wc -l)" 0 "no file-N cgroup left in the sandbox"
# (comm holds 15 bytes: sandboxd-file-helper is "sandboxd-file-h" there)
is "$(daemon_children_named sandboxd-file-h)" 0 "no file helper left"
rpc '{"op":"destroy","sandbox":"'"$SB"'"}' >/dev/null
rpc '{"op":"destroy","sandbox":"'"$SB2"'"}' >/dev/null
stop_daemon

# File operations count as runs in flight for max_runs_per_connection: two writes from pipes that
# stay open hold their helpers; a third operation is refused, and they end when the pipes close.
printf 'max_runs_per_connection = 2\n' >"$T/caps.conf"
start_daemon --config "$T/caps.conf" || exit 0
SB=$(jget "$(rpc '{"op":"create","best_effort":true}')" .sandbox.id)
export SB
run_py "file operations under the run caps" 60 <<'PYEOF'
import array, json, os, socket
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 30)
sb = os.environ["SB"]
ends = []
for i in (1, 2):
    rp, wp = os.pipe()
    c.s.sendmsg([json.dumps({"id": i, "op": "file.write", "sandbox": sb, "path": "/work/p%d" % i, "fd": 0, "fds": 1}).encode() + b"\n"],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [rp]))])
    os.close(rp)
    ends.append(wp)
r = c.call({"id": 3, "op": "file.stat", "sandbox": sb, "path": "/work"})
is_((r.get("error") or {}).get("code"), "resource_exhausted", "a third file operation on the connection: resource_exhausted")
r = Conn(os.environ["SOCK"], 30).call({"id": 1, "op": "file.stat", "sandbox": sb, "path": "/work"})
check(r.get("ok"), "... another connection is served", r)
for i, wp in enumerate(ends):
    os.write(wp, b"data %d\n" % i)
    os.close(wp)
is_([c.final(i, 30).get("bytes") for i in (1, 2)], [7, 7], "the two writes end when their pipes close")
r = c.call({"id": 4, "op": "file.stat", "sandbox": sb, "path": "/work/p1"})
is_((r.get("stat") or {}).get("size"), 7, "... and the connection is served again")
PYEOF
rpc '{"op":"destroy","sandbox":"'"$SB"'"}' >/dev/null
stop_daemon
