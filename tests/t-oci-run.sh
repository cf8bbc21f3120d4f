#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# run as the OCI runtime drives it (docs/protocol.md "run", issue 24): the client's own fds as
# the command's stdio ("stdio") and fds 3.. ("extra_fds"), passed with SCM_RIGHTS and
# type-checked; nothing captured; no timeout; a terminal whose master is handed to the client
# with "started"; the command's pid inside the sandbox; exit and signal fidelity; uid/gid,
# supplementary groups, umask, rlimits (and "rlimits_lower"), the five capability sets exactly
# ("capabilities"), an exact environment; a cwd outside /work in an image sandbox; and the run
# killed when the client that asked for it is SIGKILLed.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	skip_all "a static busybox is needed to build a tiny rootfs (apt-get install busybox-static)"

start_daemon || exit 0
fds0=$(daemon_fd_baseline)

# A tiny image whose root is the sandbox's own (cwd anywhere in it).
ROOT=$T/rootfs
mkdir -p "$ROOT/bin" "$ROOT/etc" "$ROOT/srv/app"
cp "$BUSYBOX" "$ROOT/bin/busybox"
for t in sh ls pwd id; do ln -s busybox "$ROOT/bin/$t"; done
r=$(rpc '{"op":"image.import","name":"oci-img","source":"'"$ROOT"'"}' 60)
is "$(jget "$r" '.ok')" true "a small image imported (for the cwd case)"

run_py "run with the client's fds" 180 <<'PYEOF'
import array, json, os, select, signal, socket, time
from client import Conn, check, is_

sock = os.environ["SOCK"]

def send_with(c, obj, fds):
    data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    n = c.s.sendmsg([data], anc)
    if n < len(data):
        c.s.sendall(data[n:])

def read_all(fd, limit=10.0):
    """Everything until EOF: EOF only comes once no copy of the write end is left anywhere."""
    out, deadline = b"", time.monotonic() + limit
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            b = os.read(fd, 65536)
            if not b:
                return out, True
            out += b
    return out, False

def err_of(reply):
    return (reply or {}).get("error") or {}

