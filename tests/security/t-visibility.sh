#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What a sandbox can see of the host (THREATS.md ESC-03, ESC-05, ESC-06, ESC-07, ESC-17): masked
# and read-only /proc entries, a fresh read-only /sys whose cgroup2 shows the sandbox's own
# subtree only, no other sandbox's workspace or processes, no control socket (path, abstract
# name, inherited fd, environment), and mounts that do not propagate to the host.
# The daemon is socket-activated (with NOTIFY_SOCKET set) so that an inherited listener or a
# LISTEN_*/NOTIFY_SOCKET variable would have a chance to leak into the runs.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

command -v systemd-socket-activate >/dev/null || skip_all "systemd-socket-activate is not installed"
JOURNAL_STREAM=8:12345 NOTIFY_SOCKET=$T/notify start_daemon_activated || exit 0

run_py "visibility" 120 <<'EOF'
import os, re, socket, subprocess, time
from client import Conn, check, is_
sock, cg, tdir = os.environ["SOCK"], os.environ["CG"], os.environ["T"]
c = Conn(sock, 60)
A = c.call({"op": "create", "best_effort": True, "name": "vis-a"})["sandbox"]
B = c.call({"op": "create", "best_effort": True, "name": "vis-b"})["sandbox"]

def sh(cmd, sb=A, user=None):
    req = {"op": "run", "sandbox": sb["id"], "command": cmd}
    if user:
        req["user"] = user
    r = c.call(req, 60)
    if r.get("ok") is not True:
        print("# run failed: %r" % r)
    return r.get("exit_code"), r.get("stdout") or "", r.get("stderr") or ""

def mountinfo_entry(mountinfo, point):
    """(fstype, per-mount options) of the topmost mount at point, or None."""
    found = None
    for line in mountinfo.splitlines():
        f = line.split()
        if len(f) > 4 and f[4] == point:
            sep = f.index("-")
            found = (f[sep + 1], set(f[5].split(",")))
    return found

# ---- /proc ---------------------------------------------------------------------------------
for name in ("kcore", "keys", "timer_list", "sched_debug"):
    code, out, err = sh("[ -e /proc/%s ] || { echo absent; exit 0; }; head -c 4096 /proc/%s | wc -c" % (name, name))
    check(out.strip() in ("0", "absent"), "/proc/%s reads back nothing" % name, code, out, err)
code, out, err = sh("ls -A /run /tmp | grep -v '^/\\|^$'")
is_(out.strip(), "shm", "/run and /tmp inside start empty but for /run/shm (the sandbox's own /dev/shm)")
code, out, err = sh("readlink /dev/shm; stat -f -c %T /dev/shm/; ls -A /run/shm | wc -l")
is_(out.split(), ["/run/shm", "tmpfs", "0"], "/dev/shm is the sandbox's /run/shm: tmpfs, empty")
code, out, err = sh("echo h > /proc/sysrq-trigger")
if os.path.exists("/proc/sysrq-trigger"):
    check(code != 0 and re.search(r"Read-only|Permission denied|Operation not permitted", err),
          "writing /proc/sysrq-trigger fails (EROFS/EACCES/EPERM)", code, err)
else:
    check(code != 0, "writing /proc/sysrq-trigger fails (this kernel has none)", code, err)
code, out, err = sh("echo '|/bin/false' > /proc/sys/kernel/core_pattern")
check(code != 0 and re.search(r"Read-only|Permission denied", err), "writing /proc/sys/kernel/core_pattern fails", code, err)
code, out, err = sh("echo sbx > /proc/sys/kernel/domainname")
check(code != 0 and "Read-only file system" in err, "writing /proc/sys/kernel/domainname fails with EROFS", code, err)
code, out, err = sh("cat /proc/self/mountinfo")
mi = out
for d in ("sys", "bus", "fs", "irq", "sysrq-trigger"):
    e = mountinfo_entry(mi, "/proc/" + d)
    if os.path.exists("/proc/" + d):
        check(e and e[0] == "proc" and "ro" in e[1], "/proc/%s is a read-only procfs mount" % d, e)
for d in ("acpi", "scsi", "asound"):
    if os.path.isdir("/proc/" + d):
        e = mountinfo_entry(mi, "/proc/" + d)
        check(e and e[0] == "tmpfs" and "ro" in e[1], "/proc/%s is hidden under a read-only tmpfs" % d, e)
code, out, err = sh("ls -A /proc/acpi /proc/scsi 2>/dev/null | grep -v '^/proc\\|^$' | wc -l")
is_(out.strip(), "0", "/proc/acpi and /proc/scsi list nothing")
code, out, err = sh("unshare -mrpf sh -c 'mount -t proc none /proc && echo mounted'")
check(code != 0 and "mounted" not in out, "a nested userns cannot mount an unmasked procfs (ESC-06)", code, out, err)

# ---- /sys and cgroups ----------------------------------------------------------------------
e = mountinfo_entry(mi, "/sys")
check(e and e[0] == "sysfs" and "ro" in e[1], "/sys is a fresh read-only sysfs", e)
e = mountinfo_entry(mi, "/sys/fs/cgroup")
check(e and e[0] == "cgroup2" and "ro" in e[1], "/sys/fs/cgroup is a read-only cgroup2 mount", e)
code, out, err = sh("touch /sys/x; echo x > /sys/kernel/uevent_helper; mkdir /sys/fs/cgroup/x")
check(code != 0 and "Read-only" in err and not os.path.exists("/sys/fs/cgroup/x"), "/sys and /sys/fs/cgroup are not writable", code, err)
code, out, err = sh("cat /proc/self/cgroup")
v2 = [l for l in out.splitlines() if l.startswith("0::")]
check(re.fullmatch(r"0::/run-\d+", "".join(v2)), "the cgroup2 line of /proc/self/cgroup inside is 0::/run-N", out)
check(all(l.endswith(":/") for l in out.splitlines() if not l.startswith("0::")),
      "v1 lines of /proc/self/cgroup show only the namespace root", out)
