#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Egress by name, timed (issue #32's benchmark rows): the cost of a TCP connect inside a sandbox
# when the destination is allowed by name, beside the same through an allowed address and beside
# the host's own connect without sandboxd (the floor). Rows, each a connect() to a listener that
# is two veth hops away, timed inside the program with a monotonic clock:
#   name, first     getaddrinfo() of a name never asked before (the sandbox's resolver is the
#                   daemon's relay: it asks the DNS answerer, adds the answered address to the
#                   sandbox's nftables set in one commit, then answers) + connect() to it
#   name, again     getaddrinfo() of a name the relay answered before (asked upstream again, its
#                   address's timeout renewed) + connect()
#   name, cached    connect() to the address of a name resolved before, kept by the program
#   address entry   connect() to an address on the allow list (no name)
#   host: name, first / host: address   the same from the host's namespace, no sandboxd: its
#                   getaddrinfo() asks the answerer directly
# Every name is new to the answerer too, and gets an address of its own (198.18.0.0/15, local to
# the remote namespace), so that each first connect adds a new element to the set. Rounds
# alternate the sandbox's program and the host's; inside each program the rows' order is
# shuffled at every iteration, so that load hits all rows alike.
#
#   bench/egress-names.sh [BUILD_DIR] [ROUNDS] [PER_ROUND]   (root; default build 10 40)
#
# Then, where the daemon takes a match-sni entry ({"name": ..., "match": "sni"}), throughput
# through an SNI-matched connection beside a direct connection: SNI_ROUNDS rounds (default 5;
# 0: none) of SNI_MIB MiB (default 256) up, then as much down, to the same server, one
# connection each, the two rows alternating. The matched connection is HTTP (the daemon's check
# reads its Host header as it reads a ClientHello's server_name; once admitted both are forwarded
# by the kernel alike), so that no TLS in Python weighs on either row. Then each row's
# connection start (connect, a request, its one-byte answer), 50 a round, by address. SNI_RAW=FILE
# appends every round's rates and starts to FILE, to pool sittings.
#
# Everything happens in a network namespace of its own (re-executed under unshare --net): a
# "remote" namespace behind a veth pair holds the listener (port 80 on 198.51.100.7 and on every
# address of 198.18.0.0/15) and the DNS answerer (198.51.100.53: NAME.bench.test, any depth, the
# next free address of 198.18.0.0/15, TTL 300 s less the seconds since the name was first asked,
# as a caching resolver counts it down; a fixed 300 s before b129098). The private daemon's sandboxd.conf sets
# egress_dns to the answerer, takes 198.18.0.0/15 out of egress_deny (it is private: in this
# namespace nothing leaves) and raises egress_connection_rate, whose default (256/s) a tight loop
# of connects would reach. Never touches cgroup v1: its cgroup is below the cgroup2 mount.
set -u
if [ -z "${BENCH_NETNS:-}" ]; then
        BENCH_NETNS=1 exec unshare --net -- "$BASH" "$0" "$@"
fi
B=$(cd "${1:-build}" && pwd)
ROUNDS=${2:-10}
PER=${3:-40}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CGM=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
T=$(mktemp -d "${TMPDIR:-/var/tmp}/sbx-bench-names.XXXXXX")
CTL=$B/ctl/sandboxctl
DPID= RPID= SPID=

finish() {
        [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
        for p in $SPID $RPID; do kill "$p" 2>/dev/null; done
        wait 2>/dev/null
        for _ in $(seq 50); do
                find "$CGM/sbx-bench-names-$$" -depth -type d -exec rmdir {} \; 2>/dev/null
                [ -d "$CGM/sbx-bench-names-$$" ] || break
                sleep 0.1
        done
        rm -rf --one-file-system "$T"
}
trap finish EXIT
die() { echo "egress-names: $*" >&2; exit 1; }

# ---- The remote: a listener on port 80 of every address it has, and a DNS answerer ----------
cat >"$T/remote.py" <<'PY'
import socket, struct, sys, threading, time
BULK = ("198.51.100.9", "198.51.100.10")
def bulk(c):
    """An HTTP-looking request with X-Bytes: N, then N bytes up; "k" once they are all in, then
    N bytes down."""
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            b = c.recv(65536)
            if not b:
                return
            head += b
        head, got = head.split(b"\r\n\r\n", 1)
        n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"x-bytes:")][0])
        left, buf = n - len(got), bytearray(1 << 20)
        while left > 0:
            k = c.recv_into(buf, min(left, len(buf)))
            if not k:
                return
            left -= k
        c.sendall(b"k")
        zeros, left = memoryview(bytes(1 << 20)), n
        while left > 0:
            left -= c.send(zeros[:min(left, len(zeros))])
    except OSError:
        pass
    finally:
        c.close()
