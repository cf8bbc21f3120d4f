#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# SNI matching of egress names (an allow entry {"name": ..., "match": "sni"}; daemon/sandbox/
# egress-sni.c, core/tls-hello.c), in the network of tests/egress-lib.sh, where good.test and
# evil.test resolve to the same remote address (one server there: TLS on 443 that records the
# server_name it got, HTTP on 80 that records the Host, UDP on 443). Shown: the entry round-trips
# through inspect; a TLS connection with server_name good.test reaches the remote and data flows
# both ways; one to the same address with server_name evil.test is reset and never reaches it;
# an HTTP request with Host good.test goes through, Host evil.test is reset; a ClientHello with
# Encrypted Client Hello is reset; QUIC (UDP 443) is refused by the chain; a few MiB each way
# arrive intact through the check, over TLS and HTTP (with the time beside a direct transfer); a
# connection that sends nothing is reset after the peek's time; entries that are no entry are
# refused naming the field; after SIGKILL of the daemon and a new start, the sandbox's rules
# redirect to the new daemon's relay and SNI matching still holds.
if [ -z "${EGRESS_TEST_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
        EGRESS_TEST_NETNS=1 exec unshare --net -- "$BASH" "$0" "$@"
fi
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

. "$TESTS_DIR/egress-lib.sh"
command -v openssl >/dev/null || skip_all "openssl is not installed (a certificate for the remote's TLS server)"
SNI_ADDR=198.51.100.9
egress_remote --name good.test=$SNI_ADDR --name evil.test=$SNI_ADDR --name '*.cdn.test=198.51.100.9' --name far.test=203.0.113.5
in_remote ip addr add $SNI_ADDR/32 dev lo
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=good.test -keyout "$T/key.pem" -out "$T/cert.pem" 2>/dev/null
nsenter --net=/proc/$RPID/ns/net python3 "$TESTS_DIR/egress-sni-remote.py" $SNI_ADDR --cert "$T/cert.pem" --key "$T/key.pem" \
        >"$T/sni.out" 2>&1 &
HSERVER="$HSERVER $!"
wait_until 10 grep -q ready "$T/sni.out" || diag "the SNI remote: $(cat "$T/sni.out")"

printf 'egress_dns = 198.51.100.53\n' >"$T/sandboxd.conf"
POOL_SIZE=0 start_daemon --config "$T/sandboxd.conf" || exit 0

CLIENT=$(cat "$TESTS_DIR/egress-sni-client.py")
sni() { local s=$1; shift; ctl run --sandbox "$s" -- python3 -c "$CLIENT" "$@"; }
# What the remote got since the mark: seen WHAT.
mark() { MARK=$(wc -l <"$T/sni.out"); }
seen() { tail -n +"$((MARK + 1))" "$T/sni.out" | grep -c "^$1" ; }
sni_table() { nft list table ip sandboxd_sni >/dev/null 2>&1; }
no_sni_table() { ! sni_table; }

# The table that queues what is being checked is made at the start (to know it can be), and
# removed at once when no sandbox taken back needs it.
check "a daemon with no sandbox matched on SNI leaves no table ip sandboxd_sni" wait_until 10 no_sni_table

# ---- The entry --------------------------------------------------------------------------------
r=$(rpc '{"op":"create","best_effort":true,"network":{"egress":{"allow":[{"name":"Good.test","match":"sni"},"remote.test:80",{"name":"*.cdn.test","port":443,"match":"sni"},{"name":"other.test","port":8080,"proto":"tcp"},{"name":"far.test","port":80,"match":"sni"}]}}}')
S=$(jget "$r" .sandbox.id)
like "$S" "^sbx-" "create with match-sni entries"
r=$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$S\"}")
is "$(jget "$r" '.sandbox.network.egress.allow | tojson')" \
        '[{"name":"good.test","match":"sni"},"remote.test:80",{"name":"*.cdn.test","port":443,"match":"sni"},"other.test:8080/tcp",{"name":"far.test","port":80,"match":"sni"}]' \
        "inspect: the entries as given (lower case; an object without match is given back as a string)"
is "$(jget "$(cat "$T/state/sandboxes/$S/meta.json" 2>/dev/null || echo '{}')" '.network.egress.allow[0].match')" sni \
        "the record on disk keeps the match (a restart restores it)"
