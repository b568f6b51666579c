"""Parse lanes: the crawler processes of ``--processes N`` parse each other's pages.

A crawler process whose loop is host-bound (one busy host: :class:`skitter.parse_stage.ParseStage`)
hands pages to parse to its sibling crawler processes, whose cores idle when they own no busy
host, instead of forking helper processes: a forked helper counted the crawler's whole resident
set once more (rust-doc ``--processes 2``: coordinator 71 MiB, busy crawler 100-136 MiB, idle
crawler 56 MiB and a helper 61-79 MiB, 340 MiB summed; issue 16).

Wiring (all made before the coordinator forks, :class:`ParseMesh`): one duplex pipe per ordered
pair ``(i, j)`` of crawler processes, ``i`` the client and ``j`` the server. Process ``K`` keeps
the client ends of its pairs ``(K, j)`` and the server ends of the pairs ``(i, K)`` and closes
every other end (:meth:`ParseMesh.bind`; the coordinator closes all of them once the processes
are started), so that when a process dies its ends close: a sibling waiting on it gets EOF.

* Server side (:func:`serve`): one daemon thread per server end receives ``(fn, args, raw)``
  (then one more message per index in ``raw``: the bytes of that argument, see below), runs
  ``fn(*args)`` and sends back ``("ok", result)`` or ``("error", exception)``, until EOF. The
  thread takes the GIL from its own process's loop only while it parses, which happens when the
  client is host-bound (its pages would otherwise queue behind one core).
* Client side (:class:`LaneExecutor`): a :class:`concurrent.futures.Executor` whose jobs wait in
  one queue; one thread per client end sends a job, waits for its answer, sets the future. A
  lane that reaches EOF or an OS error fails its job and every later one with
  :class:`concurrent.futures.BrokenExecutor` (the parse stage then parses inline).
* A ``bytes`` argument of :data:`RAW_BYTES_MIN` bytes or more (a large page's body) is not
  pickled: it follows the call as a message of its own, written from the caller's object
  (no copy) and read once by the server (one copy there, not two: the pickle and its load).

Durability is not touched: a lane only returns what ``fn`` returns (a parsed
:class:`~skitter.models.Page`); the client writes the rows and acks. Nothing is started here
for a crawl of one process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any

__all__ = ["RAW_BYTES_MIN", "LaneExecutor", "ParseMesh", "serve"]

log = logging.getLogger("skitter")

#: ``bytes`` arguments this large or larger are sent raw, not pickled (bytes; see module doc).
RAW_BYTES_MIN = 256 * 1024


@dataclass(slots=True)
class ParseMesh:
    """The parse pipes between ``count`` crawler processes (see module doc).

    Build it in the coordinator before forking (``ParseMesh.make(ctx, count)``); in crawler
    ``K`` call :meth:`bind` once, in the coordinator :meth:`close` once every process started.

    Attributes:
        count: the number of crawler processes.
        pipes: ``(client, server) -> (client's end, server's end)``.
    """

    count: int
    pipes: dict[tuple[int, int], tuple[Connection, Connection]] = field(default_factory=dict)
    #: shared bytes, one per process: 1 while its loop is host-bound (its own hosts leave room
    #: on its core), so it may parse for the others (see :meth:`LaneExecutor.set_free`)
    free: Any = None

    @classmethod
    def make(cls, ctx: BaseContext, count: int) -> ParseMesh:
        """One duplex pipe per ordered pair of distinct processes (none when ``count`` < 2).

        Raises:
            OSError: out of file descriptors.
        """
        mesh = cls(count, free=ctx.RawArray("b", count))
        for i in range(count):
            for j in range(count):
                if i != j:
                    mesh.pipes[i, j] = ctx.Pipe(duplex=True)
        return mesh

    def bind(self, index: int) -> tuple[list[Connection], list[Connection]]:
        """In crawler ``index``: close every end that is not its own; returns (its client ends,
        its server ends), one per sibling, by sibling index."""
        clients: list[Connection] = []
        servers: list[Connection] = []
        for (i, j), (a, b) in sorted(self.pipes.items()):
            if i == index:
                clients.append(a)
                b.close()
            elif j == index:
                servers.append(b)
                a.close()
            else:
                a.close()
                b.close()
        self.pipes = {}
        return clients, servers

    def close(self) -> None:
        """Close every end (in the coordinator, once the crawler processes hold theirs)."""
        for a, b in self.pipes.values():
            a.close()
            b.close()
        self.pipes = {}


def _serve_one(conn: Connection) -> None:
    """Answer the jobs arriving on ``conn`` until EOF (a daemon thread's body)."""
    try:
        while True:
            fn, args, raw = conn.recv()
            if raw:
                args = list(args)
                for i in raw:
                    args[i] = conn.recv_bytes()
            try:
                reply: tuple[str, Any] = ("ok", fn(*args))
            except Exception as exc:  # the client re-raises it, as for an inline parse
                reply = ("error", exc)
            try:
                conn.send(reply)  # pickled whole before a byte is written
            except (EOFError, OSError):
                raise
            except Exception as exc:  # an answer that cannot be pickled: say so instead
                conn.send(("error", RuntimeError(f"the answer cannot be sent back: {exc!r}")))
    except (EOFError, OSError):
        pass  # the client's process is gone (or closed the lane)
    finally:
        with contextlib.suppress(OSError):
            conn.close()


def serve(conns: list[Connection]) -> list[threading.Thread]:
    """Start one daemon thread answering each server end of ``conns``; returns the threads
    (they end at EOF, when the client process exits or dies)."""
    threads = []
    for k, conn in enumerate(conns):
        t = threading.Thread(target=_serve_one, args=(conn,), name=f"parse-lane-{k}", daemon=True)
        t.start()
        threads.append(t)
    return threads


_Job = tuple["concurrent.futures.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class LaneExecutor(concurrent.futures.Executor):
    """Run picklable calls in the sibling processes at the other ends of ``conns`` (client
    ends of a :class:`ParseMesh`), one call at a time per lane, in submission order.

    Args:
        conns: the client ends, one per sibling; this executor owns (and closes) them.
        free: the mesh's shared flags (:attr:`ParseMesh.free`), or None (siblings always
            free).
        index: this process's index in ``free``.

    A sibling whose own loop is busy (its flag 0) should not be given work: its parse thread
    would take the GIL from its event loop (:meth:`peer_free` tells; the parse stage then
    parses inline, its core being the only free one).

    A job whose lane broke (EOF, OS error: the sibling is gone) gets
    :class:`concurrent.futures.BrokenExecutor`, and so does every job after it: the caller
    falls back to running the call itself.
    """

    def __init__(self, conns: list[Connection], free: Any = None, index: int = 0) -> None:
        self._free = free
        self._index = index
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._broken = False
        self._closed = False
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._lane, args=(c,), name=f"parse-client-{k}", daemon=True)
            for k, c in enumerate(conns)
        ]
        for t in self._threads:
            t.start()

    @property
    def lanes(self) -> int:
        """The number of sibling processes served by this executor."""
        return len(self._threads)

    def set_free(self, free: bool) -> None:
        """Publish whether this process's loop leaves room on its core (host-bound)."""
        if self._free is not None:
            self._free[self._index] = free

    def peer_free(self) -> bool:
        """True if some sibling published that it is free (always True without flags)."""
        flags = self._free
        if flags is None:
            return True
        return any(flags[k] for k in range(len(flags)) if k != self._index)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Queue ``fn(*args)`` (``fn`` and ``args`` picklable; no keyword arguments) for the
        next free lane; returns its future.

        Raises:
            concurrent.futures.BrokenExecutor: a lane broke before.
            RuntimeError: after :meth:`shutdown`.
        """
        if kwargs:
            raise TypeError("LaneExecutor.submit takes no keyword arguments")
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._broken:
                raise concurrent.futures.BrokenExecutor("a parse lane's process is gone")
            if self._closed:
                raise RuntimeError("LaneExecutor is shut down")
            self._jobs.put((fut, fn, args))
        return fut

    def _lane(self, conn: Connection) -> None:
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                fut, fn, args = job
                if not fut.set_running_or_notify_cancel():
                    continue
                if self._broken:
                    fut.set_exception(concurrent.futures.BrokenExecutor("a parse lane broke"))
                    continue
                raw = [i for i, a in enumerate(args) if type(a) is bytes and len(a) >= RAW_BYTES_MIN]
                call = tuple(None if i in raw else a for i, a in enumerate(args)) if raw else args
                try:
                    conn.send((fn, call, raw))  # pickled whole before a byte is written
                except (EOFError, OSError):
                    pass  # the lane is broken: recv says so
                except Exception as exc:  # the call cannot be pickled: its own error
                    fut.set_exception(exc)
                    continue
                else:
                    with contextlib.suppress(EOFError, OSError):  # broken: recv says so
                        for i in raw:
                            conn.send_bytes(args[i])  # from the caller's bytes: no copy
                try:
                    kind, value = conn.recv()
                except (EOFError, OSError) as exc:
                    self._break()
                    fut.set_exception(concurrent.futures.BrokenExecutor(f"parse lane: {exc!r}"))
                    return
                except Exception as exc:  # read whole, but cannot be unpickled here
                    fut.set_exception(exc)
                    continue
                if kind == "ok":
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _break(self) -> None:
        with self._lock:
            self._broken = True
        # fail what waits (the other lanes may still be alive: they keep their own jobs)
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is None:
                self._jobs.put(None)
                return
            fut = job[0]
            if fut.set_running_or_notify_cancel():
                fut.set_exception(concurrent.futures.BrokenExecutor("a parse lane broke"))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the lanes (idempotent): with ``cancel_futures`` the queued jobs are cancelled;
        with ``wait`` this returns once the jobs in progress are answered."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if cancel_futures:
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for t in self._threads:
                t.join()
