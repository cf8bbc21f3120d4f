# SPDX-License-Identifier: LGPL-2.1-or-later
"""The asyncio face: AsyncClient, AsyncSandbox, AsyncRunStream and AsyncSession, over the same
Wire and Calls as the blocking face. Many tasks may have requests in flight on one AsyncClient.

    async with AsyncSandbox.create(memory="256M") as sb:
        r = await sb.run("make test", timeout=60)
        async for ev in sb.stream("make -j4"):
            ...
"""
from __future__ import annotations

import array
import asyncio
import builtins
import os
import tempfile
import socket as _socket
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

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
    def __init__(self, error: Error) -> None:
        self.error = error


_Item = JSON | _Lost
_Queue = asyncio.Queue[_Item]


class _Flight:
    def __init__(self, client: AsyncClient, pending: Pending[_Queue]) -> None:
        self.client = client
        self.pending = pending
        self.q = pending.sink

    async def next(self, timeout: float | None = None) -> JSON:
        try:
            item = await asyncio.wait_for(self.q.get(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"{self.pending.op}: nothing came within {timeout} s") from None
        if isinstance(item, _Lost):
            raise item.error
        return item

    def forget(self) -> None:
        self.client._wire.forget(self.pending)


class AsyncClient:
    """One connection to sandboxd: ``client = await AsyncClient.connect(path)`` or
    ``async with AsyncClient.connect() as client`` (path default as for Client)."""

    def __init__(self, path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 max_line_bytes: int = DEFAULT_MAX_LINE) -> None:
        self.path = path
        self._reader = reader
        self._writer = writer
        self._wire: Wire[_Queue] = Wire(max_line_bytes)
        self._lost: Error | None = None
        self._send_lock = asyncio.Lock()
        # File transfers beyond the daemon's per-connection cap wait here for their turn.
        self._transfers = asyncio.Semaphore(_ops.TRANSFERS_PER_CONNECTION)
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    def connect(cls, socket: str | os.PathLike[str] | None = None, *,
                connect_timeout: float | None = 10.0,
                max_line_bytes: int = DEFAULT_MAX_LINE) -> _Making[AsyncClient]:
        """Await it (``c = await AsyncClient.connect()``), or use it in ``async with`` directly
        (``async with AsyncClient.connect() as c:``, closed at the block's end)."""
        return _Making(lambda: cls._connect(socket, connect_timeout, max_line_bytes))

    @classmethod
    async def _connect(cls, socket: str | os.PathLike[str] | None, connect_timeout: float | None,
                       max_line_bytes: int) -> AsyncClient:
        path = socket_path(socket)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(path, limit=1 << 16), connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            msg = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or "timed out"
            raise ConnectionLost(f"connect {path}: {msg}") from None
        return cls(path, reader, writer, max_line_bytes)

    async def _read_loop(self) -> None:
        why: Error = ConnectionLost(f"sandboxd closed the connection ({self.path})")
        try:
            while True:
                data = await self._reader.read(1 << 16)
                if not data:
                    break
                for p, msg in self._wire.feed(data):
                    p.sink.put_nowait(msg)
        except OSError as e:
            why = ConnectionLost(f"reading from sandboxd ({self.path}): {e.strerror or e}")
        except Error as e:
            why = e
        except asyncio.CancelledError:
            pass
        if self._lost is None:
            self._lost = why
        for p in self._wire.connection_lost():
            p.sink.put_nowait(_Lost(self._lost))
        self._writer.close()

    async def close(self) -> None:
        """Closes the connection (the daemon kills its runs in flight; sessions go on)."""
        if self._lost is None:
            self._lost = ConnectionLost("the client closed the connection")
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    @property
    def closed(self) -> bool:
        return self._lost is not None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _start(self, call: Call[Any]) -> _Flight:
        if self._lost is not None:
            raise self._lost
        q: _Queue = asyncio.Queue()
        p, line = self._wire.request(call.op, call.fields, q)
        try:
            async with self._send_lock:
                if call.fds:
                    await self._send_fds(line, call.fds)
                else:
                    self._writer.write(line)
                    await self._writer.drain()
        except OSError as e:
            self._wire.forget(p)
            raise ConnectionLost(f"{call.op}: sending to sandboxd: {e.strerror or e}") from None
        return _Flight(self, p)

    async def _send_fds(self, line: bytes, fds: tuple[int, ...]) -> None:
        """The line alone in one sendmsg with fds in its SCM_RIGHTS (see client._send_fds),
        on the transport's socket once the transport's buffer is empty (the send lock keeps
        other lines out until this one is whole)."""
        transport = self._writer.transport
        while transport.get_write_buffer_size() > 0:
            if transport.is_closing():
                raise ConnectionResetError("the connection is closing")
            await asyncio.sleep(0.001)
        tsock = self._writer.get_extra_info("socket")
        if tsock is None:
            raise ConnectionResetError("the connection has no socket")
        loop = asyncio.get_running_loop()
        sock = _socket.socket(fileno=os.dup(tsock.fileno()))
        try:
            sock.setblocking(False)
            anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
            while True:
                try:
                    n = sock.sendmsg([line], anc)
                    break
                except BlockingIOError:
                    ready: asyncio.Future[None] = loop.create_future()

                    def wake(fut: asyncio.Future[None] = ready) -> None:
                        if not fut.done():
                            fut.set_result(None)
                    loop.add_writer(sock.fileno(), wake)
                    try:
                        await ready
                    finally:
                        loop.remove_writer(sock.fileno())
            if n < len(line):
                await loop.sock_sendall(sock, line[n:])
        finally:
            sock.close()

    async def _call(self, call: Call[T], on_event: Callable[[JSON], None] | None = None,
                    timeout: float | None = None) -> T:
        if call.op in _ops.TRANSFER_OPS:
            async with self._transfers:
                return await self._call_now(call, on_event, timeout)
        return await self._call_now(call, on_event, timeout)

    async def _call_now(self, call: Call[T], on_event: Callable[[JSON], None] | None,
                        timeout: float | None) -> T:
        f = await self._start(call)
        if on_event is None:
            on_event = call.events
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                msg = await f.next(left)
                if "event" in msg:
                    if on_event is not None:
                        on_event(msg)
                    continue
                return call.finish(msg)
        except BaseException:
            f.forget()
            raise

    async def _upload(self, call: Call[T], source: Any,
                      on_event: Callable[[JSON], None] | None = None) -> T:
        """As Client._upload: the content from source in file.chunk lines, within the window."""
        async with self._transfers:
            return await self._upload_now(call, source, on_event)

    async def _upload_now(self, call: Call[T], source: Any,
                          on_event: Callable[[JSON], None] | None) -> T:
        f = await self._start(call)
        up = _ops.Upload(f.pending.id, source)
        try:
            while True:
                for line in up.lines():
                    try:
                        async with self._send_lock:
                            self._writer.write(line)
                            await self._writer.drain()
                    except OSError as e:
                        raise ConnectionLost(f"{call.op}: sending to sandboxd: {e.strerror or e}") from None
                msg = await f.next(None)
                if "event" in msg:
                    if not up.take(msg) and on_event is not None:
                        on_event(msg)
                    continue
                return call.finish(msg)
        except BaseException:
            f.forget()
            raise

    async def call(self, op: str, timeout: float | None = None, **fields: Any) -> JSON:
        return await self._call(_ops.raw(op, fields), timeout=timeout)

    async def hello(self) -> Hello:
        return await self._call(_ops.hello())

    async def health(self) -> Health:
        return await self._call(_ops.health())

    async def sweep(self, dry_run: bool = False,
                    on_progress: Callable[[Progress], None] | None = None,
                    sandbox: str | None = None) -> SweepResult:
        """``sweep``; ``sandbox``: that one only, measured now (a sandbox refused for its disk
        limit takes runs again once its files are removed)."""
        return await self._call(_ops.sweep(dry_run, sandbox), _progress(on_progress))

    async def create(self, *, name: str | None = None, memory: Size | None = None,
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
        lim = _ops.limits(memory, pids, cpus, timeout, output_bytes, disk, files, limits, file_size, open_files)
        return await self._call(_ops.create(name=name, limits=lim, network=network, env=env,
                                            best_effort=best_effort, ttl=ttl, idle=idle,
                                            user=user, from_snapshot=from_snapshot, image=image, root=root,
                                            mounts=mounts, workspace=workspace, hostname=hostname, ephemeral=ephemeral, sysctls=sysctls,
                                            masked_paths=masked_paths, readonly_paths=readonly_paths, with_connection=with_connection))

    async def list(self, usage: bool = False) -> builtins.list[SandboxInfo]:
        return await self._call(_ops.list_sandboxes(usage))

    async def inspect(self, sandbox: str) -> SandboxInfo:
        return await self._call(_ops.inspect(sandbox))

    async def destroy(self, sandbox: str) -> DestroyResult:
        return await self._call(_ops.destroy(sandbox))

    async def sandbox(self, ref: str) -> AsyncSandbox:
        return AsyncSandbox(self, await self.inspect(ref), owns_sandbox=False, owns_client=False)

    async def run(self, command: Command | None = None, *, sandbox: str | None = None,
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
        return await self._call(_ops.run(command, sandbox=sandbox, argv=argv, env=env, cwd=cwd,
                                         stdin=stdin, timeout=timeout, cpu_s=cpu_s,
                                         output_bytes=output_bytes, memory=memory, pids=pids,
                                         user=user, limits=dict(limits) if limits else None,
                                         network=network, best_effort=best_effort,
                                         workspace=workspace, image=image, mounts=mounts,
                                         env_defaults=env_defaults, file_size=file_size, open_files=open_files, no_timeout=no_timeout, umask=umask, rlimits=rlimits, rlimits_lower=rlimits_lower, pid_namespace=pid_namespace, capabilities=capabilities, stdio=stdio, extra_fds=extra_fds))

    def stream(self, command: Command | None = None, *, sandbox: str | None = None,
               argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
               cwd: str | None = None, stdin: str | bytes | None = None,
               timeout: Duration | None = None, cpu_s: Duration | None = None,
               output_bytes: Size | None = None, memory: Size | None = None,
               pids: int | None = None, user: str | None = None,
               limits: Mapping[str, Any] | None = None, network: str | Mapping[str, Any] | None = None,
               best_effort: bool | None = None, workspace: str | None = None) -> AsyncRunStream:
        """A streaming run, sent when first iterated (``async for``) or awaited (``wait``)."""
        call = _ops.run(command, sandbox=sandbox, argv=argv, env=env, cwd=cwd, stdin=stdin,
                        timeout=timeout, cpu_s=cpu_s, output_bytes=output_bytes, memory=memory,
                        pids=pids, user=user, stream=True,
                        limits=dict(limits) if limits else None, network=network,
                        best_effort=best_effort, workspace=workspace)
        return AsyncRunStream(self, call)

    async def kill(self, run_id: str, signal: Signal | None = None) -> None:
        await self._call(_ops.kill(run_id, signal))

    async def signal_all(self, sandbox: str, signal: Signal) -> int:
        return await self._call(_ops.sandbox_signal(sandbox, signal))

    async def freeze(self, sandbox: str) -> bool:
        return await self._call(_ops.sandbox_freeze(sandbox))

    async def thaw(self, sandbox: str) -> bool:
        return await self._call(_ops.sandbox_thaw(sandbox))

    async def update_limits(self, sandbox: str, *, memory: Size | None = None, pids: int | None = None,
                            cpus: float | None = None, best_effort: bool | None = None) -> SandboxInfo:
        return await self._call(_ops.sandbox_update(sandbox, memory=memory, pids=pids, cpus=cpus,
                                                    best_effort=best_effort))

    async def update_network(self, sandbox: str, network: Mapping[str, Any]) -> NetworkUpdate:
        return await self._call(_ops.sandbox_update_network(sandbox, network))

    async def image_import(self, name: str, source: str, tag: str | None = None,
                           timeout: float | None = None, owner_only: bool | None = None) -> JSON:
        return await self._call(_ops.image_import(name, source, tag, owner_only), timeout=timeout)

    async def image_list(self) -> builtins.list[JSON]:
        return await self._call(_ops.image_list())

    async def image_inspect(self, image: str) -> JSON:
        return await self._call(_ops.image_inspect(image))

    async def image_remove(self, image: str) -> None:
        await self._call(_ops.image_remove(image))

    async def snapshot(self, sandbox: str, label: str | None = None,
                       on_progress: Callable[[Progress], None] | None = None) -> SnapshotResult:
        return await self._call(_ops.snapshot(sandbox, label), _progress(on_progress))

    async def snapshot_list(self, sandbox: str) -> builtins.list[Snapshot]:
        return await self._call(_ops.snapshot_list(sandbox))

    async def snapshot_restore(self, sandbox: str, snapshot: SnapshotRef,
                               on_progress: Callable[[Progress], None] | None = None
                               ) -> RestoreResult:
        return await self._call(_ops.snapshot_restore(sandbox, snapshot), _progress(on_progress))

    async def snapshot_delete(self, sandbox: str, snapshot: SnapshotRef) -> str:
        return await self._call(_ops.snapshot_delete(sandbox, snapshot))

    async def open_session(self, sandbox: str, command: Command | None = None, *,
                           argv: Sequence[str] | None = None,
                           env: Mapping[str, str] | None = None, cwd: str | None = None,
                           pty: bool | None = None, rows: int | None = None,
                           cols: int | None = None, term: str | None = None) -> AsyncSession:
        call = _ops.pty_open(sandbox, command, argv=argv, env=env, cwd=cwd, pty=pty, rows=rows,
                             cols=cols, term=term)
        f = await self._start(call)
        return AsyncSession(self, await _first_reply(f, call), f, owned=True)

    async def attach_session(self, session: str, from_seq: int | None = None) -> AsyncSession:
        call = _ops.pty_attach(session, from_seq)
        f = await self._start(call)
        return AsyncSession(self, await _first_reply(f, call), f, owned=False)

    async def pty_write(self, session: str, data: str | bytes = "", eof: bool = False) -> int:
        return await self._call(_ops.pty_write(session, data, eof))

    async def pty_resize(self, session: str, rows: int, cols: int) -> None:
        await self._call(_ops.pty_resize(session, rows, cols))

    async def pty_signal(self, session: str, signal: Signal) -> int:
        return await self._call(_ops.pty_signal(session, signal))

    async def pty_close(self, session: str) -> SessionExit:
        return await self._call(_ops.pty_close(session))

    async def pty_detach(self, session: str) -> None:
        await self._call(_ops.pty_detach(session))


async def _first_reply(f: _Flight, call: Call[T]) -> T:
    try:
        while True:
            msg = await f.next()
            if "event" not in msg:
                return call.finish(msg)
    except BaseException:
        f.forget()
        raise


class AsyncRunStream:
    """A streaming run: ``async for ev in stream`` gives Started and Output events; ``result``
    is set at the end. ``async with`` kills a run left before its end."""

    def __init__(self, client: AsyncClient, call: Call[RunResult]) -> None:
        self.client = client
        self._call = call
        self._f: _Flight | None = None
        self.run_id: str | None = None
        self.sandbox: str | None = None
        self.result: RunResult | None = None

    async def start(self) -> AsyncRunStream:
        """Sends the request (done by the first next_event otherwise)."""
        if self._f is None:
            self._f = await self.client._start(self._call)
        return self

    async def next_event(self, timeout: float | None = None) -> RunEvent | None:
        if self.result is not None:
            return None
        f = self._f if self._f is not None else (await self.start())._f
        assert f is not None
        while True:
            try:
                msg = await f.next(timeout)
            except TimeoutError:
                raise
            except BaseException:
                f.forget()
                raise
            if "event" not in msg:
                self.result = self._call.finish(msg)
                return None
            ev = decode_event(msg)
            if isinstance(ev, Started):
                self.run_id, self.sandbox = ev.run_id, ev.sandbox
            if isinstance(ev, RUN_EVENT_TYPES):
                return ev

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[RunEvent]:
        while True:
            ev = await self.next_event()
            if ev is None:
                return
            yield ev

    async def wait(self, timeout: float | None = None) -> RunResult:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self.result is None:
            await self.next_event(None if deadline is None else max(0.0, deadline - loop.time()))
        return self.result

    async def kill(self, signal: Signal | None = None) -> None:
        while self.run_id is None and self.result is None:
            if await self.next_event() is None:
                return
        if self.result is None and self.run_id is not None:
            await self.client.kill(self.run_id, signal)

    async def __aenter__(self) -> AsyncRunStream:
        return await self.start()

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self.result is None and not self.client.closed:
            try:
                await self.kill()
                await self.wait(30)
            except Error:
                if et is None:
                    raise
        if self._f is not None:
            self._f.forget()


class AsyncSession:
    """An interactive session and this connection's subscription (see Session)."""

    def __init__(self, client: AsyncClient, info: SessionInfo, flight: _Flight,
                 owned: bool) -> None:
        self.client = client
        self.id = info.session
        self.info = info
        self._f: _Flight | None = flight
        self._owned = owned
        self.exit: SessionExit | None = None
        self.next_seq = info.first_seq if info.first_seq is not None else 0

    async def read(self, timeout: float | None = None) -> SessionEvent | None:
        while self._f is not None:
            msg = await self._f.next(timeout)
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

    def __aiter__(self) -> AsyncIterator[SessionEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[SessionEvent]:
        while True:
            ev = await self.read()
            if ev is None:
                return
            if not isinstance(ev, SessionExit):
                yield ev

    async def read_until(self, needle: str | bytes, timeout: float = 30.0) -> bytes:
        want = needle.encode() if isinstance(needle, str) else needle
        got = b""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while want not in got:
            ev = await self.read(max(0.0, deadline - loop.time()))
            if ev is None or isinstance(ev, SessionExit):
                raise EOFError(f"session {self.id} ended before {want!r} came")
            if isinstance(ev, Output):
                got += ev.data
        return got

    async def wait(self, timeout: float | None = None) -> SessionExit:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self.exit is None:
            if self._f is None:
                raise EOFError(f"session {self.id}: not subscribed (detached)")
            await self.read(None if deadline is None else max(0.0, deadline - loop.time()))
        return self.exit

    async def write(self, data: str | bytes, eof: bool = False) -> int:
        return await self.client.pty_write(self.id, data, eof)

    async def resize(self, rows: int, cols: int) -> None:
        await self.client.pty_resize(self.id, rows, cols)

    async def signal(self, signal: Signal) -> int:
        return await self.client.pty_signal(self.id, signal)

    async def close(self) -> SessionExit:
        return await self.client.pty_close(self.id)

    async def detach(self) -> None:
        await self.client.pty_detach(self.id)
        self._f = None

    async def attach(self, from_seq: int | None = None) -> SessionInfo:
        call = _ops.pty_attach(self.id, from_seq)
        f = await self.client._start(call)
        info = await _first_reply(f, call)
        if self._f is not None:
            self._f.forget()
        self._f = f
        self.info = info
        self.exit = None
        self.next_seq = info.first_seq if info.first_seq is not None else 0
        return info

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._f is not None:
            self._f.forget()
        if self._owned and not self.client.closed:
            try:
                await self.close()
            except NotFound:
                pass
            except Error:
                if et is None:
                    raise


S = TypeVar("S")


class _Making(Generic[S]):
    """What AsyncSandbox.create returns: await it, or use it in ``async with`` directly."""

    def __init__(self, make: Callable[[], Awaitable[S]]) -> None:
        self._make = make
        self._made: S | None = None

    def __await__(self) -> Generator[Any, None, S]:
        return self._make().__await__()

    async def __aenter__(self) -> S:
        self._made = await self._make()
        enter = getattr(self._made, "__aenter__")
        return await enter()  # type: ignore[no-any-return]

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._made is not None:
            await getattr(self._made, "__aexit__")(et, ev, tb)


class AsyncPorts:
    """The published ports of one sandbox (``sb.ports``; docs/protocol.md, "Published ports"):
    its server on 127.0.0.1:PORT inside, reached from the host."""

    def __init__(self, client: AsyncClient, sandbox: str) -> None:
        self.client = client
        self.sandbox = sandbox

    async def open(self, port: int, *, tcp: bool | int = False) -> str:
        """``port.open``: the Unix socket's path (the caller's), or with ``tcp`` the address on
        the host's 127.0.0.1 (``True``: a port the kernel chooses; or that port), which anyone
        on the host can connect to."""
        return (await self.publish(port, tcp=tcp)).target

    async def publish(self, port: int, *, tcp: bool | int = False) -> PublishedPort:
        """``port.open``, the whole reply."""
        return await self.client._call(_ops.port_open(self.sandbox, port, tcp))

    async def close(self, port: int) -> None:
        """``port.close``: the listener, its connections and its socket file."""
        await self.client._call(_ops.port_close(self.sandbox, port))

    async def list(self) -> builtins.list[PublishedPort]:
        """The sandbox's published ports, oldest first (``inspect``'s ``ports``)."""
        return await self.client._call(_ops.port_list(self.sandbox))


class AsyncFiles:
    """The file operations of one sandbox, for asyncio (``sb.files``; see client.Files)."""

    def __init__(self, client: AsyncClient, sandbox: str, user: str | None = None) -> None:
        self.client = client
        self.sandbox = sandbox
        self.user = user

    def _u(self, user: str | None) -> str | None:
        return user if user is not None else self.user

    async def stat(self, path: PathArg, *, follow: bool = False,
                   user: str | None = None) -> FileStat:
        return await self.client._call(_ops.file_stat(self.sandbox, path, follow=follow,
                                                      user=self._u(user)))

    async def exists(self, path: PathArg, *, user: str | None = None) -> bool:
        try:
            await self.stat(path, user=user)
        except NotFound:
            return False
        return True

    async def list(self, path: PathArg = "/work", recursive: bool = False, *,
                   max_entries: int | None = None, max_depth: int | None = None,
                   user: str | None = None) -> FileList:
        return await self.client._call(_ops.file_list(self.sandbox, path, recursive=recursive,
                                                      max_entries=max_entries,
                                                      max_depth=max_depth, user=self._u(user)))

    async def mkdir(self, path: PathArg, *, parents: bool = False, mode: Mode | None = None,
                    user: str | None = None) -> int:
        return await self.client._call(_ops.file_mkdir(self.sandbox, path, parents=parents,
                                                       mode=mode, user=self._u(user)))

    async def remove(self, path: PathArg, *, recursive: bool = False, missing_ok: bool = False,
                     user: str | None = None) -> int:
        return await self.client._call(_ops.file_remove(self.sandbox, path, recursive=recursive,
                                                        missing_ok=missing_ok,
                                                        user=self._u(user)))

    async def read(self, path: PathArg, offset: Size = 0, length: Size | None = None, *,
                   nofollow: bool = False, user: str | None = None) -> bytes:
        sink = BytesSink()
        await self.client._call(_ops.file_read(self.sandbox, path, sink, offset=offset or None,
                                               length=length, nofollow=nofollow,
                                               user=self._u(user)))
        return bytes(sink.buf)

    async def read_text(self, path: PathArg, encoding: str = "utf-8", errors: str = "strict", *,
                        user: str | None = None) -> str:
        return (await self.read(path, user=user)).decode(encoding, errors)

    async def read_into(self, path: PathArg, dest: Any, offset: Size = 0,
                        length: Size | None = None, *, nofollow: bool = False,
                        user: str | None = None) -> int:
        fd = fileno_of(dest)
        if fd is not None:
            return await self.client._call(_ops.file_read(
                self.sandbox, path, None, offset=offset or None, length=length,
                nofollow=nofollow, fd=fd, user=self._u(user)))
        return await self.client._call(_ops.file_read(
            self.sandbox, path, WriterSink(dest.write), offset=offset or None, length=length,
            nofollow=nofollow, user=self._u(user)))

    async def write(self, path: PathArg, data: bytes | str, *, mode: Mode | None = None,
                    parents: bool = False, atomic: bool = True, exclusive: bool = False,
                    offset: Size | None = None, sync: bool = False,
                    user: str | None = None) -> FileWritten:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        kw: dict[str, Any] = dict(size=len(raw), mode=mode, parents=parents, exclusive=exclusive,
                                  atomic=atomic, offset=offset, sync=sync, user=self._u(user))
        if len(raw) <= INLINE_WRITE_MAX:
            return await self.client._call(_ops.file_write(
                self.sandbox, path, data if isinstance(data, str) else raw, **kw))
        return await self.client._upload(_ops.file_write_chunks(self.sandbox, path, **kw), raw)

    async def write_from(self, path: PathArg, src: Any, *, size: Size | None = None,
                         mode: Mode | None = None, parents: bool = False, atomic: bool = True,
                         exclusive: bool = False, offset: Size | None = None,
                         sync: bool = False, user: str | None = None) -> FileWritten:
        fd = fileno_of(src)
        kw: dict[str, Any] = dict(size=size, mode=mode, parents=parents, exclusive=exclusive,
                                  atomic=atomic, offset=offset, sync=sync, user=self._u(user))
        if fd is None:
            return await self.client._upload(_ops.file_write_chunks(self.sandbox, path, **kw), src)
        return await self.client._call(_ops.file_write(self.sandbox, path, fd=fd, **kw))

    async def put_tree(self, local_dir: str | os.PathLike[str], path: PathArg, *, parents: bool = False,
                 overwrite: bool = True, user: str | None = None) -> TreeCopied:
        """``file.put``: the contents of the host directory ``local_dir`` become the directory
        ``path`` (made, atomically, when missing; else copied into it, each file atomically).
        The tree is packed with tarfile into a temporary file whose fd is passed."""
        with _tree.pack(local_dir) as tmp:
            return await self.client._call(_ops.file_put(self.sandbox, path, tmp.fileno(), parents=parents,
                                                   overwrite=overwrite, user=self._u(user)))

    async def get_tree(self, path: PathArg, local_dir: str | os.PathLike[str], *, follow: bool = False,
                 user: str | None = None) -> TreeCopied:
        """``file.get``: the directory ``path`` of the sandbox becomes (or is copied into) the
        host directory ``local_dir``: its contents, not its own name. The stream comes through
        a passed temporary file and is unpacked here as hostile input (no absolute names, no
        ``..``, nothing through a symlink)."""
        with tempfile.TemporaryFile() as tmp:
            got = await self.client._call(_ops.file_get(self.sandbox, _tree.contents_path(path), tmp.fileno(),
                                                  follow=follow, user=self._u(user)))
            tmp.seek(0)
            _tree.unpack(tmp, local_dir)
        return got


class AsyncSandbox:
    """The asyncio Sandbox: ``async with AsyncSandbox.create(...) as sb`` (or ``sb = await
    AsyncSandbox.create(...)``, then ``await sb.destroy()``)."""

    def __init__(self, client: AsyncClient, info: SandboxInfo, *, owns_sandbox: bool,
                 owns_client: bool) -> None:
        self.client = client
        self.info = info
        self.id = info.id
        self.name = info.name
        self._owns_sandbox = owns_sandbox
        self._owns_client = owns_client
        #: The file operations: ``await sb.files.write("a.txt", b"...")``.
        self.files = AsyncFiles(client, info.id)
        #: Its servers reached from the host: ``await sb.ports.open(8000)``.
        self.ports = AsyncPorts(client, info.id)

    @classmethod
    def create(cls, *, client: AsyncClient | None = None,
               socket: str | os.PathLike[str] | None = None, name: str | None = None,
               memory: Size | None = None, pids: int | None = None,
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
               readonly_paths: Sequence[str] | None = None, with_connection: bool | None = None) -> _Making[AsyncSandbox]:
        async def make() -> AsyncSandbox:
            c = client if client is not None else await AsyncClient.connect(socket)
            try:
                info = await c.create(name=name, memory=memory, pids=pids, cpus=cpus,
                                      timeout=timeout, output_bytes=output_bytes, disk=disk,
                                      files=files, limits=limits, network=network, env=env,
                                      best_effort=best_effort, ttl=ttl, idle=idle, user=user,
                                      from_snapshot=from_snapshot, image=image, root=root,
                                      file_size=file_size, open_files=open_files, mounts=mounts, workspace=workspace, hostname=hostname, ephemeral=ephemeral, sysctls=sysctls,
                                      masked_paths=masked_paths, readonly_paths=readonly_paths, with_connection=with_connection)
            except BaseException:
                if client is None:
                    await c.close()
                raise
            return cls(c, info, owns_sandbox=True, owns_client=client is None)
        return _Making(make)

    @classmethod
    def fork(cls, snapshot: SnapshotRef, *, client: AsyncClient | None = None,
             socket: str | os.PathLike[str] | None = None, name: str | None = None,
             memory: Size | None = None, pids: int | None = None,
             cpus: float | str | None = None, timeout: Duration | None = None,
             output_bytes: Size | None = None, disk: Size | None = None,
             files: int | None = None, limits: Mapping[str, Any] | None = None,
             network: str | Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
             best_effort: bool | None = None, ttl: Duration | None = None,
             idle: Duration | None = None, user: str | None = None) -> _Making[AsyncSandbox]:
        return cls.create(client=client, socket=socket, name=name, memory=memory, pids=pids,
                          cpus=cpus, timeout=timeout, output_bytes=output_bytes, disk=disk,
                          files=files, limits=limits, network=network, env=env,
                          best_effort=best_effort, ttl=ttl, idle=idle, user=user,
                          from_snapshot=snapshot)

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            if self._owns_sandbox:
                try:
                    if self.client.closed:
                        # The connection went (the daemon restarted, say): a new one destroys it.
                        async with await AsyncClient.connect(self.client.path) as c:
                            await c.destroy(self.id)
                        self._owns_sandbox = False
                    else:
                        await self.destroy()
                except Error:
                    if et is None:
                        raise
        finally:
            if self._owns_client:
                await self.client.close()

    def __repr__(self) -> str:
        return f"<AsyncSandbox {self.id}{' ' + self.name if self.name else ''}>"

    async def run(self, command: Command | None = None, *, argv: Sequence[str] | None = None,
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
        return await self.client.run(command, sandbox=self.id, argv=argv, env=env, cwd=cwd,
                                     stdin=stdin, timeout=timeout, cpu_s=cpu_s,
                                     output_bytes=output_bytes, memory=memory, pids=pids,
                                     user=user, env_defaults=env_defaults, file_size=file_size, open_files=open_files, no_timeout=no_timeout, umask=umask, rlimits=rlimits, rlimits_lower=rlimits_lower, pid_namespace=pid_namespace, capabilities=capabilities, stdio=stdio, extra_fds=extra_fds)

    def stream(self, command: Command | None = None, *, argv: Sequence[str] | None = None,
               env: Mapping[str, str] | None = None, cwd: str | None = None,
               stdin: str | bytes | None = None, timeout: Duration | None = None,
               cpu_s: Duration | None = None, output_bytes: Size | None = None,
               memory: Size | None = None, pids: int | None = None,
               user: str | None = None) -> AsyncRunStream:
        return self.client.stream(command, sandbox=self.id, argv=argv, env=env, cwd=cwd,
                                  stdin=stdin, timeout=timeout, cpu_s=cpu_s,
                                  output_bytes=output_bytes, memory=memory, pids=pids, user=user)

    async def inspect(self) -> SandboxInfo:
        self.info = await self.client.inspect(self.id)
        return self.info

    async def destroy(self) -> DestroyResult:
        r = await self.client.destroy(self.id)
        self._owns_sandbox = False
        return r

    async def snapshot(self, label: str | None = None,
                       on_progress: Callable[[Progress], None] | None = None) -> Snapshot:
        return (await self.client.snapshot(self.id, label, on_progress)).snapshot

    async def snapshots(self) -> list[Snapshot]:
        return await self.client.snapshot_list(self.id)

    async def restore(self, snapshot: SnapshotRef | None = None,
                      on_progress: Callable[[Progress], None] | None = None) -> RestoreResult:
        if snapshot is None:
            snaps = await self.snapshots()
            if not snaps:
                raise NotFound(f"sandbox {self.id} has no snapshot", code="not_found",
                               field="snapshot", op="snapshot.restore")
            snapshot = snaps[-1]
        return await self.client.snapshot_restore(self.id, snapshot, on_progress)

    async def delete_snapshot(self, snapshot: SnapshotRef) -> str:
        return await self.client.snapshot_delete(self.id, snapshot)

    async def session(self, command: Command | None = None, *,
                      argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
                      cwd: str | None = None, pty: bool | None = None, rows: int | None = None,
                      cols: int | None = None, term: str | None = None) -> AsyncSession:
        return await self.client.open_session(self.id, command, argv=argv, env=env, cwd=cwd,
                                              pty=pty, rows=rows, cols=cols, term=term)
