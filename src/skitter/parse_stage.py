"""The parse stage of the crawl pipeline: HTML bodies parsed here or in a sibling process.

A crawl's pipeline has two stages (Scrapy's engine/downloader split): the *fetch* stage
(robots → fetch → response read), after which the host's slot is handed back to the
frontier (:meth:`skitter.frontier.base.Frontier.release`) so the next request to the host
may start, and the *processing* stage (parse → decide links → write rows and record → ack).
:class:`ParseStage` runs the parse step of the second stage: inline on the event loop, in
batches of pages parsed back to back (:mod:`skitter.parse_batch`: warm caches), or,
in a crawler process of ``--processes N``, in the ``N - 1`` sibling crawler processes
(:mod:`skitter.parse_lanes`: no extra process, so no extra copy of a crawler's resident set)
when the loop is *host-bound*: the last lease attempt found room under the concurrency limit
but no ready host (one busy host), so this process's core is the bottleneck while the other
processes' cores idle; or when a sibling is *idle*: nothing in flight, its own hosts done (the
end of a many-hosts crawl, when one process still has a tenth of the pages: before this, it
ran alone on its core for ~1 s of an ~8 s benchmark crawl while the other core was free).
With many ready hosts every process is busy with its own hosts and pages are parsed inline
(no pickling cost). The siblings take at most :data:`LANE_DEPTH` pages each at once; past
that the loop parses inline too, so both keep busy. Pages larger than
:data:`LANE_MAX_BYTES` are always parsed here: a sibling that parsed them kept ~5-10 MiB more
resident (a copy of the body, its segments' trees freed into a heap that glibc keeps), which
counted in the summed resident set of the crawl's processes (rust-doc ``--processes 2``: peak
216-222 MiB with them sent up to 4 MiB, 209 MiB up to 1 MiB; issue 16). Bodies of
:data:`skitter.parse_lanes.RAW_BYTES_MIN` or more are not pickled but sent as they are, so the
sibling holds one copy and this process none more. Every :data:`TRIM_EVERY_BYTES` of HTML
parsed in a process, and after each page over :data:`TRIM_PAGE_BYTES`, the C heap is trimmed
(:func:`skitter.runtime.trim_heap`); large blocks are mapped on their own
(:func:`skitter.runtime.tune_heap`, set when a parse stage is made).

Durability is not touched: a sibling only returns the parsed :class:`~skitter.models.Page`;
the crawler process writes the rows and the record and acks, as before. A sibling that is gone
(``kill -9``) breaks its lane: this and later pages are parsed inline.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from skitter.models import Page
from skitter.parse_batch import Batcher, Job, ParseBatch
from skitter.parse_lanes import BUSY, IDLE, RAW_BYTES_MIN, ROOM, LaneExecutor
from skitter.runtime import trim_heap, tune_heap

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "LANE_BATCH_PAGES",
    "LANE_DEPTH",
    "LANE_MAX_BYTES",
    "TRIM_EVERY_BYTES",
    "TRIM_PAGE_BYTES",
    "Extract",
    "ParseStage",
]

log = logging.getLogger("skitter")

#: The C heap is trimmed (:func:`skitter.runtime.trim_heap`) after every this many bytes of
#: HTML parsed in a process (here or for a sibling): parse trees are freed into glibc's heap,
#: which keeps them otherwise (rust-doc -p1: peak RSS 153 MB without, see issue 16).
TRIM_EVERY_BYTES = 32 * 1024 * 1024
#: ... and after every page larger than this (bytes): its tree (~7 MB, a segment's, and more)
#: just went back to the heap. Measured on rust-doc ``--processes 2`` (peak of the tree's
#: summed RSS, with pages over 256 KiB parsed by segments): at 1 MiB, 205-207 MiB; at 256 KiB,
#: 197-200 MiB, for 1.5x the minor page faults (what a trim gives back, the next pages fault
#: in again: ~340k against ~225k in a crawl) and no measurable CPU.
TRIM_PAGE_BYTES = 256 * 1024

#: Pages in flight per sibling before this process parses the next one itself. 8, not 2: on
#: a loaded machine an answer waits for the sibling to get a core, and with 2 the busy process
#: of rust-doc ``--processes 2`` parsed 11% of its pages itself (9 in 10 of them for this cap)
#: while its sibling used a fifth of a core. (Pages are ~40 KB, none over
#: :data:`LANE_MAX_BYTES`: the queue costs little memory.)
LANE_DEPTH = 8

#: Pages sent to a sibling in one call (those under :data:`skitter.parse_lanes.RAW_BYTES_MIN`;
#: fewer when :data:`skitter.parse_batch.BATCH_MAX_WAIT_S` passes first, or the crawl loop
#: drains), parsed there back to back and answered together:
#: one message each way instead of one per page, and warm caches on both sides. Measured on
#: rust-doc ``--processes 2`` (the busy process sends nearly every page): 39.4 CPU s, 31.2 s
#: one page a call; 35.2 CPU s, 32.5 s by 4; 33.5 CPU s, 28.9 s by 8; by 16 or 32 (with as
#: many more pages in flight), 34.5-35.2 CPU s.
LANE_BATCH_PAGES = LANE_DEPTH

#: Pages larger than this (bytes) are parsed here even when a sibling is free. Measured on
#: rust-doc ``--processes 2`` (46 pages over 1 MiB), peak of the tree's summed RSS: sent up
#: to 4 MiB, 216 and 222 MiB (the sibling at 78-83 MiB); up to 1 MiB, 209 and 209 MiB
#: (sibling 73), with no more CPU.
LANE_MAX_BYTES = 1024 * 1024

#: ``extract(body, url, content_type, x_robots) -> Page``; picklable (a module function or
#: a :func:`functools.partial` of one) to run in a sibling process.
Extract = Callable[[bytes, str, "str | None", Sequence[str]], Page]


class _Trimmer:
    """Counts the bytes parsed in this process; trims the C heap every
    :data:`TRIM_EVERY_BYTES`, and after every page larger than :data:`TRIM_PAGE_BYTES`
    (whose tree just went back to the heap: the next large page starts from a smaller
    resident set)."""

    __slots__ = ("since",)

    def __init__(self) -> None:
        self.since = 0

    def parsed(self, nbytes: int) -> None:
        """Count ``nbytes`` of HTML parsed (bytes); trim the C heap when due."""
        self.since += nbytes
        if self.since >= TRIM_EVERY_BYTES or nbytes > TRIM_PAGE_BYTES:
            self.since = 0
            trim_heap()


_lane_trimmer = _Trimmer()  # for the pages parsed here for a sibling


def _parse_job(
    extract: Extract, body: bytes, url: str, ct: str | None, xr: Sequence[str]
) -> tuple[int, Page]:  # pragma: no cover - runs in a sibling process
    page = extract(body, url, ct, xr)
    _lane_trimmer.parsed(len(body))
    return os.getpid(), page


def _parse_jobs(
    extract: Extract, jobs: list[Job]
) -> tuple[int, list[tuple[bool, Any]]]:  # pragma: no cover - runs in a sibling process
    """A batch of pages parsed back to back: ``(pid, [(True, page) or (False, exception)])``."""
    out: list[tuple[bool, Any]] = []
    for body, url, ct, xr in jobs:
        try:
            out.append((True, extract(body, url, ct, xr)))
        except Exception as exc:  # the page's caller re-raises it
            out.append((False, exc))
        _lane_trimmer.parsed(len(body))
    return os.getpid(), out


class _LaneBatch:
    """Pages for the siblings gathered (:class:`skitter.parse_batch.Batcher`: at most
    :data:`LANE_BATCH_PAGES`, ``wait_s``, or drained) into one call, parsed back to back
    there; each caller gets ``(pid, page)`` or its page's exception."""

    def __init__(self, pool: LaneExecutor, remote: Extract, wait_s: float) -> None:
        self.pool = pool
        self.remote = remote
        self.batcher: Batcher[tuple[int, Page]] = Batcher(
            self._send, max_items=LANE_BATCH_PAGES, max_bytes=LANE_BATCH_PAGES * RAW_BYTES_MIN,
            max_wait_s=wait_s,
        )  # fmt: skip
        self._calls: set[asyncio.Task[None]] = set()

    async def parse(self, remote: Extract, job: Job) -> tuple[int, Page]:
        """``(pid, page)`` of ``job`` parsed by ``remote`` in a sibling, in a batch.

        Raises:
            concurrent.futures.BrokenExecutor: the batch's lane broke.
            Exception: what parsing the page raised there.
        """
        if remote is not self.remote:  # (one parser a call)
            self.batcher.flush()
            self.remote = remote
        return await self.batcher.submit(job)

    def _send(self, items: list[tuple[asyncio.Future[tuple[int, Page]], Job]]) -> None:
        import asyncio

        call = asyncio.ensure_future(self._call(self.remote, items))
        self._calls.add(call)  # (kept until done: the loop holds tasks weakly)
        call.add_done_callback(self._calls.discard)

    async def _call(
        self, remote: Extract, items: list[tuple[asyncio.Future[tuple[int, Page]], Job]]
    ) -> None:
        import asyncio

        try:
            pid, results = await self.pool.call(_parse_jobs, remote, [job for _, job in items])
        except (Exception, asyncio.CancelledError) as exc:  # each caller gets it
            for fut, _ in items:
                if fut.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    fut.cancel()
                else:
                    fut.set_exception(exc)
            return
        for (fut, _), (ok, value) in zip(items, results, strict=True):
            if fut.done():  # (its caller was cancelled)
                continue
            if ok:
                fut.set_result((pid, value))
            else:
                fut.set_exception(value)


