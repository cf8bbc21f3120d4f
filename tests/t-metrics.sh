#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The metrics endpoint (docs/metrics.md) and health's capacity: the Prometheus text over the Unix
# socket and over TCP, read by a strict parser (tests/metrics.py); counters that only grow, a run
# counted with its reason, an error with its code, the per-sandbox cap; hostile clients (a huge
# request, one that sends nothing, too many at once, POST, a wrong path) while the control socket
# keeps answering; both sockets socket-activated and told apart by name; and a real Prometheus
# scraping the TCP port, asked through its HTTP API.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v systemd-socket-activate >/dev/null || skip_all "systemd-socket-activate is not installed"

PROM_PID=
# A Prometheus still running goes first; the script's status is kept for _cleanup.
stop_prometheus_then_cleanup() {
        local rc=$?
        if [ -n "$PROM_PID" ]; then
                kill "$PROM_PID" 2>/dev/null
                wait "$PROM_PID" 2>/dev/null
        fi
        (exit "$rc")
        _cleanup
}
trap stop_prometheus_then_cleanup EXIT

free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

PORT=$(free_port)
MSOCK=$T/metrics.sock
export MSOCK PORT
cat >"$T/sandboxd.conf" <<'EOF'
metrics_max_sandboxes = 2
metrics_group = root
EOF
start_daemon --config "$T/sandboxd.conf" --metrics-listen "$MSOCK" --metrics-listen "127.0.0.1:$PORT" || exit 0
is "$(stat -c %a "$MSOCK")" 660 "the metrics Unix socket is mode 0660 (its group's, metrics_group)"

run_py "format, counters, cardinality" 120 <<'EOF'
import os, time
from client import Conn, check, is_
import metrics
from metrics import ParseError

msock, tcp = os.environ["MSOCK"], ("127.0.0.1", int(os.environ["PORT"]))
c = Conn(os.environ["SOCK"])

def scrape(addr, what):
    try:
        s = metrics.scrape(addr)
        check(True, "%s: a 200 answer in the Prometheus text format 0.0.4, every sample under its HELP and TYPE" % what)
        return s
    except (ParseError, OSError) as e:
        check(False, "%s: a 200 answer in the Prometheus text format 0.0.4, every sample under its HELP and TYPE" % what, e)
        raise SystemExit(1)

a = scrape(msock, "scrape over the Unix socket")
for fam, t in [("sandboxd_sandboxes", "gauge"), ("sandboxd_runs_started_total", "counter"),
               ("sandboxd_runs_ended_total", "counter"), ("sandboxd_run_duration_seconds", "histogram"),
               ("sandboxd_pool_ready", "gauge"), ("sandboxd_pool_misses_total", "counter"),
               ("sandboxd_sweeps_total", "counter"), ("sandboxd_sweep_freed_bytes_total", "counter"),
               ("sandboxd_sessions_open", "gauge"), ("sandboxd_errors_total", "counter"),
               ("sandboxd_sandbox_memory_bytes", "gauge"), ("sandboxd_sandbox_cpu_seconds_total", "counter"),
               ("sandboxd_sandbox_disk_bytes", "gauge"), ("sandboxd_sandbox_pids", "gauge"),
               ("sandboxd_sandbox_connections", "gauge"), ("sandboxd_sandbox_dns_queries_total", "counter"),
               ("process_resident_memory_bytes", "gauge"), ("process_open_fds", "gauge"),
               ("sandboxd_build_info", "gauge")]:
    is_(a.types.get(fam), t, "%s is there, of type %s" % (fam, t))
check(a.value("process_resident_memory_bytes") > 1 << 20, "process_resident_memory_bytes is the daemon's RSS (over 1 MiB)",
      a.value("process_resident_memory_bytes"))
fds = len(os.listdir("/proc/%s/fd" % os.environ["DAEMON_PID"]))
check(abs(a.value("process_open_fds") - fds) <= 3, "process_open_fds is the daemon's fd count (%d)" % fds, a.value("process_open_fds"))
is_(a.label_values("sandboxd_build_info", "version") != [], True, "sandboxd_build_info has a version label")

