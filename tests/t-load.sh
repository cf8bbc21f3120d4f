#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Load and abuse, all at once, for a bounded time, on the daemon's Unix socket only:
#   - 1,000 connections held open at once (each says hello first),
#   - 50 slowloris clients sending half a request line a byte at a time,
#   - 20 clients that ask for runs with 1 MiB of output and health checks, and never read,
#   - 20 clients sending bursts of malformed lines (bad JSON, unknown ops, binary garbage),
#   - a fork bomb in one throwaway sandbox (pids 256: the RLIMIT_NPROC guard on this host, the
#     pids controller where there is one; its timeout ends it),
# while a well-behaved client asks for health and runs /bin/true in a sandbox every 0.2 s. The
# daemon must stay up and answer it every time, and its fd count and memory must come back to
# the baseline once the abusers are gone. How fast it answers is a benchmark's business, not a
# test's: the test prints the worst it saw, and fails only on a hang, a request that waited
# HANG_BOUND (15 s: hundreds of times a run's usual 5-50 ms here, thrice the worst seen under ASan on
# a loaded 2-CPU machine, and less than the LOAD_SECONDS of abuse, so an event loop blocked by
# the abusers for good still shows).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

export HANG_BOUND=${HANG_BOUND:-15} LOAD_SECONDS=${LOAD_SECONDS:-20}
mkdir -p "$T"
printf 'request_timeout = 2s\n' >"$T/sandboxd.conf"
start_daemon --config "$T/sandboxd.conf" || exit 0
fds0=$(daemon_fd_baseline)
rss0=$(daemon_rss_kb)
r=$(rpc '{"op":"create","best_effort":true}')
SB=$(jget "$r" .sandbox.id)
like "$SB" '^sbx-' "a sandbox for the well-behaved client"
export SB
fds1=$(daemon_fds)

run_py "load and abuse" 300 <<'PYEOF'
import json, os, random, resource, socket, threading, time
from client import Conn, check, is_
sock, sb = os.environ["SOCK"], os.environ["SB"]
pid = int(os.environ["DAEMON_PID"])
seconds = float(os.environ["LOAD_SECONDS"])
hang_bound = float(os.environ["HANG_BOUND"])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
stop = threading.Event()
res = {}

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sock)
    return s

def thousand():
    conns, ok = [], 0
    try:
        for _ in range(1000):
            s = connect()
            s.sendall(b'{"id":1,"op":"hello"}\n')
            conns.append(s)
        for s in conns:
            f = s.makefile("rb")
            line = f.readline()
            ok += b'"ok":true' in line
        res["thousand"] = ok
        stop.wait()
    finally:
        for s in conns:
            s.close()

def slowloris():
    conns = [connect() for _ in range(50)]
    line = b'{"id":1,"op":"health","x":"' + b"a" * 64
    closed = 0
    for i in range(len(line)):
        if stop.is_set():
            break
        for s in conns:
            try:
                s.send(line[i:i + 1])
            except OSError:
                pass
        time.sleep(0.1)
    # The daemon closes a partial line after request_timeout (2 s here): EOF, or an error.
    for s in conns:
        try:
            s.settimeout(10)
            closed += s.recv(1) == b""
        except OSError:
            closed += 1
        s.close()
    res["slowloris_closed"] = closed

def never_read():
    conns = []
    for i in range(20):
        s = connect()
        s.setblocking(False)
        conns.append(s)
    req = (json.dumps({"op": "run", "sandbox": sb, "argv": ["head", "-c", "1048576", "/dev/urandom"]}) + "\n").encode()
    req += b'{"op":"health"}\n' * 200
    while not stop.is_set():
        for s in conns:
            try:
                s.send(req)
            except OSError:
                pass
        time.sleep(0.5)
    for s in conns:
        s.close()