class Lines:
    """Reply lines with the fds that came with them (recvmsg): fds belong to the line holding the
    last byte received with them."""
    def __init__(self, c):
        self.c, self.buf, self.lines = c, b"", []
    def pump(self, timeout):
        self.c.s.settimeout(timeout)
        data, anc, _, _ = self.c.s.recvmsg(65536, socket.CMSG_SPACE(8 * 4))
        if not data:
            raise EOFError
        fds = []
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(payload[: len(payload) - len(payload) % 4])
                fds += list(a)
        self.buf += data
        parts = self.buf.split(b"\n")
        self.buf = parts.pop()
        for i, p in enumerate(parts):
            last = i == len(parts) - 1 and not self.buf
            self.lines.append((json.loads(p), fds if last else []))
        if fds and self.buf:  # the line is not complete yet: they are its
            self.pending_fds = fds
    def until(self, pred, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, (m, fds) in enumerate(self.lines):
                if pred(m):
                    del self.lines[i]
                    return m, fds
            left = deadline - time.monotonic()
            if left <= 0:
                return None, []
            try:
                self.pump(left)
            except (socket.timeout, EOFError):
                return None, []

def run_fds(obj, fds, timeout=30):
    """Sends a run with fds (ours closed after), returns (started, started_fds, final)."""
    c = Conn(sock, timeout)
    obj = dict(obj, id=1, op="run")
    if fds:
        obj["fds"] = len(fds)
    send_with(c, obj, fds)
    for fd in set(fds):
        os.close(fd)
    L = Lines(c)
    st, st_fds = L.until(lambda m: m.get("event") == "started" or "ok" in m, timeout)
    fin = st if st is not None and "ok" in st else L.until(lambda m: "ok" in m, timeout)[0]
    c.close()
    return st, st_fds, fin

r = Conn(sock).call({"op": "create", "best_effort": True, "name": "oci", "limits": {"timeout_s": 2, "open_files": 1000}})
check(r and r.get("ok"), "a sandbox for the runs (timeout_s 2)", r)
SB = "oci"

# 1. stdio: our pipes are the command's 0, 1, 2; nothing captured
in_r, in_w = os.pipe()
out_r, out_w = os.pipe()
err_r, err_w = os.pipe()
os.write(in_w, b"from stdin\n")
os.close(in_w)
st, _, fin = run_fds({"sandbox": SB, "argv": ["sh", "-c", "echo out; echo err >&2; cat"], "stdio": [0, 1, 2]},
                     [in_r, out_w, err_w])
out, out_eof = read_all(out_r)
err, err_eof = read_all(err_r)
is_(out, b"out\nfrom stdin\n", "stdio: the command read our stdin pipe and wrote to our stdout pipe")
is_(err, b"err\n", "... and to our stderr pipe")
check(out_eof and err_eof, "... which see EOF: the daemon keeps no copy of their write ends")
check(fin and fin.get("ok") and fin.get("exit_code") == 0, "... the run exits 0", fin)
is_(fin.get("captured"), False, "... the final reply says \"captured\": false")
check("stdout" not in fin and "stderr" not in fin and "stdout_truncated" not in fin, "... and has no stdout/stderr fields", fin)
check(all(k in fin for k in ("signal", "reason", "timed_out", "oom_killed", "duration_s", "cpu_user_s",
                             "memory_peak_bytes", "pids_peak", "pids_limit_hit")), "... but the whole account", fin)
check(st and isinstance(st.get("pid"), int) and st["pid"] > 1, "started carries the command's pid inside the sandbox", st)
os.close(out_r); os.close(err_r)

# 2. the pid is the one inside the sandbox's pid namespace
out_r, out_w = os.pipe()
st, _, fin = run_fds({"sandbox": SB, "argv": ["sh", "-c", "echo $$"], "stdio": [None, 0, None]}, [out_w])
out, _ = read_all(out_r)
os.close(out_r)
check(st and out.strip() == str(st.get("pid")).encode(), "started's pid is what $$ says inside", st, out)

# 3. extra_fds: fd 3 reaches the command, and no other inherited fd does
out_r, out_w = os.pipe()
x_r, x_w = os.pipe()
leak_r, leak_w = os.pipe()  # not sent: must not show up
st, _, fin = run_fds({"sandbox": SB, "argv": ["sh", "-c", "ls /proc/$$/fd; echo extra >&3"],
                      "stdio": [None, 0, 0], "extra_fds": [1]}, [out_w, x_w])
out, _ = read_all(out_r)
x, x_eof = read_all(x_r)
is_(out.decode().split(), ["0", "1", "2", "3"], "extra_fds: the command has fds 0, 1, 2, 3 and no other")
is_(x, b"extra\n", "... fd 3 is our pipe")
check(x_eof, "... which sees EOF after the run (no copy kept)")
for fd in (out_r, x_r, leak_r, leak_w):
    os.close(fd)

# 4. one fd for all three (a socket, as containerd's shim gives), another as 3
a, b = socket.socketpair()
st, _, fin = run_fds({"sandbox": SB, "argv": ["sh", "-c", "echo via-socket; echo e >&2"], "stdio": [0, 0, 0]},
                     [os.dup(a.fileno())])
a.close()
b.settimeout(10)
got = b""
try:
    while True:
        k = b.recv(4096)
        if not k:
            break
        got += k
except socket.timeout:
    pass
b.close()
is_(got, b"via-socket\ne\n", "stdio: a socket for 0, 1 and 2")

# 5. refusals, naming the field
def refused(obj, fds, field, words, desc):
    st, _, fin = run_fds(dict(obj, sandbox=SB), fds, 10)
    e = err_of(fin)
    check(e.get("code") == "invalid_request" and e.get("field") == field and words in e.get("message", ""),
          desc + " (%s: %s)" % (field, words), fin)

d = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
refused({"argv": ["true"], "stdio": [0, None, None]}, [d], "stdio", "is a directory", "a directory fd as stdin is refused")
p = os.open("/etc/passwd", os.O_PATH)
refused({"argv": ["true"], "stdio": [None, None, None], "extra_fds": [0]}, [p], "extra_fds", "O_PATH",
        "an O_PATH fd in extra_fds is refused")
ns = os.open("/proc/self/ns/net", os.O_RDONLY)
refused({"argv": ["true"], "stdio": [None, 0, None]}, [ns], "stdio", "namespace", "a network namespace fd is refused")
for f, v in (("stdin", "x"), ("stream", True), ("output_bytes", 100)):
    refused({"argv": ["true"], "stdio": [None, None, None], f: v}, [], f, "refused with 'stdio'",
            "%s with stdio is refused" % f)
w1 = os.pipe()
refused({"argv": ["true"], "stdio": [None, None, None]}, [w1[1]], "fds", "names it", "an fd no field names is refused")
os.close(w1[0])
refused({"argv": ["true"], "stdio": [None, None]}, [], "stdio", "3 entries", "stdio of two entries is refused")
refused({"argv": ["true"], "stdio": [None, 5, None]}, [], "stdio", "did not come", "an index past the fds is refused")
refused({"argv": ["true"], "no_timeout": True, "timeout_s": 5}, [], "no_timeout", "not both",
        "no_timeout with timeout_s is refused")
refused({"argv": ["true"], "extra_fds": []}, [], "extra_fds", "needs", "extra_fds without stdio or tty is refused")

# 6. no_timeout: past the sandbox's timeout_s (2 s), with and without stdio
st, _, fin = run_fds({"sandbox": SB, "argv": ["sleep", "3"], "stdio": [None, None, None], "no_timeout": True}, [])
check(fin and fin.get("exit_code") == 0 and fin.get("timed_out") is False, "no_timeout: a 3 s run in a 2 s sandbox exits 0", fin)
st, _, fin = run_fds({"sandbox": SB, "argv": ["sleep", "3"], "no_timeout": True}, [])
check(fin and fin.get("exit_code") == 0 and fin.get("timed_out") is False and "stdout" in fin,
      "... and so without stdio (captured as usual)", fin)
st, _, fin = run_fds({"sandbox": SB, "argv": ["sleep", "3"], "stdio": [None, None, None]}, [])
check(fin and fin.get("timed_out") is True and fin.get("reason") == "timeout", "without it the same run times out", fin)

# 7. exit code and signal fidelity
st, _, fin = run_fds({"sandbox": SB, "argv": ["sh", "-c", "exit 7"], "stdio": [None, None, None]}, [])
check(fin and fin.get("exit_code") == 7 and fin.get("signal") is None, "exit 7 is exit_code 7", fin)
st, _, fin = run_fds({"sandbox": SB, "argv": ["sh", "-c", "kill -TERM $$"], "stdio": [None, None, None]}, [])
check(fin and fin.get("signal") == "TERM" and fin.get("exit_code") == 143 and fin.get("reason") == "signaled",
      "kill -TERM $$ is signal TERM (exit_code 143, as a shell says)", fin)

# 8. uid/gid, umask, rlimits, env exactly as given
def output_of(obj):
    o_r, o_w = os.pipe()
    st, _, fin = run_fds(dict(obj, sandbox=SB, stdio=[None, 0, 0]), [o_w])
    out, _ = read_all(o_r)
    os.close(o_r)
    return out.decode(), fin

out, fin = output_of({"argv": ["sh", "-c", "id -u; id -g; umask"], "user": {"uid": 1234, "gid": 1234}, "umask": 0o027})
is_(out.split(), ["1234", "1234", "0027"], "user {uid,gid} 1234 and umask 027 as given")
o_r, o_w = os.pipe()
st, _, fin = run_fds({"best_effort": True, "argv": ["id", "-u"], "user": {"uid": 1234, "gid": 1234}, "stdio": [None, 0, None]},
                     [o_w])
out, _ = read_all(o_r)
os.close(o_r)
check(out == b"1234\n" and fin and fin.get("exit_code") == 0, "... and so in a throwaway sandbox made for the run", out, fin)
out, fin = output_of({"argv": ["sh", "-c", "id -u; grep CapEff /proc/self/status"], "user": {"uid": 0, "gid": 0}})
check(out.split()[:1] == ["0"], "user {uid 0} is root inside", out)
out, fin = output_of({"argv": ["sh", "-c", "id -u; id -g"], "user": {"uid": 0, "gid": 5}})
is_(out.split(), ["0", "5"], "user {uid 0, gid 5}: root with group 5")
out, fin = output_of({"argv": ["sh", "-c", "grep CapEff /proc/self/status"], "user": {"uid": 1234, "gid": 1234}})
check("0000000000000000" in out, "... and any other uid has no capabilities", out)
# capabilities: exactly the five sets, for uid 0 too
def caps_of(user, caps):
    out, fin = output_of({"argv": ["sh", "-c", "grep ^Cap /proc/self/status"], "user": user, "capabilities": caps})
    return {l.split(":")[0]: l.split(":")[1].strip() for l in out.splitlines() if ":" in l}, fin
c, fin = caps_of({"uid": 0, "gid": 0}, {})
is_([c.get(k) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")], ["0000000000000000"] * 5,
    "capabilities {} (every set empty, --cap-drop=ALL): uid 0 has no capability at all")
two = ["CAP_CHOWN", "CAP_KILL"]
c, fin = caps_of({"uid": 0, "gid": 0}, {"bounding": two, "effective": two, "permitted": two})
is_([c.get(k) for k in ("CapPrm", "CapEff", "CapBnd", "CapAmb")], ["0000000000000021"] * 3 + ["0000000000000000"],
    "CAP_CHOWN and CAP_KILL in bounding, effective, permitted: uid 0 has those two and no other")
nb = ["CAP_NET_BIND_SERVICE"]
c, fin = caps_of({"uid": 1234, "gid": 1234}, {"bounding": nb, "effective": nb, "permitted": nb, "inheritable": nb, "ambient": nb})
is_([c.get(k) for k in ("CapPrm", "CapEff", "CapBnd", "CapAmb")], ["0000000000000400"] * 4,
    "uid 1234 with CAP_NET_BIND_SERVICE in every set (ambient too) keeps it across exec")
c, fin = caps_of({"uid": 1234, "gid": 1234}, {"bounding": nb})
is_([c.get(k) for k in ("CapPrm", "CapEff", "CapBnd")], ["0000000000000000", "0000000000000000", "0000000000000400"],
    "... with it in bounding only: a bounding set of one, nothing effective")
for caps, desc in (({"effective": ["CAP_KILL"]}, "effective beyond permitted"),
                   ({"ambient": ["CAP_KILL"], "permitted": ["CAP_KILL"]}, "ambient beyond inheritable"),
                   ({"bounding": ["CAP_NOPE"]}, "an unknown capability name"),
                   ({"bounding": "CAP_KILL"}, "a set that is not an array"),
                   ({"extra": []}, "an unknown set")):
    st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "user": {"uid": 0, "gid": 0}, "capabilities": caps}, [])
    is_(err_of(fin).get("field"), "capabilities", "capabilities: %s is refused" % desc)
