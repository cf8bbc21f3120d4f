# SPDX-License-Identifier: LGPL-2.1-or-later
"""The blocking face: Client (one connection), Sandbox, RunStream and Session.

A Client is safe to share between threads: each call registers its request id with the Wire
and waits on its own queue, and one reader thread routes what the daemon sends. Many runs may
be in flight at once on one connection (as many as the daemon's runs per connection allow)."""
from __future__ import annotations

import array
import builtins
import os
import tempfile
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from . import _ops, _tree
from ._common import (
    INLINE_WRITE_MAX, RUN_EVENT_TYPES, SESSION_EVENT_TYPES, fileno_of, progress_hook as _progress,
    socket_path,
)
from ._ops import (
    BytesSink, Call, Command, Duration, Mode, PathArg, Root, RunUser, Signal, Size, SnapshotRef, WriterSink,
)
from ._wire import DEFAULT_MAX_LINE, DETACHED_EVENT, JSON, Pending, Wire
from .errors import ConnectionLost, Error, NotFound
from .replies import (
    DestroyResult, Dropped, FileList, FileStat, FileWritten, Health, Hello, NetworkUpdate, Output, Progress, PublishedPort, RestoreResult, RunEvent, RunResult,
    SandboxInfo, SessionEvent, SessionExit, SessionInfo, Snapshot, SnapshotResult, Started,
    SweepResult, TreeCopied, decode_event,
)

T = TypeVar("T")


class _Lost:
    """What a request's queue gets when the connection ends."""

    def __init__(self, error: Error) -> None:
        self.error = error


_Item = JSON | _Lost
_Queue = queue.SimpleQueue[_Item]


class _Flight:
    """One request in flight, from the waiter's side."""

    def __init__(self, client: Client, pending: Pending[_Queue]) -> None:
        self.client = client
        self.pending = pending
        self.q = pending.sink

    def next(self, timeout: float | None = None) -> JSON:
        try:
            item = self.q.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.pending.op}: nothing came within {timeout} s") from None
        if isinstance(item, _Lost):
            raise item.error
        return item

    def forget(self) -> None:
        self.client._forget(self.pending)


