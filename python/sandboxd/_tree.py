# SPDX-License-Identifier: LGPL-2.1-or-later
"""Trees as tar streams for ``files.put_tree`` and ``files.get_tree`` (stdlib tarfile). A
stream that comes out of a sandbox is hostile input: unpack() makes every entry itself beneath
the destination, never through a symlink, and refuses absolute names, ``..`` and links out."""
from __future__ import annotations

import os
import stat
import tarfile
import tempfile
from typing import IO, cast


def pack(local_dir: str | os.PathLike[str]) -> IO[bytes]:
    """The contents of local_dir as an uncompressed pax stream ("./", "./name", ...) in an
    unnamed temporary file at offset 0 (its fd goes to the daemon). Symlinks stay links."""
    tmp = tempfile.TemporaryFile()
    try:
        with tarfile.open(fileobj=tmp, mode="w", format=tarfile.PAX_FORMAT) as tf:
            tf.add(os.fspath(local_dir), arcname=".", recursive=True)
        tmp.flush()
        tmp.seek(0)
    except BaseException:
        tmp.close()
        raise
    return tmp


def contents_path(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str | bytes:
    """path/. : what file.get archives as a directory's contents, names starting with ./"""
    p = os.fspath(path)
    if isinstance(p, bytes):
        return p.rstrip(b"/") + b"/."
    return p.rstrip("/") + "/."


def _relative(name: str) -> list[str]:
    if name.startswith("/"):
        raise ValueError(f"an absolute name in the stream: {name!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"a name with '..' in the stream: {name!r}")
    return parts


def _parent(root: str, parts: list[str]) -> str:
    """root/parts[:-1], each component a real directory (made when missing), never a link."""
    d = root
    for p in parts[:-1]:
        d = os.path.join(d, p)
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            os.mkdir(d, 0o755)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise ValueError(f"an entry under {d!r}, which is not a directory (a symlink?)")
    return d


def _no_links(path: str) -> None:
    """Refuses a destination that is, or goes through, a symlink: an earlier copy out of a
    sandbox may have left it there, and following it would let the sandbox choose where on the
    host its entries land (sandboxctl cp's rule, docs/man/sandboxctl.1)."""
    d = "/"
    for p in os.path.abspath(path).split("/"):
        if not p:
            continue
        d = os.path.join(d, p)
        try:
            if stat.S_ISLNK(os.lstat(d).st_mode):
                raise ValueError(f"{path!r} goes through the symlink {d!r}: a copy out never follows a link on the host")
        except FileNotFoundError:
            return


def _copy_data(src: IO[bytes], out: IO[bytes], m: tarfile.TarInfo) -> None:
    """A sparse member's data regions only (its holes stay holes); any other member whole."""
    if not m.sparse:
        while chunk := src.read(1 << 20):
            out.write(chunk)
        return
    # (offset, size) pairs; the typeshed of Debian 12's mypy says int.
    for offset, size in cast("list[tuple[int, int]]", m.sparse):
        src.seek(offset)
        out.seek(offset)
        while size > 0 and (chunk := src.read(min(size, 1 << 20))):
            out.write(chunk)
            size -= len(chunk)
    out.truncate(m.size)


def _clear(path: str) -> None:
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass


def unpack(stream: IO[bytes], local_dir: str | os.PathLike[str], strip: int = 0) -> int:
    """Every entry of the stream beneath local_dir (made when missing), the first ``strip``
    name components dropped. Devices and sockets are skipped; modes & 0o777 (no setuid, setgid
    or sticky bit, whatever the stream says); sparse members stay sparse; mtimes kept; a
    local_dir that is or goes through a symlink is refused. The number of entries made."""
    _no_links(os.fspath(local_dir))
    root = os.path.abspath(os.fspath(local_dir))
    os.makedirs(root, exist_ok=True)
    dirs: list[tuple[str, int, float]] = []
    made = 0
    with tarfile.open(fileobj=stream, mode="r:") as tf:
        for m in tf:
            parts = _relative(m.name)[strip:]
            if not parts:
                continue
            path = os.path.join(_parent(root, parts), parts[-1])
            mode = m.mode & 0o777
            if m.isdir():
                if not os.path.isdir(path) or os.path.islink(path):
                    _clear(path)
                    os.mkdir(path, 0o700)
                dirs.append((path, mode, m.mtime))
            elif m.isreg():
                _clear(path)
                src = tf.extractfile(m)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                with os.fdopen(fd, "wb") as out:
                    if src is not None:
                        _copy_data(src, out, m)
                    os.fchmod(out.fileno(), mode & 0o777)
                os.utime(path, (m.mtime, m.mtime), follow_symlinks=False)
            elif m.issym():
                _clear(path)
                os.symlink(m.linkname, path)
                os.utime(path, (m.mtime, m.mtime), follow_symlinks=False)
            elif m.islnk():
                tparts = _relative(m.linkname)[strip:]
                if not tparts:
                    raise ValueError(f"a hard link to the top of the stream: {m.name!r}")
                target = os.path.join(_parent(root, tparts), tparts[-1])
                _clear(path)
                os.link(target, path, follow_symlinks=False)
            elif m.isfifo():
                _clear(path)
                os.mkfifo(path, mode & 0o777)
            else:
                continue
            made += 1
    for path, mode, mtime in reversed(dirs):
        os.chmod(path, mode)
        os.utime(path, (mtime, mtime))
    return made
