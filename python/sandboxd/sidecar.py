# SPDX-License-Identifier: LGPL-2.1-or-later
"""The runner-sidecar adapter: an HTTP server with the contract of the runner sidecar that
sandboxd replaces, running each command in a throwaway sandbox of sandboxd's. An application
written for that sidecar moves over by changing its URL.

    python3 -m sandboxd.sidecar [--host 127.0.0.1] [--port 8080] [--socket PATH]
                                [--best-effort] [--max-output 1M] [--timeout 60]

``GET /health``: 200 ``{"status":"ok",...}`` when sandboxd answers, else 503 with ``error``.

``POST /exec`` with a JSON object (at most 4 MiB, else 413):
  ``command`` (string for /bin/sh -c, or an argv; required), ``workdir`` (``/work`` or below it,
  or relative to it), ``env`` (object of strings), ``mounts`` (must be empty or absent: sandboxd
  cannot bind host paths into a sandbox, so a request with mounts is refused, never run without
  them), ``limits`` (``timeout`` seconds, ``memory``, ``cpus``, ``pids``, ``output_bytes``),
  ``stdin`` (string), and ``timeout`` as a synonym of ``limits.timeout``.
Answer: ``{"stdout","stderr","exit_code","timed_out","error"}`` (plus ``reason``,
``stdout_truncated``, ``stderr_truncated``, ``duration_s``). The command's own failure is an
exit code with ``error`` null; a timeout is exit code 124 with ``timed_out`` true; ``error`` is
set only when the runner failed (HTTP 500: sandboxd unreachable, the command could not be
started, a limit the host cannot enforce...) or the request was refused (HTTP 400). Output
beyond ``output_bytes`` per stream keeps its head and tail, joined by
``[... N bytes dropped ...]`` (sandboxd cuts it)."""
from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._common import socket_path
from .client import Client
from .errors import ConnectionLost, Error, InvalidRequest, SandboxdError, SpawnFailed, TooLarge

MAX_REQUEST_BYTES = 4 << 20
LIMIT_KEYS = frozenset({"timeout", "timeout_s", "memory", "cpus", "pids", "output_bytes"})
REQUEST_KEYS = frozenset({"command", "workdir", "env", "mounts", "limits", "stdin", "timeout"})


class BadRequest(Exception):
    pass


class Config:
    def __init__(self, socket: str | None = None, best_effort: bool = False,
                 max_output: int | str = "1M", timeout: float = 60.0,
                 max_request_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.socket = socket_path(socket)
        self.best_effort = best_effort
        self.max_output = max_output
        self.timeout = timeout
        self.max_request_bytes = max_request_bytes


def result(stdout: str = "", stderr: str = "", exit_code: int | None = None,
           timed_out: bool = False, error: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"stdout": stdout, "stderr": stderr, "exit_code": exit_code,
                           "timed_out": timed_out, "error": error}
    out.update(extra)
    return out


def _cwd(workdir: Any) -> str | None:
    if workdir is None or workdir == "":
        return None
    if not isinstance(workdir, str):
        raise BadRequest("'workdir' must be a string")
    if workdir.startswith("/"):
        if workdir != "/work" and not workdir.startswith("/work/"):
            raise BadRequest(f"'workdir' {workdir!r} is outside the sandbox's workspace: it must "
                             "be /work or below it (or relative to it)")
        return workdir
    return "/work/" + workdir


def parse_exec(body: Any, cfg: Config) -> dict[str, Any]:
    """The run's arguments for an /exec request; BadRequest for what cannot be honoured."""
    if not isinstance(body, dict):
        raise BadRequest("the request must be a JSON object")
    unknown = sorted(set(body) - REQUEST_KEYS)
    if unknown:
        raise BadRequest(f"unknown member {unknown[0]!r}")
    command = body.get("command")
    if isinstance(command, list):
        if not command or not all(isinstance(a, str) for a in command):
            raise BadRequest("'command' as a list must be a non-empty list of strings")
    elif not isinstance(command, str) or not command.strip():
        raise BadRequest("'command' (a string or a list of strings) is required")
    env = body.get("env")
    if env is not None and (not isinstance(env, dict)
                            or not all(isinstance(k, str) and isinstance(v, str)
                                       for k, v in env.items())):
        raise BadRequest("'env' must be an object of strings")
    mounts = body.get("mounts")
    if mounts:
        if not isinstance(mounts, list):
            raise BadRequest("'mounts' must be a list")
        first = mounts[0]
        what = json.dumps(first)[:200]
        raise BadRequest(f"mounts are not supported: sandboxd cannot bind host paths into a "
                         f"sandbox (each command runs in a new sandbox whose /work starts "
                         f"empty); refused rather than run without them ({len(mounts)} given, "
                         f"the first {what})")
    limits = body.get("limits") or {}
    if not isinstance(limits, dict):
        raise BadRequest("'limits' must be an object")
    unknown = sorted(set(limits) - LIMIT_KEYS)
    if unknown:
        raise BadRequest(f"unknown limit {unknown[0]!r} (known: {', '.join(sorted(LIMIT_KEYS))})")
    timeout = limits.get("timeout", limits.get("timeout_s", body.get("timeout")))
    if timeout is None:
        timeout = cfg.timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, str)):
        raise BadRequest("'timeout' must be a number of seconds")
    stdin = body.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise BadRequest("'stdin' must be a string")
    box: dict[str, Any] = {k: limits[k] for k in ("memory", "cpus", "pids") if limits.get(k) is not None}
    return {
        "command": command, "cwd": _cwd(body.get("workdir")), "env": env, "stdin": stdin,
        "timeout": timeout, "output_bytes": limits.get("output_bytes") or cfg.max_output,
        "limits": box or None, "best_effort": True if cfg.best_effort else None,
    }