class Client:
    """One connection to sandboxd. ``socket``: the path (default: $SANDBOXD_SOCKET, else
    /run/sandboxd/sandboxd.sock, as sandboxctl). Use as a context manager, or close()."""

    def __init__(self, socket: str | os.PathLike[str] | None = None, *,
                 connect_timeout: float | None = 10.0,
                 max_line_bytes: int = DEFAULT_MAX_LINE) -> None:
        self.path = socket_path(socket)
        self._wire: Wire[_Queue] = Wire(max_line_bytes)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        # File transfers beyond the daemon's per-connection cap wait here for their turn.
        self._transfers = threading.BoundedSemaphore(_ops.TRANSFERS_PER_CONNECTION)
        self._lost: Error | None = None
        self._sock = _socket_connect(self.path, connect_timeout)
        self._reader = threading.Thread(target=self._read_loop, name="sandboxd-reader", daemon=True)
        self._reader.start()

    # ---- the connection ---------------------------------------------------------------

    def _read_loop(self) -> None:
        why: Error = ConnectionLost(f"sandboxd closed the connection ({self.path})")
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError as e:
                why = ConnectionLost(f"reading from sandboxd ({self.path}): {e.strerror or e}")
                break
            if not data:
                break
            try:
                with self._lock:
                    lines = self._wire.feed(data)
            except Error as e:
                why = e
                break
            for p, msg in lines:
                p.sink.put(msg)
        with self._lock:
            if self._lost is None:
                self._lost = why
            lost = self._wire.connection_lost()
            err = self._lost
        for p in lost:
            p.sink.put(_Lost(err))
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        """Closes the connection: the daemon kills the runs still in flight on it (sessions
        go on); waiters get ConnectionLost."""
        with self._lock:
            if self._lost is None:
                self._lost = ConnectionLost("the client closed the connection")
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if threading.current_thread() is not self._reader:
            self._reader.join()
        self._sock.close()

    @property
    def closed(self) -> bool:
        return self._lost is not None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _forget(self, p: Pending[_Queue]) -> None:
        with self._lock:
            self._wire.forget(p)

    def _start(self, call: Call[Any]) -> _Flight:
        q: _Queue = queue.SimpleQueue()
        with self._lock:
            if self._lost is not None:
                raise self._lost
            p, line = self._wire.request(call.op, call.fields, q)
        try:
            with self._send_lock:
                if call.fds:
                    _send_fds(self._sock, line, call.fds)
                else:
                    self._sock.sendall(line)
        except OSError as e:
            self._forget(p)
            raise ConnectionLost(f"{call.op}: sending to sandboxd: {e.strerror or e}") from None
        return _Flight(self, p)

    def _call(self, call: Call[T], on_event: Callable[[JSON], None] | None = None,
              timeout: float | None = None) -> T:
        if call.op in _ops.TRANSFER_OPS:
            with self._transfers:
                return self._call_now(call, on_event, timeout)
        return self._call_now(call, on_event, timeout)

    def _call_now(self, call: Call[T], on_event: Callable[[JSON], None] | None,
                  timeout: float | None) -> T:
        f = self._start(call)
        deadline = None if timeout is None else time.monotonic() + timeout
        if on_event is None:
            on_event = call.events
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                msg = f.next(left)
                if "event" in msg:
                    if on_event is not None:
                        on_event(msg)
                    continue
                return call.finish(msg)
        except BaseException:
            f.forget()
            raise

    def _upload(self, call: Call[T], source: Any, on_event: Callable[[JSON], None] | None = None) -> T:
        """call (a file.write without data or fd), its content from source in file.chunk
        lines within the window the daemon announces."""
        with self._transfers:
            return self._upload_now(call, source, on_event)

    def _upload_now(self, call: Call[T], source: Any, on_event: Callable[[JSON], None] | None) -> T:
        f = self._start(call)
        up = _ops.Upload(f.pending.id, source)
        try:
            while True:
                for line in up.lines():
                    try:
                        with self._send_lock:
                            self._sock.sendall(line)
                    except OSError as e:
                        raise ConnectionLost(f"{call.op}: sending to sandboxd: {e.strerror or e}") from None
                msg = f.next()
                if "event" in msg:
                    if not up.take(msg) and on_event is not None:
                        on_event(msg)
                    continue
                return call.finish(msg)
        except BaseException:
            f.forget()
            raise

    def call(self, op: str, timeout: float | None = None, **fields: Any) -> JSON:
        """Any operation by name, its ``ok`` reply returned as the daemon sent it (errors are
        raised as for the named methods; events are dropped)."""
        return self._call(_ops.raw(op, fields), timeout=timeout)

    # ---- the daemon -------------------------------------------------------------------

    def hello(self) -> Hello:
        return self._call(_ops.hello())

    def health(self) -> Health:
        return self._call(_ops.health())

    def sweep(self, dry_run: bool = False,
              on_progress: Callable[[Progress], None] | None = None,
              sandbox: str | None = None) -> SweepResult:
        """``sweep``; ``sandbox``: that one only, measured now (a sandbox refused for its disk
        limit takes runs again once its files are removed)."""
        return self._call(_ops.sweep(dry_run, sandbox), _progress(on_progress))

    # ---- sandboxes --------------------------------------------------------------------

    def create(self, *, name: str | None = None, memory: Size | None = None,
               pids: int | None = None, cpus: float | str | None = None,
               timeout: Duration | None = None, output_bytes: Size | None = None,
               disk: Size | None = None, files: int | None = None,
               limits: Mapping[str, Any] | None = None, network: str | Mapping[str, Any] | None = None,
               env: Mapping[str, str] | None = None, best_effort: bool | None = None,
               ttl: Duration | None = None, idle: Duration | None = None,
               user: str | None = None, from_snapshot: SnapshotRef | None = None,
               image: str | None = None, root: Root | None = None,
               file_size: Size | None = None, open_files: int | None = None,
               mounts: Sequence[Mapping[str, Any]] | None = None,
               workspace: str | os.PathLike[str] | Mapping[str, Any] | None = None,
               hostname: str | None = None, ephemeral: bool | None = None,
               sysctls: Mapping[str, str] | None = None, masked_paths: Sequence[str] | None = None,
               readonly_paths: Sequence[str] | None = None, with_connection: bool | None = None) -> SandboxInfo:
        """``create``: the new sandbox's SANDBOX. ``timeout`` is the default ``timeout_s`` of
        its runs; ``limits`` adds members to the limits object as they are; ``image``: its
        root is that image of the daemon's store; ``root``: ``"readonly"`` (the default) or
        ``"overlay"`` (writable by root inside, kept), or ``{"path": DIR, "read_only": False}``;
        ``mounts``: ``[{"source", "target", "read_only"}]``, the caller's directories inside;
        ``workspace``: a directory of the caller's (or ``{"source": DIR}``) as ``/work`` itself.
        Every field of the protocol's create is a keyword here (docs/protocol.md)."""
        lim = _ops.limits(memory, pids, cpus, timeout, output_bytes, disk, files, limits, file_size, open_files)
        return self._call(_ops.create(name=name, limits=lim, network=network, env=env,
                                      best_effort=best_effort, ttl=ttl, idle=idle, user=user,
                                      from_snapshot=from_snapshot, image=image, root=root,
                                      mounts=mounts, workspace=workspace, hostname=hostname, ephemeral=ephemeral, sysctls=sysctls,
                                      masked_paths=masked_paths, readonly_paths=readonly_paths, with_connection=with_connection))

    def list(self, usage: bool = False) -> builtins.list[SandboxInfo]:
        return self._call(_ops.list_sandboxes(usage))

    def inspect(self, sandbox: str) -> SandboxInfo:
        return self._call(_ops.inspect(sandbox))

    def destroy(self, sandbox: str) -> DestroyResult:
        return self._call(_ops.destroy(sandbox))

    def sandbox(self, ref: str) -> Sandbox:
        """A Sandbox for an existing sandbox (id, name or UID/NAME), checked with inspect. Its
        context manager does not destroy it: it was not made here."""
        return Sandbox(self, self.inspect(ref), owns_sandbox=False, owns_client=False)

    # ---- runs -------------------------------------------------------------------------

    def run(self, command: Command | None = None, *, sandbox: str | None = None,
            argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
            cwd: str | None = None, stdin: str | bytes | None = None,
            timeout: Duration | None = None, cpu_s: Duration | None = None,
            output_bytes: Size | None = None, memory: Size | None = None,
            pids: int | None = None, user: RunUser | None = None,
            limits: Mapping[str, Any] | None = None, network: str | Mapping[str, Any] | None = None,
            best_effort: bool | None = None, workspace: str | None = None,
            image: str | None = None, mounts: Sequence[Mapping[str, Any]] | None = None,
            env_defaults: bool | None = None, file_size: Size | None = None,
            open_files: int | None = None, no_timeout: bool | None = None, umask: int | None = None,
            rlimits: Mapping[str, Any] | None = None, rlimits_lower: bool | None = None, pid_namespace: str | None = None,
            capabilities: Mapping[str, Sequence[str]] | None = None, stdio: Sequence[int | None] | None = None,
            extra_fds: Sequence[int] | None = None) -> RunResult:
        """``run``: waits for the final reply. Without ``sandbox``, a throwaway sandbox is made
        for the run (``limits``, ``network``, ``best_effort``, ``workspace``, ``image``,
        ``mounts`` (``[{"source", "target", "read_only"}]``) are its). ``env_defaults=False``:
        the environment is exactly ``env``, no ``PATH`` or ``HOME`` added. ``stdio`` (three
        fds of the caller's, or None for /dev/null) and ``extra_fds`` are the command's own fds
        (sent with the request; nothing is captured). ``user``: also ``{"uid": U, "gid": G}``.
        A command that ran is a RunResult whatever its exit; the runner's failures are
        SpawnFailed."""
        return self._call(_ops.run(command, sandbox=sandbox, argv=argv, env=env, cwd=cwd,
                                   stdin=stdin, timeout=timeout, cpu_s=cpu_s,
                                   output_bytes=output_bytes, memory=memory, pids=pids,
                                   user=user, limits=dict(limits) if limits else None,
                                   network=network, best_effort=best_effort,
                                   workspace=workspace, image=image, mounts=mounts,
                                   env_defaults=env_defaults, file_size=file_size, open_files=open_files, no_timeout=no_timeout, umask=umask, rlimits=rlimits, rlimits_lower=rlimits_lower, pid_namespace=pid_namespace, capabilities=capabilities, stdio=stdio, extra_fds=extra_fds))

    # ---- images -----------------------------------------------------------------------

    def image_import(self, name: str, source: str, tag: str | None = None,
                     timeout: float | None = None, owner_only: bool | None = None) -> JSON:
        """``image.import`` of ``source`` (a path on the daemon's host: a directory, a tar
        archive or an OCI image layout) as ``name``: the reply's ``image``. ``owner_only``:
        only the importer (and admins) may make sandboxes of it."""
        return self._call(_ops.image_import(name, source, tag, owner_only), timeout=timeout)

    def image_list(self) -> builtins.list[JSON]:
        return self._call(_ops.image_list())

    def image_inspect(self, image: str) -> JSON:
        return self._call(_ops.image_inspect(image))

    def image_remove(self, image: str) -> None:
        self._call(_ops.image_remove(image))

    def stream(self, command: Command | None = None, *, sandbox: str | None = None,
               argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
               cwd: str | None = None, stdin: str | bytes | None = None,
               timeout: Duration | None = None, cpu_s: Duration | None = None,
               output_bytes: Size | None = None, memory: Size | None = None,
               pids: int | None = None, user: str | None = None,
               limits: Mapping[str, Any] | None = None, network: str | Mapping[str, Any] | None = None,
               best_effort: bool | None = None, workspace: str | None = None) -> RunStream:
        """``run`` with ``"stream": true``, started now: iterate the RunStream for its events
        (Started, then Output as the program writes); ``result`` is set once it ended."""
        call = _ops.run(command, sandbox=sandbox, argv=argv, env=env, cwd=cwd, stdin=stdin,
                        timeout=timeout, cpu_s=cpu_s, output_bytes=output_bytes, memory=memory,
                        pids=pids, user=user, stream=True,
                        limits=dict(limits) if limits else None, network=network,
                        best_effort=best_effort, workspace=workspace)
        return RunStream(self, call, self._start(call))

    def kill(self, run_id: str, signal: Signal | None = None) -> None:
        """``kill``: ``KILL`` (the default) kills the run's whole cgroup."""
        self._call(_ops.kill(run_id, signal))

    def signal_all(self, sandbox: str, signal: Signal) -> int:
        """``sandbox.signal``: every process of the sandbox's runs; how many were signalled."""
        return self._call(_ops.sandbox_signal(sandbox, signal))

    def freeze(self, sandbox: str) -> bool:
        """``sandbox.freeze``: every process stopped (cgroup.freeze) until thaw."""
        return self._call(_ops.sandbox_freeze(sandbox))

    def thaw(self, sandbox: str) -> bool:
        return self._call(_ops.sandbox_thaw(sandbox))

    def update_limits(self, sandbox: str, *, memory: Size | None = None, pids: int | None = None,
                      cpus: float | None = None, best_effort: bool | None = None) -> SandboxInfo:
        """``sandbox.update``: new memory, pids and cpu limits, written to the kernel."""
        return self._call(_ops.sandbox_update(sandbox, memory=memory, pids=pids, cpus=cpus, best_effort=best_effort))

    def update_network(self, sandbox: str, network: Mapping[str, Any]) -> NetworkUpdate:
        """``sandbox.update``'s network: a running sandbox's new way out ({"egress": "all"} or
        {"egress": {"allow": [...]}}, maybe empty), in force at once; connections it no longer
        allows are cut (``connections_cut``)."""
        return self._call(_ops.sandbox_update_network(sandbox, network))

    # ---- snapshots --------------------------------------------------------------------

    def snapshot(self, sandbox: str, label: str | None = None,
                 on_progress: Callable[[Progress], None] | None = None) -> SnapshotResult:
        return self._call(_ops.snapshot(sandbox, label), _progress(on_progress))

    def snapshot_list(self, sandbox: str) -> builtins.list[Snapshot]:
        return self._call(_ops.snapshot_list(sandbox))

    def snapshot_restore(self, sandbox: str, snapshot: SnapshotRef,
                         on_progress: Callable[[Progress], None] | None = None) -> RestoreResult:
        return self._call(_ops.snapshot_restore(sandbox, snapshot), _progress(on_progress))

    def snapshot_delete(self, sandbox: str, snapshot: SnapshotRef) -> str:
        return self._call(_ops.snapshot_delete(sandbox, snapshot))

    # ---- sessions ---------------------------------------------------------------------

    def open_session(self, sandbox: str, command: Command | None = None, *,
                     argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
                     cwd: str | None = None, pty: bool | None = None, rows: int | None = None,
                     cols: int | None = None, term: str | None = None) -> Session:
        """``pty.open``: a Session, subscribed from seq 0. Its context manager closes it."""
        call = _ops.pty_open(sandbox, command, argv=argv, env=env, cwd=cwd, pty=pty, rows=rows,
                             cols=cols, term=term)
        f = self._start(call)
        info = _first_reply(f, call)
        return Session(self, info, f, owned=True)

    def attach_session(self, session: str, from_seq: int | None = None) -> Session:
        """``pty.attach`` of a session opened elsewhere (another connection, before a
        reconnect): a Session replaying from ``from_seq`` (default: the oldest byte kept)."""
        call = _ops.pty_attach(session, from_seq)
        f = self._start(call)
        info = _first_reply(f, call)
        return Session(self, info, f, owned=False)

    def pty_write(self, session: str, data: str | bytes = "", eof: bool = False) -> int:
        return self._call(_ops.pty_write(session, data, eof))

    def pty_resize(self, session: str, rows: int, cols: int) -> None:
        self._call(_ops.pty_resize(session, rows, cols))

    def pty_signal(self, session: str, signal: Signal) -> int:
        return self._call(_ops.pty_signal(session, signal))

    def pty_close(self, session: str) -> SessionExit:
        return self._call(_ops.pty_close(session))

    def pty_detach(self, session: str) -> None:
        self._call(_ops.pty_detach(session))


