# SPDX-License-Identifier: LGPL-2.1-or-later
"""The runner-sidecar adapter: an HTTP server with the wire contract of DeepTutor's runner
sidecar (``deeptutor/services/sandbox/runner/server.py`` and ``spec.py``), running each command
in a throwaway sandbox of sandboxd's. DeepTutor's own client (``RunnerSidecarBackend``) moves
over by pointing ``DEEPTUTOR_SANDBOX_RUNNER_URL`` at it (docs/python.md, "DeepTutor").

    python3 -m sandboxd.sidecar [--host 127.0.0.1] [--port 8900] [--unix PATH]
        [--socket SANDBOXD_SOCKET] [--best-effort] [--allowed-workdirs A:B]
        [--allow-host NAME]... [--allow-origin ORIGIN]... [--token-file FILE]
        [--workers 8] [--max-connections 1000] [--request-timeout 10]

``GET /health``: 200 when an ``/exec`` would run; 503 with ``error`` saying why not (sandboxd
unreachable; a memory limit this host cannot enforce while the sidecar was started without
``--best-effort``).

``POST /exec`` (``Content-Type: application/json``, at most 4 MiB, else 413), the contract's
members; any other member is ignored:
  ``command`` (shell string), ``argv`` (list of strings: when non-empty it is run without a
  shell, ``command`` otherwise), ``workdir`` (a path beneath one of the allowed roots),
  ``env`` (object: the whole environment but ``PATH``, which is kept unless given),
  ``mounts`` (``[{"host_path", "sandbox_path", "read_only"}]``, sandboxd mounts of the caller's
  directories; ``host_path`` beneath an allowed root), ``limits`` (``timeout_s`` 30,
  ``memory_mb`` 512, ``cpu_seconds`` 30, ``max_output_chars`` 10000; absent, not positive or
  not a number: the default).
A member of the wrong type is a 400 whose ``error`` names it. Answer (200):
``{"stdout","stderr","exit_code","timed_out","error"}``, ``error`` "" when the runner did its
job (whatever the command's exit), else the runner's failure (workdir or mount refused, sandboxd
unreachable, the program could not be started); a timeout is exit code 124 and ``timed_out``.
Each stream over ``max_output_chars`` keeps its head and tail joined by
``\\n\\n... (N chars truncated) ...\\n\\n``. sandboxd's extras: ``reason``, ``oom_killed``,
``duration_s``, ``stdout_truncated``, ``stderr_truncated``.

A web page cannot reach it: only ``application/json`` bodies are taken (a cross-site form or
``text/plain`` post is refused before its body is read), a ``Host`` other than the listening
address (DNS rebinding) and an ``Origin`` not allowed are refused. Requests are read by one
event loop: a connection holds no thread while its request arrives (at most
``--request-timeout`` seconds), and commands run on ``--workers`` threads."""
from __future__ import annotations

import argparse
import asyncio
import hmac
import ipaddress
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ._common import socket_path
from .client import Client
from .errors import ConnectionLost, Error, SandboxdError, SpawnFailed
from .replies import RunResult

log = logging.getLogger("sandboxd.sidecar")

MAX_REQUEST_BYTES = 4 << 20
DEFAULT_PORT = 8900
DEFAULT_TIMEOUT_S = 30
DEFAULT_MEMORY_MB = 512
DEFAULT_CPU_SECONDS = 30
DEFAULT_MAX_OUTPUT_CHARS = 10_000
#: The reference runner's roots, which DEEPTUTOR_RUNNER_ALLOWED_WORKDIRS replaces.
WORKDIRS_ENV = "DEEPTUTOR_RUNNER_ALLOWED_WORKDIRS"
DEFAULT_WORKDIRS = "/app/data/user/workspace:/app/data/users"
#: sandboxd's default PATH: the one variable kept when the caller's env replaces the rest.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
#: Output asked of sandboxd per stream: all of it up to sandboxd's default 1 MiB (counted exactly),
#: at least 4 bytes per character max_output_chars keeps, at most MAX_FETCH_BYTES.
FETCH_BYTES = 1 << 20
MAX_FETCH_BYTES = 8 << 20
MAX_HEADER_BYTES = 64 << 10
MAX_HEADERS = 100