st, _, fin = run_fds({"best_effort": True, "argv": ["true"], "user": {"uid": 1234, "gid": 1234}, "capabilities": {"permitted": ["CAP_KILL"]}}, [])
is_(err_of(fin).get("field"), "capabilities",
    "capabilities for a uid other than 0 in a throwaway sandbox (its mounts not locked) are refused")

out, fin = output_of({"argv": ["sh", "-c", "ulimit -n; ulimit -Hn; ulimit -c"],
                      "rlimits": {"NOFILE": [100, 200], "CORE": [0, 0]}})
is_(out.split(), ["100", "200", "0"], "rlimits NOFILE [100, 200] and CORE [0, 0] as given")
out, fin = output_of({"argv": ["sh", "-c", "ulimit -n"], "rlimits": {"NOFILE": [100, 200]}, "open_files": 50})
is_(out.split(), ["50"], "... open_files wins where both are given")
st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "rlimits": {"NOFILE": [10, 1 << 40]}}, [])
is_(err_of(fin).get("field"), "rlimits.NOFILE", "a hard limit above the daemon's is refused naming rlimits.NOFILE")
def lowered(rlimits):
    o_r, o_w = os.pipe()
    st, _, fin = run_fds({"sandbox": SB, "argv": ["sh", "-c", "ulimit -n; ulimit -Hn"], "rlimits": rlimits,
                          "rlimits_lower": True, "stdio": [None, 0, None]}, [o_w])
    out, _ = read_all(o_r)
    os.close(o_r)
    return out.decode().split(), st, fin
