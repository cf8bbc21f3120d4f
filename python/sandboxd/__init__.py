# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd: the client of the local sandbox supervisor (docs/python.md).

    from sandboxd import Sandbox
    with Sandbox.create(memory="256M") as sb:
        r = sb.run("make test", timeout=60)

Blocking: Client, Sandbox, RunStream, Session. asyncio: AsyncClient, AsyncSandbox,
AsyncRunStream, AsyncSession. Replies are dataclasses (sandboxd.replies); every error code of
the protocol is an exception class (sandboxd.errors). A sandbox's files: ``sb.files`` (Files,
AsyncFiles: stat, list, mkdir, remove, read, read_into, write, write_from); its servers reached
from the host: ``sb.ports`` (Ports, AsyncPorts: open, publish, close, list)."""
from ._common import DEFAULT_SOCKET, SOCKET_ENV, socket_path
from .aio import AsyncClient, AsyncFiles, AsyncPorts, AsyncRunStream, AsyncSandbox, AsyncSession
from .client import Client, Files, Ports, RunStream, Sandbox, Session
from .errors import (
    Conflict, ConnectionLost, Error, Internal, InvalidJson, InvalidRequest, LimitUnenforceable,
    NoSpace, NotFound, PermissionDenied, ProtocolViolation, ResourceExhausted, SandboxdError,
    SessionLost, SpawnFailed, TeardownStuck, TooLarge, UnknownOp,
)
from .replies import (
    DestroyResult, Dropped, Event, FileList, FileStat, FileWritten, TreeCopied, Health, Hello, NetworkUpdate, Output, Progress, PublishedPort, RestoreResult, RunResult,
    SandboxInfo, SessionExit, SessionInfo, SessionSummary, Snapshot, SnapshotResult, Started,
    SweepResult,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SOCKET", "SOCKET_ENV", "socket_path",
    "Client", "Sandbox", "RunStream", "Session", "Files", "Ports",
    "AsyncClient", "AsyncSandbox", "AsyncRunStream", "AsyncSession", "AsyncFiles", "AsyncPorts",
    "Error", "SandboxdError", "ConnectionLost", "ProtocolViolation",
    "InvalidJson", "InvalidRequest", "UnknownOp", "TooLarge", "NotFound", "PermissionDenied",
    "LimitUnenforceable", "ResourceExhausted", "SpawnFailed", "Conflict", "NoSpace", "Internal",
    "SessionLost", "TeardownStuck",
    "Hello", "Health", "SandboxInfo", "SessionSummary", "NetworkUpdate", "DestroyResult", "RunResult", "Started",
    "Output", "Progress", "Dropped", "SessionExit", "Event", "Snapshot", "SnapshotResult",
    "RestoreResult", "SweepResult", "SessionInfo", "FileStat", "FileList", "FileWritten", "TreeCopied",
    "PublishedPort",
]