# A run that exits, a run past its timeout, a request for what does not exist.
r = c.call({"op": "run", "best_effort": True, "argv": ["sh", "-c", "exit 3"]}, 60)
is_((r.get("reason"), r.get("exit_code")), ("exited", 3), "a run that exits 3")
r = c.call({"op": "run", "best_effort": True, "timeout_s": 0.3, "argv": ["sleep", "30"]}, 60)
is_(r.get("reason"), "timeout", "a run past its timeout")
r = c.call({"op": "inspect", "sandbox": "sbx-000000000000"})
is_((r.get("error") or {}).get("code"), "not_found", "an inspect of no sandbox: not_found")

b = scrape(tcp, "scrape over TCP")
shrunk = [(k, v, b.samples.get(k)) for k, v in a.counters().items() if b.samples.get(k) is None or b.samples[k] < v]
is_(shrunk, [], "every counter and histogram sample of the first scrape is there in the second, and none is lower")
d = lambda name, **l: (b.value(name, **l) or 0) - (a.value(name, **l) or 0)
is_(d("sandboxd_runs_started_total"), 2, "sandboxd_runs_started_total counted the two runs")
is_(d("sandboxd_runs_ended_total", reason="exited"), 1, "sandboxd_runs_ended_total{reason=\"exited\"} counted the exit")
is_(d("sandboxd_runs_ended_total", reason="timeout"), 1, "sandboxd_runs_ended_total{reason=\"timeout\"} counted the timeout")
others = {r: d("sandboxd_runs_ended_total", reason=r) for r in b.label_values("sandboxd_runs_ended_total", "reason")}
is_(sorted(r for r, v in others.items() if v), ["exited", "timeout"], "... and no other reason")
is_(d("sandboxd_run_duration_seconds_count"), 2, "the duration histogram has the two runs")
check(d("sandboxd_run_duration_seconds_bucket", le="0.25") <= 1 and d("sandboxd_run_duration_seconds_bucket", le="+Inf") == 2,
      "the timed-out run (0.3 s) is above the 0.25 s bucket, both are below +Inf")
check(d("sandboxd_run_duration_seconds_sum") >= 0.3, "the duration sum holds the 0.3 s timeout", d("sandboxd_run_duration_seconds_sum"))
is_(d("sandboxd_errors_total", code="not_found"), 1, "sandboxd_errors_total{code=\"not_found\"} counted the error")
codes = {x: d("sandboxd_errors_total", code=x) for x in b.label_values("sandboxd_errors_total", "code")}
is_(sorted(x for x, v in codes.items() if v), ["not_found"], "... and no other code")
check(len(codes) >= 14, "every error code has its series", sorted(codes))

# More sandboxes than metrics_max_sandboxes (2): two have series of their own, the rest is summed.
ids = []
for i in range(4):
    r = c.call({"op": "create", "best_effort": True}, 60)
    ids.append(r.get("sandbox", {}).get("id") or r.get("id"))
for i in ids:
    c.call({"op": "run", "sandbox": i, "argv": ["true"]}, 60)
s = scrape(msock, "scrape with 4 sandboxes")
is_(s.value("sandboxd_sandboxes", state="ready"), 4, "sandboxd_sandboxes{state=\"ready\"} is 4")
labels = s.label_values("sandboxd_sandbox_cpu_seconds_total", "sandbox")
own = [l for l in labels if l != "_other"]
check(len(own) == 2, "only metrics_max_sandboxes (2) sandboxes have series of their own", labels)
check(set(own) <= set(ids), "they are sandboxes of ours", own, ids)
is_(own, sorted(ids)[:2], "with no memory figures to sort by, the two first by id")
is_("_other" in labels, True, "the rest is summed under sandbox=\"_other\"")
is_(s.value("sandboxd_sandbox_series_folded"), 2, "sandboxd_sandbox_series_folded says 2 were summed")
is_(s.value("sandboxd_sandbox_cpu_seconds_total", sandbox="_other") > 0, True, "the sum is the others' CPU time")

