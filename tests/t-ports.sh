#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Published ports (port.open, port.close; daemon/sandbox/port.c, daemon/host/port-forward.c): a
# server inside a sandbox with no network ("none") is reached from the host through a Unix socket
# the daemon made for the caller (its owner's, mode 0600) or a loopback TCP port. The bytes are
# the server's own (an HTTP page; 64 MiB both ways through an echo server, byte for byte, with
# the half-close carried over); many connections at once; the per-sandbox caps; a client that
# does not read holds the sandbox's server back (backpressure); a port with nothing listening
# closes the connection at once, one that gets no answer inside (a backlog full) after 10 s; a restart of the sandbox's processes (snapshot.restore) ends the
# connections and keeps the listener; port.close and destroy remove the socket and
# end its connections; the daemon's fds come back to their count; another uid can neither
# connect to the socket (EACCES) nor publish a port of the sandbox (not_found); hostile requests
# are refused; a daemon killed with its ports open leaves socket files that the next one removes.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

O=65534 P=65533
mkdir -p "$T"
# Root is not capped per uid: max_ports_per_uid holds for the other uid's part below.
printf 'max_ports_per_sandbox = 4\nmax_port_connections_per_sandbox = 64\nmax_ports_per_uid = 1\n' >"$T/sandboxd.conf"
start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0755 "$T" && chmod 0666 "$SOCK"
FDS0=$(daemon_fd_baseline)
export FDS0

# The servers inside: python's http.server on 8000, and an echo server on 9000 that sends back
# every byte and closes after the client's end of stream (so the half-close must pass both ways).
# Its threads get small stacks: a best-effort sandbox's memory limit is RLIMIT_DATA, which counts them.
cat >"$T/echo.py" <<'EOF'
import socket, threading
threading.stack_size(1 << 18)
def serve(c):
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        c.sendall(b)
    c.shutdown(socket.SHUT_WR)
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9000))
s.listen(256)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
export ECHO_PY=$T/echo.py

run_py "ports" 300 <<'EOF'
import hashlib, json, os, socket, stat, threading, time
from client import Conn, check, is_, wait_for
T, pid = os.environ["T"], os.environ["DAEMON_PID"]
c = Conn(os.environ["SOCK"], 60)

def fds():
    n = 0
    for f in os.listdir("/proc/%s/fd" % pid):
        try:
            n += not os.readlink("/proc/%s/fd/%s" % (pid, f)).startswith("net:[")
        except OSError:
            pass
    return n

def fd_links():
    out = []
    for f in os.listdir("/proc/%s/fd" % pid):
        try:
            out.append(os.readlink("/proc/%s/fd/%s" % (pid, f)))
        except OSError:
            pass
    return sorted(out)

def sh(sb, cmd):
    r = c.call({"op": "run", "sandbox": sb, "command": cmd}, 60)
    return r.get("exit_code"), r.get("stdout", ""), r.get("stderr", "")

def port_open(sb, port, **kw):
    req = {"op": "port.open", "sandbox": sb, "port": port}
    req.update(kw)
    return c.call(req)

def ports_of(sb):
    return c.call({"op": "inspect", "sandbox": sb})["sandbox"].get("ports")

