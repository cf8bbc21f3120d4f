#!/bin/bash
# Egress under the packaged units (issue #21, "Egress"): the daemon of sandboxd.service gives a
# sandbox an allow list through its veth pair and the inet sandboxd table; the test makes its own
# "remote" network namespace behind a veth pair of the VM (198.51.100.0/24 and 169.254.169.254
# routed into it, checked first). The allowed address and port is reached, another port and the
# link-local metadata address are refused, root inside cannot add a route, destroy leaves no
# interface or chain, and after systemctl kill -s KILL (the sandboxes run on in their scopes) the
# restarted daemon took the running sandbox back with its interface (the same one) and replaced
# the killed one's table, a throwaway run's chain with it, by its own with the sandbox's chain;
# a systemctl restart keeps it too.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
ctl=$(command -v sandboxctl)
# The unit may not load modules (ProtectKernelModules=yes): what egress needs, loaded first, as an
# administrator would list them in modules-load.d.
for m in veth nf_tables nft_ct nft_nat nft_masq nft_reject_inet nft_chain_nat nf_conntrack nf_nat; do
	modprobe "$m" 2>/dev/null
done

ip link set lo up
unshare --net sleep infinity &
rpid=$!
for i in $(seq 50); do [ "$(readlink /proc/$rpid/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.1; done
in_remote() { nsenter --net=/proc/$rpid/ns/net "$@"; }
ip link add up0 type veth peer name eth0 netns "$rpid" && ip addr add 192.0.2.1/24 dev up0 && ip link set up0 up
in_remote sh -c 'ip link set lo up && ip link set eth0 up && ip addr add 192.0.2.2/24 dev eth0 &&
	ip addr add 198.51.100.7/32 dev lo && ip addr add 169.254.169.254/32 dev lo && ip route add default via 192.0.2.1'
ip route add 198.51.100.0/24 via 192.0.2.2 && ip route add 169.254.169.254/32 via 192.0.2.2
sysctl -qw net.ipv4.conf.up0.forwarding=1
[[ "$(ip route get 198.51.100.7)" == *"dev up0"* && "$(ip route get 169.254.169.254)" == *"dev up0"* ]]
ok $? "198.51.100.7 and 169.254.169.254 are routed into the test's remote namespace"
nsenter --net=/proc/$rpid/ns/net python3 "$here/../egress-remote.py" 198.51.100.7:80 198.51.100.7:8080 169.254.169.254:80 >/tmp/egress-remote.out 2>&1 &
spid=$!
for i in $(seq 100); do grep -q ready /tmp/egress-remote.out 2>/dev/null && break; sleep 0.1; done
cleanup() {
	kill "$spid" "$rpid" 2>/dev/null
	ip link del up0 2>/dev/null
	ip route del 198.51.100.0/24 2>/dev/null
	ip route del 169.254.169.254/32 2>/dev/null
}
trap cleanup EXIT

probe='import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print("reached", s.recv(4096).split(b"\r\n\r\n", 1)[-1].decode().strip())
except OSError as e:
    print("refused", e.errno)'
sprobe() { local s=$1; shift; "$ctl" run --sandbox "$s" -- python3 -c "$probe" "$@" 2>&1; }

r=$(call '{"op":"hello"}')
[ "$(jqr .capabilities.egress.available "$r")" = true ]
ok $? "hello: the packaged daemon can give egress"
diag "egress: $(jq -c .capabilities.egress <<<"$r")"
id=$("$ctl" create --allow 198.51.100.7:80 2>&1)
ok $? "create --allow 198.51.100.7:80"
got=$(sprobe "$id" 198.51.100.7 80)
[ "$got" = "reached remote 198.51.100.7:80" ]
ok $? "the allowed address and port is reached"
diag "got: $got"
[[ "$(sprobe "$id" 198.51.100.7 8080)" == refused* ]]
ok $? "another port is refused"
[[ "$(python3 -c "$probe" 169.254.169.254 80)" == "reached remote 169.254.169.254:80" ]]
ok $? "the VM itself reaches the remote's link-local address"
e=$("$ctl" create --egress all --user root 2>&1)
[[ "$(sprobe "$e" 169.254.169.254 80)" == refused* ]]
ok $? "a sandbox with egress all is refused the link-local metadata address"
out=$("$ctl" run --sandbox "$e" -- ip route add 198.51.100.0/24 via 10.200.0.1 2>&1)
[ $? != 0 ] && [[ "$out" == *"Operation not permitted"* ]]
ok $? "root inside cannot add a route"
"$ctl" destroy "$e" >/dev/null 2>&1
# The interface and chain go in a child of the daemon after destroy's answer: a bounded wait.
gone() { ! ip link show "sx-${e#sbx-}" >/dev/null 2>&1 && ! nft list table inet sandboxd | grep -q "sx_${e#sbx-}"; }
for _ in $(seq 100); do gone && break; sleep 0.1; done
gone
ok $? "after destroy: no interface or chain of it"

"$ctl" run --egress all -- sleep 120 >/dev/null 2>&1 &
runner=$!
for i in $(seq 100); do [ "$(nft list table inet sandboxd 2>/dev/null | grep -c 'chain sx_')" = 2 ] && break; sleep 0.1; done
[ "$(nft list table inet sandboxd 2>/dev/null | grep -c 'chain sx_')" = 2 ]
ok $? "a throwaway run with egress is in flight: two chains"
pid=$(systemctl show -p MainPID --value sandboxd.service)
ifindex() { ip -o link show dev "$1" 2>/dev/null | cut -d: -f1; }
kidx=$(ifindex "sx-${id#sbx-}")
systemctl kill -s KILL sandboxd.service
kill "$runner" 2>/dev/null
for i in $(seq 300); do
	npid=$(systemctl show -p MainPID --value sandboxd.service)
	[ -n "$npid" ] && [ "$npid" != 0 ] && [ "$npid" != "$pid" ] && ip link show "sx-${id#sbx-}" >/dev/null 2>&1 &&
		[ "$(nft list table inet sandboxd 2>/dev/null | grep -c 'chain sx_')" = 1 ] && break
	sleep 0.1
done
[ "$npid" != "$pid" ] && [ "$(ip -o link | grep -c ' sx-')" = 1 ]
ok $? "after SIGKILL: systemd restarted sandboxd; one interface is there, the restored sandbox's"
[ "$(nft list table inet sandboxd | grep -c 'chain sx_')" = 1 ] && nft list table inet sandboxd | grep -q "chain sx_${id#sbx-}"
ok $? "... and one chain, its own: the throwaway run's went with the killed daemon's table"
got=$(sprobe "$id" 198.51.100.7 80)
[ "$got" = "reached remote 198.51.100.7:80" ]
ok $? "the restored sandbox reaches its allowed address again"
[ -n "$kidx" ] && [ "$(ifindex "sx-${id#sbx-}")" = "$kidx" ]
ok $? "... through the same interface (ifindex $kidx): the sandbox ran on, and so did its way out"
systemctl restart sandboxd.service
got=$(sprobe "$id" 198.51.100.7 80)
[ "$got" = "reached remote 198.51.100.7:80" ] && [ "$(ifindex "sx-${id#sbx-}")" = "$kidx" ]
ok $? "after systemctl restart: the same interface, the allowed address reached ($got)"
"$ctl" destroy "$id" >/dev/null 2>&1
for _ in $(seq 100); do [ "$(ip -o link | grep -c ' sx-')" = 0 ] && break; sleep 0.1; done
[ "$(ip -o link | grep -c ' sx-')" = 0 ]
ok $? "destroy it: no interface left"
done_testing
