#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A stand-in for sandboxd's file operations (docs/design/files.md), for tests/t-ctl-files.sh:
sandboxctl's cp, cat and ls can be driven end to end before the daemon implements them.

NOT a model of the daemon's safety: it maps a sandbox's paths onto a host directory (ROOT/<path>)
and does the I/O itself, as the test's own user. What it checks is the wire: every fd arrives
with the line that claims it ("fds": N), of the type its field allows, and every line is valid.
It logs each request as one JSON line to LOG, so that the test can see what sandboxctl sent.

usage: fake-files-daemon.py SOCKET ROOT LOG
"""
import fcntl
import json
import os
import socket
import stat
import subprocess
import sys

SOCK, ROOT, LOG = sys.argv[1], sys.argv[2], sys.argv[3]


def host_path(p):
    if not p.startswith("/"):
        p = "/work/" + p
    return os.path.join(ROOT, p.lstrip("/"))


def error(code, field, message):
    e = {"code": code, "message": message}
    if field:
        e["field"] = field
    return {"ok": False, "error": e}


def type_of(mode):
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char"),
                       (stat.S_ISBLK, "block")):
        if test(mode):
            return name
    return "unknown"


def check_fd(fd, want_write):
    """What sbx_fd_check() does for a file op: a regular file or a pipe, open the right way."""
    fl = fcntl.fcntl(fd, fcntl.F_GETFL)
    if fl & getattr(os, "O_PATH", 0o10000000):
        return "is opened O_PATH"
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        return "is a %s" % type_of(st.st_mode)
    acc = fl & os.O_ACCMODE
    if want_write and acc == os.O_RDONLY:
        return "is not open for writing"
    if not want_write and acc == os.O_WRONLY:
        return "is not open for reading"
    return None


class Conn:
    def __init__(self, s):
        self.s = s
        self.buf = b""
        self.fds = []

    def send(self, obj):
        self.s.sendall(json.dumps(obj).encode() + b"\n")

    def lines(self):
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                yield line
            data, fds, flags, _ = socket.recv_fds(self.s, 65536, 8)
            if flags & socket.MSG_CTRUNC:
                raise SystemExit("MSG_CTRUNC")
            self.fds.extend(fds)
            if not data:
                return
            self.buf += data

    def take_fd(self, req, want_write):
        n = req.get("fds", 0)
        if n != 1 or req.get("fd") != 0 or len(self.fds) < 1:
            return None, error("invalid_request", "fds", "fds %r with %d queued" % (n, len(self.fds)))
        fd = self.fds.pop(0)
        why = check_fd(fd, want_write)
        if why:
            os.close(fd)
            return None, error("invalid_request", "fd", "fd 0 " + why)
        return fd, None


def op_stat(c, req):
    p = host_path(req["path"])
    try:
        st = os.stat(p) if req.get("follow") else os.lstat(p)
    except FileNotFoundError:
        return error("not_found", "path", "no such file or directory: " + req["path"])
    s = {"path": req["path"], "type": type_of(st.st_mode), "size": st.st_size, "mode": stat.S_IMODE(st.st_mode)}
    if stat.S_ISLNK(st.st_mode):
        s["target"] = os.readlink(p)
    return {"ok": True, "stat": s}


def op_write(c, req):
    fd, err = c.take_fd(req, False)
    if err:
        return err
    p = host_path(req["path"])
    tmp = p + ".sbx-tmp"
    n = 0
    with os.fdopen(fd, "rb") as src, open(tmp, "wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
            n += len(chunk)
            c.send({"id": req["id"], "event": "progress", "bytes": n, "total": req.get("size")})
    if "mode" in req:
        os.chmod(tmp, req["mode"])
    os.rename(tmp, p)
    return {"ok": True, "path": req["path"], "bytes": n}


def op_read(c, req):
    fd, err = c.take_fd(req, True)
    if err:
        return err
    # As the daemon: nofollow refuses a symlink as the last name; a file named "unreadable" is
    # one the sandbox's user may not read.
    p = host_path(req["path"])
    if req.get("nofollow") and os.path.islink(p):
        os.close(fd)
        return error("invalid_request", "path", req["path"] + ": is a symlink (and nofollow was asked)")
    if os.path.basename(p) == "unreadable":
        os.close(fd)
        return error("permission_denied", "path", req["path"] + ": Permission denied")
    try:
        with open(host_path(req["path"]), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        os.close(fd)
        return error("not_found", "path", "no such file: " + req["path"])
    os.write(fd, data)
    os.close(fd)
    return {"ok": True, "bytes": len(data), "changed": False}


def op_put(c, req):
    fd, err = c.take_fd(req, False)
    if err:
        return err
    d = host_path(req["path"])
    if not os.path.isdir(d):
        os.mkdir(d)
    r = subprocess.run(["tar", "-x", "-f", "-", "-C", d], stdin=fd)
    os.close(fd)
    if r.returncode:
        return error("invalid_request", "tar", "tar -x failed")
    return {"ok": True, "entries": 1, "skipped": 0}


def op_get(c, req):
    fd, err = c.take_fd(req, True)
    if err:
        return err
    p = host_path(req["path"])
    if req["path"].endswith("/."):
        argv = ["tar", "-c", "-f", "-", "-C", p, "."]
    else:
        argv = ["tar", "-c", "-f", "-", "-C", os.path.dirname(p.rstrip("/")), os.path.basename(p.rstrip("/"))]
    r = subprocess.run(argv, stdout=fd)
    os.close(fd)
    if r.returncode:
        return error("not_found", "path", "tar -c failed")
    return {"ok": True, "entries": 1, "skipped": 0, "changed": 0}


def op_list(c, req):
    d = host_path(req["path"])
    entries = []
    for name in sorted(os.listdir(d)):
        st = os.lstat(os.path.join(d, name))
        e = {"name": name, "path": req["path"].rstrip("/") + "/" + name, "type": type_of(st.st_mode),
             "size": st.st_size, "mode": stat.S_IMODE(st.st_mode)}
        if stat.S_ISLNK(st.st_mode):
            e["target"] = os.readlink(os.path.join(d, name))
        entries.append(e)
    c.send({"id": req["id"], "event": "entries", "entries": entries})
    return {"ok": True, "entries": len(entries), "truncated": False}


OPS = {"file.stat": op_stat, "file.write": op_write, "file.read": op_read, "file.put": op_put,
       "file.get": op_get, "file.list": op_list}


def serve(c, log):
    for line in c.lines():
        req = json.loads(line)
        log.write(json.dumps(req, sort_keys=True) + "\n")
        log.flush()
        fn = OPS.get(req.get("op"))
        if req.get("fds") and fn not in (op_write, op_read, op_put, op_get):
            reply = error("invalid_request", "fds", "fds on a line that takes none")
        else:
            reply = fn(c, req) if fn else error("unknown_op", "op", "no such operation")
        reply["id"] = req.get("id")
        if c.fds and not reply.get("ok"):
            for fd in c.fds:
                os.close(fd)
            c.fds = []
        c.send(reply)
    if c.fds:
        raise SystemExit("%d fds arrived that no line claimed" % len(c.fds))


def main():
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(SOCK)
    ls.listen(8)
    with open(LOG, "a") as log:
        while True:
            s, _ = ls.accept()
            serve(Conn(s), log)
            s.close()


main()
