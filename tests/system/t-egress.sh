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
# Egress by name (issue #32), with the daemon's resolver set to the test's DNS answerer
# (egress_dns in the packaged sandboxd.conf, then a restart): an allowed name resolves in a
# sandbox and is reached; a name not on the list is REFUSED and its address not reached;
# sandboxctl network cuts an open connection to what the new list removes and says so, while one
# it keeps goes on; after systemctl restart the changed list is still in force.
# Names matched on SNI (issue #32, daemon/sandbox/egress-sni.c): good.test and evil.test resolve to
# one remote address (198.51.100.9, where tests/egress-sni-remote.py serves TLS on 443 and HTTP on
# 80 and logs what reached it); a sandbox created with --allow-sni good.test gets through the
# daemon's check with Host good.test and with a ClientHello's server_name good.test, while
# evil.test on the same address is reset and never reaches the remote; 8 MiB each way arrive
# intact through the check (the kernel forwards an admitted connection); sandboxctl inspect shows
# the check's counts.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
ctl=$(command -v sandboxctl)
# The unit may not load modules (ProtectKernelModules=yes): what egress needs, loaded first, as an
# administrator would list them in modules-load.d.
for m in veth nf_tables nft_ct nft_nat nft_masq nft_reject_inet nft_chain_nat nf_conntrack nf_nat nf_conntrack_netlink \
	 nft_compat xt_NFQUEUE nfnetlink_queue; do
	modprobe "$m" 2>/dev/null
done

