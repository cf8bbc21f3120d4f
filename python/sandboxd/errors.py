# SPDX-License-Identifier: LGPL-2.1-or-later
"""The exceptions of the package: one class per error code of the protocol (docs/protocol.md,
"Error codes"), each carrying ``code``, ``field`` and ``message``, and the client's own."""
from __future__ import annotations

from typing import Any


class Error(Exception):
    """Base of every exception this package raises."""


class ConnectionLost(Error, ConnectionError):
    """The connection to sandboxd ended (or could not be made) before the answer came.

    A run in flight on a connection that closes is killed by the daemon; a session is not (it
    outlives the connection: attach to it again from another one)."""


class ProtocolViolation(Error):
    """sandboxd sent something this package cannot read (not JSON, not an object)."""


class SandboxdError(Error):
    """An ``ok:false`` reply. ``code``, ``field`` (None when the error concerns no one field) and
    ``message`` are the daemon's; ``error`` is its whole error object."""

    code: str = ""

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None,
                 error: dict[str, Any] | None = None, op: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.field = field
        self.error: dict[str, Any] = error if error is not None else {}
        self.op = op
        where = f"{op}: " if op else ""
        at = f" (field {field})" if field else ""
        super().__init__(f"{where}{self.code}: {self._for_python(message)}{at}")

    def _for_python(self, message: str) -> str:
        """The message as this package's caller reads it (``message`` stays the daemon's)."""
        return message


class InvalidJson(SandboxdError):
    code = "invalid_json"


class InvalidRequest(SandboxdError):
    code = "invalid_request"


class UnknownOp(SandboxdError):
    code = "unknown_op"


class TooLarge(SandboxdError):
    code = "too_large"


class NotFound(SandboxdError):
    code = "not_found"


class PermissionDenied(SandboxdError):
    code = "permission_denied"


class LimitUnenforceable(SandboxdError):
    code = "limit_unenforceable"

    def _for_python(self, message: str) -> str:
        # The daemon names its protocol field; a Python caller needs the keyword to pass.
        return message.replace("pass best_effort ", "pass best_effort=True ", 1)


class ResourceExhausted(SandboxdError):
    code = "resource_exhausted"


class SpawnFailed(SandboxdError):
    """The runner could not start the command: ``step`` (``exec``, ``cwd``, ...) and ``errno``
    (a symbolic name such as ``ENOENT``) say where and why."""

    code = "spawn_failed"

    @property
    def step(self) -> str | None:
        v = self.error.get("step")
        return v if isinstance(v, str) else None

    @property
    def errno_name(self) -> str | None:
        v = self.error.get("errno")
        return v if isinstance(v, str) else None


class Conflict(SandboxdError):
    code = "conflict"


class NoSpace(SandboxdError):
    """A file operation found the sandbox's disk full (or a ``size`` over its free space); the
    old file is as it was."""

    code = "no_space"


class Internal(SandboxdError):
    code = "internal"


class SessionLost(SandboxdError):
    code = "session_lost"


class TeardownStuck(SandboxdError):
    code = "teardown_stuck"


ERRORS: dict[str, type[SandboxdError]] = {
    cls.code: cls
    for cls in (InvalidJson, InvalidRequest, UnknownOp, TooLarge, NotFound, PermissionDenied,
                LimitUnenforceable, ResourceExhausted, SpawnFailed, Conflict, NoSpace, Internal,
                SessionLost, TeardownStuck)
}


def error_from_reply(reply: dict[str, Any], op: str | None = None) -> SandboxdError:
    """The exception for an ``ok:false`` reply; a code this package does not know yet is a
    plain SandboxdError with that code."""
    err = reply.get("error")
    if not isinstance(err, dict):
        err = {}
    code = err.get("code")
    code = code if isinstance(code, str) else "internal"
    message = err.get("message")
    field = err.get("field")
    cls = ERRORS.get(code, SandboxdError)
    return cls(message if isinstance(message, str) else "",
               code=code, field=field if isinstance(field, str) else None, error=err, op=op)