# capacity in health, for root (scope all).
h = c.call({"op": "health"})
cap = h.get("capacity") or {}
sb = cap.get("sandboxes") or {}
is_((sb.get("in_use"), sb.get("left"), sb.get("left_for_caller")), (4, sb.get("max", 0) - 4, sb.get("max", 0) - 4),
    "capacity.sandboxes: 4 in use, max - 4 left (root is not capped per uid)")
is_((cap.get("memory") or {}).get("granted_bytes"), sum(((c.call({"op": "inspect", "sandbox": i}).get("sandbox") or {}).get("limits") or {}).get("memory", 0) for i in ids),
    "capacity.memory.granted_bytes is the sum of the sandboxes' memory limits")
st = os.statvfs(os.environ["T"] + "/state")
free = st.f_bavail * st.f_frsize
disk = cap.get("disk") or {}
check(abs(disk.get("free_bytes", 0) - free) < 64 << 20, "capacity.disk.free_bytes is the state directory's free space", disk, free)
is_(disk.get("left_bytes"), max(disk.get("free_bytes", 0) - disk.get("min_free_bytes", 0), 0), "left_bytes = free_bytes - min_free_bytes")
is_((cap.get("pool") or {}).get("size"), 0, "capacity.pool.size is pool_size (0 in these tests)")
for i in ids:
    c.call({"op": "destroy", "sandbox": i}, 60)
c.close()
EOF

chmod 0666 "$SOCK"
out=$(as_other 65534 --regid=65534 --clear-groups -- /usr/bin/python3 "$OTHER_CLIENT" "$SOCK" call '{"id":1,"op":"health"}')
is "$(jget "$out" .scope)" caller "uid 65534's health has scope caller"
is "$(jget "$out" '[.capacity.sandboxes.left, .capacity.memory.granted_bytes] | tostring')" '[null,null]' \
        "... and its capacity says neither the daemon's sandboxes left nor other users' grants"
is "$(jget "$out" '.capacity.sandboxes.left_for_caller')" 256 "... but how many it may still create (max_sandboxes_per_uid)"
chmod 0660 "$SOCK"

run_py "hostile clients" 90 <<'EOF'
import os, socket, time
from client import Conn, check, is_, wait_for
import metrics

