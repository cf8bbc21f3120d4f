#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""run_command: a sandbox, one command with its output streamed, with the sandboxd package.

    SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock python3 run_command.py [--best-effort] [CMD ARG...]

Creates a sandbox, runs CMD in it (default: echo hello) with its output streamed: the "started"
event, then what the command writes, passed on as it arrives (stdout to stdout, stderr to
stderr), then the result (exit code, reason), and destroys the sandbox (the with block does).
Exits 0 only when every step succeeded and the command exited 0. --best-effort (or
SANDBOX_BEST_EFFORT=1) accepts limits the host cannot enforce.

The package is python/ of sandboxd's tree (`pip install ./python`, or Debian's
python3-sandboxd); run from a checkout, this example finds it there. docs/python.md is its
manual.
"""
import os
import sys

try:
    import sandboxd
except ImportError:  # not installed: the checkout's python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import sandboxd

from sandboxd import Output, Sandbox, Started


def main(argv):
    best_effort = os.environ.get("SANDBOX_BEST_EFFORT", "") in ("1", "yes", "true")
    if argv[:1] == ["--best-effort"]:
        best_effort, argv = True, argv[1:]
    command = argv or ["echo", "hello"]
    try:
        # The socket: $SANDBOXD_SOCKET, else /run/sandboxd/sandboxd.sock (as sandboxctl).
        with Sandbox.create(best_effort=best_effort) as sb:
            print(f"created: {sb.id}", flush=True)
            stream = sb.stream(command)
            for ev in stream:
                if isinstance(ev, Started):
                    print(f"started: run {ev.run_id} in {ev.sandbox}", flush=True)
                elif isinstance(ev, Output):
                    # The bytes as the command wrote them (the daemon sends base64 for bytes
                    # that are not UTF-8; the package decodes it).
                    out = sys.stdout if ev.stream == "stdout" else sys.stderr
                    out.flush()
                    out.buffer.write(ev.data)
                    out.buffer.flush()
            r = stream.result
            assert r is not None
            # The result repeats the output (capped by output_bytes): it was streamed already.
            print(f"exit_code: {r.exit_code}")
            print(f"reason: {r.reason}", flush=True)
        print(f"destroyed: {sb.id}", flush=True)
        return 0 if r.exit_code == 0 else 1
    except sandboxd.Error as e:
        print(f"run_command: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