def roots_from(spec: str | None) -> list[str]:
    """Colon-separated roots, as the reference reads DEEPTUTOR_RUNNER_ALLOWED_WORKDIRS."""
    if spec is None:
        spec = os.environ.get(WORKDIRS_ENV, DEFAULT_WORKDIRS)
    return [r for r in spec.split(":") if r]


@dataclass
class Config:
    socket: str | None = None
    best_effort: bool = False
    allowed_workdirs: list[str] | None = None  # None: $DEEPTUTOR_RUNNER_ALLOWED_WORKDIRS or default
    allow_hosts: list[str] = field(default_factory=list)
    allow_origins: list[str] = field(default_factory=list)
    token: str | None = None
    workers: int = 8
    max_connections: int = 1000
    request_timeout: float = 10.0
    max_request_bytes: int = MAX_REQUEST_BYTES

    def __post_init__(self) -> None:
        self.socket = socket_path(self.socket)
        if self.allowed_workdirs is None:
            self.allowed_workdirs = roots_from(None)


class BadRequest(Exception):
    """A malformed request: HTTP 400, ``error`` naming the member."""


class Refused(Exception):
    """A well-formed request the runner will not run: HTTP 200, ``error`` saying why."""


def reply(stdout: str = "", stderr: str = "", exit_code: int = 0, timed_out: bool = False,
          error: str = "", **extra: Any) -> dict[str, Any]:
    """The contract's answer; ``exit_code`` is 0 beside an ``error``, as the reference says."""
    out: dict[str, Any] = {"stdout": stdout, "stderr": stderr, "exit_code": exit_code,
                           "timed_out": timed_out, "error": error}
    out.update(extra)
    return out


# ---- output: head and tail in characters ----------------------------------------------------

def truncate_head_tail(text: str, max_chars: int) -> str:
    """The reference's cut: the first and last max_chars//2 characters around the marker."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    return _join(text, text, len(text), max_chars)


def _join(head: str, tail: str, length: int, max_chars: int) -> str:
    half = max_chars // 2
    return head[:half] + f"\n\n... ({length - max_chars:,} chars truncated) ...\n\n" + tail[-half:]


_DROPPED = re.compile(rb"\n\[\.\.\. (\d+) bytes dropped \.\.\.\]\n")


def stream_text(data: bytes, total: int, truncated: bool, max_chars: int) -> tuple[str, bool]:
    """A stream as the contract gives it, and whether it was cut. Output up to FETCH_BYTES comes
    whole and is counted exactly. Past it sandboxd kept the head and tail (4 bytes per character
    wanted, at least) and dropped the middle, counted in bytes: its characters are estimated at
    the kept ends' characters per byte (exact for ASCII and for text of one width)."""
    if truncated:
        for m in _DROPPED.finditer(data):
            n = int(m.group(1))
            if len(data) - len(m.group(0)) + n == total:
                head = data[:m.start()].decode(errors="replace")
                tail = data[m.end():].decode(errors="replace")
                kept = len(data) - len(m.group(0))
                dropped = n * (len(head) + len(tail)) // kept if kept else n
                return _join(head, tail, len(head) + len(tail) + dropped, max_chars), True
    text = data.decode(errors="replace")
    return truncate_head_tail(text, max_chars), max_chars > 0 and len(text) > max_chars


# ---- the request ----------------------------------------------------------------------------

def _limit(limits: Mapping[str, Any], name: str, default: int) -> int:
    """The reference's coercion (int(), not positive: the default), but a value of a wrong type
    is the caller's mistake, not a default."""
    v = limits.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise BadRequest(f"'limits.{name}' must be a number")
    try:
        n = int(v)
    except ValueError:
        raise BadRequest(f"'limits.{name}' must be a number") from None
    return n if n > 0 else default


