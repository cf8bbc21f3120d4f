#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Restart latency with many sandboxes alive (issue 22), and the cost of a sandbox's scope.

  restart-latency.py systemd N ROUNDS [RUNS]   under a real systemd (the VM, as root, sandboxd.service):
      creates N sandboxes, then ROUNDS times `systemctl restart sandboxd` and measures from the
      call to the first answered `health`, and `run true` in an existing sandbox RUNS times (50)
      before the restarts and after them; then the create latency of N more sandboxes with
      placement "scope" and, after a restart with SANDBOXD_PLACEMENT=subtree (a drop-in), with
      "subtree". Everything it made is destroyed, the drop-in removed.
  restart-latency.py standalone N ROUNDS SANDBOXD CGROUP2_MOUNT
      a private daemon (socket, state and cgroup of a temp dir, as bench/run-bench.sh): N
      sandboxes, then ROUNDS times SIGTERM and a new daemon, from its exec to the first answered
      `health` (every sandbox taken back with its processes meanwhile).

  restart-latency.py fdstore N ROUNDS SANDBOXD CGROUP2_MOUNT [RUNS]
      the same private daemon under tests/fake-fdstore.py (the host's stand-in for systemd's fd
      store, as tests/lib.sh start_under_fake_fdstore): each sandbox's init pidfd is in the store,
      so a restart (SIGTERM, then the stand-in starts a new daemon with the stored fds) is what
      `systemctl restart` does. For N in 1, 100 and 1000 use "1,100,1000". Also the latency of
      `run true` in an existing sandbox, RUNS times before the first restart and after the last.

      For a profile: RESTART_BENCH_LOG=PREFIX keeps each daemon log (PREFIX.N),
      RESTART_BENCH_PERF=FILE records `perf record -a -g` across each restart,
      RESTART_BENCH_STRACE=PREFIX `strace -f -ff -tt` of the stand-in (so the new daemon too).

Prints median and p99 of each, in ms. Never touches a cgroup v1 hierarchy (the standalone cgroup
is made below the cgroup2 mount given)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def report(what, v):
    print("| %s | %d | %.1f | %.1f | %.1f |" % (what, len(v), pct(v, 0.5) * 1e3, pct(v, 0.99) * 1e3, max(v) * 1e3),
          flush=True)


class Conn:
    def __init__(self, path, timeout=120):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.f = self.s.makefile("rwb")
        self.n = 0

    def call(self, req):
        self.n += 1
        req = dict(req, id=self.n)
        self.f.write((json.dumps(req) + "\n").encode())
        self.f.flush()
        while True:
            line = self.f.readline()
            if not line:
                raise EOFError("the daemon closed the connection")
            m = json.loads(line)
            if m.get("id") == self.n and "event" not in m:
                return m

    def close(self):
        self.s.close()