out, st, fin = lowered({"NOFILE": [1 << 40, 1 << 40]})
is_(out, ["1000", "1000"], "rlimits_lower: NOFILE [2^40, 2^40] is lowered to the sandbox's open_files (1000), not refused")
is_((st or {}).get("rlimits_lowered"), {"NOFILE": [1000, 1000]}, "... and started says so: rlimits_lowered")
out, st, fin = lowered({"NOFILE": [100, 1 << 40]})
is_(out, ["100", "1000"], "... a soft limit below the maximum stays as given")
out, st, fin = lowered({"NOFILE": [100, 200]})
check(out == ["100", "200"] and st and "rlimits_lowered" not in st, "... and limits within it are not touched", out, st)
st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "rlimits": {"NOFILE": [20, 10]}}, [])
is_(err_of(fin).get("field"), "rlimits.NOFILE", "soft above hard is refused")
st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "rlimits": {"BOGUS": [1, 1]}}, [])
is_(err_of(fin).get("field"), "rlimits", "an unknown rlimit is refused")
st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "user": {"uid": 70000, "gid": 0}}, [])
is_(err_of(fin).get("field"), "user", "a uid past 65535 is refused")
out, fin = output_of({"argv": ["sh", "-c", "id -G; grep ^Groups: /proc/self/status"], "user": {"uid": 0, "gid": 0, "groups": [0, 1, 2, 10]}})
is_(out.split(), ["0", "1", "2", "10", "Groups:", "0", "1", "2", "10"], "user.groups [0, 1, 2, 10] for uid 0: its supplementary groups inside")
out, fin = output_of({"argv": ["sh", "-c", "id -u; id -G"], "user": {"uid": 1234, "gid": 1234, "groups": [5, 6]}})
is_(out.split(), ["1234", "1234", "5", "6"], "... and for uid 1234: gid 1234, groups 5 and 6")
out, fin = output_of({"argv": ["sh", "-c", "grep ^Groups: /proc/self/status"], "user": {"uid": 1234, "gid": 1234}})
is_(out.split(), ["Groups:"], "... without them, no supplementary group at all")
out, fin = output_of({"argv": ["sh", "-c", "grep ^Groups: /proc/self/status"]})
is_(out.split(), ["Groups:"], "... nor for a run that names no user")

