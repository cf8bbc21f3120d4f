# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every operation of the protocol as a Call: the request's op and fields, and how its ``ok``
reply becomes a dataclass. Built once here, sent by Client and AsyncClient alike."""
from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Union

from .errors import ProtocolViolation, error_from_reply
from .replies import (
    JSON, DestroyResult, Health, Hello, RestoreResult, RunResult, SandboxInfo, SessionExit, SessionInfo,
    Snapshot, SnapshotResult, SweepResult, _d, _i, _l, _s,
)

T = TypeVar("T")

#: A size: bytes, or a string such as "256M" (the daemon parses it).
Size = Union[int, str]
#: A duration: seconds, or a string such as "30s", "500ms".
Duration = Union[int, float, str]
#: A command: a string for /bin/sh -c, or an argv.
Command = Union[str, Sequence[str]]
#: A signal: a name ("INT", "SIGTERM", "RTMIN+1") or a number.
Signal = Union[str, int]
#: A snapshot: its id, "SANDBOX/ID", or a Snapshot.
SnapshotRef = Union[str, Snapshot]


@dataclass(frozen=True)
class Call(Generic[T]):
    op: str
    fields: JSON
    decode: Callable[[JSON], T]

    def finish(self, reply: JSON) -> T:
        """The value of the final reply, or the exception of its error code raised."""
        if reply.get("ok") is not True:
            raise error_from_reply(reply, self.op)
        try:
            return self.decode(reply)
        except (KeyError, TypeError, ValueError) as e:
            raise ProtocolViolation(f"{self.op}: a reply this package cannot read: {e}") from None


def _none(_: JSON) -> None:
    return None


def _command(command: Command | None, argv: Sequence[str] | None) -> JSON:
    if argv is not None:
        return {"argv": list(argv)}
    if command is None:
        return {}
    if isinstance(command, str):
        return {"command": command}
    return {"argv": list(command)}


def _payload(data: str | bytes | None, key: str, enc_key: str) -> JSON:
    if data is None:
        return {}
    if isinstance(data, bytes):
        return {key: base64.b64encode(data).decode(), enc_key: "base64"}
    return {key: data}


def _snapshot_ref(s: SnapshotRef) -> str:
    return s.ref if isinstance(s, Snapshot) else s


def _snapshot_id(s: SnapshotRef) -> str:
    return s.id if isinstance(s, Snapshot) else s


def limits(memory: Size | None = None, pids: int | None = None, cpus: float | str | None = None,
           timeout: Duration | None = None, output_bytes: Size | None = None,
           disk: Size | None = None, files: int | None = None,
           extra: Mapping[str, Any] | None = None) -> JSON | None:
    """The ``limits`` object of create (and of a throwaway run); None when empty."""
    out: JSON = dict(extra or {})
    for k, v in (("memory", memory), ("pids", pids), ("cpus", cpus), ("timeout_s", timeout),
                 ("output_bytes", output_bytes), ("disk", disk), ("files", files)):
        if v is not None:
            out[k] = v
    return out or None


def hello() -> Call[Hello]:
    return Call("hello", {}, Hello.from_json)


def health() -> Call[Health]:
    return Call("health", {}, Health.from_json)


def create(*, name: str | None = None, limits: JSON | None = None, network: str | None = None,
           env: Mapping[str, str] | None = None, best_effort: bool | None = None,
           ttl: Duration | None = None, idle: Duration | None = None, user: str | None = None,
           from_snapshot: SnapshotRef | None = None) -> Call[SandboxInfo]:
    return Call("create", {
        "name": name, "limits": limits, "network": network,
        "env": dict(env) if env is not None else None, "best_effort": best_effort, "ttl": ttl,
        "idle": idle, "user": user,
        "from_snapshot": _snapshot_ref(from_snapshot) if from_snapshot is not None else None,
    }, lambda r: SandboxInfo.from_json(_d(r, "sandbox")))


def list_sandboxes(usage: bool = False) -> Call[list[SandboxInfo]]:
    return Call("list", {"usage": True if usage else None},
                lambda r: [SandboxInfo.from_json(s) for s in _l(r, "sandboxes") if isinstance(s, dict)])


def inspect(sandbox: str) -> Call[SandboxInfo]:
    return Call("inspect", {"sandbox": sandbox}, lambda r: SandboxInfo.from_json(_d(r, "sandbox")))


def destroy(sandbox: str) -> Call[DestroyResult]:
    return Call("destroy", {"sandbox": sandbox}, DestroyResult.from_json)


def run(command: Command | None = None, *, sandbox: str | None = None,
        argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
        cwd: str | None = None, stdin: str | bytes | None = None,
        timeout: Duration | None = None, cpu_s: Duration | None = None,
        output_bytes: Size | None = None, memory: Size | None = None, pids: int | None = None,
        user: str | None = None, stream: bool = False, limits: JSON | None = None,
        network: str | None = None, best_effort: bool | None = None,
        workspace: str | None = None) -> Call[RunResult]:
    fields: JSON = {"sandbox": sandbox}
    fields.update(_command(command, argv))
    fields.update(_payload(stdin, "stdin", "stdin_encoding"))
    fields.update({
        "env": dict(env) if env is not None else None, "cwd": cwd, "timeout_s": timeout,
        "cpu_s": cpu_s, "output_bytes": output_bytes, "memory": memory, "pids": pids,
        "user": user, "stream": True if stream else None, "limits": limits, "network": network,
        "best_effort": best_effort, "workspace": workspace,
    })
    return Call("run", fields, RunResult.from_json)


def kill(run_id: str, signal: Signal | None = None) -> Call[None]:
    return Call("kill", {"run_id": run_id, "signal": signal}, _none)


def sweep(dry_run: bool = False) -> Call[SweepResult]:
    return Call("sweep", {"dry_run": True if dry_run else None}, SweepResult.from_json)


def snapshot(sandbox: str, label: str | None = None) -> Call[SnapshotResult]:
    return Call("snapshot", {"sandbox": sandbox, "label": label},
                lambda r: SnapshotResult.from_json(r, sandbox))


def snapshot_list(sandbox: str) -> Call[list[Snapshot]]:
    return Call("snapshot.list", {"sandbox": sandbox},
                lambda r: [Snapshot.from_json(s, _s(r, "sandbox") or None)
                           for s in _l(r, "snapshots") if isinstance(s, dict)])


def snapshot_restore(sandbox: str, snapshot: SnapshotRef) -> Call[RestoreResult]:
    return Call("snapshot.restore", {"sandbox": sandbox, "snapshot": _snapshot_id(snapshot)},
                RestoreResult.from_json)


def snapshot_delete(sandbox: str, snapshot: SnapshotRef) -> Call[str]:
    return Call("snapshot.delete", {"sandbox": sandbox, "snapshot": _snapshot_id(snapshot)},
                lambda r: _s(r, "deleted"))


def pty_open(sandbox: str, command: Command | None = None, *, argv: Sequence[str] | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None,
             pty: bool | None = None, rows: int | None = None, cols: int | None = None,
             term: str | None = None) -> Call[SessionInfo]:
    fields: JSON = {"sandbox": sandbox}
    fields.update(_command(command, argv))
    fields.update({"env": dict(env) if env is not None else None, "cwd": cwd, "pty": pty,
                   "rows": rows, "cols": cols, "term": term})
    return Call("pty.open", fields, SessionInfo.from_json)


def pty_write(session: str, data: str | bytes = "", eof: bool = False) -> Call[int]:
    fields: JSON = {"session": session}
    fields.update(_payload(data, "data", "encoding"))
    fields["eof"] = True if eof else None
    return Call("pty.write", fields, lambda r: _i(r, "written"))


def pty_resize(session: str, rows: int, cols: int) -> Call[None]:
    return Call("pty.resize", {"session": session, "rows": rows, "cols": cols}, _none)


def pty_signal(session: str, signal: Signal) -> Call[int]:
    return Call("pty.signal", {"session": session, "signal": signal}, lambda r: _i(r, "processes"))


def pty_close(session: str) -> Call[SessionExit]:
    return Call("pty.close", {"session": session}, SessionExit.from_json)


def pty_attach(session: str, from_seq: int | None = None) -> Call[SessionInfo]:
    return Call("pty.attach", {"session": session, "from_seq": from_seq}, SessionInfo.from_json)


def pty_detach(session: str) -> Call[None]:
    return Call("pty.detach", {"session": session}, _none)


def raw(op: str, fields: Mapping[str, Any]) -> Call[JSON]:
    """Any request, its ``ok`` reply returned whole."""
    return Call(op, dict(fields), lambda r: r)