def _send_fds(sock: socket.socket, line: bytes, fds: tuple[int, ...]) -> None:
    """The line alone in one sendmsg whose SCM_RIGHTS holds fds: the kernel attaches them to
    its first byte, so a short send goes on without them (docs/protocol.md, "File
    descriptors"). Every line before it was sent whole (the send lock is held)."""
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
    n = sock.sendmsg([line], anc)
    if n < len(line):
        sock.sendall(line[n:])


def _socket_connect(path: str, timeout: float | None) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
        s.settimeout(None)
    except OSError as e:
        s.close()
        raise ConnectionLost(f"connect {path}: {e.strerror or e}") from None
    return s


def _first_reply(f: _Flight, call: Call[T]) -> T:
    """The reply of a subscribing request (it comes before its events)."""
    try:
        while True:
            msg = f.next()
            if "event" not in msg:
                return call.finish(msg)
    except BaseException:
        f.forget()
        raise


class RunStream:
    """A streaming run in flight. Iterating gives its events (Started, Output) as they come
    and ends with the final reply, kept in ``result`` (an error reply is raised). As a context
    manager, a run left before its end is killed."""

    def __init__(self, client: Client, call: Call[RunResult], flight: _Flight) -> None:
        self.client = client
        self._call = call
        self._f = flight
        self.run_id: str | None = None
        self.sandbox: str | None = None
        self.result: RunResult | None = None

    def next_event(self, timeout: float | None = None) -> RunEvent | None:
        """The next event, or None once the run ended (``result`` is then set). TimeoutError
        when nothing came within ``timeout`` seconds."""
        if self.result is not None:
            return None
        while True:
            try:
                msg = self._f.next(timeout)
            except TimeoutError:
                raise
            except BaseException:
                self._f.forget()
                raise
            if "event" not in msg:
                self.result = self._call.finish(msg)
                return None
            ev = decode_event(msg)
            if isinstance(ev, Started):
                self.run_id, self.sandbox = ev.run_id, ev.sandbox
            if isinstance(ev, RUN_EVENT_TYPES):
                return ev

    def __iter__(self) -> Iterator[RunEvent]:
        while True:
            ev = self.next_event()
            if ev is None:
                return
            yield ev

    def wait(self, timeout: float | None = None) -> RunResult:
        """Reads to the end (events dropped); the RunResult."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.result is None:
            self.next_event(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self.result

    def kill(self, signal: Signal | None = None) -> None:
        """Kills the run (waits for its ``started`` event first if it had not come)."""
        while self.run_id is None and self.result is None:
            if self.next_event() is None:
                return
        if self.result is None and self.run_id is not None:
            self.client.kill(self.run_id, signal)

    def __enter__(self) -> RunStream:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.result is None and not self.client.closed:
            try:
                self.kill()
                self.wait(30)
            except Error:
                if et is None:
                    raise
        self._f.forget()


class Session:
    """An interactive session (``pty.open`` / ``pty.attach``) and this connection's
    subscription to its output. Iterating gives Output and Dropped events until the session's
    exit (then ``exit`` is set) or the end of the subscription (``detach``)."""

    def __init__(self, client: Client, info: SessionInfo, flight: _Flight, owned: bool) -> None:
        self.client = client
        self.id = info.session
        self.info = info
        self._f: _Flight | None = flight
        self._owned = owned
        self.exit: SessionExit | None = None
        self.next_seq = info.first_seq if info.first_seq is not None else 0

    def read(self, timeout: float | None = None) -> SessionEvent | None:
        """The next event of the subscription, or None once it ended. TimeoutError when
        nothing came within ``timeout`` seconds."""
        while self._f is not None:
            msg = self._f.next(timeout)
            ev = decode_event(msg)
            if isinstance(ev, Output):
                self.next_seq = ev.seq + len(ev.data)
            elif isinstance(ev, Dropped):
                self.next_seq = ev.seq + ev.bytes
            if isinstance(ev, SessionExit) or msg.get("event") == DETACHED_EVENT:
                if isinstance(ev, SessionExit):
                    self.exit = ev
                self._f = None
                return ev if isinstance(ev, SessionExit) else None
            if isinstance(ev, SESSION_EVENT_TYPES):
                return ev
        return None

    def __iter__(self) -> Iterator[SessionEvent]:
        while True:
            ev = self.read()
            if ev is None:
                return
            if not isinstance(ev, SessionExit):
                yield ev

    def read_until(self, needle: str | bytes, timeout: float = 30.0) -> bytes:
        """Reads output until ``needle`` appears in what came since this call; returns that
        output. TimeoutError after ``timeout`` seconds; EOFError when the session ended first."""
        want = needle.encode() if isinstance(needle, str) else needle
        got = b""
        deadline = time.monotonic() + timeout
        while want not in got:
            ev = self.read(max(0.0, deadline - time.monotonic()))
            if ev is None or isinstance(ev, SessionExit):
                raise EOFError(f"session {self.id} ended before {want!r} came")
            if isinstance(ev, Output):
                got += ev.data
        return got

    def wait(self, timeout: float | None = None) -> SessionExit:
        """Reads to the session's exit event (output dropped)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.exit is None:
            if self._f is None:
                raise EOFError(f"session {self.id}: not subscribed (detached)")
            self.read(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self.exit

    def write(self, data: str | bytes, eof: bool = False) -> int:
        """``pty.write``: the session's input total once all of it was written."""
        return self.client.pty_write(self.id, data, eof)

    def resize(self, rows: int, cols: int) -> None:
        self.client.pty_resize(self.id, rows, cols)

    def signal(self, signal: Signal) -> int:
        """``pty.signal``: how many processes got it."""
        return self.client.pty_signal(self.id, signal)

    def close(self) -> SessionExit:
        """``pty.close``: the session's outcome; it is gone after."""
        return self.client.pty_close(self.id)

    def detach(self) -> None:
        """``pty.detach``: this connection stops getting the output (the session goes on)."""
        self.client.pty_detach(self.id)
        self._f = None

    def attach(self, from_seq: int | None = None) -> SessionInfo:
        """``pty.attach`` on this connection: the subscription starts again at ``from_seq``
        (default: the oldest byte still kept); events not read yet are dropped."""
        call = _ops.pty_attach(self.id, from_seq)
        f = self.client._start(call)
        info = _first_reply(f, call)
        if self._f is not None:
            self._f.forget()
        self._f = f
        self.info = info
        self.exit = None
        self.next_seq = info.first_seq if info.first_seq is not None else 0
        return info

    def __enter__(self) -> Session:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._f is not None:
            self._f.forget()
        if self._owned and not self.client.closed:
            try:
                self.close()
            except NotFound:
                pass
            except Error:
                if et is None:
                    raise


class Ports:
    """The published ports of one sandbox (``sb.ports``; docs/protocol.md, "Published ports"):
    its server on 127.0.0.1:PORT inside, reached from the host."""

    def __init__(self, client: Client, sandbox: str) -> None:
        self.client = client
        self.sandbox = sandbox

    def open(self, port: int, *, tcp: bool | int = False) -> str:
        """``port.open``: the Unix socket's path (the caller's), or with ``tcp`` the address on
        the host's 127.0.0.1 (``True``: a port the kernel chooses; or that port), which anyone
        on the host can connect to."""
        return (self.publish(port, tcp=tcp)).target

    def publish(self, port: int, *, tcp: bool | int = False) -> PublishedPort:
        """``port.open``, the whole reply."""
        return self.client._call(_ops.port_open(self.sandbox, port, tcp))

    def close(self, port: int) -> None:
        """``port.close``: the listener, its connections and its socket file."""
        self.client._call(_ops.port_close(self.sandbox, port))

    def list(self) -> builtins.list[PublishedPort]:
        """The sandbox's published ports, oldest first (``inspect``'s ``ports``)."""
        return self.client._call(_ops.port_list(self.sandbox))


class Files:
    """The file operations of one sandbox (``sb.files``; docs/protocol.md, "Files"). Paths
    are the sandbox's own, absolute or relative to /work; ``user`` (``"sandbox"`` or
    ``"root"``) defaults to the sandbox's. Errors are the protocol's: NotFound, Conflict,
    PermissionDenied, NoSpace, InvalidRequest (field ``path`` mostly)."""

    def __init__(self, client: Client, sandbox: str, user: str | None = None) -> None:
        self.client = client
        self.sandbox = sandbox
        self.user = user

    def _u(self, user: str | None) -> str | None:
        return user if user is not None else self.user

    def stat(self, path: PathArg, *, follow: bool = False, user: str | None = None) -> FileStat:
        """``file.stat``: a symlink is reported as one unless ``follow``."""
        return self.client._call(_ops.file_stat(self.sandbox, path, follow=follow, user=self._u(user)))

    def exists(self, path: PathArg, *, user: str | None = None) -> bool:
        """Whether ``path`` names anything (a dangling symlink counts)."""
        try:
            self.stat(path, user=user)
        except NotFound:
            return False
        return True

    def list(self, path: PathArg = "/work", recursive: bool = False, *,
             max_entries: int | None = None, max_depth: int | None = None,
             user: str | None = None) -> FileList:
        """``file.list`` of a directory: its entries (iterate the FileList), every level below
        with ``recursive`` (symlinks reported, mount points marked, neither entered)."""
        return self.client._call(_ops.file_list(self.sandbox, path, recursive=recursive,
                                                max_entries=max_entries, max_depth=max_depth,
                                                user=self._u(user)))

    def mkdir(self, path: PathArg, *, parents: bool = False, mode: Mode | None = None,
              user: str | None = None) -> int:
        """``file.mkdir``: how many directories were made (``parents``: as ``mkdir -p``)."""
        return self.client._call(_ops.file_mkdir(self.sandbox, path, parents=parents, mode=mode,
                                                 user=self._u(user)))

    def remove(self, path: PathArg, *, recursive: bool = False, missing_ok: bool = False,
               user: str | None = None) -> int:
        """``file.remove``: how many entries were removed (``recursive``: as ``rm -rf``)."""
        return self.client._call(_ops.file_remove(self.sandbox, path, recursive=recursive,
                                                  missing_ok=missing_ok, user=self._u(user)))

    def read(self, path: PathArg, offset: Size = 0, length: Size | None = None, *,
             nofollow: bool = False, user: str | None = None) -> bytes:
        """``file.read``: the bytes (holes as zeros), from ``offset``, ``length`` of them
        (default: to the end). They come in the daemon's chunks of at most 1 MiB; the whole
        content is held here: for a large file use read_into."""
        sink = BytesSink()
        self.client._call(_ops.file_read(self.sandbox, path, sink, offset=offset or None,
                                         length=length, nofollow=nofollow, user=self._u(user)))
        return bytes(sink.buf)

    def read_text(self, path: PathArg, encoding: str = "utf-8", errors: str = "strict", *,
                  user: str | None = None) -> str:
        return self.read(path, user=user).decode(encoding, errors)

    def read_into(self, path: PathArg, dest: Any, offset: Size = 0,
                  length: Size | None = None, *, nofollow: bool = False,
                  user: str | None = None) -> int:
        """``file.read`` into ``dest``: an fd or a file object with one (a regular file or a
        pipe, open for writing) is passed to the sandbox's helper, which writes the bytes
        there itself at its offset (a regular file stays sparse); any other object with
        ``write`` (io.BytesIO) gets them as they come. The count of bytes (holes included)."""
        fd = fileno_of(dest)
        if fd is not None:
            return self.client._call(_ops.file_read(self.sandbox, path, None, offset=offset or None,
                                                    length=length, nofollow=nofollow, fd=fd,
                                                    user=self._u(user)))
        sink = WriterSink(dest.write)
        return self.client._call(_ops.file_read(self.sandbox, path, sink, offset=offset or None,
                                                length=length, nofollow=nofollow,
                                                user=self._u(user)))

    def write(self, path: PathArg, data: bytes | str, *, mode: Mode | None = None,
              parents: bool = False, atomic: bool = True, exclusive: bool = False,
              offset: Size | None = None, sync: bool = False,
              user: str | None = None) -> FileWritten:
        """``file.write`` of ``data`` (a str is written as UTF-8): by default atomically (a
        reader sees the old file or the new one; a failure leaves the old one). ``mode``
        (default 0644 for a new file, the old one's otherwise); ``parents`` makes the missing
        directories; ``exclusive``: Conflict when ``path`` exists; ``atomic=False`` writes in
        place at ``offset``; ``sync`` fsyncs. Over 512 KiB the content follows the request in
        file.chunk lines (1 MiB each, within the daemon's window), for a file of any size."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        kw: dict[str, Any] = dict(size=len(raw), mode=mode, parents=parents, exclusive=exclusive,
                                  atomic=atomic, offset=offset, sync=sync, user=self._u(user))
        if len(raw) <= INLINE_WRITE_MAX:
            return self.client._call(_ops.file_write(self.sandbox, path, data if isinstance(data, str) else raw, **kw))
        return self.client._upload(_ops.file_write_chunks(self.sandbox, path, **kw), raw)

    def write_from(self, path: PathArg, src: Any, *, size: Size | None = None,
                   mode: Mode | None = None, parents: bool = False, atomic: bool = True,
                   exclusive: bool = False, offset: Size | None = None, sync: bool = False,
                   user: str | None = None) -> FileWritten:
        """``file.write`` from ``src``: an fd or a file object with one (a regular file, read
        from its offset to its end, or a pipe, read to EOF) is passed to the sandbox's helper,
        which reads it; any other object with ``read`` (io.BytesIO) is read here and sent in
        file.chunk lines. ``size``: what the content must come to (InvalidRequest when it ends
        short)."""
        fd = fileno_of(src)
        kw: dict[str, Any] = dict(size=size, mode=mode, parents=parents, exclusive=exclusive,
                                  atomic=atomic, offset=offset, sync=sync, user=self._u(user))
        if fd is None:
            return self.client._upload(_ops.file_write_chunks(self.sandbox, path, **kw), src)
        return self.client._call(_ops.file_write(self.sandbox, path, fd=fd, **kw))

    def put_tree(self, local_dir: str | os.PathLike[str], path: PathArg, *, parents: bool = False,
                 overwrite: bool = True, user: str | None = None) -> TreeCopied:
        """``file.put``: the contents of the host directory ``local_dir`` become the directory
        ``path`` (made, atomically, when missing; else copied into it, each file atomically).
        The tree is packed with tarfile into a temporary file whose fd is passed."""
        with _tree.pack(local_dir) as tmp:
            return self.client._call(_ops.file_put(self.sandbox, path, tmp.fileno(), parents=parents,
                                                   overwrite=overwrite, user=self._u(user)))

    def get_tree(self, path: PathArg, local_dir: str | os.PathLike[str], *, follow: bool = False,
                 user: str | None = None) -> TreeCopied:
        """``file.get``: the directory ``path`` of the sandbox becomes (or is copied into) the
        host directory ``local_dir``: its contents, not its own name. The stream comes through
        a passed temporary file and is unpacked here as hostile input (no absolute names, no
        ``..``, nothing through a symlink)."""
        with tempfile.TemporaryFile() as tmp:
            got = self.client._call(_ops.file_get(self.sandbox, _tree.contents_path(path), tmp.fileno(),
                                                  follow=follow, user=self._u(user)))
            tmp.seek(0)
            _tree.unpack(tmp, local_dir)
        return got


class Sandbox:
    """A sandbox and the Client that talks about it. ``Sandbox.create`` and ``Sandbox.fork``
    make one (the context manager destroys it, and closes the connection it opened);
    ``Client.sandbox`` names an existing one."""

    def __init__(self, client: Client, info: SandboxInfo, *, owns_sandbox: bool,
                 owns_client: bool) -> None:
        self.client = client
        self.info = info
        self.id = info.id
        self.name = info.name
        self._owns_sandbox = owns_sandbox
        self._owns_client = owns_client
        #: The file operations: ``sb.files.write("a.txt", b"...")``, ``sb.files.read(...)``.
        self.files = Files(client, info.id)
        #: Its servers reached from the host: ``sb.ports.open(8000)`` is a socket's path.
        self.ports = Ports(client, info.id)

    @classmethod
    def create(cls, *, client: Client | None = None, socket: str | os.PathLike[str] | None = None,
               name: str | None = None, memory: Size | None = None, pids: int | None = None,
               cpus: float | str | None = None, timeout: Duration | None = None,
               output_bytes: Size | None = None, disk: Size | None = None,
               files: int | None = None, limits: Mapping[str, Any] | None = None,
               network: str | Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
               best_effort: bool | None = None, ttl: Duration | None = None,
               idle: Duration | None = None,
               user: str | None = None, from_snapshot: SnapshotRef | None = None,
               image: str | None = None, root: Root | None = None,
               file_size: Size | None = None, open_files: int | None = None,
               mounts: Sequence[Mapping[str, Any]] | None = None,
               workspace: str | os.PathLike[str] | Mapping[str, Any] | None = None,
               hostname: str | None = None, ephemeral: bool | None = None,
               sysctls: Mapping[str, str] | None = None, masked_paths: Sequence[str] | None = None,
               readonly_paths: Sequence[str] | None = None, with_connection: bool | None = None) -> Sandbox:
        """``create`` on ``client`` (default: a new connection to ``socket``, closed with the
        sandbox)."""
        c = client if client is not None else Client(socket)
        try:
            info = c.create(name=name, memory=memory, pids=pids, cpus=cpus, timeout=timeout,
                            output_bytes=output_bytes, disk=disk, files=files, limits=limits,
                            network=network, env=env, best_effort=best_effort, ttl=ttl,
                            idle=idle, user=user, from_snapshot=from_snapshot, image=image, root=root,
                            file_size=file_size, open_files=open_files, mounts=mounts, workspace=workspace, hostname=hostname, ephemeral=ephemeral, sysctls=sysctls,
                            masked_paths=masked_paths, readonly_paths=readonly_paths, with_connection=with_connection)
        except BaseException:
            if client is None:
                c.close()
            raise
        return cls(c, info, owns_sandbox=True, owns_client=client is None)

    @classmethod
    def fork(cls, snapshot: SnapshotRef, *, client: Client | None = None,
             socket: str | os.PathLike[str] | None = None, name: str | None = None,
             memory: Size | None = None, pids: int | None = None,
             cpus: float | str | None = None, timeout: Duration | None = None,
             output_bytes: Size | None = None, disk: Size | None = None,
             files: int | None = None, limits: Mapping[str, Any] | None = None,
             network: str | Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
             best_effort: bool | None = None, ttl: Duration | None = None,
             idle: Duration | None = None, user: str | None = None) -> Sandbox:
        """A new sandbox whose workspace starts as a copy of ``snapshot`` (``create`` with
        ``from_snapshot``)."""
        return cls.create(client=client, socket=socket, name=name, memory=memory, pids=pids,
                          cpus=cpus, timeout=timeout, output_bytes=output_bytes, disk=disk,
                          files=files, limits=limits, network=network, env=env,
                          best_effort=best_effort, ttl=ttl, idle=idle, user=user,
                          from_snapshot=snapshot)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if self._owns_sandbox:
                try:
                    if self.client.closed:
                        # The connection went (the daemon restarted, say): a new one destroys it.
                        with Client(self.client.path) as c:
                            c.destroy(self.id)
                        self._owns_sandbox = False
                    else:
                        self.destroy()
                except Error:
                    if et is None:
                        raise
        finally:
            if self._owns_client:
                self.client.close()

    def __repr__(self) -> str:
        return f"<Sandbox {self.id}{' ' + self.name if self.name else ''}>"

    def run(self, command: Command | None = None, *, argv: Sequence[str] | None = None,
            env: Mapping[str, str] | None = None, cwd: str | None = None,
            stdin: str | bytes | None = None, timeout: Duration | None = None,
            cpu_s: Duration | None = None, output_bytes: Size | None = None,
            memory: Size | None = None,
            pids: int | None = None, user: RunUser | None = None,
            env_defaults: bool | None = None, file_size: Size | None = None,
            open_files: int | None = None, no_timeout: bool | None = None, umask: int | None = None,
            rlimits: Mapping[str, Any] | None = None, rlimits_lower: bool | None = None, pid_namespace: str | None = None,
            capabilities: Mapping[str, Sequence[str]] | None = None, stdio: Sequence[int | None] | None = None,
            extra_fds: Sequence[int] | None = None) -> RunResult:
        """Runs ``command`` (a string for /bin/sh -c, or an argv) and waits for its result."""
        return self.client.run(command, sandbox=self.id, argv=argv, env=env, cwd=cwd,
                               stdin=stdin, timeout=timeout, cpu_s=cpu_s,
                               output_bytes=output_bytes, memory=memory, pids=pids, user=user,
                               env_defaults=env_defaults, file_size=file_size, open_files=open_files, no_timeout=no_timeout, umask=umask, rlimits=rlimits, rlimits_lower=rlimits_lower, pid_namespace=pid_namespace, capabilities=capabilities, stdio=stdio, extra_fds=extra_fds)

    def stream(self, command: Command | None = None, *, argv: Sequence[str] | None = None,
               env: Mapping[str, str] | None = None, cwd: str | None = None,
               stdin: str | bytes | None = None, timeout: Duration | None = None,
               cpu_s: Duration | None = None, output_bytes: Size | None = None,
               memory: Size | None = None, pids: int | None = None,
               user: str | None = None) -> RunStream:
        """Runs ``command`` with its output streamed: ``for ev in sb.stream(...)``."""
        return self.client.stream(command, sandbox=self.id, argv=argv, env=env, cwd=cwd,
                                  stdin=stdin, timeout=timeout, cpu_s=cpu_s,
                                  output_bytes=output_bytes, memory=memory, pids=pids, user=user)

    def inspect(self) -> SandboxInfo:
        self.info = self.client.inspect(self.id)
        return self.info

    def destroy(self) -> DestroyResult:
        r = self.client.destroy(self.id)
        self._owns_sandbox = False
        return r

    def snapshot(self, label: str | None = None,
                 on_progress: Callable[[Progress], None] | None = None) -> Snapshot:
        """A snapshot of the workspace (the full reply: ``client.snapshot``)."""
        return self.client.snapshot(self.id, label, on_progress).snapshot

    def snapshots(self) -> list[Snapshot]:
        return self.client.snapshot_list(self.id)

    def restore(self, snapshot: SnapshotRef | None = None,
                on_progress: Callable[[Progress], None] | None = None) -> RestoreResult:
        """Replaces the workspace with ``snapshot`` (default: the newest one). Every process
        of the sandbox is killed."""
        if snapshot is None:
            snaps = self.snapshots()
            if not snaps:
                raise NotFound(f"sandbox {self.id} has no snapshot", code="not_found",
                               field="snapshot", op="snapshot.restore")
            snapshot = snaps[-1]
        return self.client.snapshot_restore(self.id, snapshot, on_progress)

    def delete_snapshot(self, snapshot: SnapshotRef) -> str:
        return self.client.snapshot_delete(self.id, snapshot)

    def session(self, command: Command | None = None, *, argv: Sequence[str] | None = None,
                env: Mapping[str, str] | None = None, cwd: str | None = None,
                pty: bool | None = None, rows: int | None = None, cols: int | None = None,
                term: str | None = None) -> Session:
        """Opens an interactive session (default: a login shell on a terminal)."""
        return self.client.open_session(self.id, command, argv=argv, env=env, cwd=cwd, pty=pty,
                                        rows=rows, cols=cols, term=term)
