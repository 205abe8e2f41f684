"""Atomic, durable file writes: the one temporary-file-and-rename helper every writer uses.

A file is written to a temporary sibling, flushed to disk (``fsync``), renamed onto its name (``os.replace``, atomic
on POSIX and Windows) and the directory entry flushed too, so a reader sees the old file or the whole new one, and
a power cut after the call returns cannot leave an empty or half-written file (the pattern of SQLite's and
git's lock-file writes). Layer 0: imports nothing from elical.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_path", "write_text_atomic", "write_bytes_atomic", "fsync_dir", "fsync_file"]


def fsync_dir(directory: str | os.PathLike) -> None:
    """Flush a directory entry (a rename or a new file in it) to disk. A no-op where directories cannot be
    opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a directory
        pass
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a written file's contents to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for the caller (or a library: ``safetensors.save_file``,
    ``torch.save``, an ``open(..., "w")``) to write; when the block ends without an exception the file is fsynced,
    renamed onto ``path`` and the directory fsynced. On an exception the temporary file is removed and ``path`` is
    untouched. The parent directory is created.

    overwrite : bool
        False: raise FileExistsError (and leave the existing file) when ``path`` exists, checked atomically by a
        hard link where the file system has them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # pid + random: two processes (shards of a build) or two threads writing the same file never share a temporary
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        fsync_file(tmp)
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails if the file appeared meanwhile: never overwrite
            except FileExistsError:
                raise
            except OSError:  # no hard links on this file system: check, then rename
                if path.exists():
                    raise FileExistsError(path) from None
                os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_bytes_atomic(path: str | os.PathLike, data: bytes, overwrite: bool = True) -> None:
    """Write ``data`` to ``path`` atomically and durably (:func:`atomic_path`)."""
    with atomic_path(path, overwrite) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | os.PathLike, text: str, overwrite: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically and durably (:func:`atomic_path`)."""
    write_bytes_atomic(path, text.encode("utf-8"), overwrite)