code, out, err = sh("ls -A /sys/fs/cgroup/ | grep -v '^cgroup\\.\\|^[a-z]*\\.[a-z_.]*$' | sort | tr '\\n' ' '")
names = out.split()
check("init" in names and all(n == "init" or re.fullmatch(r"run-\d+", n) for n in names),
      "/sys/fs/cgroup lists only the sandbox's own init and run-N cgroups", names)
code, out, err = sh("find /sys/fs/cgroup -type d")
check(B["id"] not in out and A["id"] not in out and "sandboxes" not in out and "daemon" not in out and "sandboxd-test" not in out,
      "no other sandbox, daemon or host cgroup in /sys/fs/cgroup", out[:500])
code, out, err = sh("ls /sys/fs/cgroup/memory /sys/fs/cgroup/unified /sys/fs/cgroup/pids 2>&1 | grep -vc 'No such file'")
is_(out.strip(), "0", "no cgroup v1 hierarchy (memory, pids) and no host unified tree inside")
for d in ("firmware", "devices/virtual/powercap"):
    if os.path.isdir("/sys/" + d):
        code, out, err = sh("ls -A /sys/%s | wc -l" % d)
        is_(out.strip(), "0", "/sys/%s is empty" % d)

# ---- people's homes ------------------------------------------------------------------------
os.makedirs("/home/sbxt-vis-user", exist_ok=True)
with open("/home/sbxt-vis-user/notes", "w") as f:
    f.write("private\n")
os.chmod("/home/sbxt-vis-user/notes", 0o644)
try:
    for user in (None, "root"):
        code, out, err = sh("ls -A /home /root; cat /home/sbxt-vis-user/notes", user=user)
        is_((out, code != 0), ("/home:\n\n/root:\n", True),
            "/home and /root are empty inside, a world-readable host file under /home unreachable (%s)" % (user or "sandbox"))
finally:
    os.unlink("/home/sbxt-vis-user/notes")
    os.rmdir("/home/sbxt-vis-user")

# ---- other sandboxes, the state dir, processes ----------------------------------------------
marker = "sbx-vis-marker-%d" % os.getpid()
c2 = Conn(sock, 60)
c2.send({"id": "bg", "op": "run", "sandbox": B["id"], "command": "echo secret > /work/%s; exec -a %s sleep 300" % (marker, marker)})
time.sleep(1)
check(os.path.exists(os.path.join(B["workdir"], marker)), "sandbox B wrote its workspace file")
code, out, err = sh("ls -A %s %s %s /var/lib/sandboxd 2>/dev/null; cat %s/%s 2>/dev/null" %
                    (B["workdir"], os.path.dirname(B["workdir"]), os.path.join(tdir, "state"), B["workdir"], marker))
check(marker not in out and "secret" not in out and B["id"] not in out, "sandbox A sees nothing of B's workspace or the state dir", out)
code, out, err = sh("cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '; ls /proc/*/root/work 2>/dev/null")
check(marker not in out, "sandbox A sees no process of sandbox B (/proc/*/cmdline, /proc/*/root)", out[:500])
code, out, err = sh("ls -d /proc/[0-9]* | wc -l")
check(out.strip().isdigit() and int(out.strip()) < 10, "sandbox A's /proc shows only a handful of its own pids", out)
c2.close()

# ---- the control plane ------------------------------------------------------------------------
code, out, err = sh("python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' %s" % sock)
check(code != 0, "the control socket path is not connectable from inside", code, err)
code, out, err = sh("cat /proc/net/unix")
check("sandboxd" not in out and sock not in out and not re.search(r" @", out),
      "no abstract or daemon socket in /proc/net/unix inside", out)
code, out, err = sh("ls /proc/self/fd | sort -n | tr '\\n' ' '")
is_(out.split(), ["0", "1", "2", "3"], "a run has only fds 0, 1, 2 (and ls's own directory fd)")
code, out, err = sh("env")
leaked = [l for l in out.splitlines() if re.match(r"(LISTEN_FDS|LISTEN_PID|LISTEN_FDNAMES|NOTIFY_SOCKET|JOURNAL_STREAM)=", l)]
is_(leaked, [], "no LISTEN_*/NOTIFY_SOCKET/JOURNAL_STREAM in a run's environment")

# ---- mount propagation and /work ------------------------------------------------------------
host_before = open("/proc/self/mountinfo").read()
code, out, err = sh("mkdir -p /tmp/x /work/x && mount -t tmpfs %s /tmp/x && mount -t tmpfs %s /work/x && grep -c %s /proc/self/mountinfo"
                    % (marker, marker, marker), user="root")
is_(out.strip(), "2", "root inside (\"user\":\"root\") can mount a tmpfs on /tmp/x and /work/x")
host_after = open("/proc/self/mountinfo").read()
check(marker not in host_after and marker not in open("/proc/1/mountinfo").read() and host_after == host_before,
      "mounts made inside do not reach the host's mount table")
code, out, err = sh("cat /proc/self/mountinfo")
e = mountinfo_entry(out, "/work")
check(e and {"nosuid", "nodev"} <= e[1], "/work is mounted nosuid,nodev", e)
f = [l.split() for l in out.splitlines() if l.split()[4] == "/"]
check(f and not any(x.startswith("shared:") for x in f[-1][6:f[-1].index("-")]), "/ inside is not shared with the host", f and f[-1])

for sb in (A, B):
    c.call({"op": "destroy", "sandbox": sb["id"]}, 60)
c.close()
EOF

stop_daemon
