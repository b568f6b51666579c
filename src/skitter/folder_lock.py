"""The output folder's lock: one Skitter process writes a crawl folder at a time.

``DIR/skitter.lock`` is locked with ``flock(LOCK_EX)`` for as long as a command writes the
folder (``crawl``, ``fetch``, ``check-links``, ``report``, ``merge`` into ``MERGED``); the
file holds the holder's process id and command, for the message another command gives.
The kernel releases the lock when the holder ends however it ends (``kill -9`` included), so
a stale lock file never blocks anything: only a live holder does. Processes forked while the
lock is held (the crawler processes of ``--processes``) close their copy at once, so the
lock lives exactly as long as the process that took it.

Checking a folder never changes it: a refused command leaves the folder as it was.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType

from skitter.errors import StateError

__all__ = ["LOCK_FILE", "FolderLock", "check_free", "lock_folder"]

#: The lock file's name in the folder.
LOCK_FILE = "skitter.lock"

#: descriptors of the locks this process holds (closed in forked children)
_HELD: set[int] = set()


def _close_in_child() -> None:
    for fd in _HELD:
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_in_child)


class FolderLock:
    """A held folder lock (see the module doc); :meth:`release` or leave the ``with``."""

    def __init__(self, folder: Path, fd: int) -> None:
        self.folder = folder
        self._fd: int | None = fd

    def release(self) -> None:
        """Release the lock (the file stays: removing it would race with the next taker)."""
        if self._fd is not None:
            _HELD.discard(self._fd)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _busy(folder: Path, fd: int) -> StateError:
    """The error for a folder whose lock ``fd`` another process holds."""
    try:
        holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
    except OSError:
        holder = []
    pid = holder[0] if holder and holder[0].isdigit() else "?"
    what = holder[1] if len(holder) > 1 else "skitter"
    return StateError(
        f"{folder} is in use by a running skitter {what} (pid {pid}); wait until it ends, "
        f"or stop it (Ctrl-C, or kill {pid}) first"
    )


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def check_free(folder: Path) -> None:
    """Refuse ``folder`` if a live process holds its lock; changes nothing in it.

    Raises:
        StateError: in use (naming the holder's pid and command).
    """
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # no lock file (or no folder): nobody holds it
    try:
        if not _try_lock(fd):
            raise _busy(folder, fd)
    finally:
        os.close(fd)  # (releases the probe's lock)


def lock_folder(folder: Path, command: str = "crawl") -> FolderLock:
    """Take ``folder``'s lock (creating ``skitter.lock`` in it) for this process's life or
    until released; record this process's id and ``command`` in it.

    Raises:
        StateError: another live process holds it (the message names its pid).
        OSError: the lock file cannot be created.
    """
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        if not _try_lock(fd):
            raise _busy(folder, fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    _HELD.add(fd)
    return FolderLock(folder, fd)
