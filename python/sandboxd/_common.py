# SPDX-License-Identifier: LGPL-2.1-or-later
"""What both faces share besides the wire: the default socket and the event filters."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .replies import Dropped, Event, Output, Progress, SessionExit, Started, decode_event

#: The socket sandboxctl uses when neither --socket nor $SANDBOXD_SOCKET says otherwise.
DEFAULT_SOCKET = "/run/sandboxd/sandboxd.sock"
#: The environment variable sandboxctl (and libsandbox) read the socket's path from.
SOCKET_ENV = "SANDBOXD_SOCKET"


def socket_path(path: str | os.PathLike[str] | None = None) -> str:
    """PATH, else $SANDBOXD_SOCKET when set and not empty, else DEFAULT_SOCKET."""
    if path is not None:
        return os.fspath(path)
    env = os.environ.get(SOCKET_ENV)
    return env if env else DEFAULT_SOCKET


RUN_EVENT_TYPES = (Started, Output, Event)
SESSION_EVENT_TYPES = (Output, Dropped, SessionExit, Event)


def progress_hook(cb: Callable[[Progress], None] | None
                  ) -> Callable[[dict[str, Any]], None] | None:
    """An event hook that passes ``progress`` events, decoded, to cb."""
    if cb is None:
        return None
    callback: Callable[[Progress], None] = cb

    def on_event(msg: dict[str, Any]) -> None:
        ev = decode_event(msg)
        if isinstance(ev, Progress):
            callback(ev)
    return on_event


#: Inline ``data`` of file.write up to this many bytes travels in the request line; more follows
#: it in file.chunk lines (JSON escapes and base64 keep the line under the 4 MiB cap).
INLINE_WRITE_MAX = 512 << 10


def fileno_of(obj: Any) -> int | None:
    """The descriptor of an int or of a file object that has one (flushed first, and for a
    readable seekable one put at its logical position, which read-ahead may have passed);
    None for one without (io.BytesIO)."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        return obj
    fileno = getattr(obj, "fileno", None)
    if fileno is None:
        return None
    try:
        fd = fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    if not isinstance(fd, int):
        return None
    flush = getattr(obj, "flush", None)
    if flush is not None:
        flush()
    f: Any = obj
    try:
        if f.seekable():
            os.lseek(fd, f.tell(), os.SEEK_SET)
    except (AttributeError, OSError, ValueError):
        pass
    return fd
