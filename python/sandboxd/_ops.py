# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every operation of the protocol as a Call: the request's op and fields, and how its ``ok``
reply becomes a dataclass. Built once here, sent by Client and AsyncClient alike."""
from __future__ import annotations

import base64
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, Union

from .errors import InvalidRequest, ProtocolViolation, error_from_reply
from .replies import (
    JSON, DestroyResult, FileList, NetworkUpdate, FileStat, FileWritten, Health, Hello, PublishedPort, RestoreResult, RunResult,
    SandboxInfo, SessionExit, SessionInfo, Snapshot, SnapshotResult, SweepResult, TreeCopied, _b, _d, _i, _l, _s,
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
#: A path in the sandbox: a str (non-UTF-8 names as os.fsdecode gives them) or bytes.
PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: A permission mode: an integer (0o644) or an octal string ("644").
Mode = Union[int, str]

#: At most this many fds travel with one request (docs/protocol.md, "File descriptors").
FDS_PER_MESSAGE = 8
# The daemon takes at most this many file transfers in flight on one connection (docs/protocol.md,
# "Files": resource_exhausted beyond); a Client lets more wait for their turn instead.
TRANSFER_OPS = frozenset({"file.read", "file.write", "file.put", "file.get"})
TRANSFERS_PER_CONNECTION = 4


@dataclass(frozen=True)
class Call(Generic[T]):
    """``fds``: descriptors sent with the request line (SCM_RIGHTS, ``"fds": N`` in the line;
    the caller keeps them open until the reply). ``events``: takes the request's events (those
    of file.list and file.read build the value ``decode`` returns)."""

    op: str
    fields: JSON
    decode: Callable[[JSON], T]
    fds: tuple[int, ...] = ()
    events: Callable[[JSON], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # The daemon reads "" as no sandbox given ("missing field"); say what the caller gave,
        # in the words of sandboxctl, before anything is sent.
        if self.fields.get("sandbox") == "":
            raise InvalidRequest("the sandbox argument is empty: give a sandbox's id, name or USER/NAME",
                                 field="sandbox", op=self.op)

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
           extra: Mapping[str, Any] | None = None, file_size: Size | None = None,
           open_files: int | None = None) -> JSON | None:
    """The ``limits`` object of create (and of a throwaway run); None when empty."""
    out: JSON = dict(extra or {})
    for k, v in (("memory", memory), ("pids", pids), ("cpus", cpus), ("timeout_s", timeout),
                 ("output_bytes", output_bytes), ("disk", disk), ("files", files),
                 ("file_size", file_size), ("open_files", open_files)):
        if v is not None:
            out[k] = v
    return out or None


def hello() -> Call[Hello]:
    return Call("hello", {}, Hello.from_json)


def health() -> Call[Health]:
    return Call("health", {}, Health.from_json)


def _network(network: str | Mapping[str, Any] | None) -> str | dict[str, Any] | None:
    """"none", or egress as the daemon takes it: {"egress": "all"} or {"egress": {"allow": [...]}}."""
    return dict(network) if isinstance(network, Mapping) else network


def _mounts(mounts: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    return [dict(m) for m in mounts] if mounts is not None else None


def _workspace(workspace: str | os.PathLike[str] | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """create's ``workspace``: a directory of the caller's as ``/work``, {"source": DIR}."""
    if workspace is None:
        return None
    if isinstance(workspace, Mapping):
        return dict(workspace)
    return {"source": os.fspath(workspace)}


#: create's ``root``: "readonly", "overlay", or {"path": DIR, "read_only": bool} (root clients).
Root = Union[str, Mapping[str, Any]]
#: A run's ``user``: "sandbox", "root", or {"uid": U, "gid": G}.
RunUser = Union[str, Mapping[str, int]]


def create(*, name: str | None = None, limits: JSON | None = None, network: str | Mapping[str, Any] | None = None,
           env: Mapping[str, str] | None = None, best_effort: bool | None = None,
           ttl: Duration | None = None, idle: Duration | None = None, user: str | None = None,
           from_snapshot: SnapshotRef | None = None, image: str | None = None,
           root: Root | None = None, mounts: Sequence[Mapping[str, Any]] | None = None,
           workspace: str | os.PathLike[str] | Mapping[str, Any] | None = None,
           hostname: str | None = None, ephemeral: bool | None = None,
           sysctls: Mapping[str, str] | None = None, masked_paths: Sequence[str] | None = None,
           readonly_paths: Sequence[str] | None = None, with_connection: bool | None = None) -> Call[SandboxInfo]:
    return Call("create", {
        "name": name, "limits": limits, "network": _network(network),
        "env": dict(env) if env is not None else None, "best_effort": best_effort, "ttl": ttl,
        "idle": idle, "user": user, "image": image,
        "root": dict(root) if isinstance(root, Mapping) else root,
        "from_snapshot": _snapshot_ref(from_snapshot) if from_snapshot is not None else None,
        "mounts": _mounts(mounts), "workspace": _workspace(workspace), "hostname": hostname,
        "ephemeral": ephemeral, "sysctls": dict(sysctls) if sysctls is not None else None,
        "masked_paths": list(masked_paths) if masked_paths is not None else None,
        "readonly_paths": list(readonly_paths) if readonly_paths is not None else None,
        "with_connection": with_connection,
    }, lambda r: SandboxInfo.from_json(_d(r, "sandbox")))


def list_sandboxes(usage: bool = False) -> Call[list[SandboxInfo]]:
    return Call("list", {"usage": True if usage else None},
                lambda r: [SandboxInfo.from_json(s) for s in _l(r, "sandboxes") if isinstance(s, dict)])


def inspect(sandbox: str) -> Call[SandboxInfo]:
    return Call("inspect", {"sandbox": sandbox}, lambda r: SandboxInfo.from_json(_d(r, "sandbox")))


def destroy(sandbox: str) -> Call[DestroyResult]:
    return Call("destroy", {"sandbox": sandbox}, DestroyResult.from_json)


def _client_fds(stdio: Sequence[int | None] | None, extra_fds: Sequence[int] | None) -> tuple[JSON, tuple[int, ...]]:
    """``stdio`` and ``extra_fds`` as indexes into the fds sent with the line (the caller's own)."""
    fds: list[int] = []
    fields: JSON = {}

    def index(fd: int) -> int:
        fds.append(fd)
        return len(fds) - 1

    if stdio is not None:
        fields["stdio"] = [None if fd is None else index(fd) for fd in stdio]
    if extra_fds is not None:
        fields["extra_fds"] = [index(fd) for fd in extra_fds]
    if fds:
        fields["fds"] = len(fds)
    return fields, tuple(fds)


def run(command: Command | None = None, *, sandbox: str | None = None,
        argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
        cwd: str | None = None, stdin: str | bytes | None = None,
        timeout: Duration | None = None, cpu_s: Duration | None = None,
        output_bytes: Size | None = None, memory: Size | None = None, pids: int | None = None,
        user: RunUser | None = None, stream: bool = False, limits: JSON | None = None,
        network: str | Mapping[str, Any] | None = None, best_effort: bool | None = None,
        workspace: str | None = None, image: str | None = None,
        mounts: Sequence[Mapping[str, Any]] | None = None,
        env_defaults: bool | None = None, file_size: Size | None = None,
        open_files: int | None = None, no_timeout: bool | None = None, umask: int | None = None,
        rlimits: Mapping[str, Any] | None = None, rlimits_lower: bool | None = None, pid_namespace: str | None = None,
        capabilities: Mapping[str, Sequence[str]] | None = None, stdio: Sequence[int | None] | None = None,
        extra_fds: Sequence[int] | None = None) -> Call[RunResult]:
    fields: JSON = {"sandbox": sandbox}
    fields.update(_command(command, argv))
    fields.update(_payload(stdin, "stdin", "stdin_encoding"))
    fields.update({
        "env": dict(env) if env is not None else None, "cwd": cwd, "timeout_s": timeout,
        "cpu_s": cpu_s, "output_bytes": output_bytes, "memory": memory, "pids": pids,
        "user": dict(user) if isinstance(user, Mapping) else user,
        "stream": True if stream else None, "limits": limits, "network": _network(network),
        "best_effort": best_effort, "workspace": workspace, "image": image,
        "mounts": _mounts(mounts), "env_defaults": env_defaults, "file_size": file_size,
        "open_files": open_files, "no_timeout": no_timeout, "umask": umask,
        "rlimits": dict(rlimits) if rlimits is not None else None, "rlimits_lower": rlimits_lower, "pid_namespace": pid_namespace,
        "capabilities": {k: list(v) for k, v in capabilities.items()} if capabilities is not None else None,
    })
    fd_fields, fds = _client_fds(stdio, extra_fds)
    fields.update(fd_fields)
    return Call("run", fields, RunResult.from_json, fds)


def kill(run_id: str, signal: Signal | None = None) -> Call[None]:
    return Call("kill", {"run_id": run_id, "signal": signal}, _none)


def run_attach(run_id: str, from_stdout: int | None = None, from_stderr: int | None = None) -> Call[RunResult]:
    """``run.attach``: a run that outlived a daemon restart; from_*: the bytes already had."""
    since = None if from_stdout is None and from_stderr is None else {"stdout": from_stdout or 0,
                                                                       "stderr": from_stderr or 0}
    return Call("run.attach", {"run_id": run_id, "from": since}, RunResult.from_json)


def sandbox_signal(sandbox: str, signal: Signal) -> Call[int]:
    """``sandbox.signal``: every process of the sandbox's runs and sessions; how many."""
    return Call("sandbox.signal", {"sandbox": sandbox, "signal": signal}, lambda r: _i(r, "signalled"))


def sandbox_freeze(sandbox: str) -> Call[bool]:
    return Call("sandbox.freeze", {"sandbox": sandbox}, lambda r: _b(r, "frozen"))


def sandbox_thaw(sandbox: str) -> Call[bool]:
    return Call("sandbox.thaw", {"sandbox": sandbox}, lambda r: _b(r, "frozen"))


def sandbox_update(sandbox: str, *, memory: Size | None = None, pids: int | None = None,
                   cpus: float | None = None, best_effort: bool | None = None) -> Call[SandboxInfo]:
    limits = {k: v for k, v in (("memory", memory), ("pids", pids), ("cpus", cpus)) if v is not None}
    return Call("sandbox.update", {"sandbox": sandbox, "limits": limits, "best_effort": best_effort},
                lambda r: SandboxInfo.from_json(_d(r, "sandbox")))


def sandbox_update_network(sandbox: str, network: Mapping[str, Any]) -> Call[NetworkUpdate]:
    return Call("sandbox.update", {"sandbox": sandbox, "network": dict(network)}, NetworkUpdate.from_json)


def sweep(dry_run: bool = False, sandbox: str | None = None) -> Call[SweepResult]:
    return Call("sweep", {"dry_run": True if dry_run else None, "sandbox": sandbox}, SweepResult.from_json)


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


# ---- files (docs/protocol.md, "Files") ---------------------------------------------------

def _path(path: PathArg, key: str = "path", enc_key: str = "path_encoding") -> JSON:
    """A str that is valid UTF-8 without NUL goes as it is; bytes, names os.fsdecode made of
    bytes that are not UTF-8, and a NUL (which JSON cannot carry to the daemon: it refuses it)
    go as base64 of their bytes."""
    p = os.fspath(path)
    if isinstance(p, str):
        if "\0" not in p:
            try:
                p.encode("utf-8")
                return {key: p}
            except UnicodeEncodeError:
                pass
        p = os.fsencode(p)
    return {key: base64.b64encode(p).decode(), enc_key: "base64"}


def _mode(mode: Mode | None) -> Mode | None:
    return mode


def _file_fields(sandbox: str, path: PathArg, user: str | None) -> JSON:
    out: JSON = {"sandbox": sandbox}
    out.update(_path(path))
    out["user"] = user
    return out


def _with_fd(fields: JSON, fd: int | None) -> tuple[JSON, tuple[int, ...]]:
    if fd is None:
        return fields, ()
    fields.update({"fds": 1, "fd": 0})
    return fields, (fd,)


def file_stat(sandbox: str, path: PathArg, *, follow: bool = False,
              user: str | None = None) -> Call[FileStat]:
    fields = _file_fields(sandbox, path, user)
    fields["follow"] = True if follow else None
    return Call("file.stat", fields, lambda r: FileStat.from_json(_d(r, "stat")))


def file_list(sandbox: str, path: PathArg, *, recursive: bool = False,
              max_entries: int | None = None, max_depth: int | None = None,
              user: str | None = None) -> Call[FileList]:
    fields = _file_fields(sandbox, path, user)
    fields.update({"recursive": True if recursive else None, "max_entries": max_entries,
                   "max_depth": max_depth})
    entries: list[FileStat] = []

    def event(ev: JSON) -> None:
        if ev.get("event") == "entries":
            entries.extend(FileStat.from_json(e) for e in _l(ev, "entries") if isinstance(e, dict))

    def decode(r: JSON) -> FileList:
        n = _i(r, "entries", -1)
        if n != len(entries):
            raise ValueError(f"the reply counts {n} entries, {len(entries)} came")
        return FileList(list(entries), _b(r, "truncated"), r)
    return Call("file.list", fields, decode, events=event)


def file_mkdir(sandbox: str, path: PathArg, *, parents: bool = False, mode: Mode | None = None,
               user: str | None = None) -> Call[int]:
    fields = _file_fields(sandbox, path, user)
    fields.update({"parents": True if parents else None, "mode": _mode(mode)})
    return Call("file.mkdir", fields, lambda r: _i(r, "created"))


def file_remove(sandbox: str, path: PathArg, *, recursive: bool = False, missing_ok: bool = False,
                user: str | None = None) -> Call[int]:
    fields = _file_fields(sandbox, path, user)
    fields.update({"recursive": True if recursive else None,
                   "missing_ok": True if missing_ok else None})
    return Call("file.remove", fields, lambda r: _i(r, "removed"))


class ReadSink:
    """Where the ``data`` events of a file.read go: ``put(offset, data)`` with ``offset``
    absolute in the file; a jump past the bytes put so far is a hole. ``end(size)`` once the
    reply came, with what it counts (holes included)."""

    def start(self, offset: int, length: int) -> None:
        pass

    def put(self, offset: int, data: bytes) -> None:
        raise NotImplementedError

    def end(self, total: int) -> None:
        pass


class BytesSink(ReadSink):
    """The bytes read, holes filled with zeros, kept in memory."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.base = 0

    def start(self, offset: int, length: int) -> None:
        self.base = offset

    def put(self, offset: int, data: bytes) -> None:
        at = offset - self.base
        if at < len(self.buf):
            raise ValueError(f"a data event at offset {offset} goes back")
        self.buf += bytes(at - len(self.buf))
        self.buf += data

    def end(self, total: int) -> None:
        if total < len(self.buf):
            raise ValueError(f"the reply counts {total} bytes, {len(self.buf)} came")
        self.buf += bytes(total - len(self.buf))


class WriterSink(ReadSink):
    """The bytes read, written to ``write`` (a file object's) as they come, holes as zeros."""

    def __init__(self, write: Callable[[bytes], Any]) -> None:
        self.write = write
        self.next = 0
        self.done = 0

    def start(self, offset: int, length: int) -> None:
        self.next = offset

    def _zeros(self, n: int) -> None:
        while n > 0:
            k = min(n, 1 << 20)
            self.write(bytes(k))
            n -= k
            self.done += k

    def put(self, offset: int, data: bytes) -> None:
        if offset < self.next:
            raise ValueError(f"a data event at offset {offset} goes back")
        self._zeros(offset - self.next)
        self.write(data)
        self.done += len(data)
        self.next = offset + len(data)

    def end(self, total: int) -> None:
        if total < self.done:
            raise ValueError(f"the reply counts {total} bytes, {self.done} came")
        self._zeros(total - self.done)


def file_read(sandbox: str, path: PathArg, sink: ReadSink | None = None, *, offset: Size | None = None,
              length: Size | None = None, nofollow: bool = False, fd: int | None = None,
              user: str | None = None) -> Call[int]:
    """The count of bytes read (holes included); they went to ``sink`` (data events) or, with
    ``fd``, into that descriptor (written by the sandbox's helper)."""
    fields = _file_fields(sandbox, path, user)
    fields.update({"offset": offset, "length": length, "nofollow": True if nofollow else None})
    fields, fds = _with_fd(fields, fd)
    state = {"length": -1}

    def event(ev: JSON) -> None:
        kind = ev.get("event")
        if kind == "size":
            state["length"] = _i(ev, "length", -1)
            if sink is not None:
                sink.start(_i(ev, "offset"), state["length"])
        elif kind == "data" and sink is not None:
            try:
                chunk = base64.b64decode(_s(ev, "data"), validate=True)
                sink.put(_i(ev, "offset"), chunk)
            except ValueError as e:  # binascii.Error is one
                raise ProtocolViolation(f"file.read: a data event this package cannot read: {e}") from None

    def decode(r: JSON) -> int:
        n = _i(r, "bytes", -1)
        if n < 0 or (state["length"] >= 0 and n > state["length"]):
            raise ValueError(f"bytes {r.get('bytes')!r} for a length of {state['length']}")
        if sink is not None:
            sink.end(n)
        return n
    return Call("file.read", fields, decode, fds=fds, events=event)


def file_write(sandbox: str, path: PathArg, data: str | bytes | None = None, *,
               fd: int | None = None, size: Size | None = None, mode: Mode | None = None,
               parents: bool = False, exclusive: bool = False, atomic: bool = True,
               offset: Size | None = None, sync: bool = False,
               user: str | None = None) -> Call[FileWritten]:
    """Either ``data`` (in the line) or ``fd`` (passed)."""
    fields = _file_fields(sandbox, path, user)
    if fd is None:
        fields.update(_payload(data if data is not None else b"", "data", "encoding"))
    fields.update({"size": size, "mode": _mode(mode), "parents": True if parents else None,
                   "exclusive": True if exclusive else None,
                   "atomic": False if not atomic else None, "offset": offset,
                   "sync": True if sync else None})
    fields, fds = _with_fd(fields, fd)
    return Call("file.write", fields, FileWritten.from_json, fds=fds)


def file_put(sandbox: str, path: PathArg, fd: int, *, parents: bool = False,
             overwrite: bool = True, user: str | None = None) -> Call[TreeCopied]:
    """A tar stream read from ``fd`` (passed) unpacked into the directory ``path``."""
    fields = _file_fields(sandbox, path, user)
    fields.update({"parents": True if parents else None, "overwrite": False if not overwrite else None})
    fields, fds = _with_fd(fields, fd)
    return Call("file.put", fields, TreeCopied.from_json, fds=fds)


def file_get(sandbox: str, path: PathArg, fd: int, *, follow: bool = False,
             user: str | None = None) -> Call[TreeCopied]:
    """``path`` as a tar stream written to ``fd`` (passed)."""
    fields = _file_fields(sandbox, path, user)
    fields["follow"] = True if follow else None
    fields, fds = _with_fd(fields, fd)
    return Call("file.get", fields, TreeCopied.from_json, fds=fds)


class Upload:
    """The file.chunk lines of a file.write by chunks (docs/protocol.md, ``file.chunk``),
    without I/O: ``take`` each event of the write, send what ``lines`` gives after each.
    ``source``: bytes, or an object whose ``read(n)`` gives bytes (or str) and b"" at its end.
    Lines are in the canonical form, which the daemon takes without a JSON parse."""

    def __init__(self, rid: int, source: Any) -> None:
        self.rid = rid
        self.view = memoryview(source) if isinstance(source, (bytes, bytearray, memoryview)) else None
        self.reader = None if self.view is not None else source
        self.off = 0
        self.seq = 0
        self.acked = 0
        self.chunk_bytes = 0
        self.window = 0
        self.eof = False

    def take(self, ev: JSON) -> bool:
        """True for the events this write consumes (ready, ack); the others are the caller's."""
        kind = ev.get("event")
        if kind == "ready":
            self.chunk_bytes = _i(ev, "chunk_bytes")
            self.window = _i(ev, "window")
            if self.chunk_bytes <= 0 or self.window <= 0:
                raise ProtocolViolation(f"file.write: a ready event this package cannot read: {ev!r}")
            return True
        if kind == "ack":
            self.acked = max(self.acked, _i(ev, "seq") + 1)
            return True
        return False

    def _next(self) -> tuple[bytes, bool]:
        n = self.chunk_bytes
        if self.view is not None:
            piece = bytes(self.view[self.off:self.off + n])
            self.off += len(piece)
            return piece, self.off >= len(self.view)
        piece = self.reader.read(n) if self.reader is not None else b""
        if isinstance(piece, str):
            piece = piece.encode()
        if len(piece) > n:
            raise ValueError(f"read({n}) gave {len(piece)} bytes")
        return bytes(piece), not piece

    def lines(self) -> list[bytes]:
        """The chunks that may go now: none before ready, at most window unacknowledged."""
        out: list[bytes] = []
        while self.window and not self.eof and self.seq - self.acked < self.window:
            piece, self.eof = self._next()
            out.append(b'{"id":%d,"op":"file.chunk","seq":%d,"data":"%s"%s}\n' % (
                self.rid, self.seq, base64.b64encode(piece), b',"eof":true' if self.eof else b""))
            self.seq += 1
        return out


def file_write_chunks(sandbox: str, path: PathArg, *, size: Size | None = None,
                      mode: Mode | None = None, parents: bool = False, exclusive: bool = False,
                      atomic: bool = True, offset: Size | None = None, sync: bool = False,
                      user: str | None = None) -> Call[FileWritten]:
    """A file.write whose content follows in file.chunk lines (an Upload)."""
    fields = _file_fields(sandbox, path, user)
    fields.update({"size": size, "mode": _mode(mode), "parents": True if parents else None,
                   "exclusive": True if exclusive else None,
                   "atomic": False if not atomic else None, "offset": offset,
                   "sync": True if sync else None})
    return Call("file.write", fields, FileWritten.from_json)


def _listen(tcp: bool | int) -> str | None:
    if tcp is True:
        return "tcp"
    if tcp is False:
        return None
    return f"tcp:{int(tcp)}"


def port_open(sandbox: str, port: int, tcp: bool | int = False) -> Call[PublishedPort]:
    """``tcp``: False for a Unix socket, True for a TCP port the kernel chooses, or that port."""
    return Call("port.open", {"sandbox": sandbox, "port": port, "listen": _listen(tcp)},
                lambda r: PublishedPort.from_json(_d(r, "port")))


def port_close(sandbox: str, port: int) -> Call[None]:
    return Call("port.close", {"sandbox": sandbox, "port": port}, _none)


def port_list(sandbox: str) -> Call[list[PublishedPort]]:
    return Call("inspect", {"sandbox": sandbox},
                lambda r: [PublishedPort.from_json(p) for p in _l(_d(r, "sandbox"), "ports") if isinstance(p, dict)])


def _image(r: JSON) -> JSON:
    image: JSON = _d(r, "image")
    return image


def image_import(name: str, source: str, tag: str | None = None, owner_only: bool | None = None) -> Call[JSON]:
    return Call("image.import", {"name": name, "source": source, "tag": tag, "owner_only": owner_only}, _image)


def image_list() -> Call[list[JSON]]:
    return Call("image.list", {}, lambda r: [i for i in _l(r, "images") if isinstance(i, dict)])


def image_inspect(image: str) -> Call[JSON]:
    return Call("image.inspect", {"image": image}, _image)


def image_remove(image: str) -> Call[None]:
    return Call("image.remove", {"image": image}, _none)


def raw(op: str, fields: Mapping[str, Any]) -> Call[JSON]:
    """Any request, its ``ok`` reply returned whole."""
    return Call(op, dict(fields), lambda r: r)
