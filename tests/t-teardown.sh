#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A teardown that cannot finish (THREATS DMN-06): a process of the sandbox waits in the kernel for
# a FUSE filesystem that never answers (tests/fuse-hang), and once SIGKILLed it waits there
# uninterruptibly (state D): neither the kill nor cgroup.kill ends it. Past teardown_timeout the
# destroy is answered teardown_stuck naming the process and its state, inspect and health say
# so, a run in flight there is answered teardown_stuck too, a second destroy is told at once, the
# daemon serves everyone else and does not spin, and once the filesystem lets go the sandbox goes
# by itself (cgroup, workspace), without a second reply to the run.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

FUSE_HANG=$top_builddir/tests/fuse-hang
[ -x "$FUSE_HANG" ] || skip_all "no $FUSE_HANG (make check builds it)"
[ -c /dev/fuse ] || skip_all "no /dev/fuse"
grep -qw fuse /proc/filesystems || modprobe fuse 2>/dev/null
grep -qw fuse /proc/filesystems || skip_all "no fuse filesystem in this kernel"

# Shown to the sandboxes as a root_binds entry (a sandbox sees nothing of the host's /var by
# itself), hence not below /tmp or /var/tmp, which are a sandbox's own. Nothing on the host may
# look into it while it hangs; it is detached at the end.
MNT=$(mktemp -d /var/lib/sbxt-fuse.XXXXXX) || skip_all "mktemp in /var/lib failed"
mkfifo "$T/fuse-ctl"
"$FUSE_HANG" "$MNT" <"$T/fuse-ctl" >"$T/fuse.out" 2>&1 &
FUSE_PID=$!
exec 9>"$T/fuse-ctl"
trap 'exec 9>&-; kill $FUSE_PID 2>/dev/null; wait $FUSE_PID 2>/dev/null; umount -l "$MNT" 2>/dev/null; rmdir "$MNT"; _cleanup' EXIT
_fuse_ready() { grep -qx ready "$T/fuse.out"; }
wait_until 10 _fuse_ready || { nok "fuse-hang mounts a filesystem on $MNT"; diag "$(cat "$T/fuse.out")"; exit 0; }
export MNT FUSE_PID SANDBOXCTL

printf 'teardown_timeout = 2s\nroot_binds = %s\n' "$MNT" >"$T/teardown.conf"
start_daemon --config "$T/teardown.conf" || exit 0

run_py "teardown stuck" 120 <<'EOF'
import os, re, signal, subprocess, time
from client import Conn, check, is_, wait_for, procs_under
sock, mnt, state = os.environ["SOCK"], os.environ["MNT"], os.path.join(os.environ["T"], "state", "sandboxes")
c, d = Conn(sock, 60), Conn(sock, 60)
stuck = c.call({"op": "create", "best_effort": True, "name": "stuck"})["sandbox"]
c.call({"op": "create", "best_effort": True, "name": "other"})
c.send({"id": "hang", "op": "run", "sandbox": "stuck", "command": "exec cat %s/file" % mnt})

def cat_pids():
    out = []
    for p in procs_under(stuck["cgroup"]):
        try:
            if open("/proc/%d/comm" % p).read().strip() == "cat":
                out.append(p)
        except OSError:
            pass
    return out
# Waiting for it really: fuse-hang has read the cat's request ("held PID OPCODE"), not merely a
# cat that has yet to reach the filesystem (which a SIGKILL would still end).
def held():
    with open(os.path.join(os.environ["T"], "fuse.out")) as f:
        pids = {int(l.split()[1]) for l in f if l.startswith("held ")}
    return [p for p in cat_pids() if p in pids]
check(wait_for(held, 10), "a run of cat on the FUSE filesystem is waiting for it")
cat = held()[0]

