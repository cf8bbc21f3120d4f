# SPDX-License-Identifier: LGPL-2.1-or-later
"""The backend design's object over the client (docs/python.md, "The other designs' faces"):
``spawn`` a sandbox with ``memory_bytes``, ``cpu_seconds``, ``file_size_bytes``, ``exec``
commands in it (an ExecResult of ``returncode, stdout, stderr, duration_s``), ``snapshot`` its
workspace and ``destroy`` it. SandboxBackend is the blocking face, AsyncSandboxBackend the
asyncio one; each holds one connection (``close``)."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .aio import AsyncClient
from .client import Client
from .replies import RunResult


@dataclass(frozen=True)
class ExecResult:
    """What ``exec`` gives: the command's exit (128 + N for a signal N, 124 for a timeout, as
    sandboxd's ``exit_code``), its output as text and the run's wall time."""
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @classmethod
    def of(cls, r: RunResult) -> ExecResult:
        return cls(r.exit_code, r.stdout, r.stderr, r.duration_s or 0.0)


@dataclass(frozen=True)
class _Spawned:
    cpu_seconds: float | None


def _create_fields(memory_bytes: int | None, file_size_bytes: int | None) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if file_size_bytes is not None:
        limits["file_size"] = file_size_bytes
    return {"memory": memory_bytes, "limits": limits or None}


def _command(command: str | Sequence[str]) -> dict[str, Any]:
    return {"command": command} if isinstance(command, str) else {"argv": list(command)}


class SandboxBackend:
    """spawn / exec / snapshot / destroy over one connection. ``cpu_seconds`` given to spawn is
    each exec's CPU-time limit (sandboxd counts it over all the run's processes)."""

    def __init__(self, socket: str | os.PathLike[str] | None = None, *,
                 client: Client | None = None, best_effort: bool | None = None) -> None:
        self.client = client if client is not None else Client(socket)
        self._owns = client is None
        self.best_effort = best_effort
        self._spawned: dict[str, _Spawned] = {}

    def spawn(self, *, memory_bytes: int | None = None, cpu_seconds: float | None = None,
              file_size_bytes: int | None = None, env: Mapping[str, str] | None = None,
              network: str | None = None) -> str:
        """A new sandbox; its id."""
        info = self.client.create(best_effort=self.best_effort, env=env, network=network,
                                  **_create_fields(memory_bytes, file_size_bytes))
        self._spawned[info.id] = _Spawned(cpu_seconds)
        return info.id

    def exec(self, sandbox: str, command: str | Sequence[str], *, timeout_s: float | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None,
             stdin: str | bytes | None = None) -> ExecResult:
        """Runs ``command`` (a string for /bin/sh -c, or an argv) in the sandbox and waits."""
        spawned = self._spawned.get(sandbox)
        r = self.client.run(sandbox=sandbox, env=env, cwd=cwd, stdin=stdin, timeout=timeout_s,
                            cpu_s=spawned.cpu_seconds if spawned else None, **_command(command))
        return ExecResult.of(r)

    def snapshot(self, sandbox: str, label: str | None = None) -> str:
        """A snapshot of the sandbox's workspace; its id."""
        return self.client.snapshot(sandbox, label).snapshot.id

    def destroy(self, sandbox: str) -> None:
        """Kills everything in the sandbox and removes it (nothing is left behind)."""
        self._spawned.pop(sandbox, None)
        self.client.destroy(sandbox)

    def close(self) -> None:
        if self._owns:
            self.client.close()

    def __enter__(self) -> SandboxBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSandboxBackend:
    """SandboxBackend's asyncio twin: ``b = await AsyncSandboxBackend.connect()`` (connecting is
    awaited, which a constructor cannot be), or ``AsyncSandboxBackend(client)`` over an
    AsyncClient of the caller's (``await AsyncClient.connect()``), which it leaves open."""

    def __init__(self, client: AsyncClient | None = None, *, owns_client: bool = False,
                 best_effort: bool | None = None) -> None:
        if client is None or isinstance(client, (str, bytes, os.PathLike)):
            raise TypeError("AsyncSandboxBackend() needs a connected AsyncClient: make one with "
                            "`await AsyncSandboxBackend.connect(socket=None, best_effort=...)`, or pass "
                            "`await AsyncClient.connect(socket)`" +
                            (f" (got the socket path {client!r})" if client is not None else ""))
        self.client = client
        self._owns = owns_client
        self.best_effort = best_effort
        self._spawned: dict[str, _Spawned] = {}

    @classmethod
    async def connect(cls, socket: str | os.PathLike[str] | None = None, *,
                      best_effort: bool | None = None) -> AsyncSandboxBackend:
        return cls(await AsyncClient.connect(socket), owns_client=True, best_effort=best_effort)

    async def spawn(self, *, memory_bytes: int | None = None, cpu_seconds: float | None = None,
                    file_size_bytes: int | None = None, env: Mapping[str, str] | None = None,
                    network: str | None = None) -> str:
        info = await self.client.create(best_effort=self.best_effort, env=env, network=network,
                                        **_create_fields(memory_bytes, file_size_bytes))
        self._spawned[info.id] = _Spawned(cpu_seconds)
        return info.id

    async def exec(self, sandbox: str, command: str | Sequence[str], *,
                   timeout_s: float | None = None, env: Mapping[str, str] | None = None,
                   cwd: str | None = None, stdin: str | bytes | None = None) -> ExecResult:
        spawned = self._spawned.get(sandbox)
        r = await self.client.run(sandbox=sandbox, env=env, cwd=cwd, stdin=stdin,
                                  timeout=timeout_s,
                                  cpu_s=spawned.cpu_seconds if spawned else None,
                                  **_command(command))
        return ExecResult.of(r)

    async def snapshot(self, sandbox: str, label: str | None = None) -> str:
        return (await self.client.snapshot(sandbox, label)).snapshot.id

    async def destroy(self, sandbox: str) -> None:
        self._spawned.pop(sandbox, None)
        await self.client.destroy(sandbox)

    async def close(self) -> None:
        if self._owns:
            await self.client.close()

    async def __aenter__(self) -> AsyncSandboxBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