def first_health(path, deadline=120):
    """Seconds until a health request is answered (connect refused or reset meanwhile: retried)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < deadline:
        try:
            c = Conn(path, 10)
            r = c.call({"op": "health"})
            c.close()
            if r.get("ok"):
                return time.perf_counter() - t0
        except (OSError, EOFError, ValueError):
            pass
        time.sleep(0.001)
    raise TimeoutError("no health answer within %d s" % deadline)


def create_many(path, n, extra=None):
    c = Conn(path)
    ids, times = [], []
    for i in range(n):
        t = time.perf_counter()
        r = c.call(dict({"op": "create"}, **(extra or {})))
        times.append(time.perf_counter() - t)
        if not r.get("ok"):
            raise RuntimeError("create %d failed: %s" % (i, r))
        ids.append(r["sandbox"]["id"])
    c.close()
    return ids, times


def destroy_all(path, ids):
    c = Conn(path)
    for i in ids:
        c.call({"op": "destroy", "sandbox": i})
    c.close()


def systemd_mode(n, rounds, runs=50):
    sock = "/run/sandboxd/sandboxd.sock"
    dropin = "/run/systemd/system/sandboxd.service.d/bench-placement.conf"
    first_health(sock)
    placement = Conn(sock).call({"op": "hello"})["capabilities"].get("placement")
    print("# systemd: %d sandboxes alive, %d restarts; placement %s" % (n, rounds, placement))
    print("| what | n | median ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
    ids, create_scope = create_many(sock, n)
    before = run_latency(sock, ids, runs)
    gaps = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run(["systemctl", "restart", "sandboxd.service"], check=True)
        gaps.append(time.perf_counter() - t + first_health(sock))
    report("systemctl restart -> first health answered, %d sandboxes alive" % n, gaps)
    after = run_latency(sock, ids, runs)
    report("run true in an existing sandbox, before the restarts (%d alive)" % n, before)
    report("run true in an existing sandbox, after the restarts (%d alive)" % n, after)
    report("create (placement scope: StartTransientUnit + JobRemoved)", create_scope)
    destroy_all(sock, ids)
    os.makedirs(os.path.dirname(dropin), exist_ok=True)
    with open(dropin, "w") as f:
        f.write("[Service]\nEnvironment=SANDBOXD_PLACEMENT=subtree\n")
    try:
        subprocess.run(["systemctl", "daemon-reload"], check=True)
        subprocess.run(["systemctl", "restart", "sandboxd.service"], check=True)
        first_health(sock)
        placement = Conn(sock).call({"op": "hello"})["capabilities"].get("placement")
        ids, create_subtree = create_many(sock, n)
        report("create (placement %s)" % placement, create_subtree)
        destroy_all(sock, ids)
    finally:
        os.unlink(dropin)
        subprocess.run(["systemctl", "daemon-reload"], check=True)
        subprocess.run(["systemctl", "restart", "sandboxd.service"], check=True)
        first_health(sock)


def start_daemon(sandboxd, t, cg):
    log = open(os.path.join(t, "daemon.log"), "ab")
    return subprocess.Popen([sandboxd, "--listen", t + "/sock", "--config", t + "/sandboxd.conf", "--state-dir",
                             t + "/state", "--cgroup-root", cg], stdout=log, stderr=log)


def standalone_mode(n, rounds, sandboxd, mount):
    t = tempfile.mkdtemp(prefix="sandboxd-restart-")
    os.chmod(t, 0o755)
    cg = os.path.join(mount, "sandboxd-restart-bench-%d" % os.getpid())
    with open(t + "/sandboxd.conf", "w") as f:
        f.write("max_sandboxes = %d\nmax_connections = 4096\npool_size = 0\n" % (n + 16))
    os.mkdir(t + "/state")
    best = "memory" not in open(os.path.join(mount, "cgroup.controllers")).read()
    d = start_daemon(sandboxd, t, cg)
    try:
        first_health(t + "/sock")
        print("# standalone: %d sandboxes alive, %d restarts (SIGTERM, then a new daemon)" % (n, rounds))
        print("| what | n | median ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
        ids, create = create_many(t + "/sock", n, {"best_effort": True} if best else None)
        report("create (placement subtree)", create)
        gaps = []
        for _ in range(rounds):
            d.send_signal(signal.SIGTERM)
            d.wait(120)
            os.unlink(t + "/sock")
            t0 = time.perf_counter()
            d = start_daemon(sandboxd, t, cg)
            gaps.append(time.perf_counter() - t0 + first_health(t + "/sock"))
        report("daemon start -> first health answered, %d sandboxes alive" % n, gaps)
        r = Conn(t + "/sock").call({"op": "list"})
        kept = sum(1 for s in r.get("sandboxes", []) if s.get("state") == "ready")
        print("# after the restarts: %d of %d sandboxes ready" % (kept, n))
        destroy_all(t + "/sock", ids)
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(120)
        if os.path.isdir(cg):
            for root, dirs, _ in os.walk(cg, topdown=False):
                for x in dirs:
                    os.rmdir(os.path.join(root, x))
            os.rmdir(cg)
        shutil.rmtree(t, ignore_errors=True)


def run_latency(path, ids, runs):
    c = Conn(path)
    times = []
    for i in range(runs):
        t = time.perf_counter()
        r = c.call({"op": "run", "sandbox": ids[i % len(ids)], "argv": ["true"]})
        times.append(time.perf_counter() - t)
        if not r.get("ok") or r.get("exit_code", r.get("result", {}).get("exit_code", 0)) != 0:
            raise RuntimeError("run %d failed: %s" % (i, r))
    c.close()
    return times


def read_pid(f, old):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 30:
        try:
            pid = int(open(f).read())
            if pid != old:
                return pid
        except (OSError, ValueError):
            pass
        time.sleep(0.0005)
    raise TimeoutError("no new daemon")


def schedstat(pid):
    """(seconds on a CPU, seconds waiting for one) of all of pid's threads so far."""
    run = wait = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            f = open("/proc/%d/task/%s/schedstat" % (pid, tid)).read().split()
        except OSError:
            continue
        run += int(f[0])
        wait += int(f[1])
    return run / 1e9, wait / 1e9