ip link set lo up
unshare --net sleep infinity &
rpid=$!
for i in $(seq 50); do [ "$(readlink /proc/$rpid/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.1; done
in_remote() { nsenter --net=/proc/$rpid/ns/net "$@"; }
ip link add up0 type veth peer name eth0 netns "$rpid" && ip addr add 192.0.2.1/24 dev up0 && ip link set up0 up
in_remote sh -c 'ip link set lo up && ip link set eth0 up && ip addr add 192.0.2.2/24 dev eth0 &&
	ip addr add 198.51.100.7/32 dev lo && ip addr add 198.51.100.8/32 dev lo && ip addr add 198.51.100.53/32 dev lo && ip addr add 198.51.100.9/32 dev lo &&
	ip addr add 169.254.169.254/32 dev lo && ip route add default via 192.0.2.1'
ip route add 198.51.100.0/24 via 192.0.2.2 && ip route add 169.254.169.254/32 via 192.0.2.2
sysctl -qw net.ipv4.conf.up0.forwarding=1
[[ "$(ip route get 198.51.100.7)" == *"dev up0"* && "$(ip route get 169.254.169.254)" == *"dev up0"* ]]
ok $? "198.51.100.7 and 169.254.169.254 are routed into the test's remote namespace"
nsenter --net=/proc/$rpid/ns/net python3 "$here/../egress-remote.py" 198.51.100.7:80 198.51.100.7:8080 198.51.100.8:80 169.254.169.254:80 \
	198.51.100.7:9000/echo 198.51.100.7:9001/echo --dns 198.51.100.53 --ttl 300 \
	--name remote.test=198.51.100.7 --name other.test=198.51.100.8 \
	--name good.test=198.51.100.9 --name evil.test=198.51.100.9 >/tmp/egress-remote.out 2>&1 &
spid=$!
# The SNI section's server (TLS with a throwaway certificate, HTTP) on 198.51.100.9.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=good.test \
	-keyout /tmp/egress-sni-key.pem -out /tmp/egress-sni-cert.pem 2>/dev/null
nsenter --net=/proc/$rpid/ns/net python3 "$here/../egress-sni-remote.py" 198.51.100.9 \
	--cert /tmp/egress-sni-cert.pem --key /tmp/egress-sni-key.pem >/tmp/egress-sni.out 2>&1 &
snipid=$!
for i in $(seq 100); do grep -q ready /tmp/egress-remote.out 2>/dev/null && break; sleep 0.1; done
# The packaged daemon's configuration file (sandboxd --help names it): its resolver becomes the
# remote's DNS answerer; the cleanup puts the file back.
conf=$(sandboxd --help 2>&1 | sed -n 's/.*--config FILE.*(default \(.*\)).*/\1/p')
cp -p "$conf" /tmp/egress-sandboxd.conf.orig
printf 'egress_dns = 198.51.100.53\n' >>"$conf"
systemctl restart sandboxd.service
ok $? "sandboxd restarted with egress_dns = 198.51.100.53 in $conf"
cleanup() {
	cp -p /tmp/egress-sandboxd.conf.orig "$conf" && systemctl try-restart sandboxd.service
	kill "$spid" "$snipid" "$rpid" 2>/dev/null
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
# dnsq NAME: what the sandbox's resolver (the relay, 127.0.0.53) answers for NAME's A record:
# "rcode N ADDRESS..." or "timeout".
dnsq='import random, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
q = struct.pack("!HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in sys.argv[1].split(".")) + b"\0\0\1\0\1"
s.sendto(q, ("127.0.0.53", 53))
try:
    m = s.recv(4096)
except socket.timeout:
    sys.exit(print("timeout"))
an, i = struct.unpack("!H", m[6:8])[0], len(q)
addrs = []
for _ in range(an):
    t, c, ttl, n = struct.unpack("!HHIH", m[i + 2:i + 12])
    if t == 1:
        addrs.append(socket.inet_ntoa(m[i + 12:i + 16]))
    i += 12 + n
print(" ".join(["rcode", str(m[3] & 15)] + addrs))'
sdnsq() { "$ctl" run --sandbox "$1" -- python3 -c "$dnsq" "$2" 2>&1; }

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
# A sandbox's own chain, sx_<id>.
chains() { nft list table inet sandboxd 2>/dev/null | grep -cE '^\s*chain sx_[0-9a-f]+ \{'; }
for i in $(seq 100); do [ "$(chains)" = 2 ] && break; sleep 0.1; done
[ "$(chains)" = 2 ]
ok $? "a throwaway run with egress is in flight: two chains"
pid=$(systemctl show -p MainPID --value sandboxd.service)
ifindex() { ip -o link show dev "$1" 2>/dev/null | cut -d: -f1; }
kidx=$(ifindex "sx-${id#sbx-}")
systemctl kill -s KILL sandboxd.service
kill "$runner" 2>/dev/null
for i in $(seq 300); do
	npid=$(systemctl show -p MainPID --value sandboxd.service)
	[ -n "$npid" ] && [ "$npid" != 0 ] && [ "$npid" != "$pid" ] && ip link show "sx-${id#sbx-}" >/dev/null 2>&1 &&
		[ "$(chains)" = 1 ] && break
	sleep 0.1
done
[ "$npid" != "$pid" ] && [ "$(ip -o link | grep -c ' sx-')" = 1 ]
ok $? "after SIGKILL: systemd restarted sandboxd; one interface is there, the restored sandbox's"
[ "$(chains)" = 1 ] && nft list table inet sandboxd | grep -q "chain sx_${id#sbx-} {"
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

# ---- Egress by name, and a list changed live ------------------------------------------------
# hold SANDBOX PORT: a process in the sandbox keeps a connection to the echo server on
# 198.51.100.7:PORT, a round trip every 0.2 s; /work/hold-PORT.log says "up N" or, once the
# connection fails, "down ERRNO" (104: reset).
hold_py='import errno, os, socket, sys, time
port = int(sys.argv[1])
log = "/work/hold-%d.log" % port
def say(s):
    with open(log + ".new", "w") as f:
        f.write(s + "\n")
    os.rename(log + ".new", log)
try:
    s = socket.create_connection(("198.51.100.7", port), timeout=5)
    n = 0
    while True:
        s.sendall(b"ping\n")
        if s.recv(64) != b"ping\n":
            raise OSError(errno.EPROTO, "bad echo")
        n += 1
        say("up %d" % n)
        time.sleep(0.2)
except OSError as e:
    say("down %s" % e.errno)'
hold() { "$ctl" run --sandbox "$1" -- sh -c "setsid python3 -c '$hold_py' $2 >/dev/null 2>&1 </dev/null &"; }
hold_state() { "$ctl" cat "$1" "/work/hold-$2.log" 2>/dev/null; }
wait_hold() { # SANDBOX PORT up|down: bounded (TCG is slow)
	for _ in $(seq 100); do [[ "$(hold_state "$1" "$2")" == "$3 "* ]] && return 0; sleep 0.2; done
	return 1
}
nm=$("$ctl" create --allow remote.test:80 --allow 198.51.100.7:9000/tcp --allow 198.51.100.7:9001/tcp 2>&1)
ok $? "create --allow remote.test:80 and the echo ports 9000, 9001 of 198.51.100.7"
got=$(sdnsq "$nm" remote.test)
[ "$got" = "rcode 0 198.51.100.7" ]
ok $? "the allowed name resolves through the sandbox's relay ($got)"
got=$(sprobe "$nm" remote.test 80)
[ "$got" = "reached remote 198.51.100.7:80" ]
ok $? "... and is reached by name ($got)"
got=$(sdnsq "$nm" other.test)
[ "$got" = "rcode 5" ]
ok $? "a name not on the list is REFUSED ($got)"
[[ "$(sprobe "$nm" 198.51.100.8 80)" == refused* ]]
ok $? "... and its address is not reached"
hold "$nm" 9000
hold "$nm" 9001
wait_hold "$nm" 9000 up && wait_hold "$nm" 9001 up
ok $? "connections to the echo ports 9000 and 9001 are up"
out=$("$ctl" network "$nm" --allow remote.test:80 --allow 198.51.100.7:9001/tcp 2>&1)
grep -qE '^ *connections cut: +1$' <<<"$out"
ok $? "sandboxctl network without :9000 cuts one connection and says so"
diag "$(grep 'connections cut' <<<"$out")"
wait_hold "$nm" 9000 down && [ "$(hold_state "$nm" 9000)" = "down 104" ]
ok $? "the program on :9000 gets a reset ($(hold_state "$nm" 9000))"
a=$(hold_state "$nm" 9001)
sleep 1
b=$(hold_state "$nm" 9001)
[[ "$a" == "up "* && "$b" == "up "* && "${b#up }" -gt "${a#up }" ]]
ok $? "the one to :9001, still allowed, goes on ($a, then $b)"
systemctl restart sandboxd.service
r=$(call "{\"op\":\"inspect\",\"sandbox\":\"$nm\"}")
[ "$(jqr '.sandbox.network.egress.allow | join(" ")' "$r")" = "remote.test:80 198.51.100.7:9001/tcp" ]
ok $? "after systemctl restart the sandbox keeps its changed list"
[[ "$(sprobe "$nm" 198.51.100.7 9000)" == refused* ]]
ok $? "... in force: :9000 is refused"
got=$(sprobe "$nm" remote.test 80)
[ "$got" = "reached remote 198.51.100.7:80" ] && [ "$(sdnsq "$nm" other.test)" = "rcode 5" ]
ok $? "... remote.test is reached ($got), other.test still REFUSED"
"$ctl" destroy "$nm" >/dev/null 2>&1
for _ in $(seq 100); do [ "$(ip -o link | grep -c ' sx-')" = 0 ] && break; sleep 0.1; done
[ "$(ip -o link | grep -c ' sx-')" = 0 ]
ok $? "destroy it: no interface left"

# ---- Names matched on SNI -------------------------------------------------------------------
# sni SANDBOX MODE ARGS...: tests/egress-sni-client.py in the sandbox ("reached ..." or "refused ...").
client=$(cat "$here/../egress-sni-client.py")
sni() { local s=$1; shift; "$ctl" run --sandbox "$s" -- python3 -c "$client" "$@" 2>&1; }
# seen WHAT: lines of the SNI remote's log, since the last mark, that begin with WHAT.
mark() { smark=$(wc -l </tmp/egress-sni.out); }
seen() { tail -n +"$((smark + 1))" /tmp/egress-sni.out | grep -c "^$1"; }
grep -q ready /tmp/egress-sni.out
ok $? "the SNI remote listens on 198.51.100.9 (TLS 443, HTTP 80)"
sn=$("$ctl" create --allow-sni good.test 2>&1)
ok $? "create --allow-sni good.test"
mark
got=$(sni "$sn" http good.test good.test)
[ "$got" = "reached http good.test hi" ] && [ "$(seen 'http good.test')" = 1 ]
ok $? "HTTP with Host good.test is admitted to the remote and answered ($got)"
mark
got=$(sni "$sn" http evil.test good.test)
[[ "$got" == refused* ]] && [ "$(seen http)" = 0 ]
ok $? "HTTP with Host evil.test to the same address is reset, and never reaches the remote ($got)"
mark
got=$(sni "$sn" tls good.test good.test)
[ "$got" = "reached tls good.test hi" ] && [ "$(seen 'tls good.test')" = 1 ]
ok $? "TLS with server_name good.test gets through ($got)"
mark
got=$(sni "$sn" tls evil.test good.test)
[[ "$got" == refused* ]] && [ "$(seen tls)" = 0 ]
ok $? "TLS with server_name evil.test to the same address is reset, and never reaches the remote ($got)"
got=$(sni "$sn" bulk http good.test good.test 8)
[[ "$got" == "intact "* ]]
ok $? "8 MiB each way through the admitted connection arrive intact ($got s)"
got=$("$ctl" inspect "$sn" 2>&1 | grep 'sni connections')
grep -qE 'sni connections: +3 admitted, 2 refused' <<<"$got"
ok $? "sandboxctl inspect shows the check's counts:${got#*:}"
diag "the SNI remote saw: $(tr '\n' ';' </tmp/egress-sni.out)"
"$ctl" destroy "$sn" >/dev/null 2>&1
done_testing
