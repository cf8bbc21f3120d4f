#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The escape catalogue (THREATS.md section 1): one focused attempt per case, made from inside a
# sandbox by a shell, python3 or tests/security/probe, as the default user (uid 1000 inside) and,
# where root of the sandbox's user namespace ("user":"root") could make a difference, as that too.
# Each line asserts that the attempt fails AND that the host is unchanged (a canary file, a
# canary process, a host TCP listener, the daemon's binary, the sandbox's cgroup).
# The daemon runs with an extra supplementary group that alone may read a canary file (ESC-14a).
# Other cases live next door: the seccomp table in t-seccomp.sh, /proc and /sys masks, the
# control socket's path, LISTEN_*/NOTIFY_SOCKET and mount propagation in t-visibility.sh, cwd
# normalisation and destroy through symlinks to host paths in ../t-run.sh, who may see whose
# sandbox in ../t-access.sh.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

PROBE=$top_builddir/tests/security/probe
[ -x "$PROBE" ] || skip_all "no probe at $PROBE (make check builds it)"
command -v setpriv >/dev/null || skip_all "setpriv is not installed"

# Host canaries, in a directory the daemon's configuration shows to every sandbox (root_binds,
# read-only): a sandbox sees nothing of the host's /var by itself, and /tmp and /var/tmp are its own.
CANARY_GID=4242
VARTMP=$(mktemp -d /var/lib/sbxt-escape.XXXXXX) || skip_all "mktemp in /var/lib failed"
chmod 0755 "$VARTMP"
trap 'rm -rf --one-file-system "$VARTMP"; _cleanup' EXIT
echo group-secret >"$VARTMP/group-secret"
chown "0:$CANARY_GID" "$VARTMP/group-secret" && chmod 0040 "$VARTMP/group-secret"
mkdir "$VARTMP/dir" && echo canary >"$VARTMP/dir/file"
# A setuid-root copy of id on the host, in a path the sandbox sees (nosuid there, and no_new_privs).
cp /usr/bin/id "$VARTMP/suid-id" && chmod 4755 "$VARTMP/suid-id"
SANDBOXD_BIN=$SANDBOXD
printf '#!/bin/sh\nexec setpriv --groups=%s -- %s "$@"\n' "$CANARY_GID" "$SANDBOXD_BIN" >"$T/sandboxd-with-group"
chmod 0755 "$T/sandboxd-with-group"
SANDBOXD=$T/sandboxd-with-group
export PROBE VARTMP CANARY_GID SANDBOXD_BIN
printf 'root_binds = %s\n' "$VARTMP" >"$T/escape.conf"
start_daemon --config "$T/escape.conf" || exit 0
like "$(grep ^Groups: /proc/$DAEMON_PID/status)" "^Groups:[[:space:]]*$" \
	"the daemon dropped the supplementary group it was started with"

run_py "escape" 300 <<'EOF'
import atexit, hashlib, os, re, shutil, signal, socket, subprocess, time
from client import Conn, check, is_
sock, cg, vartmp = os.environ["SOCK"], os.environ["CG"], os.environ["VARTMP"]
c = Conn(sock, 60)
A = c.call({"op": "create", "best_effort": True, "name": "esc-a"})["sandbox"]
B = c.call({"op": "create", "best_effort": True, "name": "esc-b"})["sandbox"]
for sb in (A, B):
    shutil.copy(os.environ["PROBE"], os.path.join(sb["workdir"], "probe"))
    os.chmod(os.path.join(sb["workdir"], "probe"), 0o755)

def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()

def run(sb=A, user=None, **kw):
    req = {"op": "run", "sandbox": sb["id"]}
    if user:
        req["user"] = user
    req.update(kw)
    return c.call(req, 60)

def sh(cmd, sb=A, user=None):
    r = run(sb, user, command=cmd)
    if r.get("ok") is not True:
        print("# run failed: %r" % r)
    return r.get("exit_code"), r.get("stdout") or "", r.get("stderr") or ""

