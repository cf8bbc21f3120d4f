#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# file.put and file.get (docs/protocol.md "Files"): tar streams in and out through
# sandboxd-file-helper, libarchive as the codec only. A tree with symlinks (absolute, dangling, a
# loop), hard links, a FIFO, unicode and newline names, an empty directory and odd modes goes out
# and back in and is compared by a listing made inside; hostile streams (../x, /etc/x, an entry
# under a symlink the sandbox planted or an earlier entry made, a hard link out) are refused with
# nothing written outside; a new directory appears whole or not at all; the helper carries its own
# seccomp filter (one more than a run's, execve and PROT_EXEC refused: a gzip'ed stream fails
# closed); another uid's client gets not_found; `sandboxctl cp` moves trees both ways and with -.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
chmod 0755 "$T" && chmod 0666 "$SOCK"
r=$(rpc '{"op":"create","best_effort":true}')
SB=$(jget "$r" .sandbox.id)
like "$SB" '^sbx-' "a sandbox"
CGS=$(jget "$r" .sandbox.cgroup)
# A second sandbox whose own tmpfs (/tmp) is small: 64M of memory gives it 32M (sandbox_tmpfs_size()).
SB2=$(jget "$(rpc '{"op":"create","best_effort":true,"limits":{"memory":"64M"}}')" .sandbox.id)
echo "host canary $$" >"$T/canary"
mkdir -p "$T/hostdir" && echo "host secret $$" >"$T/hostdir/secret"
export SB CGS SB2

run_py "file.put and file.get" 600 <<'PYEOF'
import array, base64, io, json, os, socket, subprocess, tarfile, time
from client import Conn, check, is_, procs_under

sock, sb, T, cgs = os.environ["SOCK"], os.environ["SB"], os.environ["T"], os.environ["CGS"]
c = Conn(sock, 60)
c.next_id = 10**6

def call(op, **kw):
    req = {"op": op, "sandbox": sb}
    req.update(kw)
    return c.call(req, 120) or {}

def run(script):
    return call("run", argv=["sh", "-c", script]).get("stdout", "")

def err(r):
    e = r.get("error") or {}
    return e.get("code"), e.get("field")

