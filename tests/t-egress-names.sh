#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Egress by name (create's "network.egress.allow" with host names; daemon/sandbox/egress.c,
# egress-dns.c, core/dns-message.c), in the network of tests/egress-lib.sh, whose DNS answerer
# knows the test's names (one of them moving between two addresses at each query, with a TTL of
# 1 s, and one that never answers). Shown: an allowed name resolves through the sandbox's relay
# and is reached, on its port only; a name not on the list is REFUSED by the relay without
# reaching the resolver, and its address is not reached; a wildcard admits names below it at any
# depth, not its apex; AAAA gets an empty answer; a name whose address moves is followed, and the
# new address is reached only once resolved; a datagram that is not a DNS query never reaches
# the resolver; a sandbox that floods with UDP is held to its share of the conntrack table
# (egress_connections) while another sandbox and the host connect; one user's flood of queries
# the resolver never answers leaves another user's queries answered.
if [ -z "${EGRESS_TEST_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
        EGRESS_TEST_NETNS=1 exec unshare --net -- "$BASH" "$0" "$@"
fi
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

. "$TESTS_DIR/egress-lib.sh"
egress_remote --ttl 1 --name remote.test=198.51.100.7@300 --name other.test=198.51.100.8 \
        --name '*.wild.test=203.0.113.5' --name moving.test=198.51.100.8,203.0.113.5 --silent .silent.test \
        --name counted.test=198.51.100.7@300 --counting counted.test

# A relay budget of 64 queries in flight: 16 per user, 16 per sandbox (the default 1024 would
# need 33 sandboxes of one user to show the same).
printf 'egress_dns = 198.51.100.53\negress_dns_queries = 64\nmetrics_group = root\n' >"$T/sandboxd.conf"
POOL_SIZE=0 start_daemon --config "$T/sandboxd.conf" --metrics-listen "$T/metrics.sock" || exit 0

# dnsq NAME [TYPE] [COUNT]: COUNT queries (one after the other) to the sandbox's resolver; prints
# "rcode N ADDRESS..." of the last, or "timeout"; with COUNT > 1, "answered K".
cat >"$T/dnsq.py" <<'PY'
import random, socket, struct, sys
name, qtype = sys.argv[1], {"A": 1, "AAAA": 28}[sys.argv[2] if len(sys.argv) > 2 else "A"]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 1
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
answered, line = 0, "timeout"
for _ in range(count):
    qid = random.randrange(65536)
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack("!HH", qtype, 1)
    s.sendto(q, ("127.0.0.53", 53))
    try:
        m = s.recv(4096)
    except socket.timeout:
        line = "timeout"
        continue
    answered += 1
    rcode, an = m[3] & 15, struct.unpack("!H", m[6:8])[0]
    i, addrs = len(q) - 0, []
    i = 12
    while m[i]:
        i += 1 + m[i]
    i += 5
    for _ in range(an):
        i += 2 if m[i] & 0xC0 == 0xC0 else 0
        t, c, ttl, rdlen = struct.unpack("!HHIH", m[i:i + 10])
        if t == 1:
            addrs.append(socket.inet_ntoa(m[i + 10:i + 14]))
        i += 10 + rdlen
    line = " ".join(["rcode", str(rcode)] + addrs)
print(line if count == 1 else "answered %d" % answered)
PY
DNSQ=$(cat "$T/dnsq.py")
dnsq() { local s=$1; shift; ctl run --sandbox "$s" -- python3 -c "$DNSQ" "$@"; }

# ---- Names on the list --------------------------------------------------------------------
N=$(ctl create --best-effort --allow remote.test:80 --allow '*.WILD.test')
r=$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$N\"}")
is "$(jget "$r" '.sandbox.network.egress.allow | join(" ")')" "remote.test:80 *.wild.test" "inspect: the names of the allow list, in lower case"
is "$(dnsq "$N" remote.test)" "rcode 0 198.51.100.7" "an allowed name resolves through the relay"
is "$(sbx_probe "$N" remote.test 80)" "reached remote 198.51.100.7:80" "... and is reached by its name"
like "$(sbx_probe "$N" 198.51.100.7 8080)" "^refused" "... on the allowed port only"
like "$(nft list set inet sandboxd "sx_${N#sbx-}_0")" "198\.51\.100\.7 timeout" \
        "its address is in the sandbox's set of that name, with a timeout"
is "$(dnsq "$N" REMOTE.Test)" "rcode 0 198.51.100.7" "names are matched without regard to case"
is "$(dnsq "$N" other.test)" "rcode 5" "a name not on the list: REFUSED by the relay"
unlike "$(cat "$T/remote.out")" "other\.test" "... and the question never reached the resolver"
like "$(sbx_probe "$N" 198.51.100.8 80)" "^refused" "... and that name's address is not reached"
like "$(ctl run --sandbox "$N" -- python3 -c 'import socket; socket.gethostbyname("other.test")' 2>&1)" "not known|failure" \
        "... and a program's own lookup of it fails"
is "$(dnsq "$N" a.wild.test)" "rcode 0 203.0.113.5" "a wildcard admits a name below it"
is "$(sbx_probe "$N" a.b.wild.test 80)" "reached remote 203.0.113.5:80" "... at any depth, and it is reached by name"
is "$(dnsq "$N" wild.test)" "rcode 5" "... and not its apex"
is "$(dnsq "$N" remote.test AAAA)" "rcode 0" "AAAA of an allowed name: an empty NOERROR (no IPv6 inside)"
q=$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$N\"}")" '.sandbox.network.dns_queries | "\(.refused >= 3) \(.answered >= 5) \(.relayed >= 5)"')
is "$q" "true true true" "inspect counts the relay's queries: at least 3 refused (other.test by dnsq and by the program, wild.test), the rest relayed and answered"
like "$(ctl inspect "$N")" "dns queries: +[0-9]+ relayed, [0-9]+ answered, [3-9][0-9]* refused" "sandboxctl inspect shows them"