def probe(*args, sb=A, user=None):
    r = run(sb, user, argv=["/work/probe"] + list(args))
    return (r.get("stdout") or "").strip() or repr(r)

USERS = ("sandbox", "root")
host_passwd = sha("/etc/passwd")
daemon_sha = sha(os.environ["SANDBOXD_BIN"])
canary = subprocess.Popen(["sleep", "600"])
atexit.register(canary.kill)

# ---- ESC-14: identity -------------------------------------------------------------------------
code, out, err = sh("id -u; id -g; grep -E '^(Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status")
lines = out.split("\n")
is_(lines[:2], ["1000", "1000"], "ESC-14: a run is uid/gid 1000 inside by default")
caps = dict(re.findall(r"^(\w+):[ \t]*(\S*)", out, re.M))
is_([caps.get(k) for k in ("Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")],
    ["", "0" * 16, "0" * 16, "0" * 16, "0" * 16, "0" * 16, "1"],
    "ESC-14: no supplementary group, every capability set empty (bounding and ambient too), no_new_privs")
code, out, err = sh("id; cut -d: -f1 /etc/passwd | tr '\\n' ' '; cut -d: -f1 /etc/group | tr '\\n' ' '")
host_users = [l.split(":")[0] for l in open("/etc/passwd") if l.count(":") >= 6]
is_(out.splitlines(), ["uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)", "root sandbox nobody root sandbox nogroup "],
    "ESC-14: uid 1000 is 'sandbox'; /etc/passwd and /etc/group inside list three accounts, none of the host's %d" % len(host_users))
st = os.stat(A["workdir"])
init_pid = int(open(os.path.join(cg, "sandboxes", A["id"], "init", "cgroup.procs")).read().split()[0])
host_map = open("/proc/%d/uid_map" % init_pid).read().split()
check(len(host_map) == 3 and host_map[0] == "0" and int(host_map[1]) >= 0x70000000 and st.st_uid == int(host_map[1]) + 1000,
      "ESC-14: seen from the host, the sandbox maps one range above 0x70000000 (never uid 0) and the workspace "
      "belongs to its uid 1000", host_map, st.st_uid)
for user in USERS:
    code, out, err = sh("cat %s/group-secret" % vartmp, user=user)
    check(code != 0 and "group-secret" not in out and "Permission denied" in err,
          "ESC-14: %s cannot read a file only the daemon's former supplementary group could" % user, code, out, err)
code, out, err = sh("unshare -U true; echo $?", user="root")
check(out.strip() not in ("", "0"), "ESC-14: root inside cannot create a nested user namespace", out, err)

# ---- Writing outside /work --------------------------------------------------------------------
marker = "sbx-esc-%d" % os.getpid()
for user in USERS:
    targets = ["/%s" % marker, "/etc/%s" % marker, "/usr/%s" % marker, "/var/%s" % marker, "%s/%s" % (vartmp, marker),
               "%s/dir/file" % vartmp]
    code, out, err = sh("for f in %s; do (echo x >> $f) 2>/dev/null && echo wrote $f; done; "
                        "(echo x > /tmp/%s) && echo tmp-ok; (echo y > /var/tmp/%s) && cat /tmp/%s" %
                        (" ".join(targets), marker, marker, marker), user=user)
    check("wrote" not in out and "tmp-ok\ny" in out and not any(os.path.exists(t) for t in targets[:-1])
          and not os.path.exists("/tmp/" + marker) and not os.path.exists("/var/tmp/" + marker)
          and open(vartmp + "/dir/file").read() == "canary\n" and sha("/etc/passwd") == host_passwd,
          "writing outside /work fails as %s (/, /etc, /usr, /var, a root_binds directory and a host file in it); "
          "its /tmp, and /var/tmp which leads to it, are its own" % user, out, err)

