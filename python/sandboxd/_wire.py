# SPDX-License-Identifier: LGPL-2.1-or-later
"""The wire format, without any I/O (sans-io): framing, request ids, routing of the lines that
come back to the request they answer, and the end of session subscriptions. Client (threads)
and AsyncClient (asyncio) both drive one Wire each; neither parses or routes a line itself.

A Wire is not thread-safe: its owner serialises calls to it."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import ProtocolViolation, TooLarge

JSON = dict[str, Any]
S = TypeVar("S")

#: The daemon's default ``max_line_bytes``: a longer request would be refused (``too_large``).
DEFAULT_MAX_LINE = 4 << 20

#: A line the Wire makes itself, for a subscription that ended without an ``exit`` event: a
#: ``pty.detach`` of its session, or another ``pty.attach`` of that session on this connection.
DETACHED_EVENT = "detached"

SUBSCRIBING_OPS = frozenset({"pty.open", "pty.attach"})


@dataclass
class Pending(Generic[S]):
    """One request in flight. ``sink`` is the owner's (a queue). After a subscribing request's
    ``ok`` reply ``replied`` is set and the entry stays until the session's ``exit`` event."""

    id: int
    op: str
    sink: S
    session: str | None = None
    replied: bool = False
    seen: bool = False


def encode(req: JSON) -> bytes:
    """One request line: compact, UTF-8, no NaN (the daemon refuses it, as RFC 8259 does)."""
    return json.dumps(req, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode() + b"\n"


class Wire(Generic[S]):
    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE) -> None:
        self.max_line_bytes = max_line_bytes
        self._next_id = 1
        self._pending: dict[int, Pending[S]] = {}
        self._buf = bytearray()

    # ---- requests ---------------------------------------------------------------------

    def request(self, op: str, fields: JSON, sink: S) -> tuple[Pending[S], bytes]:
        """Registers a request and returns it with the line to send. Fields that are None are
        left out (the protocol's "absent"). Raises TooLarge, before anything is sent, for a
        line the daemon would refuse."""
        rid = self._next_id
        self._next_id += 1
        req: JSON = {"id": rid, "op": op}
        req.update((k, v) for k, v in fields.items() if v is not None)
        line = encode(req)
        if len(line) > self.max_line_bytes:
            raise TooLarge(f"the request is {len(line)} bytes, over the line cap of "
                           f"{self.max_line_bytes}", op=op)
        session = fields.get("session") if op in ("pty.attach", "pty.detach") else None
        p: Pending[S] = Pending(rid, op, sink, session=session if isinstance(session, str) else None)
        self._pending[rid] = p
        return p, line

    def forget(self, p: Pending[S]) -> None:
        """The owner gave up on p (its send failed, its waiter went): later lines for it are
        dropped."""
        self._pending.pop(p.id, None)

    def in_flight(self) -> int:
        return len(self._pending)

    # ---- replies ----------------------------------------------------------------------

    def feed(self, data: bytes) -> list[tuple[Pending[S], JSON]]:
        """Takes bytes read from the socket; returns each complete line that answers a
        request of ours, with its request, in order. Raises ProtocolViolation for a line that
        is not a JSON object (the connection is then unusable)."""
        self._buf += data
        out: list[tuple[Pending[S], JSON]] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                return out
            raw = bytes(self._buf[:nl])
            del self._buf[:nl + 1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if raw.strip():
                self._route(self._parse(raw), out)

    @staticmethod
    def _parse(raw: bytes) -> JSON:
        # Bytes that are not UTF-8 inside a string (a name the daemon echoes as it is) become
        # surrogates, as os.fsdecode makes them, rather than ending the connection.
        try:
            msg = json.loads(raw.decode("utf-8", "surrogateescape"))
        except ValueError as e:
            raise ProtocolViolation(f"sandboxd sent a line that is not JSON: {e}") from None
        if not isinstance(msg, dict):
            raise ProtocolViolation("sandboxd sent a line that is not a JSON object")
        return msg

    def _route(self, msg: JSON, out: list[tuple[Pending[S], JSON]]) -> None:
        rid = msg.get("id")
        if rid is None:
            # invalid_json / too_large cannot name their request. This client sends only valid
            # JSON under the cap, so one means a cap lower than ours: give it to the oldest
            # request that has had no line yet (the daemon answers a line's framing first).
            p = next((q for q in self._pending.values() if not q.seen), None)
            if p is None or "ok" not in msg:
                return
        else:
            q = self._pending.get(rid) if isinstance(rid, int) and not isinstance(rid, bool) else None
            if q is None:
                return  # not ours (or given up)
            p = q
        p.seen = True
        if "event" in msg:
            out.append((p, msg))
            if p.replied and msg.get("event") == "exit":
                del self._pending[p.id]
            return
        if "ok" not in msg:
            return
        out.append((p, msg))
        ok = msg.get("ok") is True
        if p.op in SUBSCRIBING_OPS and ok:
            p.replied = True
            session = msg.get("session")
            p.session = session if isinstance(session, str) else p.session
            self._end_others(p, out)
        else:
            self._pending.pop(p.id, None)
            if p.op == "pty.detach" and ok:
                self._end_subscriptions(p.session, out, keep=None)

    def _end_others(self, p: Pending[S], out: list[tuple[Pending[S], JSON]]) -> None:
        # A second attach on one connection moves its subscription: the older one gets no more.
        self._end_subscriptions(p.session, out, keep=p)

    def _end_subscriptions(self, session: str | None, out: list[tuple[Pending[S], JSON]],
                           keep: Pending[S] | None) -> None:
        if session is None:
            return
        for q in list(self._pending.values()):
            if q is not keep and q.replied and q.session == session:
                del self._pending[q.id]
                out.append((q, {"id": q.id, "event": DETACHED_EVENT, "session": session}))

    def connection_lost(self) -> list[Pending[S]]:
        """The connection ended: every request still in flight, which the owner fails."""
        lost = list(self._pending.values())
        self._pending.clear()
        self._buf.clear()
        return lost
