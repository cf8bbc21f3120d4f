# SPDX-License-Identifier: LGPL-2.1-or-later
"""Dataclasses for the daemon's replies and events (docs/protocol.md). Each keeps the whole
JSON object it was read from in ``raw``, so that members added to the protocol later are at
hand before this package names them."""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
import os
from collections.abc import Iterator
from typing import Any, Union

JSON = dict[str, Any]


def _s(d: JSON, k: str, default: str = "") -> str:
    v = d.get(k)
    return v if isinstance(v, str) else default


def _os(d: JSON, k: str) -> str | None:
    v = d.get(k)
    return v if isinstance(v, str) else None


def _network(d: JSON) -> str | dict[str, Any] | None:
    v = d.get("network")
    return v if isinstance(v, (str, dict)) else None


def _i(d: JSON, k: str, default: int = 0) -> int:
    v = d.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _oi(d: JSON, k: str) -> int | None:
    v = d.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _of(d: JSON, k: str) -> float | None:
    v = d.get(k)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def _b(d: JSON, k: str) -> bool:
    return d.get(k) is True


def _ob(d: JSON, k: str) -> bool | None:
    v = d.get(k)
    return v if isinstance(v, bool) else None


def _d(d: JSON, k: str) -> JSON:
    v = d.get(k)
    return v if isinstance(v, dict) else {}


def _od(d: JSON, k: str) -> JSON | None:
    v = d.get(k)
    return v if isinstance(v, dict) else None


def _l(d: JSON, k: str) -> list[Any]:
    v = d.get(k)
    return v if isinstance(v, list) else []


def decode_data(data: str, encoding: str | None) -> bytes:
    """The bytes of a ``data``/``stdout``/``stderr`` member: text, or base64 when its
    ``*_encoding`` says so."""
    if encoding == "base64":
        return base64.b64decode(data)
    return data.encode()


@dataclass(frozen=True)
class Hello:
    protocol: int
    version: str
    capabilities: JSON
    peer: JSON
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> Hello:
        return cls(_i(d, "protocol"), _s(d, "version"), _d(d, "capabilities"), _d(d, "peer"), d)


@dataclass(frozen=True)
class Health:
    status: str
    scope: str | None
    uptime_s: float | None
    sandboxes: int | None
    runs: int | None
    connections: int | None
    quarantined: int | None
    teardown_stuck: int | None
    netns: JSON | None
    capacity: JSON | None  # what more the daemon takes (docs/protocol.md, "health")
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> Health:
        return cls(_s(d, "status"), _os(d, "scope"), _of(d, "uptime_s"), _oi(d, "sandboxes"),
                   _oi(d, "runs"), _oi(d, "connections"), _oi(d, "quarantined"),
                   _oi(d, "teardown_stuck"), _od(d, "netns"), _od(d, "capacity"), d)


@dataclass(frozen=True)
class Snapshot:
    """A snapshot of a sandbox's workspace. ``sandbox`` is the id of its sandbox where the
    reply it came in says so (``snapshot``, ``snapshot.list``, ``inspect``)."""

    id: str
    label: str | None
    created_at: str | None
    bytes: int | None
    files: int | None
    sandbox: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: JSON, sandbox: str | None = None) -> Snapshot:
        return cls(_s(d, "id"), _os(d, "label"), _os(d, "created_at"), _oi(d, "bytes"),
                   _oi(d, "files"), sandbox, d)

    @property
    def ref(self) -> str:
        """What ``from_snapshot`` takes: ``SANDBOX/SNAPSHOT`` when the sandbox is known."""
        return f"{self.sandbox}/{self.id}" if self.sandbox else self.id


@dataclass(frozen=True)
class SessionSummary:
    """A session as ``inspect`` lists it."""

    id: str
    argv: list[str]
    pty: bool
    rows: int | None
    cols: int | None
    state: str
    attached: int
    output_seq: int
    created: str | None
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> SessionSummary:
        return cls(_s(d, "id"), [a for a in _l(d, "argv") if isinstance(a, str)], _b(d, "pty"),
                   _oi(d, "rows"), _oi(d, "cols"), _s(d, "state"), _i(d, "attached"),
                   _i(d, "output_seq"), _os(d, "created"), d)


