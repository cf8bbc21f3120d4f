#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The remote of tests/t-egress-sni.sh, in the network namespace the test made: on ADDR, a TLS
server on 443 (--cert, --key: a self-signed certificate) that records the server_name each
client sent, a plain HTTP/1 server on 80 that records each request's Host, and a UDP socket on 443
that records each datagram. Every connection and datagram is written on stdout ("tls NAME",
"http HOST", "udp LENGTH"), so the test can tell what reached it. Over TLS and HTTP alike a
client says "echo TEXT" (answered "tls|http NAME TEXT"), "get N" (answered with N bytes of a
pattern), "put N" (then N bytes, answered with their sha256) or "sink N" (N bytes read and
dropped, answered "ok"). Prints "ready" once it listens."""
import argparse
import hashlib
import socket
import ssl
import sys
import threading

BLOCK = bytes(range(256)) * 4096  # 1 MiB


def pattern(n):
    out = bytearray()
    while len(out) < n:
        out += BLOCK[:n - len(out)]
    return bytes(out)


def readline(f):
    line = f.readline(1024)
    return line.decode("ascii", "replace").strip()


def serve_commands(kind, name, f, send):
    while True:
        line = readline(f)
        if not line:
            return
        cmd, _, arg = line.partition(" ")
        if cmd == "echo":
            send(f"{kind} {name} {arg}\n".encode())
        elif cmd == "get":
            send(pattern(int(arg)))
        elif cmd == "sink":
            n, buf = int(arg), bytearray(1 << 20)
            while n > 0:
                k = f.readinto(memoryview(buf)[:min(n, len(buf))])
                if not k:
                    return
                n -= k
            send(b"ok\n")
        elif cmd == "put":
            n, h = int(arg), hashlib.sha256()
            while n > 0:
                b = f.read(min(n, 1 << 20))
                if not b:
                    return
                h.update(b)
                n -= len(b)
            send((h.hexdigest() + "\n").encode())
        else:
            return


def tls_server(addr, cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    names = {}

    def on_sni(sslsock, name, _ctx):
        names[id(sslsock)] = name

    ctx.sni_callback = on_sni
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 443))
    s.listen(64)

    def conn(c):
        try:
            t = ctx.wrap_socket(c, server_side=True)
            name = names.pop(id(t), None) or "-"
            print("tls", name, flush=True)
            f = t.makefile("rb")
            serve_commands("tls", name, f, t.sendall)
            t.close()
        except (OSError, ssl.SSLError) as e:
            print("tls-error", e, flush=True)
            c.close()

    def accept():
        while True:
            c, _ = s.accept()
            c.settimeout(30)
            threading.Thread(target=conn, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def http_server(addr):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 80))
    s.listen(64)

    def conn(c):
        try:
            f = c.makefile("rb")
            host = "-"
            while True:
                line = readline(f)
                if not line:
                    break
                if line.lower().startswith("host:"):
                    host = line[5:].strip()
            print("http", host, flush=True)
            serve_commands("http", host, f, c.sendall)
        except OSError:
            pass
        c.close()

    def accept():
        while True:
            c, _ = s.accept()
            c.settimeout(30)
            threading.Thread(target=conn, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def udp_server(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 443))

    def serve():
        while True:
            msg, _ = s.recvfrom(4096)
            print("udp", len(msg), flush=True)

    threading.Thread(target=serve, daemon=True).start()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    a = p.parse_args()
    tls_server(a.addr, a.cert, a.key)
    http_server(a.addr)
    udp_server(a.addr)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