msock = os.environ["MSOCK"]
st, hd, body = metrics.get(msock, method="POST")
is_((st, hd.get("allow")), (405, "GET, HEAD"), "POST /metrics: 405 with Allow: GET, HEAD")
is_(metrics.get(msock, path="/")[0], 404, "GET /: 404")
is_(metrics.get(msock, path="/metricsx")[0], 404, "GET /metricsx: 404")
is_(metrics.get(msock, path="/metrics?x=1")[0], 200, "GET /metrics?x=1: 200 (the query is ignored)")
st, hd, body = metrics.get(msock, method="HEAD")
is_((st, body), (200, b""), "HEAD /metrics: 200 without a body")
is_(metrics.http(msock, b"GET /metrics HTTP/2.0\r\n\r\n")[0], 400, "HTTP/2.0: 400")
is_(metrics.http(msock, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n\r\n")[0], 400, "a TLS hello: 400")
is_(metrics.http(msock, b"get /metrics HTTP/1.1\r\n\r\n")[0], 400, "a lowercase method: 400")
# A request line far past the 4 KiB cap: answered 400 once the cap is reached, not read on.
s = metrics.connect(msock, 10)
try:
    s.sendall(b"GET /" + b"a" * 4200)
    data = metrics.read_all(s)
except OSError as e:
    data = repr(e).encode()
s.close()
check(data.startswith(b"HTTP/1.1 400 "), "a 4 KiB request line without an end: 400", data[:100])
s = metrics.connect(msock, 10)
sent = 0
try:
    for _ in range(1024):
        s.sendall(b"X" * 1024)
        sent += 1024
except OSError:
    pass
s.close()
check(sent < 1024 * 1024, "a 1 MiB request is not read to its end (the connection closes at the cap)", sent)

# Slow clients: 16 connections (the cap) that send nothing, and a 17th.
def daemon_sockets():
    fds = "/proc/%s/fd" % os.environ["DAEMON_PID"]
    return sum(os.readlink(os.path.join(fds, f)).startswith("socket:") for f in os.listdir(fds))
before = daemon_sockets()
conns = [metrics.connect(msock, 10) for _ in range(16)]
check(wait_for(lambda: daemon_sockets() >= before + 16, 5), "the daemon took the 16 silent connections", before, daemon_sockets())
c = Conn(os.environ["SOCK"])
t0 = time.monotonic()
is_(c.call({"op": "health"}, 5).get("status"), "ok", "with 16 silent metrics clients the control socket answers health")
check(time.monotonic() - t0 < 2, "... at once", time.monotonic() - t0)
extra = metrics.connect(msock, 3)
try:
    got = extra.recv(100)
except OSError as e:
    got = repr(e).encode()
is_(got, b"", "a 17th metrics connection is closed at once, unanswered")
extra.close()
t0 = time.monotonic()
gone = []
for s in conns:
    try:
        gone.append(s.recv(100))
    except OSError as e:
        gone.append(repr(e).encode())
    s.close()
is_(set(gone), {b""}, "the silent ones are closed by the daemon")
check(time.monotonic() - t0 < 7, "within the 5 s a connection may live", time.monotonic() - t0)
try:
    metrics.scrape(msock)
    check(True, "a scrape after them is answered")
except Exception as e:
    check(False, "a scrape after them is answered", e)
is_(c.call({"op": "health"}, 5).get("status"), "ok", "and the daemon is well")
c.close()
EOF

stop_daemon

# Socket activation of both sockets, told apart by their names (FileDescriptorName=).
rm -f "$MSOCK"
POOL_SIZE=1 ACTIVATE_ARGS="-l $MSOCK --fdname=control:metrics" start_daemon_activated || exit 0
ok "sandboxd activated with a control and a metrics socket answers health"
run_py "activated metrics socket; pool and sessions" 90 <<'EOF'
import os
from client import Conn, check, is_, wait_for
import metrics
msock = os.environ["MSOCK"]
try:
    s = metrics.scrape(msock)
    is_(s.types.get("sandboxd_runs_started_total"), "counter", "the socket named metrics serves the metrics")
except Exception as e:
    check(False, "the socket named metrics serves the metrics", e)
    raise SystemExit(1)
c = Conn(os.environ["SOCK"])
is_(c.call({"op": "health"}).get("status"), "ok", "the other one is the control socket")

s = wait_for(lambda: (lambda x: x if x.value("sandboxd_pool_ready") == 1 else None)(metrics.scrape(msock)), 30)
check(s, "with pool_size 1, sandboxd_pool_ready becomes 1")
is_((s.value("sandboxd_pool_size"), s.value("sandboxd_pool_sandboxes")), (1, 1), "sandboxd_pool_size and _sandboxes are 1")
is_(s.value("sandboxd_sandboxes", state="ready"), 0, "a pooled sandbox is not counted in sandboxd_sandboxes")
h = c.call({"op": "health"})
pool = dict((h.get("capacity") or {}).get("pool") or {})
is_(pool.pop("create", None), {"size": 0, "ready": 0, "filling": 0}, "health's capacity.pool.create: no create pool configured")
is_(pool, {"size": 1, "ready": 1, "filling": 0}, "health's capacity.pool says the same")
for i in range(2):
    r = c.call({"op": "run", "best_effort": True, "argv": ["true"]}, 60)
    is_(r.get("exit_code"), 0, "throwaway run %d" % (i + 1))
t = metrics.scrape(msock)
is_(t.value("sandboxd_pool_hits_total") - s.value("sandboxd_pool_hits_total") >= 1, True, "the first took the pooled sandbox: a pool hit")
is_(t.value("sandboxd_pool_hits_total") + t.value("sandboxd_pool_misses_total"), 2, "hits + misses count the two throwaway runs")

r = c.call({"op": "create", "best_effort": True}, 60)
sbx = (r.get("sandbox") or {}).get("id")
p = c.call({"op": "pty.open", "sandbox": sbx, "argv": ["sleep", "60"]}, 30)
check(p.get("ok"), "a session opens", p)
u = metrics.scrape(msock)
is_((u.value("sandboxd_sessions_open"), u.value("sandboxd_sessions_opened_total")), (1, 1), "sandboxd_sessions_open and _opened_total are 1")
c.call({"op": "destroy", "sandbox": sbx}, 60)
v = wait_for(lambda: (lambda x: x if x.value("sandboxd_sessions_open") == 0 else None)(metrics.scrape(msock)), 10)
check(v and v.value("sandboxd_sessions_opened_total") == 1, "once its sandbox is destroyed, sessions_open is 0 and opened_total stays 1")
c.close()
EOF
stop_daemon

# A real Prometheus scraping the TCP port, and its HTTP API asked for the series.
if ! command -v prometheus >/dev/null; then
        if [ "${SANDBOXD_TEST_MUST_WORK:-0}" = 1 ]; then
                nok "prometheus is installed (scripts/deps.sh installs Debian's prometheus)"
        else
                ok "a real Prometheus scrapes the endpoint # SKIP prometheus is not installed (apt-get install prometheus)"
        fi
        exit 0
fi
PORT=$(free_port)
PROM_PORT=$(free_port)
export PORT PROM_PORT
start_daemon --metrics-listen "127.0.0.1:$PORT" || exit 0
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: sandboxd
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
EOF
# Its own web port is picked free, but another test may take it before Prometheus binds it: a
# Prometheus that dies saying so is started again on another port (5 tries).
_prom_settled() { grep -q 'Server is ready to receive web requests' "$T/prometheus.log" || ! kill -0 "$PROM_PID" 2>/dev/null; }
for _try in 1 2 3 4 5; do
        prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/prom" \
                --web.listen-address="127.0.0.1:$PROM_PORT" >"$T/prometheus.log" 2>&1 &
        PROM_PID=$!
        wait_until 30 _prom_settled
        grep -q 'address already in use' "$T/prometheus.log" || break
        wait "$PROM_PID" 2>/dev/null
        PROM_PID=
        PROM_PORT=$(free_port)
done
export PROM_PORT
run_py "prometheus" 120 <<'EOF'
import json, os, time, urllib.parse, urllib.request
from client import Conn, check, is_

api = "http://127.0.0.1:%s/api/v1/" % os.environ["PROM_PORT"]
def query(q):
    try:
        with urllib.request.urlopen(api + "query?" + urllib.parse.urlencode({"query": q}), timeout=5) as r:
            return json.load(r)["data"]["result"]
    except Exception:
        return None

def wait_value(q, pred, limit=60):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        res = query(q)
        if res and pred(float(res[0]["value"][1])):
            return res
        time.sleep(0.5)
    return query(q)

c = Conn(os.environ["SOCK"])
res = wait_value('up{job="sandboxd"}', lambda v: v == 1)
check(res and res[0]["value"][1] == "1", "Prometheus scrapes the endpoint: up{job=\"sandboxd\"} is 1", res,
      open(os.environ["T"] + "/prometheus.log").read()[-2000:])
r = c.call({"op": "run", "best_effort": True, "argv": ["sh", "-c", "exit 5"]}, 60)
is_(r.get("exit_code"), 5, "a run")
res = wait_value('sandboxd_runs_ended_total{reason="exited"}', lambda v: v >= 1)
check(res and res[0]["value"][1] == "1", "the query sandboxd_runs_ended_total{reason=\"exited\"} returns the run", res)
res = query('sandboxd_run_duration_seconds_count')
check(res and res[0]["value"][1] == "1", "sandboxd_run_duration_seconds_count is 1 in Prometheus", res)
res = query('sandboxd_build_info')
check(res and res[0]["metric"].get("version"), "sandboxd_build_info carries its version label", res)
try:
    with urllib.request.urlopen(api + "targets", timeout=5) as t:
        targets = json.load(t)["data"]["activeTargets"]
except Exception as e:
    targets = [{"lastError": repr(e)}]
is_([x.get("lastError") for x in targets], [""], "the target's last scrape had no error (the format was accepted)")
c.close()
EOF
kill "$PROM_PID" 2>/dev/null
wait "$PROM_PID" 2>/dev/null
PROM_PID=
stop_daemon