@dataclass(frozen=True)
class SandboxInfo:
    """SANDBOX of ``create``, ``list`` and ``inspect``. ``usage``, ``runs_in_flight``,
    ``snapshots`` and ``sessions`` are filled by ``inspect`` (and ``list(usage=True)``)."""

    id: str
    name: str | None
    state: str
    owner_uid: int | None
    workdir: str | None
    workspace: str | None
    cgroup: str | None
    limits: JSON
    enforced: JSON
    best_effort: bool
    network: str | dict[str, Any] | None  # "none", or egress: {"egress": ..., "address": ...}
    user: str | None
    root: str | None
    created: str | None
    restarted_at: str | None
    restored_processes: str | None  # "kept", "restarted", or None (docs/protocol.md "Restarts")
    restored_init: str | None       # "fd store", "cgroup", or None
    ttl_s: float | None
    idle_s: float | None
    expires_at: str | None
    disk_bytes: int | None
    disk_refused: bool
    interrupted_runs: list[JSON]
    teardown_stuck: JSON | None
    usage: JSON | None
    runs_in_flight: int | None
    snapshots: list[Snapshot]
    sessions: list[SessionSummary]
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> SandboxInfo:
        sid = _s(d, "id")
        return cls(
            sid, _os(d, "name"), _s(d, "state"), _oi(d, "owner_uid"), _os(d, "workdir"),
            _os(d, "workspace"), _os(d, "cgroup"), _d(d, "limits"), _d(d, "enforced"),
            _b(d, "best_effort"), _network(d), _os(d, "user"), _os(d, "root"),
            _os(d, "created"),
            _os(d, "restarted_at"), _os(d, "restored_processes"), _os(d, "restored_init"), _of(d, "ttl_s"), _of(d, "idle_s"), _os(d, "expires_at"),
            _oi(d, "disk_bytes"), _b(d, "disk_refused"),
            [r for r in _l(d, "interrupted_runs") if isinstance(r, dict)],
            _od(d, "teardown_stuck"), _od(d, "usage"), _oi(d, "runs_in_flight"),
            [Snapshot.from_json(s, sid) for s in _l(d, "snapshots") if isinstance(s, dict)],
            [SessionSummary.from_json(s) for s in _l(d, "sessions") if isinstance(s, dict)], d)


@dataclass(frozen=True)
class NetworkUpdate:
    """``sandbox.update`` with a network: the sandbox as it is now, and the connections cut (None:
    the daemon could not read its connection table; the new list is in force all the same)."""
    sandbox: SandboxInfo
    connections_cut: int | None
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> NetworkUpdate:
        return cls(SandboxInfo.from_json(_d(d, "sandbox")), _oi(d, "connections_cut"), d)


@dataclass(frozen=True)
class DestroyResult:
    destroyed: bool
    already_gone: bool
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> DestroyResult:
        return cls(_b(d, "destroyed"), _b(d, "already_gone"), d)