# ---- Its connections and the names it resolved, in inspect, list, top and metrics ------------
# A listener on the remote that holds each connection until its client closes it, and a program
# in N that connects to it by name and holds the connection until /work/ct-close appears.
nsenter --net=/proc/$RPID/ns/net timeout 120 python3 -c '
import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("203.0.113.5", 9100))
s.listen(8)
print("ready", flush=True)
def hold(c):
    while c.recv(4096):
        pass
    c.close()
while True:
    threading.Thread(target=hold, args=(s.accept()[0],), daemon=True).start()' >"$T/hold.out" 2>&1 &
HOLD=$!
wait_until 10 grep -q ready "$T/hold.out" || diag "the holding listener: $(cat "$T/hold.out")"
ctl run --sandbox "$N" --timeout 120 -- python3 -c '
import os, socket, time
s = socket.create_connection(("c.wild.test", 9100), timeout=5)
print("connected", flush=True)
while not os.path.exists("/work/ct-close"):
    time.sleep(0.1)
s.close()' >"$T/holder.out" 2>&1 &
HOLDER=$!
conns() { jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$N\"}")" .sandbox.network.connections; }
conns_at_least_1() { [ "$(conns)" -ge 1 ] 2>/dev/null; }
check "with a connection open, inspect's network.connections is at least 1" wait_until 20 conns_at_least_1
r=$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$N\"}")
is "$(jget "$r" '.sandbox.network.names_resolved[0] | "\(.name) \(.addresses | join(","))"')" "c.wild.test 203.0.113.5" \
        "names_resolved: the name the program resolved first, with its address"
check "... with the time of its answer (within the last minute)" \
        [ $(( $(date +%s) - $(jget "$r" '.sandbox.network.names_resolved[0].at') )) -le 60 ]
is "$(jget "$r" '[.sandbox.network.names_resolved[].name] | map(select(. == "remote.test")) | length')" 1 \
        "... remote.test, resolved several times, once"
is "$(jget "$r" '.sandbox.network.names_resolved | length <= 8')" true "... at most 8 names"
is "$(jget "$r" '[.sandbox.network.names_resolved[].name] | map(select(. == "other.test" or . == "wild.test")) | length')" 0 \
        "... and none of the names the relay refused"
r=$(rpc '{"op":"list","usage":true}')
check "list with usage: its usage.connections is at least 1" \
        [ "$(jget "$r" ".sandboxes[] | select(.id == \"$N\") | .usage.connections")" -ge 1 ]
like "$(ctl top --once)" "$N +- +ready +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[1-9][0-9]* +1"$'(\n|$)' \
        "sandboxctl top: its CONNS column counts it (and its run in flight)"
metric() {
        PYTHONPATH=$TESTS_DIR python3 -c 'import metrics, sys
s = metrics.scrape(sys.argv[1])
labels = dict(a.split("=", 1) for a in sys.argv[3:])
print(s.value(sys.argv[2], **labels))' "$T/metrics.sock" "$@"
}
check "metrics: sandboxd_sandbox_connections of it is at least 1" \
        python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 1 else 1)' "$(metric sandboxd_sandbox_connections sandbox="$N")"