t0 = time.monotonic()
r = d.call({"op": "destroy", "sandbox": "stuck"}, 30)
took = time.monotonic() - t0
e = r.get("error") or {}
is_(e.get("code"), "teardown_stuck", "destroy: teardown_stuck once teardown_timeout (2 s) has passed")
check(took >= 1.9, "... not before (%.1f s)" % took)
check("pid %d cat (D)" % cat in e.get("message", ""), "... naming the process left and its state D", e)
r = c.final("hang", 10)
is_(((r.get("error") or {}).get("code"), r.get("run_id") is not None), ("teardown_stuck", True),
    "the run's client is told too, at the same time (teardown_stuck, with its run_id)")
st = open("/proc/%d/stat" % cat).read().rsplit(")", 1)[1].split()[0]
is_(st, "D", "the cat is indeed in state D: SIGKILLed, still waiting for the filesystem")

r = d.call({"op": "inspect", "sandbox": "stuck"})
sb = r.get("sandbox") or {}
is_(sb.get("state"), "destroying", "inspect: the sandbox is still there, destroying")
ts = sb.get("teardown_stuck") or {}
is_([(p.get("pid"), p.get("comm"), p.get("state")) for p in ts.get("processes", [])], [(cat, "cat", "D")],
    "inspect: teardown_stuck lists the process (pid, comm, state)")
check(ts.get("since_s", 0) >= 2, "inspect: ... and for how long the teardown has run", ts)
is_(d.call({"op": "health"}).get("teardown_stuck"), 1, "health: teardown_stuck 1")
out = subprocess.run([os.environ["SANDBOXCTL"], "--socket", sock, "inspect", "stuck"], capture_output=True, text=True).stdout
check(re.search(r"^teardown stuck: +for [0-9.]+ s: pid %d cat \(D\)$" % cat, out, re.M), "sandboxctl inspect says it too", out)
t0 = time.monotonic()
r = d.call({"op": "destroy", "sandbox": "stuck"}, 30)
is_((r.get("error") or {}).get("code"), "teardown_stuck", "a second destroy is told teardown_stuck too")
check(time.monotonic() - t0 < 10, "... at once (not after the stuck teardown, which never ends)")
is_(d.call({"op": "run", "sandbox": "other", "argv": ["echo", "ok"]}).get("stdout"), "ok\n",
    "meanwhile another sandbox runs commands")
is_(d.call({"op": "run", "best_effort": True, "argv": ["echo", "ok"]}).get("stdout"), "ok\n", "... and a throwaway run works")
is_([s["name"] for s in d.call({"op": "list"})["sandboxes"]], ["other"], "list shows the other sandbox only")

pid = int(os.environ["DAEMON_PID"])
def cpu():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
c0 = cpu()
time.sleep(3)
check(cpu() - c0 < 0.3, "the daemon does not spin on it: %.2f s of CPU in 3 s" % (cpu() - c0))

os.kill(int(os.environ["FUSE_PID"]), signal.SIGTERM)
gone = lambda: (d.call({"op": "inspect", "sandbox": "stuck"}).get("error") or {}).get("code") == "not_found"
check(wait_for(gone, 15), "once the filesystem lets go, the sandbox goes by itself")
check(not os.path.exists("/proc/%d" % cat) or open("/proc/%d/stat" % cat).read().rsplit(")", 1)[1].split()[0] == "Z"
      or not os.path.exists("/proc/%d" % cat), "the cat is gone")
check(not os.path.exists(stuck["cgroup"]), "its cgroup was removed", stuck["cgroup"])
check(not os.path.exists(os.path.dirname(stuck["workdir"])), "its workspace was removed")
is_(d.call({"op": "health"}).get("teardown_stuck"), 0, "health: teardown_stuck 0")
try:
    late = c.recv_line(1)
except Exception:
    late = None
is_(late, None, "the run's client gets nothing more once its process is gone: it was answered")
is_((d.call({"op": "destroy", "sandbox": stuck["id"]}).get("already_gone")), True, "destroy again (by its id): already_gone")
c.close()
d.close()
EOF
stop_daemon
