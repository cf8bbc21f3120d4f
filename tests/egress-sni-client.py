#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The client side of tests/t-egress-sni.sh, run inside a sandbox (python3 -c "$(cat this)" ...):
  tls NAME HOST [echo TEXT]     TLS to HOST:443 with server_hostname NAME, then "echo TEXT"
  http HOSTHDR HOST             an HTTP/1.1 request to HOST:80 with Host: HOSTHDR, then "echo hi"
  ech NAME HOST                 a ClientHello with server_name NAME and Encrypted Client Hello
  udp HOST                      a datagram to HOST:443
  bulk tls|http NAME HOST MIB   MIB MiB each way, checked: "intact SECONDS"
  blast NAME HOST MIB           MIB MiB of zeros up over HTTP, unchecked: "sent MIB/S"
  connects NAME HOST N          N HTTP connections one after the other: "connected PER-SECOND"
Prints "reached ANSWER", or "refused ERRNO-NAME" (a reset, a refusal, a timeout)."""
import errno
import hashlib
import os
import socket
import ssl
import struct
import sys
import time

BLOCK = bytes(range(256)) * 4096


def pattern(n):
    out = bytearray()
    while len(out) < n:
        out += BLOCK[:n - len(out)]
    return bytes(out)


def tls_connect(name, host):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = socket.create_connection((host, 443), timeout=8)
    return ctx.wrap_socket(s, server_hostname=name)


def http_connect(hosthdr, host):
    s = socket.create_connection((host, 80), timeout=8)
    s.sendall(f"GET / HTTP/1.1\r\nHost: {hosthdr}\r\nUser-Agent: t-egress-sni\r\n\r\n".encode())
    return s


def recv_line(s):
    data = b""
    while not data.endswith(b"\n"):
        b = s.recv(4096)
        if not b:
            break
        data += b
    return data.decode().strip()


def recv_n(s, n):
    h, left = hashlib.sha256(), n
    while left > 0:
        b = s.recv(min(left, 1 << 20))
        if not b:
            raise OSError(errno.ECONNABORTED, "short")
        h.update(b)
        left -= len(b)
    return h.hexdigest()


def ech_hello(name):
    n = name.encode()
    sni = struct.pack("!HBH", len(n) + 3, 0, len(n)) + n
    exts = struct.pack("!HH", 0, len(sni)) + sni
    ech = b"\x00\x00\x01\x00\x01\x01" + b"\x00\x20" + os.urandom(32) + b"\x00\x10" + os.urandom(16)
    exts += struct.pack("!HH", 0xfe0d, len(ech)) + ech
    body = b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) + b"\x00\x02\x13\x01\x01\x00"
    body += struct.pack("!H", len(exts)) + exts
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


def main(argv):
    mode = argv[0]
    try:
        if mode == "tls":
            t = tls_connect(argv[1], argv[2])
            t.sendall(b"echo " + (argv[3] if len(argv) > 3 else "hi").encode() + b"\n")
            print("reached", recv_line(t))
        elif mode == "http":
            s = http_connect(argv[1], argv[2])
            s.sendall(b"echo hi\n")
            print("reached", recv_line(s))
        elif mode == "ech":
            s = socket.create_connection((argv[2], 443), timeout=8)
            s.sendall(ech_hello(argv[1]))
            b = s.recv(4096)
            print("reached", len(b), "bytes" if b else "end")
        elif mode == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(2)
            s.connect((argv[1], 443))
            for _ in range(3):
                s.send(b"\xc0QUIC-initial" + b"x" * 1188)
                time.sleep(0.2)
            s.recv(100)
            print("reached")
        elif mode == "blast":
            n = int(argv[3]) << 20
            s = http_connect(argv[1], argv[2])
            chunk = memoryview(bytes(4 << 20))
            start = time.monotonic()
            s.sendall(b"sink %d\n" % n)
            left = n
            while left > 0:
                left -= s.send(chunk[:min(left, len(chunk))])
            ok = recv_line(s)
            print("sent %.0f" % ((n >> 20) / (time.monotonic() - start)) if ok == "ok" else "lost")
        elif mode == "connects":
            start = time.monotonic()
            for _ in range(int(argv[3])):
                s = http_connect(argv[1], argv[2])
                s.sendall(b"echo hi\n")
                if not recv_line(s):
                    raise OSError(errno.ECONNABORTED, "no answer")
                s.close()
            print("connected %.0f" % (int(argv[3]) / (time.monotonic() - start)))
        elif mode == "bulk":
            kind, name, host, n = argv[1], argv[2], argv[3], int(argv[4]) << 20
            s = tls_connect(name, host) if kind == "tls" else http_connect(name, host)
            start = time.monotonic()
            s.sendall(b"get %d\n" % n)
            got = recv_n(s, n)
            s.sendall(b"put %d\n" % n)
            data = pattern(n)
            s.sendall(data)
            echoed = recv_line(s)
            secs = time.monotonic() - start
            want = hashlib.sha256(data).hexdigest()
            print("intact %.3f" % secs if got == want and echoed == want else "corrupt")
    except (OSError, ssl.SSLError) as e:
        code = getattr(e, "errno", None)
        print("refused", errno.errorcode.get(code, type(e).__name__) if code else type(e).__name__)


main(sys.argv[1:])
