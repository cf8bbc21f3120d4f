#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""copy_files: a file in, a command on it, its result out, with the sandboxd package.

    SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock python3 copy_files.py [--best-effort] INPUT OUTPUT [CMD ARG...]

Creates a sandbox, copies the local file INPUT to /work/input in it (its file descriptor goes to
the daemon: no byte passes through this program), runs CMD (default: sort -o /work/output
/work/input), copies /work/output out to the local file OUTPUT, prints what each step moved, and
destroys the sandbox (the with block does). Exits 0 only when every step succeeded and CMD
exited 0. --best-effort (or SANDBOX_BEST_EFFORT=1) accepts limits the host cannot enforce.
"""
import os
import sys

try:
    import sandboxd
except ImportError:  # not installed: the checkout's python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import sandboxd

from sandboxd import Sandbox


def main(argv):
    best_effort = os.environ.get("SANDBOX_BEST_EFFORT", "") in ("1", "yes", "true")
    if argv[:1] == ["--best-effort"]:
        best_effort, argv = True, argv[1:]
    if len(argv) < 2:
        print("usage: copy_files.py [--best-effort] INPUT OUTPUT [CMD ARG...]", file=sys.stderr)
        return 2
    local_in, local_out, command = argv[0], argv[1], argv[2:] or ["sort", "-o", "/work/output", "/work/input"]
    code = 0
    try:
        with Sandbox.create(best_effort=best_effort) as sb:
            print(f"created: {sb.id}", flush=True)
            with open(local_in, "rb") as f:
                w = sb.files.write_from("/work/input", f)
            print(f"copied in: {local_in} -> /work/input ({w.bytes} bytes)", flush=True)
            r = sb.run(command)
            print(f"ran: exit_code {r.exit_code}, reason {r.reason}", flush=True)
            if r.exit_code == 0:
                with open(local_out, "wb") as f:
                    n = sb.files.read_into("/work/output", f)
                print(f"copied out: /work/output -> {local_out} ({n} bytes)", flush=True)
            else:
                sys.stderr.buffer.write(r.stderr_data)
                code = 1
        print(f"destroyed: {sb.id}", flush=True)
    except sandboxd.Error as e:
        print(f"copy_files: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"copy_files: {e}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