def fdstore_mode(counts, rounds, sandboxd, mount, runs):
    here = os.path.dirname(os.path.abspath(__file__))
    fake = os.path.join(here, "..", "tests", "fake-fdstore.py")
    best = "memory" not in open(os.path.join(mount, "cgroup.controllers")).read()
    print("# under the fd-store stand-in (tests/fake-fdstore.py): SIGTERM, then a new daemon with the stored fds")
    print("| what | n | median ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
    for n in counts:
        t = tempfile.mkdtemp(prefix="sandboxd-restart-")
        os.chmod(t, 0o755)
        cg = os.path.join(mount, "sandboxd-restart-bench-%d-%d" % (os.getpid(), n))
        with open(t + "/sandboxd.conf", "w") as f:
            f.write("max_sandboxes = %d\nmax_connections = 4096\npool_size = 0\n" % (n + 16))
        os.mkdir(t + "/state")
        log = open(os.path.join(t, "daemon.log"), "ab")
        mgr = subprocess.Popen(["python3", fake, t + "/notify", t + "/store", t + "/daemon.pid", "--", sandboxd,
                                "--listen", t + "/sock", "--config", t + "/sandboxd.conf", "--state-dir", t + "/state",
                                "--cgroup-root", cg], stdout=log, stderr=log)
        pid = 0
        try:
            pid = read_pid(t + "/daemon.pid", 0)
            first_health(t + "/sock")
            ids, create = create_many(t + "/sock", n, {"best_effort": True} if best else None)
            report("create, %d sandboxes" % n, create)
            before = run_latency(t + "/sock", ids, runs)
            report("run true in an existing sandbox, before the restarts (%d alive)" % n, before)
            stored = sum(1 for l in open(t + "/store") if l.startswith("s."))
            gaps, oncpu, waited = [], [], []
            for _ in range(rounds):
                os.kill(pid, signal.SIGTERM)
                while True:  # the stand-in reaps it; the pid file changes when the next one is born
                    try:
                        os.kill(pid, 0)
                    except ProcessLookupError:
                        break
                    try:
                        if open("/proc/%d/stat" % pid).read().split(") ")[1][0] == "Z":
                            break
                    except (OSError, IndexError):
                        break
                    time.sleep(0.0005)
                os.unlink(t + "/sock")
                t0 = time.perf_counter()
                perf = None
                if os.environ.get("RESTART_BENCH_PERF"):
                    perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "4000", "-o",
                                             os.environ["RESTART_BENCH_PERF"]], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
                if os.environ.get("RESTART_BENCH_STRACE"):
                    perf = subprocess.Popen(["strace", "-f", "-ff", "-tt", "-o", os.environ["RESTART_BENCH_STRACE"],
                                             "-p", str(mgr.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if perf:
                    time.sleep(1)
                    t0 = time.perf_counter()
                mgr.send_signal(signal.SIGUSR1)
                pid = read_pid(t + "/daemon.pid", pid)
                gaps.append(time.perf_counter() - t0 + first_health(t + "/sock"))
                # The daemon's own cost, which the machine's load does not change (the gap above
                # is that plus the time it waited for a CPU, and the stand-in's fork and exec).
                cpu, wait = schedstat(pid)
                oncpu.append(cpu)
                waited.append(wait)
                if perf:
                    perf.send_signal(signal.SIGINT)
                    perf.wait()
            report("restart -> first health answered, %d sandboxes alive (%d init pidfds stored)" % (n, stored), gaps)
            report("  the new daemon's CPU time until then (schedstat)", oncpu)
            report("  the new daemon's wait for a CPU until then (schedstat)", waited)
            after = run_latency(t + "/sock", ids, runs)
            report("run true in an existing sandbox, after the restarts (%d alive)" % n, after)
            c = Conn(t + "/sock")
            how = {}
            for i in ids:  # every sandbox kept its init, from the store (not found again in its cgroup)
                sb = c.call({"op": "inspect", "sandbox": i}).get("sandbox", {})
                k = "%s/%s/%s" % (sb.get("state"), sb.get("restored_processes"), sb.get("restored_init"))
                how[k] = how.get(k, 0) + 1
            c.close()
            print("# n=%d: after the restarts (state/processes/init: count) %s" % (n, how), flush=True)
            destroy_all(t + "/sock", ids)
        finally:
            if pid:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
            mgr.send_signal(signal.SIGTERM)
            mgr.wait(60)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            time.sleep(0.2)
            if os.path.isdir(cg):
                for root, dirs, _ in os.walk(cg, topdown=False):
                    for x in dirs:
                        try:
                            os.rmdir(os.path.join(root, x))
                        except OSError:
                            pass
                try:
                    os.rmdir(cg)
                except OSError:
                    pass
            if os.environ.get("RESTART_BENCH_LOG"):
                shutil.copy(t + "/daemon.log", "%s.%d" % (os.environ["RESTART_BENCH_LOG"], n))
            shutil.rmtree(t, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "systemd":
        systemd_mode(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 50)
    elif len(sys.argv) >= 6 and sys.argv[1] == "standalone":
        standalone_mode(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif len(sys.argv) >= 6 and sys.argv[1] == "fdstore":
        fdstore_mode([int(x) for x in sys.argv[2].split(",")], int(sys.argv[3]), sys.argv[4], sys.argv[5],
                     int(sys.argv[6]) if len(sys.argv) > 6 else 200)
    else:
        sys.exit(__doc__)