# ---- ESC-12: setuid binaries ------------------------------------------------------------------
code, out, err = sh("cp /usr/bin/id /work/suid-id && chmod 4755 /work/suid-id && stat -c %u:%a /work/suid-id", user="root")
is_(out.strip(), "0:4755", "ESC-12: root inside can make a setuid-root copy of id in /work")
code, out, err = sh("/work/suid-id -u; %s/suid-id -u" % vartmp)
is_(out.split(), ["1000", "1000"], "ESC-12: setuid-root binaries (one in /work, one on the host) run as 1000: nosuid, no_new_privs")
st = os.stat(os.path.join(A["workdir"], "suid-id"))
parent = os.stat(os.path.dirname(A["workdir"]))
check(st.st_uid != 0 and (parent.st_mode & 0o077) == 0,
      "ESC-12: on the host the setuid file belongs to the sandbox's range, under a 0700 directory", oct(parent.st_mode), st.st_uid)

# ---- ESC-06: the /proc masks cannot be undone ----------------------------------------------------
mask = next((m for m in ("/proc/keys", "/proc/timer_list", "/proc/kcore") if os.path.exists(m)), None)
for user, errno_ in (("sandbox", "EPERM"), ("root", "EINVAL")):
    out = [probe("umount", mask, user=user), probe("umount", "/proc/sys", user=user), probe("umount", "/proc", user=user)]
    is_(out, ["blocked " + errno_] * 3,
        "ESC-06: %s cannot unmount the mask on %s, /proc/sys or /proc (%s%s)" % (user, mask, errno_,
                                                                               ": the mounts are locked" if user == "root" else ""))
    is_(probe("remount-rw", "/proc/sys", user=user), "blocked EPERM", "ESC-06: %s cannot remount /proc/sys read-write" % user)
code, out, err = sh("head -c 100 %s | wc -c" % mask, user="root")
is_(out.strip(), "0", "ESC-06: %s still reads back nothing afterwards" % mask)
code, out, err = sh("mkdir -p /tmp/m; mount -t proc proc /tmp/m || mount -t sysfs sysfs /tmp/m || echo refused", user="root")
check("refused" in out, "ESC-06: root inside cannot mount a fresh procfs or sysfs (their namespaces are not its own)", out, err)

# ---- ESC-06 in a throwaway sandbox made for the default user ------------------------------------
# Its init skips the child user namespace that locks the mounts (docs/security.md): nothing in it
# may hold a capability. So the unprivileged user still cannot undo a mask, a root run is refused
# in it, and a throwaway run as root gets a sandbox whose mounts are locked.
sys_py = ("python3 -c 'import ctypes, os, sys; l = ctypes.CDLL(None, use_errno=True); "
          "r = l.umount2(sys.argv[1].encode(), 0) if sys.argv[2] == \"umount\" else "
          "l.mount(None, sys.argv[1].encode(), None, 0x20 | 0x1000, None); "
          "print(\"ok\" if r == 0 else os.strerror(ctypes.get_errno()))' ")
def throwaway(cmd, user=None, **kw):
    req = {"op": "run", "best_effort": True, "command": cmd}
    if user:
        req["user"] = user
    req.update(kw)
    return c.call(req, 60)
r = throwaway("cat /proc/self/uid_map; " + "; ".join(sys_py + "%s umount" % p for p in (mask, "/proc/sys", "/proc")) +
              "; " + sys_py + "/proc/sys remount")
out = r.get("stdout", "").splitlines()
check(len(out) == 5 and out[0].split()[:2] != ["0", "0"],
      "ESC-06: a throwaway run as the default user is in the outer user namespace (no child one locks its mounts)", r)
is_(out[1:], ["Operation not permitted"] * 4,
    "ESC-06: ... and still cannot unmount the mask on %s, /proc/sys or /proc, nor remount /proc/sys (EPERM)" % mask)
r = throwaway("unshare --user --map-root-user sh -c 'umount %s && echo unmasked'" % mask)
check(r.get("exit_code") != 0 and "unmasked" not in r.get("stdout", ""),
      "ESC-06: ... nor become root of a user namespace of its own to try", r)
r = throwaway("cat /proc/self/uid_map; " + sys_py + "%s umount" % mask, user="root")
out = r.get("stdout", "").splitlines()
is_([out[0].split()[:2], out[1:]] if out else r, [["0", "0"], ["Invalid argument"]],
    "ESC-06: a throwaway run as root gets the child user namespace: the mask is locked (EINVAL)")