def malformed():
    junk = [b"{", b"}", b"null", b"[1,2]", b'{"op":"nope"}', b'{"op":1}', b'{"id":{},"op":"run"}',
            b"\xff\xfe\x00garbage", b'{"op":"run","argv":[]}', b"'single'", b'{"op":"health"', b" " * 100]
    n = 0
    while not stop.is_set():
        conns = [connect() for _ in range(20)]
        for s in conns:
            burst = b"\n".join(random.choice(junk) for _ in range(500)) + b"\n"
            try:
                s.sendall(burst)
            except OSError:
                pass
        time.sleep(0.3)
        for s in conns:
            s.close()
        n += 20
    res["malformed_conns"] = n

def fork_bomb():
    c = Conn(sock, 120)
    r = c.call({"op": "run", "best_effort": True, "pids": 256, "timeout_s": 10,
                "command": "b() { b | b & }; b; sleep 30"}, 120)
    res["bomb"] = r
    c.close()

threads = [threading.Thread(target=f) for f in (thousand, slowloris, never_read, malformed, fork_bomb)]
for t in threads:
    t.start()
worst_h = worst_r = 0.0
fails = []
good = Conn(sock, 60)
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    t0 = time.monotonic()
    r = good.call({"op": "health"}, 60)
    t1 = time.monotonic()
    r2 = good.call({"op": "run", "sandbox": sb, "argv": ["true"]}, 60)
    t2 = time.monotonic()
    worst_h, worst_r = max(worst_h, t1 - t0), max(worst_r, t2 - t1)
    if not (r.get("ok") and r2.get("ok") and r2.get("exit_code") == 0):
        fails.append((r, r2))
    n += 1
    time.sleep(0.2)
good.close()
fds_peak = len(os.listdir("/proc/%d/fd" % pid))
stop.set()
for t in threads:
    t.join(150)
print("well-behaved client: %d rounds; worst health %.3f s, worst run %.3f s; daemon fds at the peak %d"
      % (n, worst_h, worst_r, fds_peak))
check(not fails, "every request of the well-behaved client succeeded", fails[:3])
check(worst_h < hang_bound, "no health request hung (%.0f s or more; the worst took %.3f s)" % (hang_bound, worst_h))
check(worst_r < hang_bound, "no run of /bin/true hung (%.0f s or more; the worst took %.3f s)" % (hang_bound, worst_r))
is_(res.get("thousand"), 1000, "1,000 connections at once were all answered")
is_(res.get("slowloris_closed"), 50, "the 50 slowloris connections were closed by the daemon")
check(res.get("malformed_conns", 0) >= 20, "bursts of malformed lines on %d connections" % res.get("malformed_conns", 0))
b = res.get("bomb") or {}
check(b.get("reason") == "timeout", "the fork bomb ran into its limits and was ended by its timeout", b)
check(os.path.exists("/proc/%d" % pid), "the daemon is still up")
PYEOF

check "the daemon answers health afterwards" _health_ok
is "$(ctl destroy "$SB" >/dev/null; echo $?)" 0 "the sandbox is destroyed"
_no_sandboxes() { [ "$(cg_child_count)" = 0 ]; }
check "every sandbox cgroup is gone" wait_until 30 _no_sandboxes
wait_fds "$fds0"
is "$(daemon_fds)" "$fds0" "the daemon's fd count is back to its baseline ($fds0)"
# Freed heap goes back to the kernel a second after the last connection closed (malloc_trim).
_rss_back() { [ $(($(daemon_rss_kb) - rss0)) -lt 4096 ]; }
daemon_is_asan || wait_until 10 _rss_back
rss1=$(daemon_rss_kb)
diag "daemon RSS: ${rss0} kB before, ${rss1} kB after, $(awk '/^VmHWM/ { print $2 }' /proc/$DAEMON_PID/status) kB at the peak; fds ${fds0} before"
check_rss_within "$rss0" "$rss1" 4096 "the daemon's RSS came back to within 4 MiB of its baseline"
stop_daemon