@dataclass(frozen=True)
class RunResult:
    """The final reply of a run. ``stdout``/``stderr`` are the text (bytes that are not UTF-8
    replaced by U+FFFD); ``stdout_data``/``stderr_data`` the exact bytes; ``stdout_bytes``/
    ``stderr_bytes`` how many the program wrote (more than kept when ``*_truncated``)."""

    run_id: str
    sandbox: str | None
    exit_code: int
    signal: str | None
    reason: str
    timed_out: bool
    oom_killed: bool
    stdout_data: bytes
    stderr_data: bytes
    stdout_bytes: int
    stderr_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool
    duration_s: float | None
    cpu_user_s: float | None
    cpu_system_s: float | None
    memory_peak_bytes: int | None
    pids_peak: int | None
    pids_limit_hit: bool | None
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> RunResult:
        return cls(
            _s(d, "run_id"), _os(d, "sandbox"), _i(d, "exit_code", -1), _os(d, "signal"),
            _s(d, "reason"), _b(d, "timed_out"), _b(d, "oom_killed"),
            decode_data(_s(d, "stdout"), _os(d, "stdout_encoding")),
            decode_data(_s(d, "stderr"), _os(d, "stderr_encoding")),
            _i(d, "stdout_bytes"), _i(d, "stderr_bytes"), _b(d, "stdout_truncated"),
            _b(d, "stderr_truncated"), _of(d, "duration_s"), _of(d, "cpu_user_s"),
            _of(d, "cpu_system_s"), _oi(d, "memory_peak_bytes"), _oi(d, "pids_peak"),
            _ob(d, "pids_limit_hit"), d)

    @property
    def stdout(self) -> str:
        return self.stdout_data.decode(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_data.decode(errors="replace")

    @property
    def ok(self) -> bool:
        """The command exited 0."""
        return self.reason == "exited" and self.exit_code == 0


@dataclass(frozen=True)
class Started:
    """A run's ``started`` event: the command was exec'd (``run_id`` can be killed)."""

    run_id: str
    sandbox: str | None
    raw: JSON = field(repr=False)


@dataclass(frozen=True)
class Output:
    """Output of a streaming run (``seq`` counts events) or of a session (``seq`` is a byte
    offset; ``session`` is set). ``stream`` is ``"stdout"`` or ``"stderr"``."""

    stream: str
    seq: int
    data: bytes
    session: str | None
    raw: JSON = field(repr=False)

    @property
    def text(self) -> str:
        return self.data.decode(errors="replace")


@dataclass(frozen=True)
class Progress:
    """A ``progress`` event of ``snapshot``, ``snapshot.restore`` or ``sweep``."""

    bytes: int | None
    files: int | None
    raw: JSON = field(repr=False)


@dataclass(frozen=True)
class Dropped:
    """A session's ``dropped`` event: ``bytes`` bytes from ``seq`` on were overwritten in its
    ring before this client got them."""

    session: str | None
    seq: int
    bytes: int
    raw: JSON = field(repr=False)


@dataclass(frozen=True)
class SessionExit:
    """A session's ``exit`` event (or what ``pty.close`` answered): ``seq`` is its output total
    where known."""

    session: str | None
    seq: int | None
    exit_code: int | None
    signal: str | None
    reason: str
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> SessionExit:
        return cls(_os(d, "session"), _oi(d, "seq"), _oi(d, "exit_code"), _os(d, "signal"),
                   _s(d, "reason"), d)


@dataclass(frozen=True)
class Event:
    """An event of a kind this package does not know (kept whole)."""

    kind: str
    raw: JSON = field(repr=False)


RunEvent = Union[Started, Output, Event]
SessionEvent = Union[Output, Dropped, SessionExit, Event]


def decode_event(d: JSON) -> Started | Output | Progress | Dropped | SessionExit | Event:
    kind = _s(d, "event")
    if kind == "started":
        return Started(_s(d, "run_id"), _os(d, "sandbox"), d)
    if kind in ("stdout", "stderr"):
        return Output(kind, _i(d, "seq"), decode_data(_s(d, "data"), _os(d, "data_encoding")),
                      _os(d, "session"), d)
    if kind == "progress":
        return Progress(_oi(d, "bytes"), _oi(d, "files"), d)
    if kind == "dropped":
        return Dropped(_os(d, "session"), _i(d, "seq"), _i(d, "bytes"), d)
    if kind == "exit":
        return SessionExit.from_json(d)
    return Event(kind, d)


@dataclass(frozen=True)
class SnapshotResult:
    snapshot: Snapshot
    skipped: int
    frozen: bool
    frozen_s: float | None
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON, sandbox: str | None = None) -> SnapshotResult:
        return cls(Snapshot.from_json(_d(d, "snapshot"), sandbox), _i(d, "skipped"),
                   _b(d, "frozen"), _of(d, "frozen_s"), d)


@dataclass(frozen=True)
class RestoreResult:
    sandbox: str
    snapshot: str
    bytes: int | None
    files: int | None
    runs_killed: int
    processes: str | None
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> RestoreResult:
        return cls(_s(d, "sandbox"), _s(d, "snapshot"), _oi(d, "bytes"), _oi(d, "files"),
                   _i(d, "runs_killed"), _os(d, "processes"), d)


@dataclass(frozen=True)
class SweepResult:
    """The reply of ``sweep``; its per-sandbox entries and actions are kept as the daemon's
    JSON objects (docs/protocol.md, ``sweep``)."""

    dry_run: bool
    partial: bool
    sandboxes: list[JSON]
    totals: JSON
    actions: list[JSON]
    disk_budget: int | None
    budget_exceeded: bool
    free_bytes: int | None
    duration_s: float | None
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> SweepResult:
        return cls(_b(d, "dry_run"), _b(d, "partial"),
                   [s for s in _l(d, "sandboxes") if isinstance(s, dict)], _d(d, "totals"),
                   [a for a in _l(d, "actions") if isinstance(a, dict)], _oi(d, "disk_budget"),
                   _b(d, "budget_exceeded"), _oi(d, "free_bytes"), _of(d, "duration_s"), d)


