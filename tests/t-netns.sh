#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Network namespaces used again (daemon/netns-pool.h, docs/security.md): a sandbox joins a
# namespace the daemon made, owned by the host's user namespace. Inside, the loopback is up, any
# user may bind low ports and ping, and /sys shows that namespace's lo; nobody, root included,
# may change an interface, an address, a route or a sysctl, or open a raw socket. A namespace
# goes to the next sandbox only when nothing of the last one is left in it: no socket (an
# abstract name is free again), no TIME_WAIT; one with a TIME_WAIT socket is dropped.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

run_py "netns" 120 <<'EOF'
import os, subprocess
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)

def create():
    r = c.call({"op": "create", "best_effort": True})
    return r["sandbox"]["id"]

def sh(sb, cmd, user=None):
    req = {"op": "run", "sandbox": sb, "command": cmd}
    if user:
        req["user"] = user
    r = c.call(req, 60)
    return r.get("exit_code"), r.get("stdout", ""), r.get("stderr", "")

# A namespace's cookie (SO_NETNS_COOKIE): unlike its inode number, never given to another one.
COOKIE = "import socket; print(socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8).hex())"
def netns(sb):
    return sh(sb, "python3 -c '%s'" % COOKIE)[1].strip()

def destroy(sb):
    r = c.call({"op": "destroy", "sandbox": sb})
    check(r.get("destroyed") is True, "destroy " + sb, r)

def pool():
    return c.call({"op": "health"})["netns"]

h0 = pool()
check(isinstance(h0, dict) and h0.get("idle") == 0, "health reports the namespace pool, empty at start", h0)

A = create()
nsA = netns(A)
host = subprocess.run(["python3", "-c", COOKIE], capture_output=True, text=True).stdout.strip()
check(len(nsA) == 16 and nsA != host, "a sandbox has a network namespace, not the host's", nsA, host)

# What the sandbox has in it, as either user.
for user in (None, "root"):
    who = user or "the default user"
    code, out, err = sh(A, "cat /sys/class/net/lo/operstate /sys/class/net/lo/flags; ls /sys/class/net; "
                           "ls /sys/fs/cgroup/cgroup.procs >/dev/null && echo cgroup", user)
    is_(out.split(), ["unknown", "0x9", "lo", "cgroup"], "as %s: /sys shows the namespace's lo, up, and the sandbox's cgroup" % who)

# What nobody inside may do any more: the namespace is the host's.
code, out, err = sh(A, "python3 -c 'import errno, fcntl, socket, struct\n"
                       "def t(f):\n"
                       "    try: f(); print(\"allowed\")\n"
                       "    except OSError as e: print(errno.errorcode[e.errno])\n"
                       "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                       "t(lambda: fcntl.ioctl(s, 0x8914, struct.pack(\"16sH22x\", b\"lo\", 0)))\n"
                       "t(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n"
                       "t(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))\n"
                       "t(lambda: open(\"/proc/sys/net/ipv4/ip_forward\", \"w\").write(\"1\"))'", "root")
check(out.split()[:3] == ["EPERM"] * 3 and out.split()[3:] in (["EACCES"], ["EROFS"], ["EPERM"]),
      "as root of the sandbox: bringing lo down, a raw socket, a packet socket and a net sysctl are all refused", out, err)

# A clean namespace goes to the next sandbox, with nothing of the last one in it: the abstract
# name a run of A still listened on when A was destroyed is free in B.
c.send({"id": "bg", "op": "run", "sandbox": A, "command": "python3 -c 'import socket, time\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(\"\\0sbx-netns-test\"); s.listen()\n"
        "time.sleep(600)'"})
code, out, err = sh(A, "for i in $(seq 50); do grep -q @sbx-netns-test /proc/net/unix && break; sleep 0.1; done; "
                       "grep -c @sbx-netns-test /proc/net/unix")
is_(out.strip(), "1", "a run of A listens on an abstract socket")
destroy(A)
is_(c.final("bg", 30).get("reason"), "destroyed", "... until A is destroyed")
h1 = pool()
check(h1["idle"] >= 1, "A's namespace went back to the pool", h1)
B = create()
is_(netns(B), nsA, "the next sandbox gets A's namespace")
is_(pool()["reused"], h1["reused"] + 1, "health counts it as reused")
code, out, err = sh(B, "grep -c sbx-netns-test /proc/net/unix; tail -n +2 /proc/net/tcp | wc -l; "
                       "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"\\0sbx-netns-test\"); print(\"free\")'")
is_(out.split(), ["0", "0", "free"], "B sees no socket of A's, and A's abstract name is free")

# Ports below 1024, lo and ping, as either user. The connections leave sockets in TIME_WAIT,
# which keep the namespace from the next sandbox.
for user in (None, "root"):
    who = user or "the default user"
    code, out, err = sh(B, "python3 -c 'import socket\n"
                           "s = socket.socket(); s.bind((\"127.0.0.1\", 80 if %r else 81)); s.listen()\n"
                           "t = socket.create_connection(s.getsockname()); a, _ = s.accept(); a.sendall(b\"hi\"); print(t.recv(2).decode())\n"
                           "t.close(); a.close()\n"
                           "p = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)\n"
                           "p.sendto(b\"\\x08\\0\\0\\0\\0\\0\\0\\1\", (\"127.0.0.1\", 0)); print(len(p.recv(64)))'" % bool(user), user)
    is_((code, out.split()), (0, ["hi", "8"]), "as %s: binding a port below 1024, connecting over lo and ping (an ICMP "
        "datagram socket) work" % who)
code, out, err = sh(B, "grep -o 'tw [0-9]*' /proc/net/sockstat")
check(out.strip() not in ("", "tw 0"), "B left TCP sockets in TIME_WAIT", out)
d0 = pool()["discarded"]
destroy(B)
is_(pool()["discarded"], d0 + 1, "B's namespace is dropped, not kept")
C = create()
nsC = netns(C)
check(len(nsC) == 16 and nsC != nsA, "the next sandbox gets another namespace", nsC, nsA)
code, out, err = sh(C, "grep -o 'tw [0-9]*' /proc/net/sockstat")
is_(out.strip(), "tw 0", "... with no TIME_WAIT in it")
destroy(C)
EOF

_finish_plan
