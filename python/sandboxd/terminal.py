# SPDX-License-Identifier: LGPL-2.1-or-later
"""The PTY design's session object over the client (docs/python.md, "The other designs'
faces"): a command on a terminal (or on pipes) in a sandbox, with ``write``, ``read``,
``resize``, ``signal`` (on a terminal: to its foreground process group, as a key would),
``wait``, ``close`` (the session and, when the Terminal made it, its sandbox are gone: nothing
is left behind), and ``Terminal.run`` for one command run to its end. Terminal is the blocking
face, AsyncTerminal the asyncio one."""
from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence

from ._ops import Command, Signal
from .aio import AsyncClient, AsyncSession
from .client import Client, Session
from .replies import Output, SessionExit


class Terminal:
    """An interactive session; ``Terminal.open(...)`` makes one (and a sandbox for it unless
    ``sandbox`` names one). Its context manager closes it."""

    def __init__(self, client: Client, session: Session, *, own_sandbox: str | None,
                 owns_client: bool) -> None:
        self.client = client
        self.session = session
        self.id = session.id
        self.sandbox = session.info.sandbox
        self._own_sandbox = own_sandbox
        self._owns_client = owns_client
        self._buf = b""

    @classmethod
    def open(cls, command: Command | None = None, *, argv: Sequence[str] | None = None,
             sandbox: str | None = None, pty: bool = True, rows: int = 24, cols: int = 80,
             env: Mapping[str, str] | None = None, cwd: str | None = None,
             client: Client | None = None, socket: str | os.PathLike[str] | None = None,
             best_effort: bool | None = None) -> Terminal:
        """``command`` (a string for /bin/sh -c, or an argv; default a login shell) on a
        terminal of ``rows`` x ``cols``, or on pipes with ``pty=False``."""
        c = client if client is not None else Client(socket)
        own: str | None = None
        try:
            if sandbox is None:
                own = sandbox = c.create(best_effort=best_effort).id
            s = c.open_session(sandbox, command, argv=argv, env=env, cwd=cwd, pty=pty,
                               rows=rows if pty else None, cols=cols if pty else None)
        except BaseException:
            if own is not None:
                c.destroy(own)
            if client is None:
                c.close()
            raise
        return cls(c, s, own_sandbox=own, owns_client=client is None)

    @classmethod
    def run(cls, command: Command, *, pty: bool = False, timeout: float | None = None,
            env: Mapping[str, str] | None = None, cwd: str | None = None,
            sandbox: str | None = None, client: Client | None = None,
            socket: str | os.PathLike[str] | None = None,
            best_effort: bool | None = None) -> tuple[int | None, bytes]:
        """Runs one command in a session to its end: (exit code, all its output). TimeoutError
        after ``timeout`` seconds (the session and its sandbox are closed either way)."""
        with cls.open(command, pty=pty, env=env, cwd=cwd, sandbox=sandbox, client=client,
                      socket=socket, best_effort=best_effort) as t:
            out = b""
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                chunk = t.read(None if deadline is None else max(0.0, deadline - time.monotonic()))
                if not chunk:
                    break
                out += chunk
            return t.wait(), out

    def write(self, data: str | bytes, eof: bool = False) -> int:
        """Input to the command (``eof``: then end it); the session's input total."""
        return self.session.write(data, eof)

    def read(self, timeout: float | None = None) -> bytes:
        """The next output, b"" once the command has ended. TimeoutError when nothing came
        within ``timeout`` seconds."""
        if self._buf:
            out, self._buf = self._buf, b""
            return out
        while True:
            ev = self.session.read(timeout)
            if ev is None or isinstance(ev, SessionExit):
                return b""
            if isinstance(ev, Output) and ev.data:
                return ev.data

    def read_until(self, needle: str | bytes, timeout: float = 30.0) -> bytes:
        """Output up to and including ``needle`` (the rest is kept for the next read).
        TimeoutError, or EOFError when the command ended first."""
        want = needle.encode() if isinstance(needle, str) else needle
        got = b""
        deadline = time.monotonic() + timeout
        while want not in got:
            chunk = self.read(max(0.0, deadline - time.monotonic()))
            if not chunk:
                raise EOFError(f"session {self.id} ended before {want!r} came")
            got += chunk
        end = got.index(want) + len(want)
        self._buf = got[end:] + self._buf
        return got[:end]

    def resize(self, rows: int, cols: int) -> None:
        self.session.resize(rows, cols)

    def signal(self, signal: Signal) -> int:
        """To the terminal's foreground process group (on pipes: to the command); how many
        processes got it."""
        return self.session.signal(signal)

    def wait(self, timeout: float | None = None) -> int | None:
        """The command's exit code (None when a signal ended it: see ``exit``)."""
        return self.session.wait(timeout).exit_code

    @property
    def exit(self) -> SessionExit | None:
        return self.session.exit

    def close(self) -> None:
        """Ends the command if it still runs, removes the session and the sandbox this Terminal
        made, and closes the connection it opened."""
        try:
            if self.session.exit is None:
                self.session.close()
        finally:
            try:
                if self._own_sandbox is not None:
                    self.client.destroy(self._own_sandbox)
                    self._own_sandbox = None
            finally:
                if self._owns_client:
                    self.client.close()

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTerminal:
    """Terminal's asyncio twin: ``t = await AsyncTerminal.open(...)``."""

    def __init__(self, client: AsyncClient, session: AsyncSession, *, own_sandbox: str | None,
                 owns_client: bool) -> None:
        self.client = client
        self.session = session
        self.id = session.id
        self.sandbox = session.info.sandbox
        self._own_sandbox = own_sandbox
        self._owns_client = owns_client
        self._buf = b""

    @classmethod
    async def open(cls, command: Command | None = None, *, argv: Sequence[str] | None = None,
                   sandbox: str | None = None, pty: bool = True, rows: int = 24, cols: int = 80,
                   env: Mapping[str, str] | None = None, cwd: str | None = None,
                   client: AsyncClient | None = None,
                   socket: str | os.PathLike[str] | None = None,
                   best_effort: bool | None = None) -> AsyncTerminal:
        c = client if client is not None else await AsyncClient.connect(socket)
        own: str | None = None
        try:
            if sandbox is None:
                own = sandbox = (await c.create(best_effort=best_effort)).id
            s = await c.open_session(sandbox, command, argv=argv, env=env, cwd=cwd, pty=pty,
                                     rows=rows if pty else None, cols=cols if pty else None)
        except BaseException:
            if own is not None:
                await c.destroy(own)
            if client is None:
                await c.close()
            raise
        return cls(c, s, own_sandbox=own, owns_client=client is None)

    @classmethod
    async def run(cls, command: Command, *, pty: bool = False, timeout: float | None = None,
                  env: Mapping[str, str] | None = None, cwd: str | None = None,
                  sandbox: str | None = None, client: AsyncClient | None = None,
                  socket: str | os.PathLike[str] | None = None,
                  best_effort: bool | None = None) -> tuple[int | None, bytes]:
        async with await cls.open(command, pty=pty, env=env, cwd=cwd, sandbox=sandbox,
                                  client=client, socket=socket, best_effort=best_effort) as t:
            out = b""
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                chunk = await t.read(None if deadline is None
                                     else max(0.0, deadline - time.monotonic()))
                if not chunk:
                    break
                out += chunk
            return await t.wait(), out

    async def write(self, data: str | bytes, eof: bool = False) -> int:
        return await self.session.write(data, eof)

    async def read(self, timeout: float | None = None) -> bytes:
        if self._buf:
            out, self._buf = self._buf, b""
            return out
        while True:
            ev = await self.session.read(timeout)
            if ev is None or isinstance(ev, SessionExit):
                return b""
            if isinstance(ev, Output) and ev.data:
                return ev.data

    async def read_until(self, needle: str | bytes, timeout: float = 30.0) -> bytes:
        want = needle.encode() if isinstance(needle, str) else needle
        got = b""
        deadline = time.monotonic() + timeout
        while want not in got:
            chunk = await self.read(max(0.0, deadline - time.monotonic()))
            if not chunk:
                raise EOFError(f"session {self.id} ended before {want!r} came")
            got += chunk
        end = got.index(want) + len(want)
        self._buf = got[end:] + self._buf
        return got[:end]

    async def resize(self, rows: int, cols: int) -> None:
        await self.session.resize(rows, cols)

    async def signal(self, signal: Signal) -> int:
        return await self.session.signal(signal)

    async def wait(self, timeout: float | None = None) -> int | None:
        return (await self.session.wait(timeout)).exit_code

    @property
    def exit(self) -> SessionExit | None:
        return self.session.exit

    async def close(self) -> None:
        try:
            if self.session.exit is None:
                await self.session.close()
        finally:
            try:
                if self._own_sandbox is not None:
                    await self.client.destroy(self._own_sandbox)
                    self._own_sandbox = None
            finally:
                if self._owns_client:
                    await self.client.close()

    async def __aenter__(self) -> AsyncTerminal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
