"""Shared plumbing for the crash-safe output writers.

Crash-safety model (every writer in :mod:`skitter.export` follows it):

* The file is opened ``O_WRONLY | O_APPEND`` and written with :func:`os.write`: there is no
  Python-level buffer that a ``kill -9`` could lose. One *unit* (a pages.jsonl line, all
  links.tsv rows of one page, both gzip members of one WARC exchange) is handed to the kernel
  in a single ``os.write`` call (looped only if the kernel reports a short write).
* Nothing is fsync'ed per unit; :meth:`AppendFile.sync` does ``fsync`` and is called by the
  crawler at checkpoints (and by ``close``).
* If the process dies in the middle of a write, the file ends in a partial unit. Each writer's
  ``repair()`` cuts that partial tail so the file is valid again before anything is appended.
* ``offset()`` is the file size in bytes (everything written so far) for checkpoints.
"""

from __future__ import annotations

import contextlib
import os
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

__all__ = ["AppendFile", "Writer", "fsync_dir", "named_os_error", "truncate_partial_line"]

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
_SCAN_BLOCK_BYTES = 64 * 1024


@runtime_checkable
class Writer(Protocol):
    """What the crawler needs from every output writer (besides its own ``write`` method)."""

    def offset(self) -> int:
        """Bytes written to the current file so far (= its size), for checkpoints."""
        ...

    def sync(self) -> None:
        """``fsync`` the current file so everything written so far survives a power loss."""
        ...

    def close(self) -> None:
        """Sync and close; idempotent."""
        ...


def named_os_error(exc: OSError, path: str) -> OSError:
    """``exc`` again with ``path`` as its file name (``os.write`` on a descriptor names
    none), so that the one-line error says which file could not be written."""
    return OSError(exc.errno, exc.strerror or str(exc), path)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """``fsync`` a directory so a newly created file's name is durable (best effort).

    Errors are ignored: some filesystems do not allow opening or syncing directories.
    """
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


class Closing:
    """Mixin: ``with writer:`` closes the writer at the end of the block."""

    def close(self) -> None:
        """Release the writer's resources; idempotent."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AppendFile(Closing):
    """An append-only file written with unbuffered :func:`os.write` calls.

    Args:
        path: file to open (created with mode 0o644 if missing, never truncated).
        exclusive: fail with :class:`FileExistsError` if the file already exists.

    Raises:
        OSError: the file cannot be opened.

    Not thread-safe: one ``AppendFile`` per file per process.
    """

    __slots__ = ("_closed", "_fd", "_offset", "path")

    def __init__(self, path: str | os.PathLike[str], *, exclusive: bool = False) -> None:
        self.path = os.fspath(path)
        flags = _OPEN_FLAGS | (os.O_EXCL if exclusive else 0)
        existed = os.path.exists(self.path)
        self._fd = os.open(self.path, flags, 0o644)
        self._closed = False
        self._offset = os.fstat(self._fd).st_size
        if not existed:
            fsync_dir(os.path.dirname(os.path.abspath(self.path)))

    def write(self, data: bytes) -> int:
        """Append ``data`` (one unit) with a single ``os.write`` call; return its length in bytes.

        A short write (rare for regular files) is continued until everything is written. If
        writing fails part-way (e.g. ``ENOSPC``), the bytes of this unit already written are cut
        off again, so no partial unit is left in the middle of the file, and the error is
        re-raised.

        Raises:
            ValueError: the file is closed.
            OSError: the write failed (its ``filename`` is this file).
        """
        if self._closed:
            raise ValueError(f"write to closed file {self.path}")
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.write(self._fd, view[written:])
        except BaseException as exc:
            if written:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            if isinstance(exc, OSError) and exc.filename is None:
                raise named_os_error(exc, self.path) from None
            raise
        self._offset += written
        return written

    def offset(self) -> int:
        """Size of the file in bytes (everything written so far).

        Read with ``fstat`` while open, so it stays right if another party truncated the file
        (e.g. a resume cutting an orphan tail); after :meth:`close`, the last known size.
        """
        if not self._closed:
            self._offset = os.fstat(self._fd).st_size
        return self._offset

    def sync(self) -> None:
        """``fsync`` the file. No-op once closed.

        Raises:
            OSError: fsync failed.
        """
        if not self._closed:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise named_os_error(exc, self.path) from None

    def close(self) -> None:
        """Sync and close the file; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise named_os_error(exc, self.path) from None
        finally:
            os.close(self._fd)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed


def truncate_partial_line(path: str | os.PathLike[str]) -> int:
    """Cut everything after the last ``b"\\n"`` of a line-oriented file.

    A file that does not end in a newline ends with a line cut short by a crash; removing it
    makes the file valid again. A missing file is left missing.

    Returns:
        The number of bytes removed (0 if the file was already whole, empty or missing).

    Raises:
        OSError: the file cannot be read or truncated.
    """
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb") as f:
        end = size
        keep = 0
        while end > 0:
            start = max(0, end - _SCAN_BLOCK_BYTES)
            f.seek(start)
            block = f.read(end - start)
            nl = block.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            end = start
    cut = size - keep
    if cut:
        os.truncate(path, keep)
    return cut


class LineJournal(Closing):
    """Base of the line-oriented journals (pages.jsonl, links.tsv): an :class:`AppendFile`
    whose partial last line, left by a crash, is cut when it is opened.

    Args:
        path: the file; created if missing, appended to otherwise (bytes cut by the repair
            in :attr:`repaired_bytes`).

    Raises:
        OSError: the file cannot be opened or repaired.

    Not thread-safe; one writer per file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.repaired_bytes = self.repair(self.path)
        self._file = AppendFile(self.path)

    def offset(self) -> int:
        """Size of the file in bytes (everything written so far)."""
        return self._file.offset()

    def sync(self) -> None:
        """``fsync`` the file (call at checkpoints).

        Raises:
            OSError: fsync failed.
        """
        self._file.sync()

    def close(self) -> None:
        """Sync and close; idempotent."""
        self._file.close()

    @classmethod
    def repair(cls, path: str | os.PathLike[str]) -> int:
        """Cut a partial last line (no trailing ``\\n``) left by a crash.

        Returns:
            Bytes removed (0 if the file was whole, empty or missing).

        Raises:
            OSError: the file cannot be read or truncated.
        """
        return truncate_partial_line(path)
