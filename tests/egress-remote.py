#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The "remote" host of tests/t-egress.sh, run in a network namespace the test made: a tiny HTTP
server on each ADDR:PORT given (it answers "remote ADDR:PORT"), and with --dns ADDR a DNS answerer
on ADDR:53 that knows the names given (--name NAME=ADDR[,ADDR...][@TTL]: an A record; with several
addresses, the next one at each query; "*.x.test=ADDR" answers every name below x.test), with
their TTL or that of --ttl (for a --counting NAME, as a caching resolver gives it: less the seconds
since it was first asked), never answers names ending with --silent SUFFIX, and says NXDOMAIN to
the rest.
Every datagram it gets is written on stdout ("dns LENGTH NAME"). Prints "ready" once every socket
listens."""
import argparse
import socket
import struct
import sys
import threading
import time


def http(addr, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)

    def serve():
        while True:
            c, _ = s.accept()
            try:
                c.settimeout(5)
                c.recv(4096)
                body = f"remote {addr}:{port}\n".encode()
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            except OSError:
                pass
            c.close()

    threading.Thread(target=serve, daemon=True).start()


def echo(addr, port):
    """Each connection held open, in a thread of its own, sending back what it gets until it ends:
    a long-lived connection for the tests that cut one (sandbox.update)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)

    def one(c):
        try:
            while True:
                b = c.recv(4096)
                if not b:
                    break
                c.sendall(b)
        except OSError:
            pass
        c.close()

    def serve():
        while True:
            c, _ = s.accept()
            threading.Thread(target=one, args=(c,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def qname(msg):
    labels, i = [], 12
    while msg[i]:
        n = msg[i]
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    return ".".join(labels).lower(), i + 5  # the name, the end of the question (type, class)


def lookup(names, turns, name):
    addrs = names.get(name)
    if addrs is None:
        wild = [n for n in names if n.startswith("*.") and name.endswith(n[1:])]
        addrs = names[wild[0]] if wild else None
    if not addrs:
        return None
    turn = turns.get(name, 0)
    turns[name] = turn + 1
    return addrs[turn % len(addrs)]


def ttl_of(ttls, name, default):
    if name in ttls:
        return ttls[name]
    wild = [n for n in ttls if n.startswith("*.") and name.endswith(n[1:])]
    return ttls[wild[0]] if wild else default


def dns(addr, names, ttls, ttl, silent, counting=()):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    turns, first = {}, {}

    def ttl_now(name):
        t = ttl_of(ttls, name, ttl)
        if name not in counting:
            return t
        # As a caching resolver answers: the TTL less the seconds since it was first asked.
        first.setdefault(name, time.monotonic())
        return max(1, t - int(time.monotonic() - first[name]))

    def serve():
        while True:
            msg, peer = s.recvfrom(4096)
            try:
                name, end = qname(msg)
                qtype = struct.unpack("!H", msg[end - 4:end - 2])[0]
            except (IndexError, struct.error):
                print("dns", len(msg), "-", flush=True)
                continue
            print("dns", len(msg), name, flush=True)
            if silent and name.endswith(silent):
                continue
            known = lookup(names, turns, name) if qtype == 1 else names.get(name)
            header = msg[:2] + struct.pack("!HHHHH", 0x8180 if known else 0x8183, 1,
                                           1 if known and qtype == 1 else 0, 0, 0)
            answer = b""
            if known and qtype == 1:
                answer = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, ttl_now(name), 4) + socket.inet_aton(known)
            s.sendto(header + msg[12:end] + answer, peer)

    threading.Thread(target=serve, daemon=True).start()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("listen", nargs="*", help="ADDR:PORT (HTTP), ADDR:PORT/echo (held open, echoed)")
    p.add_argument("--dns")
    p.add_argument("--name", action="append", default=[])
    p.add_argument("--ttl", type=int, default=60)
    p.add_argument("--silent")
    p.add_argument("--counting", action="append", default=[])
    a = p.parse_args()
    for spec in a.listen:
        addr, port = spec.rsplit(":", 1)
        if port.endswith("/echo"):
            echo(addr, int(port[:-5]))
        else:
            http(addr, int(port))
    if a.dns:
        names, ttls = {}, {}
        for n in a.name:
            name, addrs = n.lower().split("=", 1)
            if "@" in addrs:
                addrs, t = addrs.split("@", 1)
                ttls[name] = int(t)
            names[name] = addrs.split(",")
        dns(a.dns, names, ttls, a.ttl, a.silent, [c.lower() for c in a.counting])
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
