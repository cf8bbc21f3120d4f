#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Restart latency with many sandboxes alive (issue 22), and the cost of a sandbox's scope.

  restart-latency.py systemd N ROUNDS    under a real systemd (the VM, as root, sandboxd.service):
      creates N sandboxes, then ROUNDS times `systemctl restart sandboxd` and measures from the
      call to the first answered `health`; then the create latency of N more sandboxes with
      placement "scope" and, after a restart with SANDBOXD_PLACEMENT=subtree (a drop-in), with
      "subtree". Everything it made is destroyed, the drop-in removed.
  restart-latency.py standalone N ROUNDS SANDBOXD CGROUP2_MOUNT
      a private daemon (socket, state and cgroup of a temp dir, as bench/run-bench.sh): N
      sandboxes, then ROUNDS times SIGTERM and a new daemon, from its exec to the first answered
      `health` (every sandbox taken back with its processes meanwhile).

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


def systemd_mode(n, rounds):
    sock = "/run/sandboxd/sandboxd.sock"
    dropin = "/run/systemd/system/sandboxd.service.d/bench-placement.conf"
    first_health(sock)
    placement = Conn(sock).call({"op": "hello"})["capabilities"].get("placement")
    print("# systemd: %d sandboxes alive, %d restarts; placement %s" % (n, rounds, placement))
    print("| what | n | median ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
    ids, create_scope = create_many(sock, n)
    gaps = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run(["systemctl", "restart", "sandboxd.service"], check=True)
        gaps.append(time.perf_counter() - t + first_health(sock))
    report("systemctl restart -> first health answered, %d sandboxes alive" % n, gaps)
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


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "systemd":
        systemd_mode(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) >= 6 and sys.argv[1] == "standalone":
        standalone_mode(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        sys.exit(__doc__)
