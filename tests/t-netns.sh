#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Network namespaces used again (daemon/host/netns-pool.h, docs/security.md): a sandbox joins a
# namespace the daemon made, owned by the host's user namespace. Inside, the loopback is up, any
# user may bind low ports and ping, and /sys shows that namespace's lo; nobody, root included,
# may change an interface, an address, a route or a sysctl, or open a raw socket. A namespace
# goes to the next sandbox only when it shows what a new one shows (daemon/host/netns-pool.c compares
# /proc/net, the TCP metrics, two sysctls): one left with a TIME_WAIT socket, an IPv6 flow label
# or a TCP metrics entry is dropped; one a sandbox used and left nothing in (an abstract listener,
# netlink, UDP, ping, TCP closed by a reset) is used again. No net sysctl opens for writing, and
# no interface, address, route, neighbour, rule, nftables table, conntrack entry, xfrm state or
# anycast address can be made, as either user.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

# TCP metrics are shown by netlink alone: the check reads them inside with iproute2's ip.
command -v ip >/dev/null || nok "ip (package iproute2, scripts/deps.sh) is installed: the TCP metrics check needs it"
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

# Leftovers a check of sockets in use and TIME_WAIT did not see. Each is made in a sandbox as the
# default user, the sandbox destroyed; the next sandbox must get another namespace.
FLOWLABEL = ("import socket, struct\n"
             "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
             # struct in6_flowlabel_req: dst, label, action GET, share ANY, flags CREATE, expires,
             # linger (150 s, the most an unprivileged user may ask)
             "s.setsockopt(41, 32, struct.pack(\"16sIBBHHHI\", socket.inet_pton(socket.AF_INET6, \"::1\"), "
             "socket.htonl(0xbeef5), 0, 255, 1, 150, 150, 0))\n"
             "s.close()\n"
             "print(\"made\")")
TFO = ("import socket, struct\n"
       "s = socket.socket(); s.bind((\"0.0.0.0\", 8080)); s.listen()\n"
       "c = socket.socket(); c.sendto(b\"hi\", socket.MSG_FASTOPEN, (\"127.77.66.55\", 8080))\n"
       "a, _ = s.accept(); print(a.recv(2).decode())\n"
       # closed by a reset: no TIME_WAIT, only the metrics entry is left
       "for k in (c, a): k.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack(\"ii\", 1, 0)); k.close()\n"
       "s.close()")
for what, prog, want, seen in (("an IPv6 flow label (shared, lingering 150 s)", FLOWLABEL, "made",
                                "grep -ci beef5 /proc/net/ip6_flowlabel"),
                               ("a TCP metrics entry for an address of its choice (Fast Open)", TFO, "hi",
                                "ip tcp_metrics show | grep -c 127.77.66.55")):
    D = create()
    nsD = netns(D)
    code, out, err = sh(D, "python3 -c '%s'; %s; grep -o 'tw [0-9]*' /proc/net/sockstat" % (prog, seen))
    is_(out.split(), [want, "1", "tw", "0"], "a sandbox leaves %s, and no TIME_WAIT" % what)
    d0 = pool()["discarded"]
    destroy(D)
    is_(pool()["discarded"], d0 + 1, "... its namespace is dropped")
    E = create()
    nsE = netns(E)
    check(len(nsE) == 16 and nsE != nsD, "... and the next sandbox gets another one", nsE, nsD)
    code, out, err = sh(E, seen)
    is_(out.strip(), "0", "... with nothing of the last in it (%s)" % seen)
    destroy(E)

# Unix sockets that only a message in flight holds (each end sent over the pair, both closed):
# the kernel's garbage collector frees them, or they keep the namespace from the next sandbox.
# Either way the next sandbox sees none.
D = create()
code, out, err = sh(D, "python3 -c 'import socket\n"
                       "a, b = socket.socketpair()\n"
                       "socket.send_fds(a, [b\"x\"], [a.fileno(), b.fileno()])\n"
                       "a.close(); b.close(); print(\"sent\")'")
is_(out.strip(), "sent", "a sandbox leaves a pair of unix sockets held only by a message in flight")
destroy(D)
E = create()
code, out, err = sh(E, "tail -n +2 /proc/net/unix | wc -l")
is_(out.strip(), "0", "... the next sandbox sees no unix socket")
destroy(E)

