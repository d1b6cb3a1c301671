"""Durable output files: write a temporary file in the target's directory, then ``os.replace`` it.

A reader of the target sees either the previous file or the complete new one, never a prefix: an
exception, ``KeyboardInterrupt`` (SIGINT) or a full disk while writing leaves the previous file as it was
and removes the temporary file (a ``SIGKILL`` may leave a ``.NAME.*.tmp`` file next to it, never a
truncated target). Every file the adapters write goes through :func:`atomic_write`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

__all__ = ["atomic_write", "same_file"]


def _is_special(path: Path) -> bool:
    """True for an existing target that is not a regular file (``/dev/stdout``, a FIFO): written in place."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["w", "wb"] = "w", *, encoding: str = "utf-8"
) -> Iterator[IO[Any]]:
    """Opens a temporary file next to ``path`` for writing; on a clean exit it replaces ``path``.

    Text mode writes ``encoding`` with ``\\n`` line endings. The data is flushed and fsync'ed before the
    rename. A target that exists and is not a regular file (a device such as ``/dev/stdout``, a FIFO) is
    written in place: there is nothing to replace.

    Args:
      path: the file to (re)place.
      mode: ``"w"`` (text) or ``"wb"`` (bytes).
      encoding: the text encoding (text mode only).

    Yields:
      The open temporary file.

    Raises:
      OSError: the directory cannot take the temporary file, or the rename fails (the target is untouched).
      ValueError: ``mode`` is not ``"w"`` or ``"wb"``.

    Examples:
      >>> import tempfile
      >>> target = Path(tempfile.mkdtemp()) / "out.txt"
      >>> with atomic_write(target) as f:
      ...     _ = f.write("all or nothing\\n")
      >>> target.read_text()
      'all or nothing\\n'
      >>> try:
      ...     with atomic_write(target) as f:
      ...         _ = f.write("half")
      ...         raise KeyboardInterrupt
      ... except KeyboardInterrupt:
      ...     pass
      >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
      ('all or nothing\\n', ['out.txt'])
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    text = {"encoding": encoding, "newline": "\n"} if mode == "w" else {}
    if _is_special(target):
        with open(target, mode, **text) as f:  # type: ignore[call-overload]
            yield f
        return
    # A 64-bit random name: a clash is an error, never someone else's file removed. Mode 0o666 less the
    # umask, as open() would create the target. The file is created inside the try: a KeyboardInterrupt
    # that lands right after os.open returns still removes it.
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    fd = -1
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, mode, **text) as f:  # type: ignore[call-overload]
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        if not (isinstance(e, FileExistsError) and fd < 0):
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name the same file: the same inode when both exist, else the same resolved path.

    Examples:
      >>> same_file("x/../out.jsonl", "out.jsonl"), same_file("a.jsonl", "b.jsonl")
      (True, False)
    """
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()
