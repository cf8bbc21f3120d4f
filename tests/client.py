#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small raw-socket client of sandboxd's wire protocol, for the integration tests (stdlib only).

As a module (the t-*.sh tests put tests/ on sys.path):
    c = Conn(path); reply = c.call({"op": "hello"}); c.close()
As a command:
    client.py SOCK call JSON [--timeout S]
        sends one request (an "id" is added when missing), prints its final reply as one JSON
        line; exit status 0, or 1 (with {"client_error":...} printed) on EOF or timeout.
    client.py SOCK raw [--count N] [--timeout S]
        sends its standard input as is, then prints the reply lines (up to N, until EOF or
        until nothing arrives for S seconds).
"""
import json
import os
import socket
import sys
import time


class ClientError(Exception):
    pass


class Conn:
    def __init__(self, path, timeout=30.0):
        self.path = path
        self.timeout = timeout
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        self.eof = False
        self.next_id = 1
        self.pending = []  # lines read while looking for a given id

    def fileno(self):
        return self.s.fileno()

    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.s.sendall(data)

    def send(self, obj):
        self.send_raw(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def recv_line(self, timeout=None):
        """One reply line without its newline (bytes), or None at EOF. Raises ClientError on
        timeout."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while b"\n" not in self.buf:
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClientError("timed out waiting for a reply line")
            self.s.settimeout(left)
            try:
                chunk = self.s.recv(1 << 16)
            except socket.timeout:
                raise ClientError("timed out waiting for a reply line")
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
                if not self.buf:
                    return None
                line, self.buf = self.buf, b""
                return line
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def recv_json(self, timeout=None):
        line = self.recv_line(timeout)
        if line is None:
            return None
        return json.loads(line)

    def final(self, req_id, timeout=None):
        """Reads until the final reply to req_id (event lines and other ids are kept aside)."""
        for i, m in enumerate(self.pending):
            if m.get("id") == req_id and "ok" in m:
                del self.pending[i]
                return m
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            m = self.recv_json(max(0.0, deadline - time.monotonic()))
            if m is None:
                raise ClientError("connection closed before the reply to id %r" % (req_id,))
            if m.get("id") == req_id and "ok" in m:
                return m
            self.pending.append(m)

    def call(self, req, timeout=None):
        req = dict(req)
        if "id" not in req:
            req["id"] = self.next_id
            self.next_id += 1
        self.send(req)
        return self.final(req["id"], timeout)

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def check(cond, desc, *diag):
    """One result line for lib.sh's run_py: "PASS desc" or "FAIL desc" plus "# diag" lines."""
    print(("PASS " if cond else "FAIL ") + desc)
    if not cond:
        for d in diag:
            for line in str(d)[:4000].splitlines() or [""]:
                print("# " + line)
    sys.stdout.flush()
    return bool(cond)


def is_(got, expected, desc):
    return check(got == expected, desc, "got:      %r" % (got,), "expected: %r" % (expected,))


def wait_for(pred, limit, step=0.1):
    """Polls pred() until it is true or limit seconds have passed; returns its last value."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def cgroup_dirs(path):
    """Every cgroup directory strictly below path."""
    out = []
    for root, dirs, _ in os.walk(path):
        out += [os.path.join(root, d) for d in dirs]
    return out


def procs_under(path):
    """Every pid in the cgroup subtree at path (path included)."""
    pids = []
    for root, _, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                pids += [int(p) for p in open(os.path.join(root, "cgroup.procs")).read().split()]
            except OSError:
                pass
    return pids


def warm_helper(pid):
    """Whether pid is a daemon's helper waiting, warm, for a sandbox's next run (docs/architecture.md,
    "The next run, made ahead"): a process of the daemon's, not of any run."""
    try:
        return open("/proc/%d/comm" % pid).read().strip() == "sandboxd-warm"
    except OSError:
        return False


def call(path, req, timeout=30.0):
    c = Conn(path, timeout)
    try:
        return c.call(req, timeout)
    finally:
        c.close()


def call_with_fds(path, req, fds, uid=None):
    """One request with fds passed beside it (SCM_RIGHTS), from a child process (as uid, if
    given): its final reply, or {} when the child could not say."""
    import array
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            if uid is not None:
                os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
            c = Conn(path)
            data = (json.dumps(dict(req, id=1, fds=len(fds))) + "\n").encode()
            if fds:
                c.s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            else:
                c.s.sendall(data)
            os.write(w, json.dumps(c.final(1, timeout=60)).encode())
        except Exception as e:
            print("# child: %r" % (e,), flush=True)
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        out += b
    os.waitpid(pid, 0)
    return json.loads(out or b"{}")


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    path, verb, rest = argv[1], argv[2], argv[3:]
    timeout = 30.0
    count = None
    args = []
    i = 0
    while i < len(rest):
        if rest[i] == "--timeout":
            timeout = float(rest[i + 1])
            i += 2
        elif rest[i] == "--count":
            count = int(rest[i + 1])
            i += 2
        else:
            args.append(rest[i])
            i += 1
    try:
        if verb == "call":
            reply = call(path, json.loads(args[0]), timeout)
            print(json.dumps(reply, separators=(",", ":")), flush=True)
            return 0
        if verb == "raw":
            c = Conn(path, timeout)
            c.send_raw(sys.stdin.buffer.read())
            n = 0
            while count is None or n < count:
                try:
                    line = c.recv_line(timeout)
                except ClientError:
                    break
                if line is None:
                    break
                # Flushed line by line: a test reads each reply while the others are awaited
                # (a file or pipe is block-buffered, and no test may rely on PYTHONUNBUFFERED).
                sys.stdout.write(line.decode("utf-8", "replace") + "\n")
                sys.stdout.flush()
                n += 1
            c.close()
            return 0
    except (ClientError, OSError, ValueError) as e:
        print(json.dumps({"client_error": str(e)}), flush=True)
        return 1
    sys.stderr.write("unknown verb %r\n" % verb)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
