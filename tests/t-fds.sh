#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A daemon out of file descriptors (its RLIMIT_NOFILE lowered by prlimit to what it holds plus
# a few, then more connections than that): it does not spin on the readable listening socket
# (accept pauses), a run whose timeout comes meanwhile is killed (its cgroup.kill was opened when
# it started) and answered, a run it cannot give pipes to is refused cleanly, a sandbox destroyed
# meanwhile still has its processes killed, and once fds come back the destroy completes, new
# clients are answered and the fd count returns to its baseline.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
fds0=$(daemon_fd_baseline)
r=$(rpc '{"op":"create","best_effort":true}')
SB=$(jget "$r" .sandbox.id)
like "$SB" '^sbx-' "a sandbox to destroy while out of fds"
export SB

run_py "out of fds" 180 <<'PYEOF'
import os, resource, socket, subprocess, time
from client import Conn, check, is_, wait_for, procs_under
pid, sock, sb, cg = int(os.environ["DAEMON_PID"]), os.environ["SOCK"], os.environ["SB"], os.environ["CG"]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

def nfds():
    return len(os.listdir("/proc/%d/fd" % pid))

def cpu_ticks():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime + stime

c1 = Conn(sock, 60)
c1.send({"id": 1, "op": "run", "sandbox": sb, "argv": ["sleep", "1000"]})
ev = c1.recv_json(30)
is_(ev and ev.get("event"), "started", "a long run in the sandbox started")
# Its timeout (8 s) comes while the daemon is out of fds; a process it left in the background goes too.
c1.send({"id": 2, "op": "run", "sandbox": sb, "timeout_s": 8, "command": "sleep 1001 & sleep 1002"})
ev = c1.recv_json(30)
is_(ev and ev.get("event"), "started", "a run with a timeout of 8 s started")
t_started = time.monotonic()
c2 = Conn(sock, 60)
orig = subprocess.run(["prlimit", "--pid", str(pid), "--nofile", "--raw", "--noheadings", "-o", "SOFT,HARD"],
                      capture_output=True, text=True).stdout.split()
limit = nfds() + 4
is_(subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%d:%d" % (limit, limit)]).returncode, 0,
    "the daemon's RLIMIT_NOFILE lowered to its fd count + 4 (%d)" % limit)
extra = []
for _ in range(40):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    extra.append(s)
check(wait_for(lambda: nfds() >= limit, 10), "the daemon uses every fd it may (%d)" % limit, "fds: %d" % nfds())
log = os.path.join(os.environ["T"], "daemon.log")
check(wait_for(lambda: "out of file descriptors" in open(log).read(), 10), "the daemon noticed (its log says so)")
t0 = cpu_ticks()
time.sleep(3)
used = (cpu_ticks() - t0) / os.sysconf("SC_CLK_TCK")
check(used < 0.6, "out of fds, the daemon does not spin: %.2f s of CPU in 3 s" % used)

time.sleep(max(0.0, t_started + 7 - time.monotonic()))
check(nfds() >= limit, "1 s before that run's timeout the daemon is still out of fds (%d)" % nfds())
r = c1.final(2, 20)
is_((r.get("reason"), r.get("exit_code")), ("timeout", 124), "out of fds, the run's timeout still ends it (reason timeout)")
check(wait_for(lambda: subprocess.run(["pgrep", "-f", "^sleep 100[12]$"], capture_output=True).returncode == 1, 5),
      "... and neither of its processes is left (nor the one in the background)")

# The ended run's fds came back: taken again by clients, so that the next run finds none. (Its
# cgroup and warm helper were made ahead with fds of their own: only its pipes are new.)
for _ in range(20):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    extra.append(s)
check(wait_for(lambda: nfds() >= limit, 10), "out of fds again (%d)" % limit, "fds: %d" % nfds())
r = c2.call({"op": "run", "sandbox": sb, "argv": ["true"]}, 30)
is_(r and r.get("error", {}).get("code"), "spawn_failed", "a run that cannot get its pipes is refused (spawn_failed)")
c2.send({"id": 50, "op": "destroy", "sandbox": sb})
r = c1.final(1, 30)
is_(r and r.get("reason"), "destroyed", "the run in the destroyed sandbox ended (reason destroyed), still out of fds")
gone = wait_for(lambda: not procs_under(os.path.join(cg, "sandboxes", sb)), 30)
check(gone, "every process of the sandbox is dead while the daemon is still out of fds",
      procs_under(os.path.join(cg, "sandboxes", sb)))

for s in extra:
    s.close()
subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%s:%s" % (orig[0], orig[1])])
r = c2.final(50, 30)
check(r and r.get("ok"), "the destroy completes once fds come back", r)
check(not os.path.exists(os.path.join(cg, "sandboxes", sb)), "the sandbox's cgroup is gone")
t = time.monotonic()
r = Conn(sock, 10).call({"op": "health"}, 10)
check(r and r.get("ok"), "a new client is answered (%.2f s)" % (time.monotonic() - t))
c1.close()
c2.close()
PYEOF
wait_fds "$fds0"
is "$(daemon_fds)" "$fds0" "the daemon's fd count is back to its baseline ($fds0)"
[ "$(daemon_fds)" = "$fds0" ] || diag "$(ls -l /proc/$DAEMON_PID/fd 2>/dev/null)"
stop_daemon
