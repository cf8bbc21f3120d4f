#!/bin/bash
# A published port under the packaged units (issue #21, "Reaching a sandbox's server"): a
# python3 -m http.server inside a "none" sandbox is reached through `sandboxctl port` from the
# host, as the sandbox's owner (a member of group sandboxd), and from nobody else: the socket is
# under the unit's RuntimeDirectory (/run/sandboxd/ports), the owner's, mode 0600. A daemon
# killed with the port open is restarted by systemd, and the new one removes the socket it left.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
ctl=$(command -v sandboxctl)
gid=$(getent group sandboxd | cut -d: -f3)
as_nobody() { setpriv --reuid=65534 --regid=65534 "$@"; }
# The outcome of a connect to a Unix socket as uid 65533, without groups: "ok" or the errno's name.
connect_as_other() {
	setpriv --reuid=65533 --regid=65533 --clear-groups -- python3 -c '
import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$1"
}

id=$(as_nobody --groups="$gid" "$ctl" create --name "ports-vm-$$" 2>&1)
ok $? "uid 65534 (group sandboxd) creates a sandbox (network none)"
out=$(as_nobody --groups="$gid" "$ctl" run --sandbox "$id" -- sh -c 'cd /work && echo served-in-vm > index.html &&
	setsid python3 -m http.server 8000 --bind 127.0.0.1 </dev/null >/dev/null 2>&1 &
	for i in $(seq 100); do python3 -c "import socket; socket.create_connection((\"127.0.0.1\", 8000))" 2>/dev/null && exit 0; sleep 0.1; done; exit 1' 2>&1)
ok $? "an HTTP server listens on the sandbox's 127.0.0.1:8000"
path=$(cd / && as_nobody --groups="$gid" "$ctl" port "$id" 8000 2>&1)
[ "$path" = "/run/sandboxd/ports/$id-8000.sock" ]
ok $? "sandboxctl port prints the socket under the unit's RuntimeDirectory"
diag "path: $path"
[ "$(stat -c '%u %a %F' "$path" 2>&1) $(stat -c '%u %a' /run/sandboxd/ports 2>&1)" = "65534 600 socket 0 711" ]
ok $? "the socket is the owner's (65534), mode 0600, in root's 0711 directory"
# What curl --unix-socket does, in python (curl is not among the packages scripts/deps.sh installs).
got=$(as_nobody --groups="$gid" timeout 30 python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1])
s.sendall(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n")
out = b""
while True:
    b = s.recv(65536)
    if not b: break
    out += b
print(out.split(b"\r\n\r\n", 1)[-1].decode().strip())' "$path" 2>&1)
[ "$got" = served-in-vm ]
ok $? "the owner reaches the sandbox's page through it (an HTTP GET on the socket)"
diag "got: $got"
[ "$(connect_as_other "$path")" = EACCES ]
ok $? "another uid cannot connect to it: EACCES"
pid=$(systemctl show -p MainPID --value sandboxd.service)
systemctl kill -s KILL sandboxd.service
for i in $(seq 200); do
	npid=$(systemctl show -p MainPID --value sandboxd.service)
	[ -n "$npid" ] && [ "$npid" != 0 ] && [ "$npid" != "$pid" ] && [ ! -e "$path" ] && break
	sleep 0.1
done
[ ! -e "$path" ] && [ "$npid" != "$pid" ]
ok $? "after a SIGKILL, systemd restarts sandboxd and the new one removes the socket it left"
r=$(call "{\"op\":\"inspect\",\"sandbox\":\"$id\"}")
[ "$(jqr '.sandbox.ports | length' "$r")" = 0 ]
ok $? "the restored sandbox has no published port"
as_nobody --groups="$gid" "$ctl" destroy "$id" >/dev/null 2>&1
ok $? "destroy it"
done_testing