def listen():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 80))
    s.listen(4096)
    while True:
        c, _ = s.accept()
        if c.getsockname()[0] in BULK:
            threading.Thread(target=bulk, args=(c,), daemon=True).start()
        else:
            c.close()
def answer():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("198.51.100.53", 53))
    given, first = {}, {}
    while True:
        m, peer = s.recvfrom(4096)
        i, labels = 12, []
        while m[i]:
            labels.append(m[i + 1:i + 1 + m[i]].decode("ascii", "replace").lower())
            i += 1 + m[i]
        end = i + 5
        name, qtype = ".".join(labels), struct.unpack("!H", m[end - 4:end - 2])[0]
        known = name.endswith(".bench.test") or name == "bulk.sni.test"
        rr = b""
        if known and qtype == 1:
            if name == "bulk.sni.test":
                given[name] = socket.inet_aton(BULK[0])
            elif name not in given:
                k = len(given) + 1
                given[name] = socket.inet_aton("198.%d.%d.%d" % (18 + (k >> 16), (k >> 8) & 255, k & 255))
            # The TTL as a caching resolver gives it: 300 s less the seconds since first asked.
            ttl = max(1, 300 - int(time.monotonic() - first.setdefault(name, time.monotonic())))
            rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, ttl, 4) + given[name]
        s.sendto(m[:2] + struct.pack("!HHHHH", 0x8180 if known else 0x8183, 1, 1 if rr else 0, 0, 0) + m[12:end] + rr, peer)