check "metrics: sandboxd_sandbox_dns_queries_total of it, answered and refused, count its queries" \
        python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 5 and float(sys.argv[2]) >= 3 else 1)' \
        "$(metric sandboxd_sandbox_dns_queries_total sandbox="$N" result=answered)" \
        "$(metric sandboxd_sandbox_dns_queries_total sandbox="$N" result=refused)"
ctl run --sandbox "$N" -- touch /work/ct-close
wait "$HOLDER"
is "$(cat "$T/holder.out")" connected "the program in N connected by name and closed its connection"
conns_zero() { [ "$(conns)" = 0 ]; }
check "closed, it is no more counted in network.connections" wait_until 20 conns_zero
kill "$HOLD" 2>/dev/null
wait "$HOLD" 2>/dev/null

# A datagram that is not a query (its flags byte looks like one's), then a query: the resolver
# saw the query and not the datagram.
ctl run --sandbox "$N" -- python3 -c 'import socket; socket.socket(2, 2).sendto(b"AB\0\0NOT-DNS" + b"x" * 1593, ("127.0.0.53", 53))'
is "$(dnsq "$N" remote.test)" "rcode 0 198.51.100.7" "after a datagram of 1,604 bytes that is not DNS, the relay still answers"
unlike "$(cat "$T/remote.out")" "^dns 1604 " "... and that datagram never reached the resolver"

# ---- A name that moves --------------------------------------------------------------------
M=$(ctl create --best-effort --allow moving.test:80)
is "$(dnsq "$M" moving.test)" "rcode 0 198.51.100.8" "a name with a TTL of 1 s resolves to its first address"
is "$(sbx_probe "$M" 198.51.100.8 80)" "reached remote 198.51.100.8:80" "... which is reached"
like "$(sbx_probe "$M" 203.0.113.5 80)" "^refused" "its next address is not reached before it is resolved"
is "$(dnsq "$M" moving.test)" "rcode 0 203.0.113.5" "the resolver moves the name"
is "$(sbx_probe "$M" 203.0.113.5 80)" "reached remote 203.0.113.5:80" "... and the new address is reached"
ctl destroy "$M" >/dev/null

# ---- One sandbox's share of the conntrack table --------------------------------------------
U=$(ctl create --best-effort --allow 198.51.100.7:9/udp)
UADDR=$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$U\"}")" .sandbox.network.address)
UADDR=${UADDR%/30}
ctl run --sandbox "$U" -- python3 -c '
import socket
for i in range(2300):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("198.51.100.7", 9))
    s.close()'
tracked=$(grep -c "src=$UADDR " /proc/net/nf_conntrack)
if [ "$tracked" -le 2048 ] && [ "$tracked" -ge 1800 ]; then
        ok "a sandbox that sent 2,300 one-datagram flows has $tracked tracked: at most egress_connections (2048)"
else
        nok "a sandbox that sent 2,300 one-datagram flows has $tracked tracked: at most egress_connections (2048)"
