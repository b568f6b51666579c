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
* Client side (:class:`LaneExecutor`): runs on the crawler's event loop, no thread: a call is
  pickled and written to the least loaded lane's socket (non-blocking; what does not fit waits
  for the loop's writer callback), answers are read by the loop's reader callback and set on
  the callers' futures in order. A thread per lane cost the busy process of rust-doc
  ``--processes 2`` 8% of its time (two thread wake-ups per page, and every answer waited for
  the GIL up to the 5 ms switch interval, idling the sibling). A lane that reaches EOF or an
  OS error fails its calls and every later one with
  :class:`concurrent.futures.BrokenExecutor` (the parse stage then parses inline).
* A ``bytes`` argument of :data:`RAW_BYTES_MIN` bytes or more (a large page's body) is not
  pickled: it follows the call as a message of its own, written from the caller's object
  (no copy) and read once by the server (one copy there, not two: the pickle and its load).

Durability is not touched: a lane only returns what ``fn`` returns (a parsed
:class:`~skitter.models.Page`); the client writes the rows and acks. Nothing is started here
for a crawl of one process.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from multiprocessing.reduction import ForkingPickler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the event loop is imported where a lane is called (a crawler process):
    import asyncio  # not by the coordinator, which only builds the pipes (ParseMesh)

__all__ = ["BUSY", "IDLE", "RAW_BYTES_MIN", "ROOM", "LaneExecutor", "ParseMesh", "serve"]

#: Levels a process publishes in :attr:`ParseMesh.free`: its loop keeps its core busy; it
#: is host-bound (room under its limit, no ready host); it has nothing in flight at all.
BUSY, ROOM, IDLE = 0, 1, 2

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
    #: shared bytes, one per process: :data:`ROOM` while its loop is host-bound (its own hosts
    #: leave room on its core), :data:`IDLE` while it has nothing in flight either (its hosts
    #: are done: the end of a crawl), so it may parse for the others (see
    #: :meth:`LaneExecutor.set_free`); :data:`BUSY` otherwise
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


_READ_BYTES = 256 * 1024


def _frame(payload: bytes | memoryview) -> bytes:
    """The header :class:`multiprocessing.connection.Connection` puts before a message."""
    n = len(payload)
    return struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!iQ", -1, n)


class _Lane:
    """One client end on the event loop: what waits to be written, what was read, the
    futures of the calls sent, in order."""

    __slots__ = ("conn", "fd", "inbuf", "out", "waiting", "writing")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.fd = conn.fileno()
        self.out: collections.deque[memoryview] = collections.deque()
        self.inbuf = bytearray()
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.writing = False


class LaneExecutor:
    """Run picklable calls in the sibling processes at the other ends of ``conns`` (client
    ends of a :class:`ParseMesh`), from the running event loop (see the module doc).

    Args:
        conns: the client ends, one per sibling; this executor owns (and closes) them.
        free: the mesh's shared flags (:attr:`ParseMesh.free`), or None (siblings always
            free).
        index: this process's index in ``free``.

    A sibling whose own loop is busy (its flag 0) should not be given work: its parse thread
    would take the GIL from its event loop (:meth:`peer_free` tells; the parse stage then
    parses inline, its core being the only free one).

    A call whose lane broke (EOF, OS error: the sibling is gone) raises
    :class:`concurrent.futures.BrokenExecutor`, and so does every call after it: the caller
    falls back to running the call itself.
    """

    def __init__(self, conns: list[Connection], free: Any = None, index: int = 0) -> None:
        self._free = free
        self._index = index
        self._lanes = [_Lane(c) for c in conns]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._broken = False
        self._closed = False

    @property
    def lanes(self) -> int:
        """The number of sibling processes served by this executor."""
        return len(self._lanes)

    def set_free(self, level: int) -> None:
        """Publish how free this process's loop leaves its core: :data:`BUSY`, :data:`ROOM`
        (host-bound) or :data:`IDLE` (nothing in flight)."""
        if self._free is not None:
            self._free[self._index] = level

    def peer_free(self, level: int = 1) -> bool:
        """True if some sibling published a level of at least ``level`` (:data:`ROOM`: it has
        room; :data:`IDLE`: it has nothing to do); always True without flags."""
        flags = self._free
        if flags is None:
            return True
        return any(flags[k] >= level for k in range(len(flags)) if k != self._index)

    def _attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch the lanes' sockets from ``loop`` (the first call's; again after a new loop)."""
        old, self._loop = self._loop, loop
        for lane in self._lanes:
            if old is not None and not old.is_closed():
                old.remove_reader(lane.fd)
                old.remove_writer(lane.fd)
            lane.writing = False
            os.set_blocking(lane.fd, False)
            loop.add_reader(lane.fd, self._readable, lane)
            if lane.out:
                self._flush(lane)

    async def call(self, fn: Callable[..., Any], /, *args: Any) -> Any:
        """``fn(*args)`` run in the least loaded sibling (``fn`` and ``args`` picklable);
        its result, or its exception raised here.

        Raises:
            concurrent.futures.BrokenExecutor: a lane broke (now or before).
            RuntimeError: after :meth:`shutdown`.
            Exception: what pickling the call raised (nothing was sent).
        """
        if self._broken:
            raise concurrent.futures.BrokenExecutor("a parse lane's process is gone")
        if self._closed:
            raise RuntimeError("LaneExecutor is shut down")
        import asyncio

        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._attach(loop)
        raw = [i for i, a in enumerate(args) if type(a) is bytes and len(a) >= RAW_BYTES_MIN]
        sent = tuple(None if i in raw else a for i, a in enumerate(args)) if raw else args
        message = ForkingPickler.dumps((fn, sent, raw))  # raises before anything is written
        lane = min(self._lanes, key=lambda ln: len(ln.waiting))
        fut: asyncio.Future[Any] = loop.create_future()
        lane.waiting.append(fut)
        lane.out.append(memoryview(_frame(message)))
        lane.out.append(memoryview(message))
        for i in raw:
            lane.out.append(memoryview(_frame(args[i])))
            lane.out.append(memoryview(args[i]))  # written from the caller's bytes: no copy
        if not lane.writing:
            self._flush(lane)
        return await fut

    def _flush(self, lane: _Lane) -> None:
        """Write what fits of ``lane.out``; the rest when the socket is writable again."""
        out = lane.out
        try:
            while out:
                view = out[0]
                n = os.write(lane.fd, view)
                if n < len(view):
                    out[0] = view[n:]
                    break
                out.popleft()
        except BlockingIOError:
            pass
        except OSError as exc:
            self._break(f"parse lane: {exc!r}")
            return
        want = bool(out)
        if want != lane.writing and self._loop is not None:
            lane.writing = want
            if want:
                self._loop.add_writer(lane.fd, self._flush, lane)
            else:
                self._loop.remove_writer(lane.fd)

    def _readable(self, lane: _Lane) -> None:
        """Read what arrived; answer the calls whose replies are whole."""
        try:
            data = os.read(lane.fd, _READ_BYTES)
        except BlockingIOError:
            return
        except OSError as exc:
            self._break(f"parse lane: {exc!r}")
            return
        if not data:
            self._break("parse lane: EOF (the sibling process is gone)")
            return
        buf = lane.inbuf
        buf += data
        while len(buf) >= 4:
            (size,) = struct.unpack_from("!i", buf)
            head = 4
            if size == -1:
                if len(buf) < 12:
                    return
                (size,) = struct.unpack_from("!Q", buf, 4)
                head = 12
            if len(buf) < head + size:
                return
            fut = lane.waiting.popleft()
            try:
                with memoryview(buf) as view:  # loaded in place: no copy of the answer
                    kind, value = ForkingPickler.loads(view[head : head + size])
            except Exception as exc:  # read whole, but cannot be unpickled here
                kind, value = "error", exc
            if len(buf) == head + size:
                buf = lane.inbuf = bytearray()  # (its storage is freed, not kept)
            else:
                del buf[: head + size]
            if fut.done():
                continue  # its caller was cancelled
            if kind == "ok":
                fut.set_result(value)
            else:
                fut.set_exception(value)

    def _break(self, why: str) -> None:
        """Every lane is given up: the waiting calls (and later ones) get BrokenExecutor."""
        self._broken = True
        for lane in self._lanes:
            while lane.waiting:
                fut = lane.waiting.popleft()
                if not fut.done():
                    fut.set_exception(concurrent.futures.BrokenExecutor(why))
        self._release()

    def _release(self) -> None:
        loop, self._loop = self._loop, None
        for lane in self._lanes:
            if loop is not None and not loop.is_closed():
                loop.remove_reader(lane.fd)
                loop.remove_writer(lane.fd)
            lane.out.clear()
            with contextlib.suppress(OSError):
                lane.conn.close()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the lanes (idempotent): the calls still waiting are cancelled and the lanes
        closed (each sibling's server sees EOF). ``wait`` and ``cancel_futures`` are accepted
        for :class:`concurrent.futures.Executor`'s signature; nothing is left to wait for."""
        if self._closed:
            return
        self._closed = True
        for lane in self._lanes:
            while lane.waiting:
                lane.waiting.popleft().cancel()
        self._release()