def execute(body: Any, cfg: Config) -> tuple[int, dict[str, Any]]:
    """The HTTP status and answer of one /exec request."""
    try:
        args = parse_exec(body, cfg)
    except BadRequest as e:
        return 400, result(error=str(e))
    try:
        with Client(cfg.socket) as c:
            r = c.run(**args)
    except (InvalidRequest, TooLarge) as e:
        return 400, result(error=f"sandboxd refused the request: {e}")
    except SpawnFailed as e:
        return 500, result(error=f"the command could not be started: {e}")
    except SandboxdError as e:
        return 500, result(error=f"sandboxd: {e}")
    except (ConnectionLost, Error) as e:
        return 500, result(error=f"sandboxd unreachable: {e}")
    return 200, result(r.stdout, r.stderr, r.exit_code, r.timed_out or r.reason == "timeout",
                       None, reason=r.reason, stdout_truncated=r.stdout_truncated,
                       stderr_truncated=r.stderr_truncated, duration_s=r.duration_s)


def health(cfg: Config) -> tuple[int, dict[str, Any]]:
    try:
        with Client(cfg.socket, connect_timeout=5) as c:
            hello = c.hello()
            h = c.health()
    except Error as e:
        return 503, {"status": "error", "error": str(e)}
    return 200, {"status": "ok" if h.status == "ok" else h.status,
                 "sandboxd": {"version": hello.version, "protocol": hello.protocol,
                              "sandboxes": h.sandboxes, "runs": h.runs}}


class Handler(BaseHTTPRequestHandler):
    server_version = "sandboxd-sidecar/0.1"
    cfg: Config

    def log_message(self, format: str, *args: Any) -> None:
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _answer(self, status: int, obj: dict[str, Any], close: bool = False) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _discard(self, n: int) -> None:
        self.connection.settimeout(10)
        try:
            while n > 0:
                chunk = self.rfile.read(min(n, 1 << 16))
                if not chunk:
                    return
                n -= len(chunk)
        except OSError:
            pass

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/health":
            self._answer(*health(self.cfg))
        elif self.path.split("?", 1)[0] == "/exec":
            self._answer(405, result(error="/exec takes POST"))
        else:
            self._answer(404, result(error=f"no such endpoint {self.path[:100]!r}"))

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != "/exec":
            self._answer(404, result(error=f"no such endpoint {self.path[:100]!r}"))
            return
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length is None:
            self._answer(411, result(error="a Content-Length is required"), close=True)
            return
        try:
            n = int(length)
            if n < 0:
                raise ValueError
        except ValueError:
            self._answer(400, result(error="bad Content-Length"), close=True)
            return
        if n > self.cfg.max_request_bytes:
            # Never parsed. A body up to 4 times the cap is read and dropped, so that a client
            # that sends it before reading gets the answer rather than a reset; a larger one is
            # not read at all and the connection is closed after the answer.
            if n <= 4 * self.cfg.max_request_bytes:
                self._discard(n)
            self._answer(413, result(error=f"the request is {n} bytes, over the cap of "
                                           f"{self.cfg.max_request_bytes}"), close=True)
            return
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError as e:
            self._answer(400, result(error=f"the request is not JSON: {e}"))
            return
        self._answer(*execute(body, self.cfg))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    verbose = False


def make_server(host: str, port: int, cfg: Config) -> Server:
    handler = type("BoundHandler", (Handler,), {"cfg": cfg})
    return Server((host, port), handler)


def serve_in_thread(server: Server) -> threading.Thread:
    t = threading.Thread(target=server.serve_forever, name="sidecar", daemon=True)
    t.start()
    return t


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m sandboxd.sidecar",
                                 description="The runner-sidecar HTTP contract over sandboxd.")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    ap.add_argument("--port", type=int, default=8080, help="port (8080; 0: any free one)")
    ap.add_argument("--socket", help="sandboxd's socket (default: $SANDBOXD_SOCKET, else "
                                     "/run/sandboxd/sandboxd.sock)")
    ap.add_argument("--best-effort", action="store_true",
                    help="accept limits this host cannot enforce")
    ap.add_argument("--max-output", default="1M",
                    help="output kept per stream when a request sets none (1M)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds a command may run when a request sets none (60)")
    ap.add_argument("--verbose", action="store_true", help="log each request to stderr")
    a = ap.parse_args(argv)
    cfg = Config(a.socket, a.best_effort, a.max_output, a.timeout)
    server = make_server(a.host, a.port, cfg)
    server.verbose = a.verbose
    host, port = server.server_address[0], server.server_address[1]
    print(f"sandboxd-sidecar: listening on http://{host!s}:{port} (sandboxd at {cfg.socket})",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