def _beneath(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        r = os.path.realpath(root)
        if real == r or real.startswith(r.rstrip("/") + "/"):
            return True
    return False


def _mounts(raw: Any, roots: Sequence[str]) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRequest("'mounts' must be a list")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise BadRequest(f"'mounts[{i}]' must be an object")
        host, target, ro = m.get("host_path"), m.get("sandbox_path"), m.get("read_only", True)
        for name, v in (("host_path", host), ("sandbox_path", target)):
            if not isinstance(v, str) or not v:
                raise BadRequest(f"'mounts[{i}].{name}' must be a non-empty string")
        if not isinstance(ro, bool):
            raise BadRequest(f"'mounts[{i}].read_only' must be a boolean")
        assert isinstance(host, str) and isinstance(target, str)
        if not _beneath(host, roots):
            raise Refused(f"mounts[{i}] {json.dumps(m)}: host_path {host!r} is outside the "
                          f"shared workspace roots ({':'.join(roots)}); refusing to execute")
        out.append({"source": os.path.realpath(host), "target": os.path.normpath(target),
                    "read_only": ro})
    return out


def parse_exec(body: Any, cfg: Config) -> dict[str, Any]:
    """Client.run's arguments for an /exec request: BadRequest for a malformed one, Refused for
    one the runner will not run."""
    if not isinstance(body, dict):
        raise BadRequest("the request must be a JSON object")
    known = {"command", "argv", "workdir", "env", "mounts", "limits", "stdin"}
    for k in body:
        if k not in known:
            log.debug("ignoring the unknown member %r", k)
    command, argv = body.get("command"), body.get("argv")
    if command is not None and not isinstance(command, str):
        raise BadRequest("'command' must be a string")
    if argv is not None and (not isinstance(argv, list)
                             or not all(isinstance(a, str) for a in argv)):
        raise BadRequest("'argv' must be a list of strings")
    if not argv and not command:
        raise BadRequest("missing or empty 'command'")
    workdir = body.get("workdir") or None
    if workdir is not None and not isinstance(workdir, str):
        raise BadRequest("'workdir' must be a string or null")
    env = body.get("env")
    if env is not None and not isinstance(env, dict):
        raise BadRequest("'env' must be an object")
    limits = body.get("limits")
    if limits is not None and not isinstance(limits, dict):
        raise BadRequest("'limits' must be an object")
    limits = limits or {}
    stdin = body.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise BadRequest("'stdin' must be a string")
    timeout_s = _limit(limits, "timeout_s", DEFAULT_TIMEOUT_S)
    memory_mb = _limit(limits, "memory_mb", DEFAULT_MEMORY_MB)
    cpu_seconds = _limit(limits, "cpu_seconds", DEFAULT_CPU_SECONDS)
    max_chars = _limit(limits, "max_output_chars", DEFAULT_MAX_OUTPUT_CHARS)
    roots = cfg.allowed_workdirs or []
    mounts = _mounts(body.get("mounts"), roots)
    cwd = None
    if workdir is not None:
        if not _beneath(workdir, roots):
            raise Refused(f"workdir {workdir!r} is outside the shared workspace roots "
                          f"({':'.join(roots)}); refusing to execute")
        cwd = os.path.abspath(workdir)  # normal; relative to the sidecar's own, as the reference
        # The reference's runner sees the roots at the same paths; a sandbox sees only what is
        # mounted, so a workdir no mount holds is mounted at its own path.
        if not any(cwd == m["target"] or cwd.startswith(m["target"].rstrip("/") + "/")
                   for m in mounts):
            mounts.append({"source": os.path.realpath(workdir), "target": cwd, "read_only": False})
    full_env = {"PATH": DEFAULT_PATH}
    full_env.update({str(k): str(v) for k, v in (env or {}).items()})
    run_argv: list[str] | None = argv or None
    if cwd is not None and cwd != "/work" and not cwd.startswith("/work/"):
        # sandboxd starts a run at or beneath /work; a workdir elsewhere (a mount at its own
        # path) is entered by a shell that then execs the command, argv untouched.
        run_argv = (["/bin/sh", "-c", 'cd -- "$0" && exec "$@"', cwd] + argv if argv else
                    ["/bin/sh", "-c", 'cd -- "$0" && exec /bin/sh -c "$1"', cwd, str(command)])
        cwd = None
    return {
        "command": None if run_argv else command, "argv": run_argv, "cwd": cwd,
        "env": full_env, "env_defaults": False, "stdin": stdin, "timeout": timeout_s,
        "cpu_s": cpu_seconds, "limits": {"memory": f"{memory_mb}M"},
        "output_bytes": min(max(4 * max_chars + 8, FETCH_BYTES), MAX_FETCH_BYTES),
        "mounts": mounts or None, "best_effort": True if cfg.best_effort else None,
        "max_chars": max_chars,
    }


def _mount_named(e: SandboxdError, mounts: Sequence[Mapping[str, Any]] | None,
                 explicit: int) -> str:
    m = re.match(r"mounts\[(\d+)\]", e.field or "")
    if not m or not mounts or int(m.group(1)) >= len(mounts):
        return ""
    i = int(m.group(1))
    entry = mounts[i]
    if i >= explicit:
        return f"the workdir's mount ({entry['source']} at {entry['target']}): "
    return (f"mounts[{i}] (host_path {entry['source']}, sandbox_path {entry['target']}): ")


def _answer(r: RunResult, max_chars: int) -> dict[str, Any]:
    out, out_cut = stream_text(r.stdout_data, r.stdout_bytes, r.stdout_truncated, max_chars)
    err, err_cut = stream_text(r.stderr_data, r.stderr_bytes, r.stderr_truncated, max_chars)
    timed_out = r.timed_out or r.reason == "timeout"
    return reply(out, err, 124 if timed_out else r.exit_code, timed_out, "", reason=r.reason,
                 oom_killed=r.oom_killed, duration_s=r.duration_s, stdout_truncated=out_cut,
                 stderr_truncated=err_cut)


def execute(body: Any, cfg: Config) -> tuple[int, dict[str, Any]]:
    """The HTTP status and answer of one /exec request."""
    try:
        args = parse_exec(body, cfg)
    except BadRequest as e:
        return 400, reply(error=str(e))
    except Refused as e:
        return 200, reply(error=str(e))
    max_chars = args.pop("max_chars")
    explicit = len(body.get("mounts") or [])
    try:
        with Client(cfg.socket) as c:
            r = c.run(**args)
    except SpawnFailed as e:
        return 200, reply(error=f"the command could not be started: {e.message}")
    except SandboxdError as e:
        what = _mount_named(e, args["mounts"], explicit)
        msg = f"sandboxd refused the run: {what}{e}"
        if "pass best_effort" in e.message:
            msg += " (start the sidecar with --best-effort to run with what this host enforces)"
        return 200, reply(error=msg)
    except (ConnectionLost, Error) as e:
        return 200, reply(error=f"sandboxd unreachable at {cfg.socket}: {e}")
    return 200, _answer(r, max_chars)


def health(cfg: Config) -> tuple[int, dict[str, Any]]:
    """200 when an /exec would run, else 503 and why."""
    try:
        with Client(cfg.socket, connect_timeout=5) as c:
            hello = c.hello()
            h = c.health()
    except Error as e:
        return 503, {"status": "error", "error": f"sandboxd unreachable at {cfg.socket}: {e}"}
    if not cfg.best_effort and not hello.capabilities.get("cgroup", {}).get("memory"):
        return 503, {"status": "error", "error":
                     "sandboxd cannot enforce memory limits on this host (hello: "
                     "capabilities.cgroup.memory is false), so every /exec, which carries "
                     "limits.memory_mb, would be refused: start the sidecar with --best-effort "
                     "to run with the limits this host can enforce"}
    return 200, {"status": "ok" if h.status == "ok" else h.status,
                 "sandboxd": {"version": hello.version, "protocol": hello.protocol,
                              "sandboxes": h.sandboxes, "runs": h.runs}}


# ---- HTTP -----------------------------------------------------------------------------------

class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
           411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
           431: "Request Header Fields Too Large", 503: "Service Unavailable"}