class ParseStage:
    """Parse HTML bodies inline, or through ``executor`` (the sibling crawler processes,
    :class:`skitter.parse_lanes.LaneExecutor`) when host-bound and a sibling has room, or
    when a sibling is idle.

    Args:
        extract: the parser run inline (see :data:`Extract`), in batches
            (:class:`skitter.parse_batch.ParseBatch`).
        remote: the same parser, picklable, for the siblings (None: always inline).
        executor: runs ``remote`` in the siblings, one page per lane at a time (None: always
            inline); owned (shut down by :meth:`close`).
        batch_wait_s: seconds a batch of pages waits at most for more (the crawl loop calls
            :meth:`drain` when nothing more can come); 0: a batch is what comes in one turn
            of the event loop.

    Attributes ``workers``: the lanes still usable (0 once the executor broke: inline).

    Attributes:
        host_bound: set by the crawl loop: True when its last lease attempt had room but no
            ready host.
    """

    def __init__(
        self,
        extract: Extract,
        remote: Extract | None = None,
        executor: LaneExecutor | None = None,
        *,
        batch_wait_s: float = 0.0,
    ) -> None:
        self.extract = extract
        self.remote = remote
        self.workers = executor.lanes if remote is not None and executor is not None else 0
        self._pool = executor
        self._host_bound = False
        self._idle = False
        self._pending = 0
        self._here = 0
        self._elsewhere: Counter[int] = Counter()
        self._trimmer = _Trimmer()
        self._lanes: _LaneBatch | None = None  # pages gathered for the siblings
        self._batch = ParseBatch(extract, after=self._trimmer.parsed, max_wait_s=batch_wait_s)
        tune_heap()  # large bodies and parse buffers in maps of their own, freed at once

    @property
    def host_bound(self) -> bool:
        """True when the loop's last lease attempt had room but no ready host (set by the
        crawl loop; published to the siblings: a host-bound process may parse for them)."""
        return self._host_bound

    @host_bound.setter
    def host_bound(self, value: bool) -> None:
        if value != self._host_bound:
            self._host_bound = value
            self._publish()

    @property
    def idle(self) -> bool:
        """True when the loop has nothing in flight and no lease to start (set by the crawl
        loop: its hosts are done, or all wait; published to the siblings: a busy sibling
        gives its pages to an idle process even when the sibling is not host-bound)."""
        return self._idle

    @idle.setter
    def idle(self, value: bool) -> None:
        if value != self._idle:
            self._idle = value
            self._publish()

    def _publish(self) -> None:
        if self._pool is not None:
            self._pool.set_free(IDLE if self._idle else ROOM if self._host_bound else BUSY)

    def _use_pool(self, size: int) -> LaneExecutor | None:
        if not self.workers or self._pending >= LANE_DEPTH * self.workers:
            return None
        if size > LANE_MAX_BYTES:
            return None  # parsed segment by segment: here (see LANE_MAX_BYTES)
        # host-bound here: any sibling with room may help; busy here (its own hosts keep
        # this core full): only a sibling with nothing to do (the end of a many-hosts crawl:
        # one process's hosts are done while the other's still have ~10% of the pages)
        if self._pool is None or not self._pool.peer_free(ROOM if self._host_bound else IDLE):
            return None  # the siblings' cores are busy with their own hosts
        return self._pool

    async def parse(
        self, body: bytes, url: str, content_type: str | None, x_robots: Sequence[str]
    ) -> Page:
        """The :class:`Page` of an HTML ``body`` fetched from ``url`` (see :data:`Extract`).

        Raises what ``extract`` raises (a sibling's exception is re-raised here). An executor
        that broke (a sibling gone) is dropped: this and later pages are parsed inline.
        """
        pool = self._use_pool(len(body))
        remote = self.remote
        if pool is not None and remote is not None:
            self._pending += 1
            try:
                pid: int
                page: Page
                if len(body) < RAW_BYTES_MIN:  # (larger bodies are sent raw, one a call)
                    if self._lanes is None:
                        self._lanes = _LaneBatch(pool, remote, self._batch.max_wait_s)
                    job = (body, url, content_type, x_robots)
                    pid, page = await self._lanes.parse(remote, job)
                else:
                    pid, page = await pool.call(
                        _parse_job, remote, body, url, content_type, x_robots
                    )
                self._elsewhere[pid] += 1
                return page
            except concurrent.futures.BrokenExecutor:
                # (a sibling that died: the coordinator says so and stops the crawl)
                log.debug("a sibling process stopped parsing: parsing in this process")
                self.workers = 0
                self._shutdown()
            finally:
                self._pending -= 1
        self._here += 1
        return await self._batch.parse(body, url, content_type, x_robots)

    def drain(self) -> None:
        """The crawl loop has nothing more to start and nothing is being fetched: the pages
        waiting in a batch are parsed at the event loop's next turn
        (:meth:`skitter.parse_batch.ParseBatch.drain`), and those gathered for the siblings
        are sent now."""
        self._batch.drain()
        if self._lanes is not None:
            self._lanes.batcher.flush()

    def report_sections(self) -> dict[str, Any]:
        """``{"parse": {"pid", "here", "helpers": {pid: pages}}}`` (pages parsed in this
        process and in each sibling process) when siblings may parse, else ``{}``."""
        if not self.workers and not self._elsewhere:
            return {}
        helpers = {str(p): n for p, n in sorted(self._elsewhere.items())}
        return {"parse": {"pid": os.getpid(), "here": self._here, "helpers": helpers}}

    def _shutdown(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.shutdown()

    def close(self) -> None:
        """Stop using the siblings (idempotent; a page still sent to one is cancelled: the
        crawl loop closes the stage once its pages are done)."""
        if self._lanes is not None:
            self._lanes.batcher.close()
        self._batch.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()