# "pid_namespace": "own": pid 1 of a pid namespace of its own, which ignores a signal it has no
# handler for, from anyone but SIGKILL; the daemon's SIGKILL ends it.
out, fin = output_of({"argv": ["sh", "-c", "echo $$; kill -TERM $$; echo alive"], "pid_namespace": "own"})
is_((out.split(), (fin or {}).get("exit_code")), (["1", "alive"], 0), "pid_namespace own: $$ is 1, its own SIGTERM ignored")
out, fin = output_of({"argv": ["sh", "-c", "echo $$"], "pid_namespace": "sandbox"})
check(out.strip() not in ("", "1"), "pid_namespace sandbox (the default): not pid 1 (the init is)", out)
c = Conn(sock, 30)
c.send({"id": 1, "op": "run", "sandbox": SB, "argv": ["sleep", "30"], "pid_namespace": "own"})
st = c.recv_json()
is_((st.get("event"), st.get("pid")), ("started", 1), "started says pid 1")
k = Conn(sock, 30)
is_(k.call({"op": "kill", "run_id": st.get("run_id"), "signal": "TERM"}).get("ok"), True, "kill TERM is sent")
time.sleep(0.5)
is_(k.call({"op": "kill", "run_id": st.get("run_id"), "signal": "KILL"}).get("ok"), True, "... and, 0.5 s on, KILL")
fin = c.recv_json()
is_((fin.get("signal"), fin.get("reason")), ("KILL", "killed"), "it ignored TERM (no handler, pid 1) and died by the KILL")
st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "pid_namespace": "host"}, [])
is_(err_of(fin).get("field"), "pid_namespace", "pid_namespace other than sandbox or own is refused")
st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "user": {"uid": 1, "gid": 1, "groups": [70000]}}, [])
is_(err_of(fin).get("field"), "user", "a group past 65535 is refused")
st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "user": {"uid": 1, "gid": 1, "groups": list(range(33))}}, [])
is_(err_of(fin).get("field"), "user", "more than 32 groups are refused")
st, _, fin = run_fds({"sandbox": SB, "argv": ["true"], "user": {"uid": 1, "gid": 1, "groups": ["5"]}}, [])
is_(err_of(fin).get("field"), "user", "a group that is not an integer is refused")
out, fin = output_of({"argv": ["/usr/bin/env"], "env": {"A": "1", "B": "two"}, "env_defaults": False})
is_(sorted(out.split("\n")[:-1]), ["A=1", "B=two"], "env_defaults false: the environment is exactly env")
out, fin = output_of({"argv": ["/usr/bin/env"], "env": {"A": "1"}})
check("PATH=" in out and "HOME=/work" in out, "... and without it PATH and HOME are added as before", out)
st, _, fin = run_fds({"sandbox": SB, "argv": ["pwd"], "cwd": "/tmp"}, [])
is_(err_of(fin).get("field"), "cwd", "cwd outside /work in a sandbox without a root of its own is refused")

