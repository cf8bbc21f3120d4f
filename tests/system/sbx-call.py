#!/usr/bin/env python3
"""Sends one request per argument (JSON objects) over one connection and prints each final
reply as one JSON line. Socket: $SANDBOXD_SOCKET or /run/sandboxd/sandboxd.sock."""
import json
import os
import socket
import sys

path = os.environ.get("SANDBOXD_SOCKET", "/run/sandboxd/sandboxd.sock")
s = socket.socket(socket.AF_UNIX)
s.settimeout(float(os.environ.get("SBX_TIMEOUT", "120")))
s.connect(path)
f = s.makefile("rwb")
for i, arg in enumerate(sys.argv[1:], 1):
    req = json.loads(arg)
    req.setdefault("id", i)
    f.write((json.dumps(req) + "\n").encode())
    f.flush()
    while True:
        msg = json.loads(f.readline())
        if msg.get("id") == req["id"] and "event" not in msg:
            print(json.dumps(msg), flush=True)
            break