# A sandbox that used the network and left nothing: its namespace is used again (the pool's
# point). Netlink, as getaddrinfo() does (its socket is freed an RCU grace period after the
# close), UDP over both families, ping, a TCP connection closed by a reset, an abstract socket.
CLEAN = ("import socket, struct\n"
         "n = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\n"
         "n.send(struct.pack(\"IHHII\", 20, 18, 0x301, 1, 0) + bytes(4)); n.recv(65536); n.close()\n"
         "socket.getaddrinfo(\"127.0.0.1\", 80, flags=socket.AI_ADDRCONFIG)\n"
         "for fam, addr in ((socket.AF_INET, \"127.0.0.1\"), (socket.AF_INET6, \"::1\")):\n"
         "    u = socket.socket(fam, socket.SOCK_DGRAM); u.bind((addr, 0)); u.sendto(b\"x\", u.getsockname()); u.recv(1); u.close()\n"
         "p = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)\n"
         "p.sendto(b\"\\x08\\0\\0\\0\\0\\0\\0\\1\", (\"127.0.0.1\", 0)); p.recv(64); p.close()\n"
         "s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()\n"
         "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b\"hi\"); print(a.recv(2).decode())\n"
         "for k in (c, a): k.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack(\"ii\", 1, 0)); k.close()\n"
         "s.close()\n"
         "x = socket.socket(socket.AF_UNIX); x.bind(\"\\0sbx-netns-clean\"); x.listen(); x.close()")
D = create()
nsD = netns(D)
code, out, err = sh(D, "python3 -c '%s'" % CLEAN)
is_((code, out.strip()), (0, "hi"), "a sandbox uses netlink, UDP, ping, TCP and a unix socket")
h = pool()
destroy(D)
E = create()
is_(netns(E), nsD, "... and the next sandbox gets its namespace")
is_(pool()["reused"], h["reused"] + 1, "... counted as reused")

# What cannot be made from inside, as either user: no net sysctl can be opened for writing (the
# namespace is the host's: root of the sandbox is not its root), and netlink refuses every
# change of configuration (EPERM before it reads the message), or has no such protocol.
for user in (None, "root"):
    who = user or "the default user"
    code, out, err = sh(E, "python3 -c 'import os\n"
                           "n = w = 0\n"
                           "for d, _, fs in os.walk(\"/proc/sys/net\"):\n"
                           "    for f in fs:\n"
                           "        n += 1\n"
                           "        try: os.close(os.open(os.path.join(d, f), os.O_WRONLY)); w += 1; print(d, f)\n"
                           "        except OSError: pass\n"
                           "print(n, w)'", user)
    words = out.split()
    check(code == 0 and len(words) == 2 and int(words[0]) > 100 and words[1] == "0",
          "as %s: none of the namespace's net sysctls can be opened for writing" % who, out, err)
    code, out, err = sh(E, "python3 -c 'import errno, socket, struct\n"
                           "def t(proto, kind):\n"
                           "    try: s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto)\n"
                           "    except OSError as e: return errno.errorcode[e.errno]\n"
                           "    s.send(struct.pack(\"IHHII\", 16 + 64, kind, 0x605, 1, 0) + bytes(64))\n"
                           "    e = struct.unpack(\"i\", s.recv(65536)[16:20])[0]\n"
                           "    return errno.errorcode[-e] if e else \"allowed\"\n"
                           # rtnetlink: a link, an address, a route, a neighbour, a rule;
                           # nfnetlink: an nftables table, a conntrack entry; xfrm: a state, a policy
                           "print(*[t(p, k) for p, k in ((0, 16), (0, 20), (0, 24), (0, 28), (0, 32), "
                           "(12, 0xa00), (12, 0x100), (6, 0x10), (6, 0x13))])\n"
                           # IPV6_JOIN_ANYCAST on lo: an anycast address (/proc/net/anycast6)
                           "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
                           "try: s.setsockopt(41, 27, socket.inet_pton(socket.AF_INET6, \"2001:db8::1\") + struct.pack(\"i\", 1)); print(\"allowed\")\n"
                           "except OSError as e: print(errno.errorcode[e.errno])'", user)
    words = out.split()
    check(len(words) == 10 and words[:5] == ["EPERM"] * 5 and words[9] == "EPERM" and
          all(w in ("EPERM", "EPROTONOSUPPORT") for w in words),
          "as %s: netlink refuses a new link, address, route, neighbour, rule, nftables table, "
          "conntrack entry, xfrm state and policy; an anycast address is refused" % who, out, err)
destroy(E)
EOF

_finish_plan
