#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""run_command: talk to sandboxd with nothing but the standard library.

    SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock python3 run_command.py [--best-effort] [CMD ARG...]

Creates a sandbox, runs CMD in it (default: echo hello) with its output streamed: the "started"
event, then what the command writes, passed on as it arrives (stdout to stdout, stderr to
stderr), then the result (exit code, reason), and destroys the sandbox. Exits 0 only when
every step succeeded and the command exited 0. --best-effort (or SANDBOX_BEST_EFFORT=1) accepts
limits the host cannot enforce.

The protocol (docs/protocol.md): one JSON object per line in both directions. Every request
carries an id; the daemon may send event lines ({"id":..,"event":..}) for it, then exactly one
final reply ({"id":..,"ok":true,..} or {"id":..,"ok":false,"error":{"code":..,"message":..}}).
"""
import base64
import json
import os
import socket
import sys

DEFAULT_SOCKET = "/run/sandboxd/sandboxd.sock"


class SandboxdError(Exception):
    def __init__(self, op, error):
        self.code = error.get("code", "?")
        super().__init__(f"{op}: {self.code}: {error.get('message', '')}")


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1

    def close(self):
        self.sock.close()

    def _read_line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("sandboxd closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, op, on_event=None, **fields):
        """Sends one request and returns its final reply; raises SandboxdError when not ok."""
        rid = self.next_id
        self.next_id += 1
        request = dict(fields, id=rid, op=op)
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        while True:
            msg = self._read_line()
            if msg.get("id") is None and msg.get("ok") is False:
                # invalid_json / too_large cannot name a request: it was ours, we sent one.
                raise SandboxdError(op, msg.get("error", {}))
            if msg.get("id") != rid:
                continue  # another request's line; this client has only one in flight
            if "event" in msg:
                if on_event:
                    on_event(msg)
                continue
            if not msg.get("ok"):
                raise SandboxdError(op, msg.get("error", {}))
            return msg


def print_event(event):
    kind = event["event"]
    if kind == "started":
        print(f"started: run {event.get('run_id')} in {event.get('sandbox')}", flush=True)
    elif kind in ("stdout", "stderr"):
        # Output as the command wrote it: text, or base64 when it was not UTF-8.
        data = event.get("data", "")
        raw = base64.b64decode(data) if event.get("data_encoding") == "base64" else data.encode()
        stream = sys.stdout if kind == "stdout" else sys.stderr
        stream.flush()
        stream.buffer.write(raw)
        stream.buffer.flush()
    else:
        print(f"event: {json.dumps(event)}", flush=True)


def print_result(reply):
    # The reply repeats the output (capped by output_bytes): it was streamed already.
    print(f"exit_code: {reply['exit_code']}")
    print(f"reason: {reply['reason']}")
    sys.stdout.flush()


def main(argv):
    best_effort = os.environ.get("SANDBOX_BEST_EFFORT", "") in ("1", "yes", "true")
    if argv[:1] == ["--best-effort"]:
        best_effort, argv = True, argv[1:]
    command = argv or ["echo", "hello"]
    path = os.environ.get("SANDBOXD_SOCKET") or DEFAULT_SOCKET

    try:
        client = Client(path)
    except OSError as e:
        print(f"run_command: connect {path}: {e.strerror or e}", file=sys.stderr)
        return 1
    code = 1
    try:
        sandbox = client.call("create", best_effort=best_effort)["sandbox"]["id"]
        print(f"created: {sandbox}", flush=True)
        try:
            reply = client.call("run", on_event=print_event, sandbox=sandbox, argv=command, stream=True)
            print_result(reply)
            code = 0 if reply["exit_code"] == 0 else 1
        finally:
            # Destroy even when the run failed: the sandbox would outlive us otherwise.
            client.call("destroy", sandbox=sandbox)
            print(f"destroyed: {sandbox}", flush=True)
    except (SandboxdError, OSError, ValueError) as e:
        print(f"run_command: {e}", file=sys.stderr)
        code = 1
    finally:
        client.close()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