@dataclass(frozen=True)
class SessionInfo:
    """The reply of ``pty.open`` or ``pty.attach``. The attach members (``from_seq``,
    ``first_seq``, ``dropped``, ``next_seq``) are None after an open (which starts at 0)."""

    session: str
    sandbox: str | None
    pty: bool
    rows: int | None
    cols: int | None
    state: str
    from_seq: int | None
    first_seq: int | None
    dropped: int | None
    next_seq: int | None
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> SessionInfo:
        return cls(_s(d, "session"), _os(d, "sandbox"), _b(d, "pty"), _oi(d, "rows"),
                   _oi(d, "cols"), _s(d, "state"), _oi(d, "from_seq"), _oi(d, "first_seq"),
                   _oi(d, "dropped"), _oi(d, "next_seq"), d)


def _name(d: JSON, k: str, enc_key: str) -> str | None:
    """A name or path of the sandbox's: a str, bytes that are not UTF-8 (base64 on the wire,
    ``*_encoding``) as os.fsdecode makes them (surrogateescape); None when absent or null."""
    v = d.get(k)
    if not isinstance(v, str):
        return None
    if d.get(enc_key) == "base64":
        return os.fsdecode(base64.b64decode(v))
    return v


@dataclass(frozen=True)
class FileStat:
    """An entry of ``file.stat`` or ``file.list``. ``type``: ``file``, ``dir``, ``symlink``,
    ``fifo``, ``socket``, ``char`` or ``block``; ``mode``: the permission bits; ``uid``/``gid``
    as the sandbox sees them; ``target``: a symlink's text; ``mount``: a mount point below a
    listed directory."""

    path: str
    name: str
    type: str
    size: int
    mode: int
    uid: int
    gid: int
    mtime: str
    mtime_ns: int
    nlink: int
    blocks_bytes: int
    target: str | None
    mount: bool
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> FileStat:
        return cls(_name(d, "path", "path_encoding") or "", _name(d, "name", "name_encoding") or "",
                   _s(d, "type"), _i(d, "size"), _i(d, "mode"), _i(d, "uid"), _i(d, "gid"),
                   _s(d, "mtime"), _i(d, "mtime_ns"), _i(d, "nlink"), _i(d, "blocks_bytes"),
                   _name(d, "target", "target_encoding"), _b(d, "mount"), d)

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"


@dataclass(frozen=True)
class FileList:
    """What ``file.list`` gave: its entries (sorted by name within a directory) and whether
    ``max_entries`` cut the walk. Iterable, with a length."""

    entries: list[FileStat]
    truncated: bool
    raw: JSON = field(repr=False)

    def __iter__(self) -> Iterator[FileStat]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> list[str]:
        return [e.name for e in self.entries]


@dataclass(frozen=True)
class TreeCopied:
    """The reply of ``file.put`` and ``file.get``: entries made or archived, bytes of the tar
    stream, entries skipped (devices, sockets; for get also ones that vanished mid-walk), files
    that changed while archived (get)."""

    entries: int
    bytes: int
    skipped: int
    changed: int
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> TreeCopied:
        return cls(_i(d, "entries"), _i(d, "bytes"), _i(d, "skipped"), _i(d, "changed"), d)


@dataclass(frozen=True)
class FileWritten:
    """The reply of ``file.write``: the path written, its byte count, whether it was new."""

    path: str
    bytes: int
    created: bool
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> FileWritten:
        return cls(_name(d, "path", "path_encoding") or "", _i(d, "bytes"), _b(d, "created"), d)


@dataclass(frozen=True)
class PublishedPort:
    """A port of a sandbox published on the host (``port.open``; docs/protocol.md, "Published
    ports"): ``path`` for a Unix socket (the caller's, mode 0600), ``address``
    (``"127.0.0.1:PORT"``) for TCP, which anyone on the host can reach."""

    port: int
    listen: str
    path: str | None
    address: str | None
    connections: int
    raw: JSON = field(repr=False)

    @property
    def target(self) -> str:
        """The socket's path, or the TCP address."""
        return self.path if self.path is not None else (self.address or "")

    @classmethod
    def from_json(cls, d: JSON) -> PublishedPort:
        return cls(_i(d, "port"), _s(d, "listen"), _os(d, "path"), _os(d, "address"), _i(d, "connections"), d)