# 9. cwd anywhere in an image sandbox
r = Conn(sock).call({"op": "create", "best_effort": True, "name": "img", "image": "oci-img"}, 60)
check(r and r.get("ok"), "an image sandbox", r)
o_r, o_w = os.pipe()
st, _, fin = run_fds({"sandbox": "img", "argv": ["/bin/sh", "-c", "pwd"], "cwd": "/srv/app", "stdio": [None, 0, None]}, [o_w])
out, _ = read_all(o_r)
os.close(o_r)
is_(out, b"/srv/app\n", "cwd /srv/app (outside /work) in an image sandbox")
st, _, fin = run_fds({"sandbox": "img", "argv": ["/bin/sh", "-c", "pwd"], "cwd": "/nope"}, [])
e = err_of(fin)
check(e.get("code") == "invalid_request" and e.get("field") == "cwd" and "No such file" in e.get("message", ""),
      "a missing cwd there: invalid_request naming cwd, as anywhere", fin)

# 10. tty: the master reaches the client with "started"; tty and stty size inside
st, st_fds, fin = run_fds({"sandbox": SB, "argv": ["sh", "-c", "tty; stty size; sleep 1"], "tty": {"rows": 30, "cols": 100}}, [])
check(st and st.get("fds") == 1 and st.get("master") == 0 and len(st_fds) == 1,
      "tty: started says fds 1, master 0, and carries one fd", st, st_fds)