def with_fd(op, fd, conn=None, rid=None, **kw):
    conn = conn or c
    rid = rid or conn.next_id
    conn.next_id += 1
    req = {"id": rid, "op": op, "sandbox": sb, "fd": 0, "fds": 1}
    req.update(kw)
    conn.s.sendmsg([json.dumps(req).encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    return rid

def get_file(path, **kw):
    out = os.path.join(T, "get.tar")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    rid = with_fd("file.get", fd, path=path, **kw)
    os.close(fd)
    r = c.final(rid, 120) or {}
    return r, open(out, "rb").read()

def put_bytes(path, data, **kw):
    src = os.path.join(T, "put.tar")
    with open(src, "wb") as f:
        f.write(data)
    fd = os.open(src, os.O_RDONLY)
    rid = with_fd("file.put", fd, path=path, **kw)
    os.close(fd)
    return c.final(rid, 120) or {}

def get_events(path, **kw):
    req = {"op": "file.get", "sandbox": sb, "path": path}
    req.update(kw)
    rid = c.next_id
    c.next_id += 1
    req["id"] = rid
    c.send(req)
    data, offsets = b"", []
    while True:
        m = c.recv_json(120)
        if m is None:
            return {}, data, offsets
        if m.get("id") != rid:
            continue
        if m.get("event") == "data":
            offsets.append(m.get("offset"))
            data += base64.b64decode(m["data"])
        elif "event" not in m:
            return m, data, offsets

# A listing of a tree made inside: path, type, mode, size, link target, and a hash of each file;
# hard links shown as the set of names sharing an inode. Owners and times aside (times: below).
LIST = ("cd %s && find . -mindepth 1 -printf '%%P|%%y|%%m|%%s|%%l\\n' | LC_ALL=C sort && "
        "find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum && "
        "find . -type f -links +1 -printf '%%i %%P\\n' | LC_ALL=C sort | awk '{a[$1]=a[$1] \" \" $2} END {for (i in a) print a[i]}' | LC_ALL=C sort")
def listing(d):
    return run(LIST % d)

run(r"""set -e; mkdir -p /work/src/empty /work/src/sub/deep /work/src/sticky /work/outside
printf 'hello\n' > /work/src/a.txt; head -c 300000 /dev/urandom > /work/src/sub/deep/bin
ln -s /etc/passwd /work/src/abs; ln -s /nowhere/at/all /work/src/dangling; ln -s loop2 /work/src/loop1; ln -s loop1 /work/src/loop2
ln /work/src/a.txt /work/src/sub/hard; mkfifo /work/src/fifo; printf 'u\n' > '/work/src/ünïcødé ✓'; printf 'n\n' > '/work/src/new
line'; printf 'x' > /work/src/exec; chmod 0751 /work/src/exec; chmod 1777 /work/src/sticky; printf 's' > /work/src/suid
chmod 4755 /work/src/suid; chmod 0700 /work/src/sub; touch -d '2001-02-03 04:05:06' /work/src/a.txt /work/src/empty
name=$(printf 'L%.0s' $(seq 200)); mkdir -p /work/src/long/$name; printf 'deep' > /work/src/long/$name/$name""")
src_list = listing("/work/src")

# ---- file.get into a passed fd
r, tar = get_file("/work/src")
check(r.get("ok"), "file.get of a tree into a passed fd: ok", r)
names = tarfile.open(fileobj=io.BytesIO(tar)).getnames()
is_(r.get("bytes"), len(tar), "... bytes is the stream's length")
is_(r.get("entries"), len(names), "... entries is the number of entries in it")
is_((r.get("skipped"), r.get("changed")), (0, 0), "... nothing skipped or changed")
check(names[0] == "src" and all(n == "src" or n.startswith("src/") for n in names), "... names start with the basename", names[:3])
members = {m.name: m for m in tarfile.open(fileobj=io.BytesIO(tar))}
is_((members["src/abs"].issym(), members["src/abs"].linkname), (True, "/etc/passwd"), "... an absolute symlink as a symlink, not followed")
check(members["src/fifo"].isfifo(), "... a FIFO as a FIFO entry (never opened)")
check(members["src/sub/hard"].islnk() or members["src/a.txt"].islnk(), "... a hard link as a tar hard link")
check("src/ünïcødé ✓" in members and "src/new\nline" in members, "... unicode and newline names as they are")
check(any(len(n) > 400 for n in names), "... a name longer than ustar's 255 bytes (pax)")
is_(members["src/a.txt"].mtime, 981173106, "... mtimes kept")
is_((members["src/suid"].mode, members["src/sticky"].mode, members["src/exec"].mode), (0o755, 0o777, 0o751),
    "... no setuid, setgid or sticky bit in the stream, the rest of the mode kept")
p = subprocess.run(["tar", "-tvf", "-"], input=tar, capture_output=True)
check(p.returncode == 0, "GNU tar reads the stream", p.stderr)

# ---- and back in: file.put from a passed fd into a new directory
r = put_bytes("/work/copy", tar)
check(r.get("ok"), "file.put of that stream into a new directory: ok", r)
is_((r.get("entries"), r.get("bytes"), r.get("skipped")), (len(names), len(tar), 0), "... entries, bytes, skipped")
got = listing("/work/copy/src")
is_(got, src_list.replace("|4755|", "|755|").replace("|1777|", "|777|"),
    "put back, the tree lists as the original (types, modes, sizes, targets, data, hard links)")
is_(run("stat -c '%a' /work/copy/src/suid /work/copy/src/sticky /work/copy/src/sub"), "755\n777\n700\n",
    "... setuid and sticky came out of none of it, a 0700 directory's mode applied last")
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as tf:
    ti = tarfile.TarInfo("st")
    ti.type, ti.mode = tarfile.DIRTYPE, 0o1777
    tf.addfile(ti)
check(put_bytes("/work/stickyin", buf.getvalue()).get("ok") and run("stat -c %a /work/stickyin/st") == "1777\n",
      "file.put keeps a directory's sticky bit going in")
is_(run("stat -c '%Y %u' /work/copy/src/a.txt /work/copy/src/empty"), "981173106 1000\n981173106 1000\n",
    "... mtimes kept (a directory's too), the sandbox user's files")
is_(run("ls -a /work | grep -c sbx-put"), "0\n", "... no .sbx-put directory left")

# the same by events out and inline data in
r, data, offsets = get_events("/work/src/.")
check(r.get("ok") and len(data) == r.get("bytes"), "file.get by data events: ok, bytes as received", r)
check(offsets == sorted(offsets) and offsets[0] == 0, "... offsets in order from 0")
enames = tarfile.open(fileobj=io.BytesIO(data)).getnames()
check(enames[0] in (".", "./") and all(n.startswith("./") for n in enames[1:]), "... a path ending in /. archives the contents as ./...", enames[:3])
r = call("file.put", path="/work/inline", data=base64.b64encode(data).decode())
check(r.get("ok"), "file.put of inline base64 data: ok", r)
is_(listing("/work/inline"), src_list.replace("|4755|", "|755|").replace("|1777|", "|777|"), "... the same tree")

# a stream made on the host by Python's tarfile into an existing directory
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
    for name, body in (("top/one", b"1"), ("top/two", b"22")):
        ti = tarfile.TarInfo(name); ti.size = len(body); ti.mode = 0o640; tf.addfile(ti, io.BytesIO(body))
    ti = tarfile.TarInfo("top/dev"); ti.type = tarfile.CHRTYPE; ti.devmajor, ti.devminor = 1, 3; tf.addfile(ti)
    ti = tarfile.TarInfo("top/sock"); ti.type = tarfile.SYMTYPE; ti.linkname = "one"; tf.addfile(ti)
run("mkdir -p /work/exist && echo old > /work/exist/keep")
r = put_bytes("/work/exist", buf.getvalue())
is_((r.get("ok"), r.get("entries"), r.get("skipped")), (True, 3, 1), "a GNU tar into an existing directory: ok, a device skipped and counted")
is_(run("cat /work/exist/keep /work/exist/top/two; stat -c %a /work/exist/top/one; readlink /work/exist/top/sock; ls /work/exist/top"),
    "old\n22640\none\none\nsock\ntwo\n", "... entries added beside what was there, modes and links as in the stream, no device node")
is_(err(put_bytes("/work/exist", buf.getvalue(), overwrite=False)), ("conflict", "tar"), "overwrite false: conflict on an existing file")
is_(err(put_bytes("/work/src/a.txt", buf.getvalue())), ("invalid_request", "path"), "a path that is a file: invalid_request")
is_(err(put_bytes("/work/no/such/dir", buf.getvalue())), ("not_found", "path"), "a missing parent without parents: not_found")
check(put_bytes("/work/no/such/dir", buf.getvalue(), parents=True).get("ok"), "... made with parents")

# ---- hostile streams: refused, nothing written outside the target
def tar_of(entries):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            ti = tarfile.TarInfo(e[0])
            if e[1] == "file":
                ti.size = len(e[2]); tf.addfile(ti, io.BytesIO(e[2]))
            elif e[1] == "dir":
                ti.type = tarfile.DIRTYPE; tf.addfile(ti)
            elif e[1] == "sym":
                ti.type = tarfile.SYMTYPE; ti.linkname = e[2]; tf.addfile(ti)
            elif e[1] == "hard":
                ti.type = tarfile.LNKTYPE; ti.linkname = e[2]; tf.addfile(ti)
    return b.getvalue()

run("mkdir -p /work/slip && ln -sfn /work/outside /work/slip/planted && ln -sfn %s/hostdir /work/slip/host" % T)
cases = [
    ("../x", tar_of([("ok1", "file", b"1"), ("../x", "file", b"evil")])),
    ("/etc/x", tar_of([("/work/outside/x", "file", b"evil")])),
    ("a/../../x", tar_of([("a", "dir"), ("a/../../x", "file", b"evil")])),
    ("under a planted symlink", tar_of([("planted/x", "file", b"evil")])),
    ("under a symlink to a host path", tar_of([("host/x", "file", b"evil")])),
    ("under a symlink an earlier entry made", tar_of([("esc", "sym", "/work/outside"), ("esc/x", "file", b"evil")])),
    ("a relative symlink out, then through it", tar_of([("esc2", "sym", "../outside"), ("esc2/x", "file", b"evil")])),
    ("a hard link to /etc/shadow", tar_of([("hl", "hard", "/etc/shadow")])),
    ("a hard link through ..", tar_of([("hl2", "hard", "../outside/target")])),
    ("a hard link through a planted symlink", tar_of([("hl3", "hard", "planted/target")])),
]
run("echo target > /work/outside/target")
for what, data in cases:
    r = put_bytes("/work/slip", data)
    is_(err(r), ("invalid_request", "tar"), "tar slip (%s): invalid_request, field tar" % what)
    check("entry " in ((r.get("error") or {}).get("message") or ""), "... the message names the entry", r)
is_(run("ls -A /work/outside; ls -A /work/slip; test -e /x && echo x; test -e /work/x && echo wx"),
    "target\na\nesc\nesc2\nhost\nok1\nplanted\n",
    "... nothing written outside (only the good entries before each bad one landed: a file, a directory, two symlinks)")
check(sorted(os.listdir(T + "/hostdir")) == ["secret"], "... nothing written on the host")
r = put_bytes("/work/newtree", tar_of([("a", "file", b"a"), ("b", "dir"), ("../x", "file", b"evil")]))
is_((err(r), r.get("entries")), (("invalid_request", "tar"), 2), "a bad third entry into a new directory: refused, entries 2 in the error")
is_(run("ls -a /work | grep -c -e newtree -e sbx-put"), "0\n", "... the new directory never appears, its temporary is removed")
gz = subprocess.run(["gzip", "-c"], input=tar_of([("g", "file", b"gz")]), capture_output=True).stdout
r = put_bytes("/work/gz", gz)
is_(err(r), ("invalid_request", "tar"), "a gzip'ed stream: invalid_request (only uncompressed tar: no filter, no external program)")
is_(run("test -e /work/gz && echo there"), "", "... nothing made")
is_(err(put_bytes("/work/junk", b"this is not a tar stream" * 100)), ("invalid_request", "tar"), "junk: invalid_request, field tar")

# a full disk: no_space, field tar, and the new directory never appears
big = io.BytesIO()
with tarfile.open(fileobj=big, mode="w") as tf:
    ti = tarfile.TarInfo("huge"); ti.size = 40 << 20; tf.addfile(ti, io.BytesIO(bytes(40 << 20)))
sb_saved, sb = sb, os.environ["SB2"]
r = put_bytes("/tmp/full", big.getvalue())
is_(err(r), ("no_space", "tar"), "a 40 MiB entry into a 32 MiB tmpfs: no_space, field tar")
is_(call("run", argv=["sh", "-c", "ls -A /tmp"]).get("stdout"), "", "... the new directory never appears, its temporary is removed")
sb = sb_saved
# a name that is not UTF-8 goes out and back as its bytes (pax hdrcharset=BINARY)
run("mkdir -p /work/raw && printf r > /work/raw/$(printf 'b\\377n')")
r, t1 = get_file("/work/raw")
check(r.get("ok") and b"b\xffn" in t1, "a name that is not UTF-8: archived as its bytes", r)
check(put_bytes("/work/raw2", t1).get("ok") and run("ls /work/raw2/raw | od -An -c | tr -s ' '") == " b 377 n \\n\n",
      "... and put back as the same bytes")

# ---- file.get: what is not found, what is skipped
is_(err(get_file("/work/nope")[0]), ("not_found", "path"), "file.get of a missing path: not_found")
r, t1 = get_file("/work/src/abs")
is_([(m.name, m.issym()) for m in tarfile.open(fileobj=io.BytesIO(t1))], [("abs", True)], "file.get of a symlink: the link itself")
r, t1 = get_file("/work/src/abs", follow=True)
is_([(m.name, m.isfile()) for m in tarfile.open(fileobj=io.BytesIO(t1))], [("abs", True)], "... with follow, what it names inside")
r, t1 = get_file("/dev")
check(r.get("ok") and r.get("skipped", 0) > 0, "file.get of /dev: devices skipped and counted", r)

# ---- the helper's own seccomp filter: one more than a run's, seen while it is blocked on a pipe
run("head -c 4000000 /dev/zero > /work/big")
rp, wp = os.pipe()
rid = with_fd("file.get", wp, path="/work/big")
os.close(wp)
def helper_pids():
    return [p for d in os.listdir(cgs) if d.startswith("file-") for p in procs_under(os.path.join(cgs, d))]
end = time.monotonic() + 10
while not helper_pids() and time.monotonic() < end:
    time.sleep(0.05)
def status(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return line.split()[1]
pids = helper_pids()
# Born, it has none yet; it installs both filters before its first byte.
while pids and status(pids[0], "Seccomp_filters") == "0" and time.monotonic() < end:
    time.sleep(0.05)
helper = status(pids[0], "Seccomp_filters") if pids else None
c2 = Conn(sock, 60)
c2.send({"id": 1, "op": "run", "sandbox": sb, "argv": ["sh", "-c", "grep Seccomp_filters /proc/self/status"]})
runs = ((c2.final(1, 60) or {}).get("stdout") or "").split()[-1:]
check(helper is not None and runs and int(helper) == int(runs[0]) + 1,
      "the file helper has its own seccomp filter on top of the runs' (%s filters, a run's command %s)" % (helper, runs))
is_(status(pids[0], "NoNewPrivs") if pids else None, "1", "... with no_new_privs")
n = 0
while True:
    b = os.read(rp, 1 << 20)
    if not b:
        break
    n += len(b)
os.close(rp)
r = c.final(rid, 60) or {}
is_((r.get("ok"), n), (True, r.get("bytes")), "... and its stream ends when read")
c2.close()
PYEOF

# ---- sandboxctl cp of trees, both ways and with -
hostlist() { (cd "$1" && find . -mindepth 1 -printf '%P|%y|%m|%s|%l\n' | LC_ALL=C sort); }
inlist() {
	jget "$(rpc '{"op":"run","sandbox":"'"$SB"'","argv":["sh","-c","cd '"$1"' && find . -mindepth 1 -printf \"%P|%y|%m|%s|%l\\n\" | LC_ALL=C sort"]}')" .stdout
}
src=$T/cpsrc
mkdir -p "$src/sub/empty" && echo a >"$src/a" && ln -s /etc/passwd "$src/abs" && ln -s missing "$src/dangling" &&
	mkfifo "$src/fifo" && printf x >"$src/sub/x" && chmod 0700 "$src/sub" && printf 'u' >"$src/ünï ✓"
want=$(hostlist "$src")
ctl cp "$src" "$SB:/work/cpdir" >"$T/cp.out" 2>&1
is "$?:$(inlist /work/cpdir)" "0:$want" "sandboxctl cp DIR SBX:NEW: the directory's contents become NEW (types, modes, sizes, links)"
ctl cp "$src" "$SB:/work/cpdir/" >"$T/cp.out" 2>&1
is "$?:$(inlist /work/cpdir/cpsrc)" "0:$want" "sandboxctl cp DIR SBX:EXISTING/: copied into it under its own name"
ctl cp "$SB:/work/cpdir" "$T/cpout" >"$T/cp.out" 2>&1
is "$?:$(hostlist "$T/cpout" | grep -v '^cpsrc')" "0:$want" "sandboxctl cp SBX:DIR NEW: the tree out into a new local directory"
mkdir "$T/cpinto"
ctl cp "$SB:/work/cpdir" "$T/cpinto" >"$T/cp.out" 2>&1
is "$?:$(hostlist "$T/cpinto/cpdir" | grep -v '^cpsrc')" "0:$want" "sandboxctl cp SBX:DIR EXISTING: into it under its own name"
# `-` is a tar stream into a directory: an existing one, or a new one named with a trailing /
# (without it, a DST that is no directory takes stdin as the content of one file).
tar -C "$src" -cf - . | ctl cp - "$SB:/work/cpstream/" >"$T/cp.out" 2>&1
is "$?:$(inlist /work/cpstream)" "0:$want" "tar -c | sandboxctl cp - SBX:DIR/: a tar stream on stdin, into a new directory"
names=$(ctl cp "$SB:/work/cpstream" - | tar --quoting-style=literal -tf - | LC_ALL=C sort)
is "$names" "$(printf '%s\n' cpstream/ cpstream/a cpstream/abs cpstream/dangling cpstream/fifo 'cpstream/ünï ✓' cpstream/sub/ cpstream/sub/empty/ cpstream/sub/x | LC_ALL=C sort)" \
	"sandboxctl cp SBX:PATH - | tar -t: a tar stream on stdout, names from the basename"
printf 'not a tar' | ctl cp - "$SB:/work/cpbad/" >"$T/cp.out" 2>&1
st=$?
like "$st:$(cat "$T/cp.out")" '^1:.*not a tar stream' "sandboxctl cp - of junk: status 1, the daemon's message"

# Another uid's client: the same bytes as for a sandbox that never existed.
other_get() {
	printf '{"id":1,"op":"file.get","sandbox":"%s","path":"/work"}\n' "$1" |
		as_other 65534 --regid=65534 --clear-groups -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" raw --count 1 --timeout 30
}
unknown=sbx-00000000000000000000000000000000
a=$(other_get "$SB")
b=$(other_get "$unknown")
like "$a" '"code":"not_found"' "another uid's file.get: not_found"
is "${a//$SB/@}" "${b//$unknown/@}" "... byte for byte what an unknown sandbox gets"

rpc '{"op":"destroy","sandbox":"'"$SB"'"}' >/dev/null
rpc '{"op":"destroy","sandbox":"'"$SB2"'"}' >/dev/null
stop_daemon
