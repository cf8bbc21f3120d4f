#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Egress (create's "network"; daemon/sandbox/egress.c, daemon/host/veth.c, nftables.c), in the
# network of tests/egress-lib.sh (a namespace of the test's own, a "remote" behind a veth pair
# with HTTP servers and a DNS answerer; no packet leaves for an address the test did not make).
# Names on the allow list: t-egress-names.sh.
# Shown: an allowed address and port is reached; another port, another address, the host's own
# addresses, the sandbox's gateway, another sandbox and a link-local address (on the remote, the
# host reaches it) are refused, while every one of them answers the host itself; the table's
# rules name the denied ranges; names resolve through the daemon's relay (resolv.conf inside says
# 127.0.0.53); root inside cannot add an address, a route or a rule; a throwaway run gets egress
# and never a pooled sandbox; a network namespace with an interface is never used again; hostile
# entries are refused naming the field; after destroy no interface, chain or conntrack entry of
# the sandbox is left; after SIGKILL of the daemon and a new start, the throwaway run's are gone
# and a sandbox still running keeps its interface, with its rules in the new daemon's table; a
# second daemon in the same network namespace says it cannot give egress, and leaves the first's
# interfaces and table alone.
if [ -z "${EGRESS_TEST_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
        EGRESS_TEST_NETNS=1 exec unshare --net -- "$BASH" "$0" "$@"
fi
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

. "$TESTS_DIR/egress-lib.sh"
egress_remote --name remote.test=198.51.100.7

for t in 198.51.100.7:8080 198.51.100.8:80 169.254.169.254:80 192.0.2.1:8081; do
        is "$(host_probe ${t%:*} ${t#*:})" "reached remote ${t/192.0.2.1/0.0.0.0}" "the host itself reaches $t"
done

# ---- A daemon with egress -----------------------------------------------------------------
mkdir -p "$T"
printf 'egress_dns = 198.51.100.53\n' >"$T/sandboxd.conf"
POOL_SIZE=1 start_daemon --config "$T/sandboxd.conf" || exit 0
r=$(rpc '{"op":"hello"}')
is "$(jget "$r" .capabilities.egress.available)" true "hello: egress can be given here"
is "$(jget "$r" '.capabilities.egress.forwarding | join(",")')" up0 "hello: the host's interface that forwards"
is "$(jget "$r" '"\(.capabilities.egress.sni) \(.capabilities.egress.sni_reason)"')" "true null" \
        "hello: names can be matched on SNI (the netfilter queue is bound)"
like "$(ctl doctor 2>&1)" "sandboxes can be given egress" "doctor says egress can be given"

A=$(ctl create --best-effort --allow 198.51.100.7:80 --allow 203.0.113.0/24:80/tcp)
r=$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$A\"}")
is "$(jget "$r" '.sandbox.network.egress.allow | join(" ")')" "198.51.100.7:80 203.0.113.0/24:80/tcp" "inspect: the allow list"
AADDR=$(jget "$r" .sandbox.network.address)
AGW=$(jget "$r" .sandbox.network.gateway)
AIF=$(jget "$r" .sandbox.network.interface)
like "$AADDR" '^10\.200\.[0-9]+\.[0-9]+/30$' "inspect: its address, from egress_range"
is "$AIF" "sx-${A#sbx-}" "inspect: its interface, named after it"
like "$(ctl inspect "$A")" "egress to 198.51.100.7:80, 203.0.113.0/24:80/tcp" "sandboxctl inspect shows the allow list"
check "its host end is here, up" sh -c "ip link show '$AIF' up | grep -q UP"

is "$(sbx_probe "$A" 198.51.100.7 80)" "reached remote 198.51.100.7:80" "allowed address and port: reached"
is "$(sbx_probe "$A" 203.0.113.5 80)" "reached remote 203.0.113.5:80" "an address of an allowed prefix: reached"
like "$(sbx_probe "$A" 198.51.100.7 8080)" "^refused" "another port of the allowed address: refused"
like "$(sbx_probe "$A" 198.51.100.8 80)" "^refused" "another address: refused"
like "$(sbx_probe "$A" 192.0.2.1 8081)" "^refused" "the host's own address: refused"
like "$(sbx_probe "$A" "$AGW" 8081)" "^refused" "the sandbox's gateway (the host's end): refused"

