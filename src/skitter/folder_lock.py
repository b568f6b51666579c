"""The output folder's lock: one Skitter process writes a crawl folder at a time.

``DIR/skitter.lock`` is locked with ``flock(LOCK_EX)`` for as long as a command writes the
folder (``crawl``, ``fetch``, ``check-links``, ``report``, ``merge`` into ``MERGED``); the
file holds the holder's process id and command, for the message another command gives.
The kernel releases the lock when the holder ends however it ends (``kill -9`` included), so
a stale lock file never blocks anything: only a live holder does. Processes forked while the
lock is held (the crawler processes of ``--processes``) close their copy at once, so the
lock lives exactly as long as the process that took it.

The lock is re-entrant within a process: a second :func:`lock_folder` of a folder this process
holds already (the CLI's lock, then :func:`skitter.processes.run_processes`' own) succeeds and
shares the held lock, counted; the folder is released when its last holder releases it.
(``flock`` itself would refuse it: a second descriptor of the same file is another holder.)
Held folders are known by their resolved path; :func:`check_free` passes a folder this process
holds.

Checking a folder never changes it: a refused command leaves the folder as it was.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from pathlib import Path
from types import TracebackType

from skitter.errors import StateError

__all__ = ["LOCK_FILE", "FolderLock", "check_free", "held_here", "lock_folder"]

#: The lock file's name in the folder.
LOCK_FILE = "skitter.lock"


class _Held:
    """A folder lock this process holds: its descriptor and how many holders share it."""

    __slots__ = ("count", "fd", "key")

    def __init__(self, key: str, fd: int) -> None:
        self.key = key  # (its entry in _HELD)
        self.fd: int | None = fd
        self.count = 1


#: the folders this process holds, by resolved path (emptied in forked children)
_HELD: dict[str, _Held] = {}
_HELD_LOCK = threading.Lock()


def _close_in_child() -> None:
    global _HELD_LOCK
    _HELD_LOCK = threading.Lock()  # (another thread may have held it at the fork)
    for held in _HELD.values():
        if held.fd is not None:
            with contextlib.suppress(OSError):
                os.close(held.fd)
        held.fd = None  # (a FolderLock the child inherited releases nothing)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_in_child)


def _key(folder: Path) -> str:
    return os.path.realpath(folder)


class FolderLock:
    """A held folder lock (see the module doc); :meth:`release` or leave the ``with``."""

    def __init__(self, folder: Path, held: _Held) -> None:
        self.folder = folder
        self._held: _Held | None = held

    def release(self) -> None:
        """Release this hold (once; again does nothing). The folder is freed when its last
        holder in this process releases it (the file stays: removing it would race with the
        next taker)."""
        held, self._held = self._held, None
        if held is None:
            return
        with _HELD_LOCK:
            if held.fd is None:  # (a forked child's copy: closed at the fork)
                return
            held.count -= 1
            if held.count > 0:
                return
            del _HELD[held.key]
            fd, held.fd = held.fd, None
        with contextlib.suppress(OSError):
            os.close(fd)

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def held_here(folder: Path) -> bool:
    """Whether this process holds ``folder``'s lock."""
    with _HELD_LOCK:
        return _key(folder) in _HELD


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
        StateError: in use by another process (naming the holder's pid and command).
    """
    if held_here(folder):
        return  # (this process holds it)
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
    until released; record this process's id and ``command`` in it. A folder this process
    holds already is shared (re-entrant, counted: see the module doc; the file keeps the first
    holder's command).

    Raises:
        StateError: another live process holds it (the message names its pid).
        OSError: the lock file cannot be created.
    """
    key = _key(folder)
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is not None:
            held.count += 1
            return FolderLock(folder, held)
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if not _try_lock(fd):
                raise _busy(folder, fd)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        held = _HELD[key] = _Held(key, fd)
    return FolderLock(folder, held)