c.send({"id": "slow", "op": "run", "best_effort": True, "command": "sleep 30"})
ev = c.recv_json(10) or {}
sb = ev.get("sandbox")
check(ev.get("event") == "started" and sb, "a throwaway run as the default user started", ev)
r = c.call({"op": "run", "sandbox": sb, "user": "root", "command": sys_py + "%s umount" % mask})
e = r.get("error") or {}
is_((e.get("code"), e.get("field")), ("invalid_request", "user"),
    "ESC-06: a \"user\":\"root\" run in that in-flight throwaway sandbox (by its id) is refused")
r = c.call({"op": "run", "sandbox": sb, "command": "id -u"})
is_(r.get("stdout"), "1000\n", "... while a run as its default user is not")
c.call({"op": "kill", "run_id": ev.get("run_id")})
r = c.final("slow", 30)
is_(r.get("reason"), "killed", "the refused run left that sandbox alone: its own run ends with the kill, not destroyed")

# ---- ESC-08/17: another sandbox's files -------------------------------------------------------
secret = "secret-%d" % os.getpid()
sh("echo %s > /work/secret; echo %s > /dev/shm/secret; echo %s > /tmp/secret" % (secret, secret, secret), sb=B)
for user in USERS:
    code, out, err = sh("cat %s/secret /dev/shm/secret /tmp/secret 2>/dev/null; grep -rs %s /work /dev/shm /tmp /run 2>/dev/null; "
                        "ls /proc/*/root/work 2>/dev/null" % (B["workdir"], secret), user=user)
    check(secret not in out and "secret" not in out, "reading another sandbox's files fails as %s (host path, /dev/shm, /tmp, /proc/*/root)" % user, out)
check(os.stat(A["workdir"]).st_uid != os.stat(B["workdir"]).st_uid, "the two workspaces belong to different host uids")