fi
like "$(nft list chain inet sandboxd "sx_${U#sbx-}")" "ct count over 2048 counter packets [1-9]" "... its chain refused the rest"
is "$(sbx_probe "$N" remote.test 80)" "reached remote 198.51.100.7:80" "meanwhile another sandbox connects"
is "$(host_probe 198.51.100.7 8080)" "reached remote 198.51.100.7:8080" "... and so does the host"
ctl destroy "$U" >/dev/null

# ---- One user's flood of queries never answered --------------------------------------------
# Another user reaches the test's socket (the packaged socket unit uses group sandboxd instead).
chmod 0755 "$T" && chmod 0666 "$SOCK"
other() { as_other 65534 --regid=65534 --clear-groups -- ./sandboxctl --socket "$SOCK" "$@"; }
F=() FLOODS=()
for i in 1 2 3 4 5; do F+=("$(ctl create --best-effort --allow 198.51.100.7:80)"); done
for s in "${F[@]}"; do
        ctl run --sandbox "$s" -- python3 -c '
import socket, struct, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for k in range(1500):
    name = bytes([5]) + b"q%04d" % k + b"\x06silent\x04test\x00"
    s.sendto(struct.pack("!HHHHHH", k, 0x0100, 1, 0, 0, 0) + name + b"\x00\x01\x00\x01", ("127.0.0.53", 53))
    time.sleep(0.04)' >/dev/null 2>&1 &
        FLOODS+=($!)
done
wait_until 20 sh -c "[ \$(grep -c 'silent\.test' '$T/remote.out') -ge 16 ]" || diag "the flood did not start"
OTHER=$(other create --best-effort --allow remote.test:80)
like "$OTHER" "^sbx-" "another user's sandbox with a name on its list"
is "$(other run --sandbox "$OTHER" -- python3 -c "$DNSQ" remote.test A 10)" \
        "answered 10" "while root's sandboxes flood the relay with queries never answered, the other user's 10 are answered"
check "... and the flood was still on when they were" kill -0 "${FLOODS[@]}"
# Destroying the flooding sandboxes (their floods would go on for a minute) ends their runs and
# gives their queries in flight back to root's budget at once.
for s in "${F[@]}"; do ctl destroy "$s" >/dev/null; done
wait "${FLOODS[@]}"

# ---- A name asked again ---------------------------------------------------------------------
# counted.test's TTL counts down as a caching resolver's does: asked again, the answer asks for
# no longer than the relay's last commit keeps its address, which is left alone (no commit);
# remote.test's is 300 s every time: its element's timeout starts again.
C=$(ctl create --best-effort --allow counted.test:80 --allow remote.test:80)
is "$(dnsq "$C" counted.test) $(dnsq "$C" remote.test)" "rcode 0 198.51.100.7 rcode 0 198.51.100.7" \
        "two names on the list resolve: one whose TTL counts down, one whose TTL stays"
# expires SET: the seconds its element has left, as nft lists it (1m2s345ms: 62.345).
expires() {
        nft list set inet sandboxd "sx_${C#sbx-}_$1" | grep -o 'expires [0-9hms]*' | head -1 | python3 -c '
import re, sys
t = sys.stdin.read()
print(sum(float(n) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[u] for n, u in re.findall(r"(\d+)(ms|h|m|s)", t)))'
}
sleep 4
nft monitor elements >"$T/monitor.out" 2>&1 &
MON=$!
sleep 0.5
is "$(dnsq "$C" counted.test) $(dnsq "$C" remote.test)" "rcode 0 198.51.100.7 rcode 0 198.51.100.7" "4 s later, both asked again"
sleep 0.5
kill "$MON" 2>/dev/null
wait "$MON" 2>/dev/null
is "$(grep -c "sx_${C#sbx-}_0 " "$T/monitor.out")" 0 \
        "counted.test's element was not committed again (its answer asks for less than the last commit keeps)"
like "$(grep "sx_${C#sbx-}_1 " "$T/monitor.out")" "add element inet sandboxd sx_${C#sbx-}_1 .*198\.51\.100\.7" \
        "remote.test's was (nft monitor saw it)"
left=$(expires 1)
check "... and its timeout started again ($left s of 300)" python3 -c "import sys; sys.exit(0 if ${left:-0} > 298.5 else 1)"

# ---- A daemon killed, and the next one --------------------------------------------------------
# N resolved remote.test (TTL 300 s): the next daemon takes N back with what its set held.
is "$(dnsq "$N" remote.test)" "rcode 0 198.51.100.7" "N (root's) resolves at once: the destroyed sandboxes' queries left root's budget"
{ kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
DAEMON_PID=
KEEP_SANDBOXES=1 POOL_SIZE=0 start_daemon --config "$T/sandboxd.conf" || exit 0
like "$(nft list set inet sandboxd "sx_${N#sbx-}_0")" "198\.51\.100\.7 timeout [0-9ms]+ expires" \
        "after SIGKILL and a new daemon, N's set of remote.test still holds its address, with the time it had left"
is "$(sbx_probe "$N" 198.51.100.7 80)" "reached remote 198.51.100.7:80" "... and N reaches it without resolving again"
is "$(dnsq "$N" other.test)" "rcode 5" "... and its relay, bound again, still answers only the names on its list"