E=$(ctl create --best-effort --egress all)
is "$(sbx_probe "$E" 198.51.100.8 80)" "reached remote 198.51.100.8:80" "egress all: another address is reached"
like "$(sbx_probe "$E" 169.254.169.254 80)" "^refused" "egress all: the link-local metadata address is refused"
like "$(sbx_probe "$E" 192.0.2.1 8081)" "^refused" "egress all: the host's own address is refused"
rules=$(nft list table inet sandboxd)
like "$rules" "169\.254\.0\.0/16" "the daemon's rules: link-local is in the set never reached"
like "$rules" 'iifname "sx-\*" ip daddr @never .*reject' "... and the forward chain rejects what it holds"
like "$rules" 'oifname "sx-\*" .*drop' "... and nothing goes in toward a sandbox but replies"
like "$rules" 'chain input .*iifname "sx-\*" .*reject' "... and nothing from a sandbox reaches the host itself"
like "$rules" "sx_${A#sbx-}" "... with a chain of each sandbox"

# Another sandbox's server: reached inside it, refused from the first.
ctl run --sandbox "$E" -- python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &
SRV=$!
EADDR=$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$E\"}")" .sandbox.network.address)
EADDR=${EADDR%/30}
wait_until 10 sh -c "'$SANDBOXCTL' --socket '$SOCK' run --sandbox '$E' -- python3 -c '$PROBE' $EADDR 8000 | grep -q reached" ||
        diag "the server in $E did not come up"
like "$(sbx_probe "$E" "$EADDR" 8000)" "^reached" "a server in the second sandbox answers on its address, inside it"
like "$(sbx_probe "$A" "$EADDR" 8000)" "^refused" "another sandbox: refused"
kill $SRV 2>/dev/null; wait $SRV 2>/dev/null

# DNS through the daemon's relay.
like "$(ctl run --sandbox "$A" -- cat /etc/resolv.conf)" "nameserver 127\.0\.0\.53" "resolv.conf inside names the daemon's relay"
is "$(ctl run --sandbox "$A" -- python3 -c 'import socket; print(socket.gethostbyname("remote.test"))')" 198.51.100.7 \
        "a name resolves through the relay (the test's resolver in the remote)"
is "$(sbx_probe "$A" remote.test 80)" "reached remote 198.51.100.7:80" "... and is reached by its name"
like "$(ctl run --sandbox "$A" -- python3 -c 'import socket; socket.gethostbyname("unknown.test")' 2>&1)" "Name or service not known|not known" \
        "an unknown name: NXDOMAIN comes back"

# Root inside: no CAP_NET_ADMIN over its namespace.
R=$(ctl create --best-effort --egress all --user root)
before=$(ctl run --sandbox "$R" -- ip route)
for cmd in "ip route add 203.0.113.0/24 via ${AGW%/*}" "ip addr add 10.9.9.9/32 dev eth0" "ip link set eth0 down" \
        "nft add table ip mine" "ip rule add from all lookup 100"; do
        out=$(ctl run --sandbox "$R" -- sh -c "$cmd" 2>&1)
        like "$out" "Operation not permitted|EPERM" "root inside cannot: $cmd"
done
is "$(ctl run --sandbox "$R" -- ip route)" "$before" "its routes are as the daemon made them"

# A throwaway run: its own sandbox, never a pooled one.
r=$(ctl run --best-effort --allow 198.51.100.8:80 -- python3 -c "$PROBE" 198.51.100.8 80)
is "$r" "reached remote 198.51.100.8:80" "a throwaway run with --allow reaches its address"
like "$(ctl run --best-effort -- ip -o link)" "^1: lo" "a throwaway run without egress: loopback only"
check "... and no eth0 in it" sh -c "! '$SANDBOXCTL' --socket '$SOCK' run --best-effort -- ip -o link | grep -q eth0"

# A namespace that had an interface is never used again: destroy one, then the next sandboxes.
d0=$(jget "$(rpc '{"op":"health"}')" .netns.discarded)
T1=$(ctl create --best-effort --egress all)
ctl destroy "$T1" >/dev/null
d1=$(jget "$(rpc '{"op":"health"}')" .netns.discarded)
is "$((d1 - d0))" 1 "the destroyed egress sandbox's namespace was closed, not kept for another"
for i in 1 2 3; do
        N=$(ctl create --best-effort)
        is "$(ctl run --sandbox "$N" -- ip -o link | grep -c -v ': lo:')" 0 "a new sandbox $i without egress has no interface but lo"
        ctl destroy "$N" >/dev/null
done

