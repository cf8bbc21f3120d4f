#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A running sandbox's way out changed (sandbox.update's "network", sandboxctl network;
# daemon/sandbox/egress.c egress_update), in the network of tests/egress-lib.sh: the new list is
# in force at once; a connection open to what it no longer allows is cut (the program gets a
# reset) and the reply counts it, while one to what it still allows goes on; a name on both lists
# keeps the addresses it resolved to, a name taken off no longer resolves, a new one does;
# --deny-all closes everything and a later list opens it again; what cannot be changed is refused
# with a clear error; the new list is what the sandbox's record keeps, and what a next daemon
# takes back.
if [ -z "${EGRESS_TEST_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
        EGRESS_TEST_NETNS=1 exec unshare --net -- "$BASH" "$0" "$@"
fi
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

. "$TESTS_DIR/egress-lib.sh"
egress_remote --ttl 300 --name remote.test=198.51.100.7 --name other.test=198.51.100.8
printf 'egress_dns = 198.51.100.53\n' >"$T/sandboxd.conf"
POOL_SIZE=0 start_daemon --config "$T/sandboxd.conf" || exit 0

# resolve NAME: the address a program in the sandbox gets for NAME, or "unresolved".
resolve() {
        ctl run --sandbox "$1" -- python3 -c 'import socket, sys
try:
    print(socket.gethostbyname(sys.argv[1]))
except OSError:
    print("unresolved")' "$2"
}

# hold SANDBOX PORT: a process in the sandbox keeps a connection to 198.51.100.7:PORT (an echo
# server) and sends a line on it every 0.2 s; /work/hold-PORT.log says "up N" (N round trips so
# far) or, once the connection fails, "down ERRNO" (104: reset).
HOLD='import errno, socket, sys, time
port = int(sys.argv[1])
log = "/work/hold-%d.log" % port
def say(s):
    with open(log + ".new", "w") as f:
        f.write(s + "\n")
    import os; os.rename(log + ".new", log)
try:
    s = socket.create_connection(("198.51.100.7", port), timeout=3)
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
hold() {
        ctl run --sandbox "$1" -- sh -c "setsid python3 -c '$HOLD' $2 >/dev/null 2>&1 </dev/null &"
}
hold_state() { ctl cat "$1" "/work/hold-$2.log" 2>/dev/null; }
hold_up() { [[ "$(hold_state "$1" "$2")" == "up "* ]]; }
hold_down() { [[ "$(hold_state "$1" "$2")" == "down "* ]]; }
# hold_advances SANDBOX PORT: its count of round trips grows.
hold_advances() {
        local a b
        a=$(hold_state "$1" "$2")
        sleep 1
        b=$(hold_state "$1" "$2")
        [[ "$a" == "up "* && "$b" == "up "* && "${b#up }" -gt "${a#up }" ]]
}

S=$(ctl create --best-effort --name upd --allow 198.51.100.7:9000/tcp --allow 198.51.100.7:9001/tcp --allow remote.test:80)
check "a sandbox with two echo ports and a name on its list is made" test -n "$S"
is "$(resolve "$S" remote.test)" "198.51.100.7" "remote.test resolves"
is "$(resolve "$S" other.test)" "unresolved" "other.test, not on the list, does not"
hold "$S" 9000
hold "$S" 9001
check "a connection to :9000 is up" wait_until 20 hold_up "$S" 9000
check "a connection to :9001 is up" wait_until 20 hold_up "$S" 9001

# ---- A new list -----------------------------------------------------------------------------
# :9000 goes, :9001 stays, remote.test stays (at another index), other.test comes.
r=$(rpc "{\"op\":\"sandbox.update\",\"sandbox\":\"$S\",\"network\":{\"egress\":{\"allow\":[\"other.test:80\",\"198.51.100.7:9001/tcp\",\"remote.test:80\"]}}}")
is "$(jget "$r" .ok)" true "sandbox.update with a new allow list is answered ok"
is "$(jget "$r" '.sandbox.network.egress.allow | join(" ")')" "other.test:80 198.51.100.7:9001/tcp remote.test:80" \
        "the reply's sandbox shows the new list"
is "$(jget "$r" .connections_cut)" 1 "one connection was cut: the one to :9000, which the new list does not allow"
check "the program on :9000 sees its connection fail" wait_until 10 hold_down "$S" 9000
is "$(hold_state "$S" 9000)" "down 104" "... with a reset (ECONNRESET), not a hang"
check "the connection to :9001, still allowed, goes on" hold_advances "$S" 9001
like "$(sbx_probe "$S" 198.51.100.7 9000)" "^refused" "a new connection to :9000 is refused"
is "$(sbx_probe "$S" 198.51.100.7 80)" "reached remote 198.51.100.7:80" \
        "remote.test's address is reached at once: the name is on both lists, its set kept what it resolved"
like "$(nft list set inet sandboxd "sx_${S#sbx-}_2")" "198\.51\.100\.7 timeout" "... now in the set of its new index, 2"
is "$(resolve "$S" other.test)" "198.51.100.8" "other.test, new on the list, resolves"
is "$(sbx_probe "$S" other.test 80)" "reached remote 198.51.100.8:80" "... and is reached"
is "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$S\"}")" '.sandbox.network.egress.allow | join(" ")')" \
        "other.test:80 198.51.100.7:9001/tcp remote.test:80" "inspect shows the new list"
meta=$(cat "$T"/state/sandboxes/"$S"/meta.json 2>/dev/null)
is "$(jget "$meta" '.network.egress.allow | join(" ")')" "other.test:80 198.51.100.7:9001/tcp remote.test:80" \
        "the sandbox's record keeps the new list"

# ---- sandboxctl network ---------------------------------------------------------------------
out=$(ctl network upd --allow remote.test:80)
is "$?" 0 "sandboxctl network NAME --allow ... exits 0"
like "$out" "egress to remote.test:80" "... and prints the new list"
like "$out" "connections cut: +1$" "... and the connection cut: the one to :9001 (closed ones to other.test are not counted)"
check "the program on :9001 sees its connection fail" wait_until 10 hold_down "$S" 9001
is "$(resolve "$S" other.test)" "unresolved" "other.test, taken off the list, no longer resolves"
like "$(sbx_probe "$S" 198.51.100.8 80)" "^refused" "... and its address is no longer reached"

out=$(ctl network "$S" --deny-all)
is "$?" 0 "sandboxctl network --deny-all exits 0"
like "$out" "egress to nothing" "... and says nothing is reachable"
like "$(sbx_probe "$S" 198.51.100.7 80)" "^refused" "after --deny-all remote.test's address is not reached"
is "$(resolve "$S" remote.test)" "unresolved" "... and no name resolves"
out=$(ctl network "$S" --egress all)
is "$?" 0 "sandboxctl network --egress all exits 0"
is "$(sbx_probe "$S" 198.51.100.8 80)" "reached remote 198.51.100.8:80" "after --egress all other.test's address is reached"
is "$(resolve "$S" other.test)" "198.51.100.8" "... and every name resolves"
like "$(sbx_probe "$S" 192.0.2.1 8081)" "^refused" "... but not the host, which no sandbox reaches"

# ---- What is refused ------------------------------------------------------------------------
bad() { # REQUEST_TAIL CODE FIELD PATTERN WHAT
        local r
        r=$(rpc "{\"op\":\"sandbox.update\",\"sandbox\":\"$S\"$1}")
        is "$(jget "$r" '.error.code + " " + .error.field')" "$2 $3" "refused ($2, $3): $5"
        like "$(jget "$r" .error.message)" "$4" "... saying why: $5"
}
bad ',"network":"none"' invalid_request network 'allow.:\[\]' "network none for a running sandbox (an empty list closes it)"
bad ',"network":{"egress":{"allow":["10.1.2.3"]}}' permission_denied 'network.egress.allow[0]' "which no sandbox reaches" \
        "a denied range, as at create"
bad ',"network":{"egress":{"allow":["localhost"]}}' invalid_request 'network.egress.allow[0]' "is not a host name" "a bad entry"
bad '' invalid_request limits "needs 'limits', 'network' or both" "neither limits nor network"
is "$(sbx_probe "$S" 198.51.100.8 80)" "reached remote 198.51.100.8:80" "after the refusals the list in force is unchanged (all)"
N=$(ctl create --best-effort)
r=$(rpc "{\"op\":\"sandbox.update\",\"sandbox\":\"$N\",\"network\":{\"egress\":\"all\"}}")
is "$(jget "$r" '.error.code + " " + .error.field')" "conflict network" "a sandbox made without a way out cannot be given one"
like "$(jget "$r" .error.message)" 'without a way out.*allow.:\[\]' "... and the error says how to make one that can"
D=$(ctl create --best-effort --deny-all)
like "$(ctl inspect "$D")" "egress to nothing" "create --deny-all: a way out with nothing on it"
is "$(resolve "$D" remote.test)" "unresolved" "... where no name resolves"
ctl network "$D" --allow remote.test:80 >/dev/null
is "$(sbx_probe "$D" remote.test 80)" "reached remote 198.51.100.7:80" "... until sandboxctl network opens it"

# A connection to a name's address, cut when the name leaves the list.
ctl network "$D" --allow remote.test:9000/tcp >/dev/null
is "$(resolve "$D" remote.test)" "198.51.100.7" "remote.test:9000/tcp on D's list: the name resolves"
hold "$D" 9000
check "D holds a connection to remote.test's :9000" wait_until 20 hold_up "$D" 9000
out=$(ctl network "$D" --allow other.test:80)
like "$out" "connections cut: +1$" "the name taken off the list: its connection is cut"
check "... and D's program sees it reset" wait_until 10 hold_down "$D" 9000
is "$(hold_state "$D" 9000)" "down 104" "... ECONNRESET"

# A connection the chain forwarded to a name's address does not survive that name becoming an
# SNI-matched entry: such an entry's connections go through the relay, and this one never did.
ctl network "$D" --allow remote.test:9001/tcp >/dev/null
is "$(resolve "$D" remote.test)" "198.51.100.7" "remote.test:9001/tcp on D's list: the name resolves"
hold "$D" 9001
check "D holds a forwarded connection to remote.test's :9001" wait_until 20 hold_up "$D" 9001
r=$(rpc "{\"op\":\"sandbox.update\",\"sandbox\":\"$D\",\"network\":{\"egress\":{\"allow\":[{\"name\":\"remote.test\",\"port\":9001,\"match\":\"sni\"}]}}}")
is "$(jget "$r" .connections_cut)" 1 "the same name on the same port, now matched on SNI: the forwarded connection is cut"
check "... and D's program sees it reset" wait_until 10 hold_down "$D" 9001
ctl network "$D" --allow other.test:80 >/dev/null

# ---- The Python package ----------------------------------------------------------------------
out=$(PYTHONPATH="$top_srcdir/python" python3 -c 'import sys
from sandboxd import Client
with Client(sys.argv[1]) as c:
    u = c.update_network(sys.argv[2], {"egress": {"allow": ["other.test:80"]}})
    print(u.connections_cut, " ".join(u.sandbox.network["egress"]["allow"]))' "$SOCK" "$D" 2>&1)
is "$out" "0 other.test:80" "Client.update_network: the same list again cuts nothing, and the reply has it"
is "$(sbx_probe "$D" other.test 80)" "reached remote 198.51.100.8:80" "... in force"
out=$(ctl inspect "$D")
like "$out" "names resolved: +other\.test \(198\.51\.100\.8\), remote\.test \(198\.51\.100\.7\)" \
        "sandboxctl inspect: the names its relay answered, the last first, with their addresses"
like "$out" "connections: +0 open" "... and its open connections (none: each probe's has closed)"

# ---- Another user, and a next daemon ---------------------------------------------------------
chmod 0666 "$SOCK"
out=$(as_other 65534 --regid=65534 --clear-groups -- "$OTHER_SANDBOXCTL" --socket "$SOCK" network "$S" --egress all 2>&1)
like "$out" "not_found" "another user cannot change root's sandbox's way out"
ctl network "$S" --allow remote.test:80 >/dev/null
{ kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
DAEMON_PID=
KEEP_SANDBOXES=1 POOL_SIZE=0 start_daemon --config "$T/sandboxd.conf" || exit 0
wait_ready "$S" >/dev/null
is "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$S\"}")" '.sandbox.network.egress.allow | join(" ")')" "remote.test:80" \
        "after SIGKILL and a new daemon the sandbox has its changed list"
like "$(sbx_probe "$S" 198.51.100.8 80)" "^refused" "... in force: other.test's address is not reached"
is "$(sbx_probe "$S" remote.test 80)" "reached remote 198.51.100.7:80" "... remote.test is, resolved again"

ctl destroy "$S" "$N" "$D" >/dev/null
stop_daemon