def unix(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(path)
    return s

def recv_all(s):
    out = []
    while True:
        b = s.recv(1 << 16)
        if not b:
            return b"".join(out)
        out.append(b)

def http_get(s, what="/index.html"):
    s.sendall(b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % what.encode())
    return recv_all(s)

def ends_at_once(s):
    """The connection is closed by the far end within 5 s (EOF or a reset), nothing received."""
    s.settimeout(5)
    try:
        return s.recv(100) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False

def listening(sb, port):
    code = "import socket,time\nfor i in range(100):\n try: socket.create_connection(('127.0.0.1',%d)).close(); break\n except OSError: time.sleep(0.1)\nelse: raise SystemExit(1)" % port
    return sh(sb, "python3 -c \"%s\"" % code)[0] == 0

A = c.call({"op": "create", "best_effort": True, "name": "web"})["sandbox"]["id"]
echo = open(os.environ["ECHO_PY"], "rb").read().decode()
code, _, err = sh(A, "cd /work && printf 'hello port\\n' > index.html && cat > echo.py <<'PY'\n%sPY\n"
                     "setsid python3 -m http.server 8000 --bind 127.0.0.1 </dev/null >/dev/null 2>&1 & "
                     "setsid python3 echo.py </dev/null >/dev/null 2>&1 &" % echo)
is_(code, 0, "an HTTP server (8000) and an echo server (9000) start in the background of a run")
check(listening(A, 8000) and listening(A, 9000), "both listen on the sandbox's loopback")
# Counted once the last run's fds are gone (its pidfd and pipes go a moment after its reply).
def settled_fds():
    prev = -1
    for _ in range(50):
        n = fds()
        if n == prev:
            return n
        prev = n
        time.sleep(0.3)
    return n
FDS1 = settled_fds()

# ---- A Unix socket of the caller's ---------------------------------------------------------
r = port_open(A, 8000)
p = r.get("port", {})
path = p.get("path", "")
check((r.get("ok"), p.get("port"), p.get("listen"), p.get("connections")) == (True, 8000, "unix", 0),
    "port.open 8000 answers with the published port", r)
is_(path, "%s/ports/%s-8000.sock" % (T, A), "its socket is RUNTIME/ports/<sandbox>-<port>.sock (beside the daemon's)")
st = os.lstat(path) if os.path.exists(path) else None
check(st and stat.S_ISSOCK(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600,
      "the socket is the caller's (uid 0 here), mode 0600", st)
dst = os.lstat(T + "/ports")
check(dst.st_uid == 0 and stat.S_IMODE(dst.st_mode) == 0o711, "its directory is the daemon's, mode 0711", oct(dst.st_mode))
body = http_get(unix(path))
check(body.startswith(b"HTTP/1.0 200") and body.endswith(b"\r\n\r\nhello port\n"),
      "an HTTP GET through the socket gets the sandbox's page", body[:300])
body = http_get(unix(path), "/nothing-here")
check(body.startswith(b"HTTP/1.0 404"), "... and the server's own 404 for a missing one", body[:100])

# ---- 64 MiB both ways, byte for byte, and the half-close -------------------------------------
r = port_open(A, 9000)
epath = r.get("port", {}).get("path", "")
check(r.get("ok"), "port.open 9000", r)
data = os.urandom(64 << 20)
s = unix(epath)
def send_all():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send_all)
t0 = time.monotonic()
t.start()
got = recv_all(s)
t.join()
s.close()
secs = time.monotonic() - t0
is_((len(got), hashlib.sha256(got).hexdigest()), (len(data), hashlib.sha256(data).hexdigest()),
    "64 MiB sent through the port come back byte for byte (both directions at once, %.1f s), then EOF: "
    "the client's SHUT_WR reached the server, whose close reached the client" % secs)

# ---- Many at once, and the caps ---------------------------------------------------------------
conns = [unix(epath) for _ in range(48)]
oks = 0
for i, s in enumerate(conns):
    msg = b"%d:" % i + os.urandom(1000)
    s.sendall(msg)
    got = b""
    while len(got) < len(msg):
        got += s.recv(len(msg) - len(got))
    oks += got == msg
is_(oks, 48, "48 connections at once, each answered with its own bytes")
p9 = [x for x in ports_of(A) if x["port"] == 9000]
check(p9 and p9[0]["connections"] == 48, "inspect counts them: connections 48", p9)
conns += [unix(epath) for _ in range(16)]
for s in conns[48:]:
    s.sendall(b"x")
    s.recv(1)
over = unix(epath)
check(ends_at_once(over), "past max_port_connections_per_sandbox (64) a connection is closed at once")
for s in conns:
    s.close()
over.close()
check(wait_for(lambda: ports_of(A)[-1]["connections"] == 0, 5), "closed by the client, they are gone from inspect",
      ports_of(A))

# ---- Backpressure: a client that does not read holds the server back --------------------------
code, _, err = sh(A, "cd /work && cat > push.py <<'PY'\n"
                     "import os, socket\n"
                     "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                     "s.bind(('127.0.0.1', 9001)); s.listen(4); chunk = bytes(65536)\n"
                     "while True:\n"
                     "    c, _ = s.accept(); sent = 0\n"
                     "    try:\n"
                     "        while sent < (64 << 20):\n"
                     "            c.sendall(chunk); sent += len(chunk)\n"
                     "            open('/tmp/sent.tmp', 'w').write(str(sent)); os.rename('/tmp/sent.tmp', '/tmp/sent')\n"
                     "    except OSError:\n"
                     "        pass\n"
                     "    c.close()\n"
                     "PY\n"
                     "setsid python3 push.py </dev/null >/dev/null 2>&1 &")
check(code == 0 and listening(A, 9001), "a server that pushes 64 MiB to each connection listens on 9001", err)
r = port_open(A, 9001)
s = unix(r.get("port", {}).get("path", "/nonexistent"))
time.sleep(2)
sent = int(sh(A, "cat /tmp/sent 2>/dev/null || echo 0")[1].strip() or 0)
check(0 < sent < (24 << 20), "a client that reads nothing for 2 s: the server could send only %.1f MiB of 64 "
      "(socket buffers and one pipe, then it waits)" % (sent / 2**20), sent)
got = len(recv_all(s))
s.close()
is_(got, 64 << 20, "then the client reads all 64 MiB")
c.call({"op": "port.close", "sandbox": A, "port": 9001})

# ---- A listener inside that never accepts: a connect that gets no answer ends after 10 s -----
code, _, err = sh(A, "cd /work && setsid python3 -c 'import socket, time\ns = socket.socket()\n"
                     "s.bind((\"127.0.0.1\", 9002)); s.listen(0); time.sleep(1000)' </dev/null >/dev/null 2>&1 & sleep 0.5")
r = port_open(A, 9002)
spath = r.get("port", {}).get("path", "/nonexistent")
first = unix(spath)  # the one the backlog holds: connected inside, never served
check(wait_for(lambda: ports_of(A)[-1]["connections"] == 1, 5), "a connection the listener's backlog holds", ports_of(A))
more = [unix(spath), unix(spath)]  # their SYNs are dropped: the backlog is full
t0 = time.monotonic()
ended = 0
for s in more:
    s.settimeout(25)
    try:
        ended += s.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        pass
check(ended == 2, "the connects that got no answer inside were ended (after %.1f s; the timeout is 10 s)" % (time.monotonic() - t0))
p2 = [x for x in ports_of(A) if x["port"] == 9002]
check(p2 and (p2[0]["connections"], p2[0]["refused"]) == (1, 2), "inspect: 1 connection open, 2 refused", p2)
first.settimeout(0.2)
try:
    first.recv(1)
    check(False, "the connection the backlog holds is still open")
except socket.timeout:
    check(True, "the connection the backlog holds is still open")
for s in more + [first]:
    s.close()
c.call({"op": "port.close", "sandbox": A, "port": 9002})  # its listener goes with the sandbox's processes

# ---- Nothing listening -------------------------------------------------------------------------
r = port_open(A, 7000)
s = unix(r.get("port", {}).get("path", "/nonexistent"))
t0 = time.monotonic()
check(ends_at_once(s), "a connection to a port nobody listens on inside is closed at once (%.3f s)" % (time.monotonic() - t0))
s.close()
p7 = [x for x in ports_of(A) if x["port"] == 7000]
check(p7 and (p7[0]["accepted"], p7[0]["refused"], p7[0]["connections"]) == (1, 1, 0), "inspect: accepted 1, refused 1", p7)

# ---- Hostile requests ----------------------------------------------------------------------------
def code_of(req):
    req.setdefault("op", "port.open")
    return c.call(req).get("error", {}).get("code")
for desc, req, want in [
        ("port 0", {"sandbox": A, "port": 0}, "invalid_request"),
        ("port 70000", {"sandbox": A, "port": 70000}, "invalid_request"),
        ("port -1", {"sandbox": A, "port": -1}, "invalid_request"),
        ("a string for the port", {"sandbox": A, "port": "8000"}, "invalid_request"),
        ("no port", {"sandbox": A}, "invalid_request"),
        ("listen \"udp\"", {"sandbox": A, "port": 8001, "listen": "udp"}, "invalid_request"),
        ("listen \"tcp:0x50\"", {"sandbox": A, "port": 8001, "listen": "tcp:0x50"}, "invalid_request"),
        ("listen \"tcp:70000\"", {"sandbox": A, "port": 8001, "listen": "tcp:70000"}, "invalid_request"),
        ("listen \"tcp:\"", {"sandbox": A, "port": 8001, "listen": "tcp:"}, "invalid_request"),
        ("an unknown field", {"sandbox": A, "port": 8001, "name": "x"}, "invalid_request"),
        ("a sandbox that does not exist", {"sandbox": "sbx-000000000000", "port": 8001}, "not_found"),
        ("the same port twice", {"sandbox": A, "port": 8000}, "conflict"),
        ("the same port twice, as TCP", {"sandbox": A, "port": 8000, "listen": "tcp"}, "conflict"),
        ("port.close of a port not published", {"op": "port.close", "sandbox": A, "port": 8001}, "not_found"),
]:
    is_(code_of(req), want, "port.open refuses %s: %s" % (desc, want) if "port.close" not in desc else desc + ": " + want)
check(port_open(A, 7001).get("ok"), "a fourth port is published")
r = port_open(A, 7002)
check(r.get("error", {}).get("code") == "resource_exhausted", "a fifth is refused (max_ports_per_sandbox 4)", r)

# ---- port.close ------------------------------------------------------------------------------
held = unix(path)
held.sendall(b"GET /index.html HTT")  # half a request line: the server waits for the rest
check(wait_for(lambda: [x["connections"] for x in ports_of(A) if x["port"] == 8000] == [1], 5),
      "a connection held open through port 8000", ports_of(A))
r = c.call({"op": "port.close", "sandbox": A, "port": 8000})
check(r.get("ok"), "port.close 8000", r)
check(not os.path.exists(path), "its socket file is gone")
check(ends_at_once(held), "its connection was ended")
held.close()
check(8000 not in [x["port"] for x in ports_of(A)], "inspect no longer lists it")

# ---- TCP on the host's loopback ----------------------------------------------------------------
r = port_open(A, 8000, listen="tcp")
addr = r.get("port", {}).get("address", "")
check(r.get("ok") and addr.startswith("127.0.0.1:") and "path" not in r["port"], "port.open listen tcp: 127.0.0.1:PORT", r)
host, _, tport = addr.partition(":")
body = http_get(socket.create_connection((host, int(tport or 0)), 30))
check(body.endswith(b"\r\n\r\nhello port\n"), "the page through TCP", body[:200])
is_([(x["port"], x["listen"], x.get("address")) for x in ports_of(A) if x["port"] == 8000], [(8000, "tcp", addr)],
    "inspect lists it with its address")
fixed = socket.socket()
fixed.bind(("127.0.0.1", 0))
free_port = fixed.getsockname()[1]
fixed.close()
r = c.call({"op": "port.close", "sandbox": A, "port": 7001})
r = port_open(A, 7001, listen="tcp:%d" % free_port)
check(r.get("port", {}).get("address") == "127.0.0.1:%d" % free_port, "listen tcp:PORT takes that host port", r)
r2 = c.call({"op": "create", "best_effort": True})
B = r2["sandbox"]["id"]
is_(port_open(B, 7001, listen="tcp:%d" % free_port).get("error", {}).get("code"), "conflict",
    "another sandbox asking for the same host port: conflict")
check(c.call({"op": "destroy", "sandbox": B}, 60).get("destroyed"), "destroy that other sandbox")

# ---- fds back; destroy ends everything -------------------------------------------------------
for port in (7000, 7001, 8000, 9000):
    c.call({"op": "port.close", "sandbox": A, "port": port})
is_(ports_of(A), [], "every port closed: inspect's ports is empty")
check(wait_for(lambda: fds() == FDS1, 5), "the daemon's fds are back to their count before the first port (%d)" % FDS1, fds())
left = sorted(os.listdir(T + "/ports"))
is_(left, [], "no socket file is left in RUNTIME/ports")
r = port_open(A, 9000)
epath = r.get("port", {}).get("path", "")
held = unix(epath)
held.sendall(b"ping")
check(held.recv(4) == b"ping", "a connection through a new port")

# ---- A restart of the sandbox's processes (snapshot.restore) keeps the listener -------------
snap = c.call({"op": "snapshot", "sandbox": A}, 120).get("snapshot", {}).get("id")
r = c.call({"op": "snapshot.restore", "sandbox": A, "snapshot": snap}, 120)
check(r.get("ok"), "snapshot.restore restarts the sandbox's processes", r)
check(ends_at_once(held), "the connection held through the port ended with the old processes")
held.close()
check(os.path.exists(epath) and [x["port"] for x in ports_of(A)] == [9000],
      "the port is still published, at the same path", ports_of(A))
check(ends_at_once(unix(epath)), "with the echo server gone, a connection is closed at once")
code, _, err = sh(A, "cd /work && setsid python3 echo.py </dev/null >/dev/null 2>&1 &")
check(code == 0 and listening(A, 9000), "the echo server started again in the new processes", err)
held = unix(epath)
held.sendall(b"pong")
check(held.recv(4) == b"pong", "the same socket reaches it: the new namespace's server")
r = c.call({"op": "destroy", "sandbox": A}, 60)
check(r.get("destroyed"), "destroy the sandbox", r)
check(not os.path.exists(epath), "destroy removed its socket file")
check(ends_at_once(held), "destroy ended its connection")
held.close()
FDS0 = int(os.environ["FDS0"])
# FDS0 was counted with no client: this one's connection is the one more.
check(wait_for(lambda: fds() == FDS0 + 1, 10),
      "with both sandboxes gone the daemon holds the fds it had at start (%d, and this client's)" % FDS0, fds(), fd_links())
EOF

# ---- Another uid ---------------------------------------------------------------------------
check "the client is copied where other uids may run it" other_user_files
rpc_as() { # UID JSON
	as_other "$1" --regid="$1" --clear-groups -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call "$2" --timeout 30
}
connect_as() { # UID PATH: the connect's outcome, "ok" or the errno's name
	as_other "$1" --regid="$1" --clear-groups -- timeout 30 python3 -c '
import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$2"
}
r=$(rpc_as $O '{"op":"create","best_effort":true,"name":"mine"}')
osb=$(jget "$r" .sandbox.id)
r=$(rpc_as $O '{"op":"run","sandbox":"mine","command":"cd /work && echo owner > index.html && setsid python3 -m http.server 8000 --bind 127.0.0.1 </dev/null >/dev/null 2>&1 & for i in $(seq 100); do python3 -c \"import socket; socket.create_connection((\\\"127.0.0.1\\\", 8000))\" 2>/dev/null && exit 0; sleep 0.1; done; exit 1"}')
is "$(jget "$r" .exit_code)" 0 "uid $O starts an HTTP server in its sandbox"
ctl_as() { # UID sandboxctl-args...
	local uid=$1
	shift
	as_other "$uid" --regid="$uid" --clear-groups -- timeout 30 "$OTHER_SANDBOXCTL" --socket "$SOCK" "$@"
}
opath=$(ctl_as $O port mine 8000)
is "$opath" "$T/ports/$osb-8000.sock" "uid $O: sandboxctl port mine 8000 prints the socket's path"
is "$(stat -c '%u %a %F' "$opath" 2>&1)" "$O 600 socket" "uid $O's published port is a socket of uid $O, mode 0600"
like "$(ctl_as $O inspect mine)" "ports: +8000 unix $opath, 0 connections" "sandboxctl inspect shows it"
got=$(as_other $O --regid=$O --clear-groups -- timeout 30 python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"GET / HTTP/1.0\r\n\r\n")
out = b""
while True:
    b = s.recv(65536)
    if not b: break
    out += b
print(out.split(b"\r\n\r\n", 1)[-1].decode().strip())' "$opath" 2>&1)
is "$got" owner "uid $O reaches its own server through it"
is "$(connect_as $P "$opath")" EACCES "another uid ($P) cannot connect to it: EACCES"
like "$(ctl_as $P port "$O/mine" 8000 2>&1)" "not_found" "another uid's sandboxctl port of it: not_found"
check "sandboxctl port --close mine 8000" ctl_as $O port --close mine 8000
check "... removed the socket" test ! -e "$opath"
addr=$(ctl_as $O port mine 8000 --tcp)
like "$addr" '^127\.0\.0\.1:[0-9]+$' "sandboxctl port mine 8000 --tcp prints the host address"
got=$(timeout 20 python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://" + sys.argv[1] + "/index.html", timeout=10).read().decode().strip())' "$addr" 2>&1)
is "$got" owner "anyone on the host (here root) reaches a TCP one: the page"
ctl_as $O port --close mine 8000
is "$(ctl_as $O port mine 8000)" "$opath" "published again as a Unix socket, at the same path"
out=$(ctl_as $O port mine 8000 2>&1)
is "$?:$out" "1:sandboxctl: conflict: port 8000 of sandbox $osb is published already (field: port)"$'\n'"sandboxctl: 'sandboxctl port --close mine 8000' frees it" \
	"sandboxctl port of a port published already: the conflict, and the command that frees it"
is "$(jget "$(rpc_as $P "{\"op\":\"port.open\",\"sandbox\":\"$osb\",\"port\":8001}")" .error.code)" not_found \
	"another uid's port.open of that sandbox: not_found"
is "$(jget "$(rpc_as $P "{\"op\":\"port.close\",\"sandbox\":\"$osb\",\"port\":8000}")" .error.code)" not_found \
	"another uid's port.close of it: not_found"
r=$(rpc_as $O '{"op":"port.open","sandbox":"mine","port":8001,"listen":"tcp:80"}')
is "$(jget "$r" .error.code)" permission_denied "a TCP port below 1024 is refused to a non-root uid"
r=$(rpc_as $O '{"op":"port.open","sandbox":"mine","port":8001}')
is "$(jget "$r" .error.code)" resource_exhausted "a second port of uid $O is refused (max_ports_per_uid 1)"

# ---- A daemon killed with its ports open ---------------------------------------------------
check "the socket is there while the daemon runs" test -S "$opath"
{ kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
DAEMON_PID=
check "a daemon killed by SIGKILL leaves its socket file behind" test -S "$opath"
start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0666 "$SOCK"
check "the next daemon removed it at start" test ! -e "$opath"
grep -q "a published port of an earlier daemon" "$T/daemon.log" && ok "... and said so in its log" || nok "... and said so in its log"
r=$(rpc_as $O '{"op":"inspect","sandbox":"mine"}')
is "$(jget "$r" '.sandbox.ports | length')" 0 "the restored sandbox has no published port (the listeners went with the daemon)"
r=$(rpc_as $O '{"op":"port.open","sandbox":"mine","port":8000}')
is "$(jget "$r" .port.path)" "$opath" "it can be published again, at the same path"
stop_daemon
check "a daemon stopped with SIGTERM removes its ports' sockets" test -z "$(ls -A "$T/ports")"