# Hostile entries.
bad() { # ENTRIES_JSON FIELD PATTERN WHAT
        local r
        r=$(rpc "{\"op\":\"create\",\"best_effort\":true,\"network\":$1}")
        is "$(jget "$r" .error.field)" "$2" "refused, naming $2: $4"
        like "$(jget "$r" .error.message)" "$3" "... saying why: $4"
}
bad '{"egress":{"allow":["pypi.org:443","localhost"]}}' 'network.egress.allow[1]' "is not a host name" "a name of one label"
bad '{"egress":{"allow":["*.com"]}}' 'network.egress.allow[0]' "is not a host name" "a wildcard over a top-level domain"
bad '{"egress":{"allow":["a.*.example.com:443"]}}' 'network.egress.allow[0]' "is not a host name" "a '*' inside a name"
bad '{"egress":{"allow":["pypi..org"]}}' 'network.egress.allow[0]' "is not a host name" "an empty label"
bad '{"egress":{"allow":["pypi.org:99999"]}}' 'network.egress.allow[0]' "port must be" "a name with port 99999"
bad '{"egress":{"allow":["198.51.100.7:80","10.1.2.3"]}}' 'network.egress.allow[1]' "within 10.0.0.0/8" "a private address"
bad '{"egress":{"allow":["169.254.169.254:80"]}}' 'network.egress.allow[0]' "within 169.254.0.0/16" "the metadata address"
bad '{"egress":{"allow":["198.51.100.7/24"]}}' 'network.egress.allow[0]' "bits set below" "host bits set"
bad '{"egress":{"allow":["2001:db8::1"]}}' 'network.egress.allow[0]' "IPv6" "IPv6"
bad '{"egress":{"allow":["198.51.100.7:0"]}}' 'network.egress.allow[0]' "port must be" "port 0"
bad '{"egress":{"allow":["198.51.100.7:65536"]}}' 'network.egress.allow[0]' "port must be" "port 65536"
bad '{"egress":{"allow":["198.51.100.7:80/sctp"]}}' 'network.egress.allow[0]' "port must be" "an unknown protocol"
bad '{"egress":{"allow":["0198.51.100.7"]}}' 'network.egress.allow[0]' "not ADDRESS" "a leading zero"
bad '{"egress":{"allow":"198.51.100.7"}}' 'network.egress.allow' "must be an array" "not an array"
bad '{"egress":{"allow":[7]}}' 'network.egress.allow[0]' "must be a string" "a number"
bad '{"egress":"some"}' 'network.egress' "must be" "a mode that is not all"
bad '{"egress":"all","extra":1}' 'network' "unknown field" "an unknown field"
bad '"host"' 'network' "must be" "another string"
many=$(python3 -c 'import json; print(json.dumps({"egress": {"allow": ["203.0.113.%d" % i for i in range(65)]}}))')
bad "$many" 'network.egress.allow' "at most 64 entries" "65 entries"

# ---- Destroy, SIGKILL, a new daemon -------------------------------------------------------
# A connection of A's just before (a closed one is tracked 2 min: the test may take longer under load).
sbx_probe "$A" 198.51.100.7 80 >/dev/null
check "A's connections were tracked (NAT)" grep -q "src=${AADDR%/30} " /proc/net/nf_conntrack
ctl destroy "$A" >/dev/null
# The interface, chain and NAT entries go in a child of the daemon after destroy's answer (its
# steps wait for the kernel's RCU grace periods, which the event loop must not): bounded wait.
wait_until 10 sh -c "! ip link show '$AIF' 2>/dev/null && ! nft list table inet sandboxd | grep -q 'sx_${A#sbx-}' &&
        ! grep -q 'src=${AADDR%/30} ' /proc/net/nf_conntrack" || diag "A's teardown did not end within 10 s"
check "after destroy: A's interface is gone" sh -c "! ip link show '$AIF' 2>/dev/null"
check "after destroy: A's chain is gone" sh -c "! nft list table inet sandboxd | grep -q 'sx_${A#sbx-}'"
check "after destroy: no conntrack entry of A is left" sh -c "! grep -q 'src=${AADDR%/30} ' /proc/net/nf_conntrack"