like "$(nft list chain inet sandboxd "sx_${S#sbx-}")" "daddr @sx_${S#sbx-}_0 tcp dport \{ 80, 443 \} ct mark set ct mark \| 0x00010000 accept" \
        "its chain marks new connections to good.test's addresses on 80 and 443 as being checked"
like "$(nft list table ip sandboxd_sni)" "goto check" "... and the table ip sandboxd_sni hands what is being checked to the queue"

# ---- TLS ----------------------------------------------------------------------------------------
mark
is "$(sni "$S" tls good.test good.test ping)" "reached tls good.test ping" \
        "TLS with server_name good.test reaches the remote, and its answer comes back"
is "$(seen 'tls good.test')" 1 "... the remote saw server_name good.test"
mark
like "$(sni "$S" tls evil.test good.test)" "^refused" "TLS to the same address with server_name evil.test is refused"
is "$(seen tls)" 0 "... and never reached the remote"
like "$(sni "$S" tls evil.test $SNI_ADDR)" "^refused" "... also by address"
like "$(sni "$S" ech good.test good.test)" "^refused" "a ClientHello with Encrypted Client Hello (0xfe0d) is refused"
is "$(seen tls)" 0 "... and never reached the remote"
is "$(sni "$S" tls a.b.cdn.test a.b.cdn.test)" "reached tls a.b.cdn.test hi" "a wildcard entry admits a name below it"
like "$(sni "$S" tls x.cdn.test good.test)" "^reached" "... on an address of good.test's too: each name's own set, and the wildcard's holds it"

# sandboxctl create --allow-sni
C=$(ctl create --best-effort --allow-sni good.test --allow-sni '*.cdn.test:443' --allow remote.test:80)
like "$(ctl inspect "$C")" "egress to good\.test \(sni\), \*\.cdn\.test:443 \(sni\), remote\.test:80" \
        "sandboxctl create --allow-sni NAME[:PORT]: inspect shows the entries"
is "$(sni "$C" tls good.test good.test)" "reached tls good.test hi" "... good.test is reached"
like "$(sni "$C" tls evil.test good.test)" "^refused" "... evil.test on its address is not"
like "$(ctl inspect "$C")" "sni connections: +1 admitted, 1 refused, 0 being checked" "sandboxctl inspect shows the check's counts"
like "$(ctl create --best-effort --allow-sni good.test:99999 2>&1)" "port must be 1-65535" "--allow-sni with port 99999 is refused"
ctl destroy "$C" >/dev/null

# ---- HTTP ---------------------------------------------------------------------------------------
mark
is "$(sni "$S" http good.test good.test)" "reached http good.test hi" "HTTP with Host good.test reaches the remote"
is "$(sni "$S" http good.test:80 good.test)" "reached http good.test:80 hi" "... and with Host good.test:80"
like "$(sni "$S" http evil.test good.test)" "^refused" "HTTP to the same address with Host evil.test is refused"
is "$(seen 'http evil')" 0 "... and never reached the remote"
like "$(sni "$S" http a.cdn.test good.test)" "^refused" "the wildcard entry is for 443 only: Host a.cdn.test on 80 is refused"
like "$(sni "$S" http far.test far.test)" "^reached HTTP/1.0 200" "far.test (another address) with Host far.test is reached"
like "$(sni "$S" http good.test 203.0.113.5)" "^refused" \
        "Host good.test to far.test's address is refused: an allowed name, but not an address good.test resolved to"

# ---- QUIC, other ports, a silent client -----------------------------------------------------
mark
like "$(sni "$S" udp good.test)" "^refused" "UDP 443 (QUIC) to good.test is refused"
is "$(seen udp)" 0 "... and never reached the remote"
like "$(nft list chain inet sandboxd "sx_${S#sbx-}")" "udp dport 443 counter packets [1-9]" "... by its chain's rule"
like "$(sbx_probe "$S" $SNI_ADDR 8080)" "^refused" "another TCP port of good.test's address is refused"
t0=$(date +%s)
like "$(ctl run --sandbox "$S" -- python3 -c '
import socket, time
s = socket.create_connection(("good.test", 443), timeout=20)
try:
    time.sleep(7)
    s.sendall(b"GET / HTTP/1.0\r\nHost: good.test\r\n\r\n")
    print("reached", s.recv(1))
except OSError as e:
    print("refused", e.errno)')" "^refused 104" "a connection that sends nothing for 7 s is reset at its first bytes"
t1=$(date +%s)
if [ $((t1 - t0)) -ge 6 ] && [ $((t1 - t0)) -le 14 ]; then ok "... at once, its 5 s past ($((t1 - t0)) s)"; else nok "... at once, its 5 s past ($((t1 - t0)) s)"; fi
r=$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$S\"}")
is "$(jget "$r" '.sandbox.network.sni | "\(.admitted >= 5) \(.refused >= 6) \(.checking)"')" "true true 0" \
        "inspect counts the checked connections: admitted, refused, being checked"

# ---- Throughput ---------------------------------------------------------------------------------
for kind in tls http; do
        out=$(sni "$S" bulk $kind good.test good.test 8)
        like "$out" "^intact" "8 MiB each way over $kind through the check arrive intact"
        direct=$(python3 -c "$CLIENT" bulk $kind good.test $SNI_ADDR 8)
        diag "$kind, 16 MiB in all: through the check ${out#intact } s; from the host, direct, ${direct#intact } s"
done
# Beside a sandbox that reaches the same server by address (its forward chain, no relay).
D=$(ctl create --best-effort --allow $SNI_ADDR:80/tcp)
out=$(sni "$S" blast good.test good.test 1024)
like "$out" "^sent" "1 GiB up through the check"
direct=$(sni "$D" blast good.test $SNI_ADDR 1024)
like "$direct" "^sent" "... and by address, without the relay"
diag "1 GiB of zeros up over HTTP: through the check ${out#sent } MiB/s, by address ${direct#sent } MiB/s"
out=$(sni "$S" connects good.test good.test 200)
like "$out" "^connected" "200 connections one after the other through the check"
direct=$(sni "$D" connects good.test $SNI_ADDR 200)
diag "connections a second: through the check ${out#connected }, by address ${direct#connected }"
ctl destroy "$D" >/dev/null

# ---- A new list, live -------------------------------------------------------------------------
HOLD='
import errno, socket, ssl, time
def say(line):
    with open("/work/hold.tmp", "w") as f:
        f.write(line + "\n")
    import os; os.rename("/work/hold.tmp", "/work/hold.log")
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
try:
    t = ctx.wrap_socket(socket.create_connection(("good.test", 443), timeout=3), server_hostname="good.test")
    n = 0
    while True:
        t.sendall(b"echo x\n")
        if not t.recv(64):
            raise OSError(errno.ECONNABORTED, "closed")
        n += 1
        say("up %d" % n)
        time.sleep(0.2)
except OSError as e:
    say("down %s" % e.errno)'
ctl run --sandbox "$S" -- sh -c "setsid python3 -c '$HOLD' >/dev/null 2>&1 </dev/null &"
hold_state() { ctl cat "$S" /work/hold.log 2>/dev/null; }
hold_up() { [[ "$(hold_state)" == "up "* ]]; }
hold_down() { [[ "$(hold_state)" == "down "* ]]; }
check "a TLS connection to good.test is held open through the check" wait_until 20 hold_up
r=$(rpc "{\"op\":\"sandbox.update\",\"sandbox\":\"$S\",\"network\":{\"egress\":{\"allow\":[{\"name\":\"*.cdn.test\",\"port\":443,\"match\":\"sni\"}]}}}")
is "$(jget "$r" .ok)" true "sandbox.update to a list without good.test"
is "$(jget "$r" .connections_cut)" 1 "... cuts one connection: good.test's, through the check"
check "... which its program sees fail" wait_until 10 hold_down
like "$(sni "$S" tls good.test good.test)" "^refused" "a new TLS connection to good.test is refused"
is "$(sni "$S" tls x.cdn.test $SNI_ADDR)" "reached tls x.cdn.test hi" \
        "x.cdn.test is reached on the address its name resolved to before (kept in its set at its new index)"
like "$(nft list chain inet sandboxd "sx_${S#sbx-}")" "daddr @sx_${S#sbx-}_0 tcp dport 443 ct mark set ct mark \| 0x00010000 accept" "the chain follows the new list"
r=$(rpc "{\"op\":\"sandbox.update\",\"sandbox\":\"$S\",\"network\":{\"egress\":{\"allow\":[\"remote.test:80\"]}}}")
is "$(jget "$r" .ok)" true "sandbox.update to a list of a plain name only"
is "$(nft list chain inet sandboxd "sx_${S#sbx-}" | grep -c '| 0x00010000 accept')" 0 "... no connection is checked any more"
like "$(nft list chain inet sandboxd "sx_${S#sbx-}")" "ct mark & 0x00010000 == 0x00010000 counter packets [0-9]+ bytes [0-9]+ reject with tcp reset" \
        "... and one still marked as being checked is reset (the table that queued it may go)"

# ---- The table's life ---------------------------------------------------------------------------
# Its presence slows every egress create (a second base chain on the forward hook): it is there
# only while a sandbox has a match-sni entry, and SNI_TABLE_LINGER_USEC (5 s) after.
check "with no sandbox left with a match-sni entry, the table ip sandboxd_sni goes (seconds after)" wait_until 20 no_sni_table
P=$(ctl create --best-effort --allow $SNI_ADDR:80/tcp)
like "$P" "^sbx-" "a sandbox with egress and no match-sni entry"
check "... does not bring the table back" no_sni_table
is "$(sni "$P" http evil.test $SNI_ADDR)" "reached http evil.test hi" "... and reaches its address unchecked"
E=$(ctl create --best-effort --allow-sni good.test)
check "a sandbox created with a match-sni entry makes the table again, before its rules" sni_table
is "$(sni "$E" tls good.test good.test anew)" "reached tls good.test anew" "... and its connection to good.test is checked and admitted"
like "$(sni "$E" tls evil.test good.test)" "^refused" "... and evil.test refused"
ctl destroy "$E" >/dev/null
ctl destroy "$P" >/dev/null
check "... the table goes again after that sandbox" wait_until 20 no_sni_table
r=$(rpc "{\"op\":\"sandbox.update\",\"sandbox\":\"$S\",\"network\":{\"egress\":{\"allow\":[{\"name\":\"good.test\",\"match\":\"sni\"},\"remote.test:80\",{\"name\":\"*.cdn.test\",\"port\":443,\"match\":\"sni\"}]}}}")
is "$(jget "$r" .ok)" true "... and back to match-sni entries"
check "... which makes the table again" sni_table
is "$(sni "$S" tls good.test good.test back)" "reached tls good.test back" "... good.test is reached again"

# ---- Entries refused ----------------------------------------------------------------------------
bad() { # ENTRY_JSON FIELD PATTERN WHAT
        local r
        r=$(rpc "{\"op\":\"create\",\"best_effort\":true,\"network\":{\"egress\":{\"allow\":[$1]}}}")
        is "$(jget "$r" .error.field)" "$2" "refused, naming $2: $4"
        like "$(jget "$r" .error.message)" "$3" "... saying why: $4"
}
bad '{"name":"good.test","match":"dns"}' 'network.egress.allow[0].match' 'must be "sni"' "a match other than sni"
bad '{"name":"good.test","match":"sni","proto":"udp"}' 'network.egress.allow[0].proto' "for TCP" "match sni over UDP"
bad '{"name":"198.51.100.7","match":"sni"}' 'network.egress.allow[0].name' "not a host name" "an address"
bad '{"match":"sni"}' 'network.egress.allow[0].name' "must be a host name" "no name"
bad '{"name":"good.test","port":0,"match":"sni"}' 'network.egress.allow[0].port' "1-65535" "port 0"
bad '{"name":"good.test","port":"443","match":"sni"}' 'network.egress.allow[0].port' "1-65535" "a port as a string"
bad '{"name":"good.test","proto":"tcp"}' 'network.egress.allow[0].proto' "needs a 'port'" "a proto without a port"
bad '{"name":"good.test","match":"sni","via":"x"}' 'network.egress.allow[0].via' "unknown field" "an unknown field"

# ---- A daemon killed, and the next one ----------------------------------------------------------
ctl run --sandbox "$S" -- sh -c "setsid python3 -c '$HOLD' >/dev/null 2>&1 </dev/null &"
check "a TLS connection to good.test is held open, admitted" wait_until 20 hold_up
{ kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
DAEMON_PID=
KEEP_SANDBOXES=1 POOL_SIZE=0 start_daemon --config "$T/sandboxd.conf" || exit 0
like "$(cat /proc/net/netfilter/nfnetlink_queue)" "^ *23504 " "after SIGKILL and a new daemon, the queue is bound again"
held=$(hold_state); held=${held#up }
held_more() { local n; n=$(hold_state); [[ "$n" == "up "* ]] && [ "${n#up }" -gt "$((${held:-0} + 3))" ]; }
check "... the admitted connection goes on past the daemon's end (the kernel forwards it)" wait_until 10 held_more
is "$(sni "$S" tls good.test good.test again)" "reached tls good.test again" "... and a new connection to good.test is checked and admitted"
like "$(sni "$S" tls evil.test good.test)" "^refused" "... and evil.test still refused"