threading.Thread(target=listen, daemon=True).start()
threading.Thread(target=answer, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
PY

remote() {
        ip link set lo up
        unshare --net sleep infinity &
        RPID=$!
        for _ in $(seq 50); do [ "$(readlink /proc/$RPID/ns/net)" != "$(readlink /proc/$$/ns/net)" ] && break; sleep 0.1; done
        in_remote() { nsenter --net=/proc/$RPID/ns/net "$@"; }
        ip link add up0 type veth peer name eth0 netns "$RPID" || die "no veth pair"
        ip addr add 192.0.2.1/24 dev up0
        ip link set up0 up
        in_remote sh -c 'ip link set lo up && ip link set eth0 up && ip addr add 192.0.2.2/24 dev eth0 &&
                ip addr add 198.51.100.7/32 dev lo && ip addr add 198.51.100.53/32 dev lo &&
                ip addr add 198.51.100.9/32 dev lo && ip addr add 198.51.100.10/32 dev lo &&
                ip route add local 198.18.0.0/15 dev lo && ip route add default via 192.0.2.1' || die "remote addresses"
        ip route add 198.51.100.0/24 via 192.0.2.2
        ip route add 198.18.0.0/15 via 192.0.2.2
        sysctl -qw net.ipv4.conf.up0.forwarding=1
        nsenter --net=/proc/$RPID/ns/net python3 "$T/remote.py" >"$T/remote.out" 2>&1 &
        SPID=$!
        for _ in $(seq 100); do grep -q ready "$T/remote.out" 2>/dev/null && break; sleep 0.1; done
        grep -q ready "$T/remote.out" || die "the remote did not start: $(cat "$T/remote.out")"
}

# ---- The measuring program: MODE (sbx|host) ROUND PER; prints "ROW MILLISECONDS" lines --------
cat >"$T/measure.py" <<'PY'
import os, random, socket, sys, time
mode, rnd, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ns = time.perf_counter_ns
seq = 0
resolved = []
def fresh():
    global seq
    seq += 1
    return "%s%d-%d-%d.bench.test" % (mode[0], os.getpid(), rnd, seq)
def connect(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect((addr, 80))
    s.close()
def by_name(name):
    a = socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    connect(a)
    return a
def name_first():
    name = fresh()
    resolved.append((name, by_name(name)))
def name_again():
    by_name(random.choice(resolved)[0])
def name_cached():
    connect(random.choice(resolved)[1])
def address():
    connect("198.51.100.7")
rows = {"sbx": [("name, first", name_first), ("name, again", name_again), ("name, cached", name_cached),
                ("address entry", address)],
        "host": [("host: name, first", name_first), ("host: address", address)]}[mode]
name_first()
out = []
for i in range(per + 3):
    random.shuffle(rows)
    for row, f in rows:
        t = ns()
        f()
        if i >= 3:  # warm-up iterations not counted
            out.append("%s\t%.4f" % (row, (ns() - t) / 1e6))
print("\n".join(out))
PY

# ---- Throughput: ROUNDS MIB; "ROW\tup|down\tMIB/S" lines, the two rows alternating ----------
cat >"$T/bulk.py" <<'PY'
import socket, sys, time
rounds, mib, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
zeros, buf = memoryview(bytes(1 << 20)), bytearray(1 << 20)
def one(host, n):
    s = socket.create_connection((host, 80), timeout=60)
    s.sendall(b"GET / HTTP/1.1\r\nHost: bulk.sni.test\r\nX-Bytes: %d\r\n\r\n" % n)
    t, left = time.perf_counter(), n
    while left > 0:
        left -= s.send(zeros[:min(left, len(zeros))])
    if s.recv(1) != b"k":
        raise SystemExit("no acknowledgement of the upload")
    up, t, left = time.perf_counter() - t, time.perf_counter(), n
    while left > 0:
        k = s.recv_into(buf, min(left, len(buf)))
        if not k:
            raise SystemExit("short download")
        left -= k
    down = time.perf_counter() - t
    s.close()
    return up, down
sni = socket.getaddrinfo("bulk.sni.test", 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
rows = [("SNI-matched (checked)", sni), ("direct (address entry)", "198.51.100.10")]
for _, host in rows if mode == "bulk" else []:
    one(host, 16 << 20)  # warm-up
for r in range(rounds if mode == "bulk" else 0):
    for row, host in rows if r % 2 == 0 else rows[::-1]:
        up, down = one(host, mib << 20)
        print("%s\tup\t%.1f\n%s\tdown\t%.1f" % (row, mib / up, row, mib / down), flush=True)
# A connection's start: connect, a request with X-Bytes: 0, its one-byte answer; by address for
# both rows (no resolve in it), 50 a round, the rows alternating one by one.
def start(host):
    t = time.perf_counter()
    s = socket.create_connection((host, 80), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: bulk.sni.test\r\nX-Bytes: 0\r\n\r\n")
    if s.recv(1) != b"k":
        raise SystemExit("no answer")
    ms = (time.perf_counter() - t) * 1000
    s.close()
    return ms
for r in range(rounds if mode == "starts" else 0):
    for i in range(50):
        for row, host in rows if (r + i) % 2 == 0 else rows[::-1]:
            print("%s\tstart\t%.4f" % (row, start(host)), flush=True)
PY

# cpu_ticks PID: its user + system time, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# sni_bench ROUNDS MIB: a sandbox with bulk.sni.test as a match-sni entry (its connections to
# port 80 are checked by the daemon, which reads the Host header, then left to the kernel) and
# 198.51.100.10:80 by address (the same server, routed directly).
sni_bench() {
        local r id
        r=$("$CTL" --socket "$T/sock" call '{"op":"create","best_effort":true,"network":{"egress":{"allow":[{"name":"bulk.sni.test","match":"sni"},"198.51.100.10:80/tcp"]}}}' 2>&1)
        id=$(jq -r '.sandbox.id // empty' <<<"$r" 2>/dev/null)
        if [ -z "$id" ]; then
                echo "# SNI throughput: not measured: this daemon refuses a match sni entry ($(jq -r '.error.message // .' <<<"$r" 2>/dev/null | head -n1))"
                return
        fi
        echo "# SNI throughput: $1 rounds of $2 MiB up then down per row; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
        local cpu0 cpu1
        cpu0=$(cpu_ticks "$DPID")
        "$CTL" --socket "$T/sock" run --sandbox "$id" -- python3 -c "$(cat "$T/bulk.py")" "$1" "$2" bulk >"$T/bulk" ||
                echo "# SNI throughput: the program failed: $(tail -n 3 "$T/bulk")"
        cpu1=$(cpu_ticks "$DPID")
        "$CTL" --socket "$T/sock" run --sandbox "$id" -- python3 -c "$(cat "$T/bulk.py")" "$1" "$2" starts >>"$T/bulk" ||
                echo "# SNI starts: the program failed: $(tail -n 3 "$T/bulk")"
        # SNI_RAW=FILE: each round's rates appended there too (ROW TAB WAY TAB MiB/s), to pool sittings.
        [ -n "${SNI_RAW:-}" ] && cat "$T/bulk" >>"$SNI_RAW"
        echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
        # The matched row's bytes: each round's MiB up and down, and the 16 MiB warm-up both ways.
        awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v mib=$(($1 * $2 * 2 + 32)) 'BEGIN {
                printf "# the daemon'"'"'s CPU meanwhile: %.2f s for %d MiB through SNI-matched connections: %.2f s a GiB\n", t / hz, mib, t / hz / mib * 1024 }'
        python3 - "$T/bulk" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    row, way, rate = line.rstrip("\n").split("\t")
    v.setdefault((row, way), []).append(float(rate))
print("| throughput | way | median MiB/s | min MiB/s | max MiB/s | rounds |")
print("|---|---|---|---|---|---|")
for (row, way), r in sorted(v.items()):
    if way != "start":
        print("| %s | %s | %.0f | %.0f | %.0f | %d |" % (row, way, statistics.median(r), min(r), max(r), len(r)))
print("\n| a connection's start (connect, request, answer) | median ms | p99 ms | N |\n|---|---|---|---|")
for (row, way), r in sorted(v.items()):
    if way == "start":
        r = sorted(r)
        print("| %s | %.3f | %.3f | %d |" % (row, statistics.median(r), r[min(len(r) - 1, int(0.99 * len(r)))], len(r)))
for way in ("up", "down"):
    a, b = v.get(("SNI-matched (checked)", way)), v.get(("direct (address entry)", way))
    if a and b:
        print("\nSNI-matched / direct, %s: %.1f %%" % (way, 100 * statistics.median(a) / statistics.median(b)), end="")
print()
PY
        "$CTL" --socket "$T/sock" destroy "$id" >/dev/null
}

# ---- The private daemon ---------------------------------------------------------------------
daemon() {
        local deny
        deny=$(sed -n 's/^#egress_deny = //p' "$SRC/daemon/sandboxd.conf")
        [ -n "$deny" ] || die "no default egress_deny in daemon/sandboxd.conf"
        printf '%s\n' "egress_dns = 198.51.100.53" "egress_deny = ${deny/198.18.0.0\/15 /}" \
                "egress_connection_rate = 100000" "sweep_interval = 0" >"$T/sandboxd.conf"
        mkdir -p "$T/state"
        "$B/daemon/sandboxd" --config "$T/sandboxd.conf" --listen "$T/sock" --state-dir "$T/state" \
                --cgroup-root "$CGM/sbx-bench-names-$$" --pool-size 0 --stop-sandboxes >"$T/daemon.log" 2>&1 &
        DPID=$!
        for _ in $(seq 100); do "$CTL" --socket "$T/sock" list >/dev/null 2>&1 && break; sleep 0.1; done
        "$CTL" --socket "$T/sock" list >/dev/null 2>&1 || die "the daemon did not start: $(tail -5 "$T/daemon.log")"
}

remote
daemon
printf 'nameserver 198.51.100.53\n' >"$T/resolv.conf"
S=$("$CTL" --socket "$T/sock" create --best-effort --allow '*.bench.test:80' --allow 198.51.100.7:80/tcp) ||
        die "create failed: $(tail -5 "$T/daemon.log")"
echo "# $(date -u +%FT%TZ); $(uname -r); $(nproc) CPUs; $(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -n1)"
echo "# bench/egress-names.sh $B $ROUNDS $PER; sandboxd $("$B/daemon/sandboxd" --version 2>&1 | head -n1)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$T/samples"
MEASURE=$(cat "$T/measure.py")
for ((r = 0; r < ROUNDS; r++)); do
        sbx() { "$CTL" --socket "$T/sock" run --sandbox "$S" -- python3 -c "$MEASURE" sbx "$r" "$PER" >>"$T/samples" || die "the sandbox's round $r failed"; }
        host() { unshare --mount sh -c 'mount --bind "$1" /etc/resolv.conf && shift && exec python3 "$@"' sh \
                "$T/resolv.conf" "$T/measure.py" host "$r" "$PER" >>"$T/samples" || die "the host's round $r failed"; }
        if ((r % 2)); then host; sbx; else sbx; host; fi
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$CTL" --socket "$T/sock" inspect "$S" | grep -iE "dns|connections" | sed 's/^/# /'
python3 - "$T/samples" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    row, ms = line.rstrip("\n").split("\t")
    rows.setdefault(row, []).append(float(ms))
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
print("| connect | median ms | p99 ms | min ms | N |")
print("|---|---|---|---|---|")
for row in ("name, first", "name, again", "name, cached", "address entry", "host: name, first", "host: address"):
    v = rows.get(row, [])
    if v:
        print("| %s | %.3f | %.3f | %.3f | %d |" % (row, statistics.median(v), q(v, 0.99), min(v), len(v)))
PY
"$CTL" --socket "$T/sock" destroy "$S" >/dev/null
if [ "${SNI_ROUNDS:-5}" -gt 0 ]; then
        sni_bench "${SNI_ROUNDS:-5}" "${SNI_MIB:-256}"
fi