ctl destroy "$E" >/dev/null
ctl destroy "$R" >/dev/null
K=$(ctl create --best-effort --name keep --allow 198.51.100.7:80)
ctl run --best-effort --egress all -- sleep 60 >/dev/null 2>&1 &
RUNNER=$!
wait_until 10 sh -c "[ \$(ip -o link | grep -c ' sx-') -ge 2 ]" || diag "$(ip -o link)"
links=$(ip -o link | sed -n 's/^[0-9]*: \(sx-[0-9a-f]*\)@.*/\1/p' | sort)
ifindex() { ip -o link show dev "$1" 2>/dev/null | cut -d: -f1; }
kidx=$(ifindex "sx-${K#sbx-}")
{ kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
DAEMON_PID=
kill $RUNNER 2>/dev/null; wait $RUNNER 2>/dev/null
is "$(ip -o link | grep -c ' sx-')" "$(echo "$links" | wc -l)" "a daemon killed by SIGKILL leaves its interfaces behind"
check "... and its table" sh -c "nft list table inet sandboxd >/dev/null"
# This one takes the running sandboxes back (KEEP_SANDBOXES: no --stop-sandboxes).
KEEP_SANDBOXES=1 POOL_SIZE=1 start_daemon --config "$T/sandboxd.conf" || exit 0
grep -q "removed [0-9]* interface(s) an earlier daemon left" "$T/daemon.log" && ok "the next daemon removed them at start" ||
        nok "the next daemon removed them at start"
# K's init outlived the daemon: it keeps its interface (the same one: its connections go on), and
# the new table, which replaced the killed daemon's in one commit, has its chain.
grep -q "egress: 1 sandbox(es) taken back running have their interfaces and rules" "$T/daemon.log" &&
        ok "... and took the running sandbox's interface back, with its rules in a new table" ||
        nok "... and took the running sandbox's interface back, with its rules in a new table"
is "$(ifindex "sx-${K#sbx-}")" "$kidx" "... the same interface (ifindex $kidx), not a new one"
KIF=sx-${K#sbx-}
wait_until 10 sh -c "ip link show '$KIF' >/dev/null 2>&1"
now=$(ip -o link | sed -n 's/^[0-9]*: \(sx-[0-9a-f]*\)@.*/\1/p' | sort)
is "$now" "$KIF" "after the new start only the restored sandbox's interface is there (the throwaway's is gone)"
rules=$(nft list table inet sandboxd)
is "$(printf '%s\n' "$rules" | grep -c 'chain sx_[0-9a-f]* {')" 1 "... and only its chain"
is "$(sbx_probe keep 198.51.100.7 80)" "reached remote 198.51.100.7:80" "the restored sandbox has its egress again"
like "$(sbx_probe keep 198.51.100.8 80)" "^refused" "... and its allow list"
# A second daemon (its own state directory, cgroup and socket) in the same network namespace: no
# egress of its own, and nothing of the first's removed at its start.
mkdir -p "$T/state2"
# shellcheck disable=SC2046
"$SANDBOXD" --listen "$T/sock2" --state-dir "$T/state2" --cgroup-root "$CG-2" --pool-size 0 $(_stop_opt) >"$T/daemon2.log" 2>&1 &
D2=$!
wait_until 15 test -S "$T/sock2" || diag "$(tail -5 "$T/daemon2.log")"
r=$(timeout 30 python3 "$TESTS_DIR/client.py" "$T/sock2" call '{"op":"hello"}')
is "$(jget "$r" .capabilities.egress.available)" false "a second daemon in the same network namespace gives no egress"
like "$(jget "$r" .capabilities.egress.reason)" "another sandboxd gives egress in this network namespace" "... and says why"
kill -TERM "$D2" 2>/dev/null
wait "$D2" 2>/dev/null
D2=
rmdir "$CG-2/sandboxes" "$CG-2/daemon" "$CG-2" 2>/dev/null
is "$(ip -o link | sed -n 's/^[0-9]*: \(sx-[0-9a-f]*\)@.*/\1/p')" "$KIF" "... and the first's interface is left alone"
is "$(sbx_probe keep 198.51.100.7 80)" "reached remote 198.51.100.7:80" "... and so is its sandbox's way out"
# A stop that leaves the sandbox running leaves its way out (interface, table, chain) for the next
# daemon; that one (with --stop-sandboxes) stops it, starts its init anew, and makes a new one.
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID"
DAEMON_PID=
is "$(ifindex "$KIF")" "$kidx" "a stop that leaves the sandbox running leaves its interface"
check "... and its chain" sh -c "nft list table inet sandboxd | grep -q 'chain sx_${K#sbx-}'"
POOL_SIZE=1 start_daemon --config "$T/sandboxd.conf" || exit 0
wait_until 10 sh -c "ip link show '$KIF' >/dev/null 2>&1"
n=$(ifindex "$KIF")
if [ -n "$n" ] && [ "$n" != "$kidx" ]; then
        ok "a daemon that stops sandboxes makes its init and interface anew (ifindex $kidx -> $n)"
else
        nok "a daemon that stops sandboxes makes its init and interface anew (ifindex $kidx -> $n)"
fi
is "$(sbx_probe keep 198.51.100.7 80)" "reached remote 198.51.100.7:80" "... and it has its egress"
is "$(nft list table inet sandboxd | grep -c 'chain sx_[0-9a-f]* {')" 1 "... one chain, its own"
stop_daemon
is "$(ip -o link | grep -c ' sx-')" 0 "a daemon stopped with SIGTERM removes its interfaces"
check "... and its table" sh -c "! nft list table inet sandboxd 2>/dev/null"