# ---- Network ----------------------------------------------------------------------------------
lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen(8)
lst.setblocking(False)
port = lst.getsockname()[1]
code, out, err = sh("ls /sys/class/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
is_(sorted(set(out.split())), ["lo"], "network: the only interface inside is lo")
host_ips = [a for a in subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split() if ":" not in a]
for user in USERS:
    got = probe("tcp", "127.0.0.1:%d" % port, user=user)
    others = [probe("tcp", "%s:%d" % (ip, port), user=user) for ip in host_ips[:2]]
    try:
        lst.accept()
        accepted = True
    except BlockingIOError:
        accepted = False
    check(got == "blocked ECONNREFUSED" and all(o == "blocked ENETUNREACH" for o in others) and not accepted,
          "network: as %s, connecting to a TCP port the host listens on (127.0.0.1 and %s) fails and the host accepts nothing"
          % (user, ",".join(host_ips[:2]) or "no other address"), got, others, accepted)
lst.close()

# ---- ESC-13: ptrace of anything outside --------------------------------------------------------
for user in USERS:
    res = [probe("ptrace", "1", user=user), probe("vmread", "1", user=user), probe("open-r", "/proc/1/mem", user=user),
           probe("open-r", "/proc/1/environ", user=user), probe("ptrace", str(canary.pid), user=user)]
    check(res[:4] == ["blocked EPERM", "blocked EPERM", "blocked EACCES", "blocked EACCES"] and res[4] in ("blocked ESRCH", "blocked EPERM"),
          "ESC-13: as %s, ptrace/process_vm_readv/mem/environ of the sandbox's init fail, the host canary pid %d is out of reach"
          % (user, canary.pid), res)
status = open("/proc/%d/status" % canary.pid).read()
check(canary.poll() is None and re.search(r"^TracerPid:\s+0$", status, re.M), "ESC-13: the host canary is alive and untraced")

# ---- ESC-01: the daemon's binary through /proc/*/exe ------------------------------------------
for user in USERS:
    code, out, err = sh("for p in /proc/[0-9]*; do /work/probe open-w $p/exe; done | sort | uniq -c; "
                        "readlink /proc/1/exe || echo unreadable", user=user)
    check("allowed" not in out and "unreadable" in out and "sandboxd" not in out,
          "ESC-01: as %s, no /proc/*/exe opens for writing, and /proc/1/exe (a fork of the daemon) is not even readable" % user, out)
is_(sha(os.environ["SANDBOXD_BIN"]), daemon_sha, "ESC-01: the daemon's binary is unchanged")
dpid = os.environ["DAEMON_PID"]
code, out, err = sh("cat /proc/%s/cmdline 2>/dev/null | tr '\\0' ' '; ls /proc/%s/fd 2>/dev/null | wc -l" % (dpid, dpid), user="root")
check("sandboxd" not in out, "ESC-03: /proc/<daemon pid> inside is not the daemon (pid namespace)", out)

# ---- ESC-15: raising the cgroup limits or leaving the cgroup -----------------------------------
sbcg = os.path.join(cg, "sandboxes", A["id"])
before = {f: open(os.path.join(sbcg, f)).read() for f in ("cgroup.max.descendants", "cgroup.max.depth", "cgroup.subtree_control")
          if os.path.exists(os.path.join(sbcg, f))}
dirs_before = sorted(os.listdir(sbcg))
for user in USERS:
    code, out, err = sh("for f in memory.max pids.max cpu.max cgroup.max.descendants cgroup.subtree_control; do "
                        "(echo max > /sys/fs/cgroup/$f) 2>/dev/null && echo wrote $f; done; "
                        "(echo $$ > /sys/fs/cgroup/cgroup.procs) 2>/dev/null && echo moved; "
                        "(echo $$ > /sys/fs/cgroup/../cgroup.procs) 2>/dev/null && echo moved-up; "
                        "mkdir /sys/fs/cgroup/escape 2>/dev/null && echo made; "
                        "mount -t cgroup2 none /tmp 2>/dev/null && echo mounted2; "
                        "mount -t cgroup -o rdma none /tmp 2>/dev/null && echo mounted1; cat /proc/self/cgroup | grep ^0::", user=user)
    check(re.fullmatch(r"0::/run-\d+", out.strip()), "ESC-15: as %s, no cgroup file written, no move, no mkdir, no cgroup mount; "
          "the run stays in its own cgroup" % user, out, err)
after = {f: open(os.path.join(sbcg, f)).read() for f in before}
is_(after, before, "ESC-15: the sandbox's cgroup settings on the host are unchanged")
check(not os.path.exists(os.path.join(sbcg, "escape")) and not any(d == "escape" for d in os.listdir(sbcg)),
      "ESC-15: no cgroup appeared under the sandbox's on the host")

# ---- ESC-03: the control socket ----------------------------------------------------------------
def unix_inodes(text):
    return {l.split()[6] for l in text.splitlines()[1:] if len(l.split()) > 6}
# An abstract socket of the host's (as containerd's shim had, CVE-2020-15257), and any others.
abs_lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
abs_lst.bind("\0sbx-escape-%d" % os.getpid())
abs_lst.listen(8)
abs_lst.setblocking(False)
host_unix = open("/proc/net/unix").read()
abstract = [l.split()[7][1:] for l in host_unix.splitlines()[1:] if len(l.split()) > 7 and l.split()[7].startswith("@")][:5]
conns = c.call({"op": "health"})["connections"]
code, out, err = sh("cat /proc/net/unix")
inner = unix_inodes(out)
check(not (inner & unix_inodes(host_unix)) and sock not in out, "ESC-03: /proc/net/unix inside shares no socket with the host's", sorted(inner)[:10])
res = [probe("abstract", a) for a in abstract] + [probe("open-r", sock)]
try:
    abs_lst.accept()
    accepted = True
except BlockingIOError:
    accepted = False
abs_lst.close()
check(all(r.startswith("blocked ") for r in res) and len(abstract) >= 1 and not accepted,
      "ESC-03: host abstract sockets (%d tried, one of them the test's own listener) and the socket path cannot be "
      "reached; the listener accepted nothing" % len(abstract), res)
is_(c.call({"op": "health"})["connections"], conns, "ESC-03: the daemon saw no new connection")
for user in USERS:
    code, out, err = sh("ls /proc/self/fd | sort -n | tr '\\n' ' '; env | grep -E '^(LISTEN_|NOTIFY_SOCKET|JOURNAL_STREAM)' || true", user=user)
    is_(out.split(), ["0", "1", "2", "3"], "ESC-02/03: as %s, /proc/self/fd lists 0, 1, 2 and ls's own fd; no LISTEN_*, NOTIFY_SOCKET, JOURNAL_STREAM" % user)

# ---- ESC-04: terminal injection ------------------------------------------------------------------
for user in USERS:
    res = [probe("tty", user=user), probe("tiocsti", user=user), probe("tiocsti-pty", user=user)]
    is_(res, ["blocked ENXIO", "blocked EPERM", "blocked EPERM"],
        "ESC-04: as %s, no controlling terminal (/dev/tty ENXIO); TIOCSTI refused on stdin and on a pty of its own" % user)

# ---- ESC-16: signalling a reused pid ------------------------------------------------------------
c.send({"id": "short", "op": "run", "sandbox": A["id"], "argv": ["true"]})
started = None
while True:
    m = c.recv_json(30)
    if m.get("event") == "started" and m.get("id") == "short":
        started = m["run_id"]
    if m.get("id") == "short" and "ok" in m:
        break
c2 = Conn(sock, 60)
c2.send({"id": "bg", "op": "run", "sandbox": A["id"], "argv": ["sleep", "300"]})
bg = c2.recv_json(30)
res = [c.call({"op": "kill", "run_id": started, "signal": s}) for s in ("KILL", "TERM")]
check(started and all(r.get("error", {}).get("code") == "not_found" for r in res),
      "ESC-16: kill of a finished run's id is not_found", started, res)
check(canary.poll() is None and bg.get("event") == "started" and
      c.call({"op": "inspect", "sandbox": A["id"]})["sandbox"]["runs_in_flight"] == 1,
      "ESC-16: the host canary and the sandbox's other run are untouched")
c2.close()

# ---- ESC-10/11: symlinks on every path-taking operation ------------------------------------------
sh("ln -s / /work/root; ln -s /proc/self/fd/0 /work/fdlink; ln -s %s/dir /work/hostdir; ln -s /etc /work/etc; "
   "mkdir -p /work/sub; ln -s ../../.. /work/sub/up" % vartmp)
for cwd in ("/work/root", "/work/root/etc", "/work/fdlink", "/work/sub/up", "/work/hostdir", "/work/sub/up/etc"):
    r = run(argv=["sh", "-c", "echo ran > /tmp/cwd-ran"], cwd=cwd)
    check(r.get("ok") is False and r["error"].get("field") == "cwd", "symlinks: cwd %s (a symlink out of /work) is refused" % cwd, r)
code, out, err = sh("test -e /tmp/cwd-ran && echo ran")
is_(out.strip(), "", "symlinks: no refused cwd ran anything")
code, out, err = sh("rmdir /work; mv /work /work2; ln -sfn / /work; umount /work; echo done", user="root")
check(os.path.isdir(A["workdir"]) and not os.path.islink(A["workdir"]),
      "ESC-11: the workspace itself cannot be swapped for a symlink from inside", out, err)
etc_before = sorted(os.listdir("/etc"))
r = c.call({"op": "destroy", "sandbox": A["id"]}, 60)
check(r.get("destroyed") is True and os.path.exists(vartmp + "/dir/file") and open(vartmp + "/dir/file").read() == "canary\n"
      and sorted(os.listdir("/etc")) == etc_before and sha("/etc/passwd") == host_passwd and not os.path.exists(A["workdir"]),
      "ESC-10: destroy of a workspace holding symlinks to /, /etc and a host directory removes the workspace only")
c.call({"op": "destroy", "sandbox": B["id"]}, 60)
canary.kill()
canary.wait()
c.close()
EOF

stop_daemon
