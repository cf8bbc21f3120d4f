# SPDX-License-Identifier: LGPL-2.1-or-later
# The network of the egress tests (tests/t-egress*.sh), sourced after tests/lib.sh by a script
# that re-executed itself in a network namespace of its own (EGRESS_TEST_NETNS): that namespace is
# the test's "host", daemon included, so nothing touches the machine's interfaces and rules.
# egress_remote makes a "remote" namespace behind a veth pair, routes 198.51.100.0/24,
# 203.0.113.0/24 and the link-local 169.254.169.254 into it (checked with ip route get before any
# packet goes), and runs HTTP servers (and echo servers on 198.51.100.7:9000 and 9001, which hold
# each connection open) and a DNS answerer there (tests/egress-remote.py, its
# options given to egress_remote; what it got is in $T/remote.out). No packet leaves for an
# address the test did not make.
[ -n "${EGRESS_TEST_NETNS:-}" ] || skip_all "no network namespace of the test's own (unshare)"
for tool in ip nft nsenter; do
        command -v $tool >/dev/null || skip_all "$tool is not installed (scripts/deps.sh)"
done

RPID= RSERVER= HSERVER= D2=
_egress_cleanup() {
        local rc=$?
        _daemon_end
        [ -n "${D2:-}" ] && kill -KILL "$D2" 2>/dev/null
        for p in $RSERVER $HSERVER $RPID; do kill "$p" 2>/dev/null; done
        wait 2>/dev/null
        (exit "$rc")
        _cleanup
}
trap _egress_cleanup EXIT

# egress_remote [DNS ANSWERER OPTIONS...]
egress_remote() {
        ip link set lo up
        unshare --net sleep infinity &
        RPID=$!
        _remote_apart() { [ "$(readlink /proc/$RPID/ns/net)" != "$(readlink /proc/$$/ns/net)" ]; }
        wait_until 5 _remote_apart || skip_all "no remote namespace (unshare --net)"
        in_remote() { nsenter --net=/proc/$RPID/ns/net "$@"; }
        ip link add up0 type veth peer name eth0 netns "$RPID"
        ip addr add 192.0.2.1/24 dev up0
        ip link set up0 up
        in_remote ip link set lo up
        in_remote ip link set eth0 up
        in_remote ip addr add 192.0.2.2/24 dev eth0
        for a in 198.51.100.7 198.51.100.8 198.51.100.53 203.0.113.5 169.254.169.254; do in_remote ip addr add $a/32 dev lo; done
        in_remote ip route add default via 192.0.2.1
        for n in 198.51.100.0/24 203.0.113.0/24 169.254.169.254/32; do ip route add $n via 192.0.2.2; done
        # The uplink forwards (the replies come in on it); the daemon turns it on for its own veths only.
        sysctl -qw net.ipv4.conf.up0.forwarding=1
        for a in 198.51.100.7 203.0.113.5 169.254.169.254; do
                like "$(ip route get $a)" "dev up0" "$a is routed into the test's remote namespace, nowhere else"
        done

        # nsenter execs the server: $! is the server itself, which the cleanup ends (a shell function
        # run in the background would be a subshell, and the server would outlive it).
        nsenter --net=/proc/$RPID/ns/net python3 "$TESTS_DIR/egress-remote.py" 198.51.100.7:80 198.51.100.7:8080 198.51.100.8:80 203.0.113.5:80 \
                169.254.169.254:80 198.51.100.7:9000/echo 198.51.100.7:9001/echo --dns 198.51.100.53 "$@" >"$T/remote.out" 2>&1 &
        RSERVER=$!
        python3 "$TESTS_DIR/egress-remote.py" 0.0.0.0:8081 >"$T/host.out" 2>&1 &
        HSERVER=$!
        for f in remote host; do
                wait_until 10 grep -q ready "$T/$f.out" 2>/dev/null || diag "the $f servers: $(cat "$T/$f.out")"
        done
}

# probe HOST PORT: "reached <the server's answer>" or "refused <errno>" (a timeout: "refused None").
cat >"$T/probe.py" <<'PY'
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    print("reached", data.split(b"\r\n\r\n", 1)[-1].decode().strip())
except OSError as e:
    print("refused", e.errno)
PY
PROBE=$(cat "$T/probe.py")
host_probe() { python3 "$T/probe.py" "$@"; }
sbx_probe() { local s=$1; shift; ctl run --sandbox "$s" -- python3 -c "$PROBE" "$@"; }