out = b""
if st_fds:
    m = st_fds[0]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ready, _, _ = select.select([m], [], [], 0.2)
        if ready:
            try:
                k = os.read(m, 4096)
            except OSError:
                break
            if not k:
                break
            out += k
    os.close(m)
lines = out.decode(errors="replace").replace("\r", "").split("\n")
check(len(lines) > 1 and lines[0].startswith("/dev/pts/"), "... tty inside names its terminal", out)
check(len(lines) > 1 and lines[1].strip() == "30 100", "... and stty size says 30 100", out)
check(fin and fin.get("exit_code") == 0 and fin.get("captured") is False, "... the run exits 0, nothing captured", fin)
refused({"argv": ["true"], "tty": {"rows": 30}}, [], "tty", "needs", "tty without cols is refused")
refused({"argv": ["true"], "tty": {"rows": 3, "cols": 4}, "stdio": [None, None, None]}, [], "tty", "not both",
        "tty with stdio is refused")

# 11. a SIGKILLed client kills its run: our pipe's only other writer is the command
x_r, x_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(x_r); os.close(go_r)
    c = Conn(sock, 30)
    send_with(c, {"id": 1, "op": "run", "sandbox": SB, "argv": ["sleep", "1000"], "no_timeout": True, "fds": 1,
                  "stdio": [None, 0, None]}, [x_w])
    os.close(x_w)
    L = Lines(c)
    m, _ = L.until(lambda m: m.get("event") == "started", 20)
    os.write(go_w, b"1" if m else b"0")
    time.sleep(1000)
    os._exit(0)
os.close(x_w); os.close(go_w)
ready, _, _ = select.select([go_r], [], [], 20)
started = ready and os.read(go_r, 1) == b"1"
check(started, "a client's run started")
ready, _, _ = select.select([x_r], [], [], 1)
check(not ready, "... and runs while the client lives")
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
_, eof = read_all(x_r, 15)
check(eof, "the client SIGKILLed: its run is killed (its pipe's writer is gone)")
os.close(x_r); os.close(go_r)
for name in ("oci", "img"):
    r = Conn(sock).call({"op": "destroy", "sandbox": name}, 60)
    check(r and r.get("ok"), "sandbox %s destroyed" % name, r)
PYEOF

# libsandbox takes the master from the started line (sbx_client_line_fds()).
rpc '{"op":"create","best_effort":true,"name":"lib"}' >/dev/null
out=$("$top_builddir/tests/oci-tty-client" "$SOCK" lib keep 2>&1)
printf '%s\n' "$out" | sed 's/^/# /'
line() { printf '%s\n' "$out" | sed -n "$1p"; }
is "$(line 1)" "fds=1 field=1 master=0" "libsandbox: the started line's fd is the client's (sbx_client_line_fds)"
is "$(line 3 | tr -d ' ')" "30100" "... a terminal of 30 rows and 100 columns (stty size through it)"
is "$(line 4)" "exit_code=0 captured=false signal=null" "... and the final reply: exit 0, nothing captured"
out=$("$top_builddir/tests/oci-tty-client" "$SOCK" lib close 2>&1)
printf '%s\n' "$out" | sed 's/^/# /'
is "$(line 4)" "exit_code=129 captured=false signal=HUP" \
	"the master closed by the client while the command sleeps: it hangs up (the daemon holds no copy)"
is "$(jget "$(rpc '{"op":"destroy","sandbox":"lib"}')" .ok)" true "sandbox lib destroyed"

wait_fds "$fds0"
is "$(daemon_fds)" "$fds0" "the daemon's fd count is back to its baseline ($fds0)"
stop_daemon
