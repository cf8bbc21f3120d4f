# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers for the session tests (t-pty.sh): a session's events on a client.Conn."""
import base64
import time

from client import ClientError


def data_of(ev):
    """The bytes of an output event."""
    d = ev.get("data", "")
    if ev.get("data_encoding") == "base64":
        return base64.b64decode(d)
    return d.encode()


class Session:
    """The events of one subscription (the id of its pty.open or pty.attach) on a connection."""

    def __init__(self, conn, reply, req_id):
        self.c = conn
        self.reply = reply
        self.id = reply.get("session")
        self.rid = req_id
        self.out = {"stdout": b"", "stderr": b""}
        self.events = []
        self.exit = None
        self.next_seq = reply.get("first_seq", 0)
        self.gaps = []  # (expected seq, got seq) where an event did not follow on
        self.keep = True  # False: count the output, keep only its last 64K (floods)
        self.count = {"stdout": 0, "stderr": 0}

    def _next(self, deadline):
        for i, m in enumerate(self.c.pending):
            if m.get("id") == self.rid and "event" in m:
                del self.c.pending[i]
                return m
        while True:
            m = self.c.recv_json(max(0.0, deadline - time.monotonic()))
            if m is None:
                raise ClientError("connection closed")
            if m.get("id") == self.rid and "event" in m:
                return m
            self.c.pending.append(m)

    def pump(self, deadline):
        m = self._next(deadline)
        if self.keep or m["event"] not in ("stdout", "stderr"):
            self.events.append(m)
        kind = m["event"]
        if kind in ("stdout", "stderr"):
            if m["seq"] != self.next_seq:
                self.gaps.append((self.next_seq, m["seq"]))
            b = data_of(m)
            self.count[kind] += len(b)
            self.out[kind] = (self.out[kind] + b) if self.keep else (self.out[kind][-65536:] + b)
            self.next_seq = m["seq"] + len(b)
        elif kind == "dropped":
            self.next_seq = m["seq"] + m["bytes"]
        elif kind == "exit":
            self.exit = m
        return m

    def wait_for(self, needle, timeout=30, stream="stdout"):
        """Reads until needle (bytes or str) is in the stream's output; True when it came."""
        if isinstance(needle, str):
            needle = needle.encode()
        deadline = time.monotonic() + timeout
        try:
            while needle not in self.out[stream]:
                if self.exit is not None:
                    return False
                self.pump(deadline)
        except ClientError:
            return False
        return True

    def wait_exit(self, timeout=30):
        deadline = time.monotonic() + timeout
        try:
            while self.exit is None:
                self.pump(deadline)
        except ClientError:
            pass
        return self.exit

    def text(self, stream="stdout"):
        return self.out[stream].decode("utf-8", "replace")


def _follow(conn, prefix, req):
    """Sends a request whose events follow its reply; returns (reply, Session or None)."""
    req["id"] = "%s-%d" % (prefix, conn.next_id)
    conn.next_id += 1
    r = conn.call(req, 60)
    return r, (Session(conn, r, req["id"]) if r.get("ok") else None)


def open_session(conn, sandbox, **fields):
    """pty.open; returns (reply, Session or None)."""
    return _follow(conn, "open", dict(fields, op="pty.open", sandbox=sandbox))


def attach(conn, session, **fields):
    """pty.attach; returns (reply, Session or None)."""
    return _follow(conn, "attach", dict(fields, op="pty.attach", session=session))


def err_code(reply):
    return (reply.get("error") or {}).get("code")