@dataclass
class Request:
    method: str
    path: str
    version: str
    headers: dict[str, str]


def _host_names(host: str, port: int, extra: Sequence[str]) -> set[str]:
    """The Host values a request may carry: the listening address (and localhost when it is
    loopback), and the --allow-host names, each with the port (bare too on port 80)."""
    names = {host}
    try:
        ip = ipaddress.ip_address(host)
        if ip.version == 6:
            names = {f"[{host}]"}
        if ip.is_loopback:
            names.add("localhost")
    except ValueError:
        pass
    names.update(extra)
    out: set[str] = set()
    for n in names:
        n = n.lower()
        if re.search(r":\d+$", n) and not n.endswith("]"):
            out.add(n)
            continue
        out.add(f"{n}:{port}")
        if port == 80:
            out.add(n)
    return out


class Sidecar:
    """The server: one event loop reads requests (a connection holds no thread while its request
    arrives, each request must arrive within request_timeout), a pool of cfg.workers threads
    runs them. start() in a thread of its own, or serve() in this one."""

    def __init__(self, cfg: Config, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 unix: str | None = None) -> None:
        self.cfg = cfg
        self.host, self.port, self.unix = host, port, unix
        self.hosts: set[str] = set()
        self.pool = ThreadPoolExecutor(max_workers=max(1, cfg.workers),
                                       thread_name_prefix="sidecar")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.arriving: dict[asyncio.StreamWriter, float] = {}
        self.conns: set[asyncio.StreamWriter] = set()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- lifecycle
    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop.set_default_executor(self.pool)  # no thread beyond the pool's, ever
        self._stop = asyncio.Event()
        server: asyncio.AbstractServer
        if self.unix is not None:
            if os.path.exists(self.unix):
                os.unlink(self.unix)
            server = await asyncio.start_unix_server(self._conn, self.unix, limit=MAX_HEADER_BYTES)
            os.chmod(self.unix, 0o600)
        else:
            server = await asyncio.start_server(self._conn, self.host, self.port,
                                                limit=MAX_HEADER_BYTES, backlog=1024)
            self.port = server.sockets[0].getsockname()[1]
            self.hosts = _host_names(self.host, self.port, self.cfg.allow_hosts)
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for w in list(self.conns):
                w.transport.abort()
            await server.wait_closed()

    def serve(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            self.pool.shutdown(wait=False, cancel_futures=True)

    def start(self) -> Sidecar:
        def run() -> None:
            try:
                self.serve()
            except BaseException as e:  # surfaced by start() below
                self._error = e
                self._ready.set()
        self._thread = threading.Thread(target=run, name="sidecar-loop", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}"

    # -- a connection
    def _admit(self, writer: asyncio.StreamWriter) -> bool:
        """At max_connections, the connection whose request has been arriving longest makes
        way: a crowd of slow ones cannot lock out a prompt one."""
        if len(self.conns) < self.cfg.max_connections:
            return True
        if not self.arriving:
            return False
        oldest = min(self.arriving, key=lambda w: self.arriving[w])
        oldest.transport.abort()
        self.arriving.pop(oldest, None)
        self.conns.discard(oldest)
        return True

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._admit(writer):
            writer.transport.abort()
            return
        self.conns.add(writer)
        try:
            while True:
                self.arriving[writer] = asyncio.get_running_loop().time()
                begun: list[bool] = []
                try:
                    got = await asyncio.wait_for(self._arrive(reader, writer, begun),
                                                 self.cfg.request_timeout)
                except asyncio.TimeoutError:
                    if begun:  # an idle keep-alive connection is closed without an answer
                        await self._send(writer, 408, reply(error="the request did not arrive "
                                         f"within {self.cfg.request_timeout:g} s"), close=True)
                    break
                except HttpError as e:
                    await self._send(writer, e.status, reply(error=str(e)), close=True)
                    break
                if got is None:
                    break
                self.arriving.pop(writer, None)  # arrived: from here the command's timeout runs
                if not await self._handle(writer, *got):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self.arriving.pop(writer, None)
            self.conns.discard(writer)
            writer.close()

    async def _send(self, writer: asyncio.StreamWriter, status: int, obj: Mapping[str, Any],
                    close: bool) -> None:
        data = json.dumps(obj).encode()
        head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                f"Connection: {'close' if close else 'keep-alive'}\r\n"
                "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n")
        writer.write(head.encode() + data)
        await writer.drain()

    async def _head(self, reader: asyncio.StreamReader, begun: list[bool]) -> Request | None:
        try:
            line = await reader.readline()
            if not line:
                return None
            begun.append(True)
            if line in (b"\r\n", b"\n"):  # a stray blank line between requests (RFC 9112 2.2)
                line = await reader.readline()
            parts = line.decode("latin-1").split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                raise HttpError(400, "not an HTTP/1 request line")
            headers: dict[str, str] = {}
            size = len(line)
            while True:
                h = await reader.readline()
                if not h.endswith(b"\n"):
                    raise asyncio.IncompleteReadError(h, None)
                size += len(h)
                if h in (b"\r\n", b"\n"):
                    break
                if size > MAX_HEADER_BYTES or len(headers) >= MAX_HEADERS:
                    raise HttpError(431, "the request's header is too large")
                name, sep, value = h.decode("latin-1").partition(":")
                name = name.strip().lower()
                if not sep or not name or name != name.split()[0]:
                    raise HttpError(400, "a malformed header line")
                if name in headers and name in ("host", "content-length", "content-type",
                                                "origin", "authorization", "transfer-encoding"):
                    raise HttpError(400, f"the header {name} is repeated")
                headers[name] = value.strip()
        except (ValueError, asyncio.LimitOverrunError):
            raise HttpError(431, "a header line is too long") from None
        return Request(parts[0], parts[1], parts[2], headers)

    def _policy(self, req: Request) -> None:
        """What a browser could send on a page's behalf, refused before any body is read."""
        if self.unix is None and req.headers.get("host", "").lower() not in self.hosts:
            raise HttpError(403, f"Host {req.headers.get('host', '')[:100]!r} is not this "
                            "sidecar's address (add it with --allow-host)")
        origin = req.headers.get("origin")
        if origin is not None and origin not in self.cfg.allow_origins:
            raise HttpError(403, f"Origin {origin[:100]!r} is not allowed (--allow-origin)")
        if self.cfg.token is not None:
            kind, _, tok = req.headers.get("authorization", "").partition(" ")
            if kind.lower() != "bearer" or not hmac.compare_digest(tok.strip().encode(),
                                                                   self.cfg.token.encode()):
                raise HttpError(401, "a bearer token is required (--token-file)")

    async def _arrive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      begun: list[bool]) -> tuple[Request, bytes] | None:
        """One request, header and body; HttpError for one refused (its body unread). ``begun``
        gets an element once its first line came."""
        req = await self._head(reader, begun)
        if req is None:
            return None
        path = req.path.split("?", 1)[0].rstrip("/") or "/"
        self._policy(req)
        if path in ("/health", "/"):
            if req.method != "GET":
                raise HttpError(405, "/health takes GET")
            return req, b""
        if path != "/exec":
            raise HttpError(404, f"no such endpoint {req.path[:100]!r}")
        if req.method != "POST":
            raise HttpError(405, "/exec takes POST")
        ctype = req.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            raise HttpError(415, "the body must be Content-Type: application/json")
        if "transfer-encoding" in req.headers or "content-length" not in req.headers:
            raise HttpError(411, "a Content-Length is required")
        try:
            n = int(req.headers["content-length"])
            if n < 0:
                raise ValueError
        except ValueError:
            raise HttpError(400, "bad Content-Length") from None
        if n > self.cfg.max_request_bytes:
            # Never parsed. A body up to 4 times the cap is read and dropped, so that a client
            # that sends it before reading gets the answer rather than a reset.
            left = n if n <= 4 * self.cfg.max_request_bytes else 0
            while left > 0:
                chunk = await reader.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
            raise HttpError(413, f"the request is {n} bytes, over the cap of "
                            f"{self.cfg.max_request_bytes}")
        if req.headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return req, await reader.readexactly(n)

    async def _handle(self, writer: asyncio.StreamWriter, req: Request, raw: bytes) -> bool:
        """Answers a request that arrived; whether the connection goes on."""
        conn = req.headers.get("connection", "").lower()
        close = conn == "close" or (req.version == "HTTP/1.0" and conn != "keep-alive")
        loop = asyncio.get_running_loop()
        if req.method == "GET":
            status, obj = await loop.run_in_executor(self.pool, health, self.cfg)
        else:
            try:
                body = json.loads(raw)
            except ValueError as e:
                status, obj = 400, reply(error=f"invalid JSON: {e}")
            else:
                status, obj = await loop.run_in_executor(self.pool, execute, body, self.cfg)
        await self._send(writer, status, obj, close)
        return not close


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m sandboxd.sidecar",
                                 description="DeepTutor's runner-sidecar contract over sandboxd.")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT,
                    help=f"port ({DEFAULT_PORT}, the reference's; 0: any free one)")
    ap.add_argument("--unix", metavar="PATH", help="listen on this Unix socket (mode 0600) instead")
    ap.add_argument("--socket", help="sandboxd's socket (default: $SANDBOXD_SOCKET, else "
                                     "/run/sandboxd/sandboxd.sock)")
    ap.add_argument("--best-effort", action="store_true",
                    help="run with the limits this host can enforce (no memory controller: "
                         "memory_mb is then an rlimit, not a cgroup limit)")
    ap.add_argument("--allowed-workdirs", metavar="A:B",
                    help=f"roots for workdir and mounts' host_path (default: ${WORKDIRS_ENV}, "
                         f"else {DEFAULT_WORKDIRS})")
    ap.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                    help="another Host the sidecar answers to (a container's name for it)")
    ap.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                    help="an Origin whose requests are taken (none by default)")
    ap.add_argument("--token-file", help="require 'Authorization: Bearer' with this file's token")
    ap.add_argument("--workers", type=int, default=8, help="threads running commands (8)")
    ap.add_argument("--max-connections", type=int, default=1000, help="open connections (1000)")
    ap.add_argument("--request-timeout", type=float, default=10.0,
                    help="seconds a request's header and body may take to arrive (10)")
    ap.add_argument("--verbose", action="store_true", help="debug log on stderr")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.WARNING,
                        format="sandboxd-sidecar: %(message)s")
    token = None
    if a.token_file:
        with open(a.token_file, encoding="utf-8") as f:
            token = f.read().strip()
        if not token:
            ap.error(f"{a.token_file} holds no token")
    cfg = Config(a.socket, a.best_effort, roots_from(a.allowed_workdirs)
                 if a.allowed_workdirs is not None else None, a.allow_host, a.allow_origin, token,
                 a.workers, a.max_connections, a.request_timeout)
    sc = Sidecar(cfg, a.host, a.port, a.unix)
    sc.start()
    where = f"unix:{a.unix}" if a.unix else sc.url
    print(f"sandboxd-sidecar: listening on {where} (sandboxd at {cfg.socket}; workdirs "
          f"{':'.join(cfg.allowed_workdirs or [])})", file=sys.stderr, flush=True)
    done = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: done.set())
    while not done.wait(1):
        pass
    sc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
