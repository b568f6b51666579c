"""Pages parsed in batches: the inline parses of a crawling process gathered and run back
to back.

Parsing one page between a crawl's other steps (reading sockets, deciding links, writing
WARC records, the frontier's SQLite) finds the parser's code and its memory cold: every
other step went through the CPU's caches since the last page. Measured in a ``--processes
1`` crawl of the shared benchmark web, link extraction took ~400 µs a page, against ~230 µs
for the same pages parsed one after another (and ~290 µs when 4 MiB of other memory are
touched between two pages). Parsed in batches, both it and the steps after it (each page's
records are written in a row too) run warm: the whole crawl used 24% less CPU (13.5 → 10.3
CPU s), and one big site (rust-doc, one host) 16% less, in less wall time.

:class:`ParseBatch` holds the pages handed to it until one of these:

* it holds :data:`BATCH_MAX_PAGES` pages or :data:`BATCH_MAX_BYTES` bytes of bodies;
* the crawl loop calls :meth:`ParseBatch.drain`: it has nothing more to start and no
  request is being fetched, so nothing else could join soon, and the crawl may be waiting
  for this batch's links (its start, a polite crawl with one request at a time);
* ``max_wait_s`` (:data:`BATCH_MAX_WAIT_S` in a crawl) went by since its first page: a
  bound on the delay, nothing more. With ``max_wait_s=0`` (no crawl loop to drain it: a
  :class:`~skitter.worker.Worker` used alone) a batch is what comes in one turn of the event
  loop.

Then its pages are parsed in the order they came, each caller's ``await`` returning its own
:class:`~skitter.models.Page` (or raising its exception). Durability is not touched: a page's
rows and record are written, and its lease acked, by its own task after its parse, as
without batches. A caller cancelled while its page waits (Ctrl-C abandons fetches in flight)
is skipped. Pages larger than :data:`BATCH_PAGE_MAX_BYTES` are not held (they are parsed
segment by segment at once: :mod:`skitter.html_chunks`), so a batch holds at most
:data:`BATCH_MAX_BYTES` + that of bodies the crawl already holds anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from skitter.html_chunks import SEGMENT_MIN_BYTES
from skitter.models import Page

__all__ = [
    "BATCH_MAX_BYTES",
    "BATCH_MAX_PAGES",
    "BATCH_MAX_WAIT_S",
    "BATCH_PAGE_MAX_BYTES",
    "Batcher",
    "Job",
    "ParseBatch",
]

#: Pages in one batch at most. Measured on rust-doc ``--processes 1`` (one host, ~8-10 pages
#: come in 5 ms): CPU s of the crawl 32.3 unbatched, 29.4 at 4 pages, 28.6 at 8, 28.0 at 16,
#: 27.1 at 32.
BATCH_MAX_PAGES = 32
#: Bytes of bodies in one batch at most.
BATCH_MAX_BYTES = 4 * 1024 * 1024
#: Seconds a batch waits at most for more pages while other requests are being fetched.
#: 5 ms: waiting 10 or 20 ms gained nothing more on rust-doc.
BATCH_MAX_WAIT_S = 0.005
#: Larger bodies (bytes) are parsed at once, not held (parsed segment by segment).
BATCH_PAGE_MAX_BYTES = SEGMENT_MIN_BYTES

#: ``parse(body, url, content_type, x_robots) -> Page``
Parse = Callable[[bytes, str, "str | None", Sequence[str]], Page]
#: a page to parse: ``(body, url, content_type, x_robots)``
Job = tuple[bytes, str, "str | None", Sequence[str]]

R = TypeVar("R")


class Batcher(Generic[R]):
    """The gathering of a batch (see the module doc), for a runner: jobs are held until the
    batch is full (``max_items`` jobs or ``max_bytes`` bytes of bodies), ``max_wait_s``
    passed since its first job (0: the event loop's next turn), or :meth:`drain` makes it
    due at the next turn; then ``run`` gets the batch, ``[(future, job)]`` in the order the
    jobs came, and must settle every future not done yet (a done one: its caller was
    cancelled). Used by :class:`ParseBatch` (parsed here) and by the parse stage for the
    sibling processes (one call of a batch: :mod:`skitter.parse_stage`).

    Args:
        run: takes a batch, at once (in the caller's turn of the event loop).
        max_items, max_bytes, max_wait_s: the batch's bounds (jobs; bytes; seconds).
    """

    def __init__(
        self,
        run: Callable[[list[tuple[asyncio.Future[R], Job]]], None],
        *,
        max_items: int,
        max_bytes: int,
        max_wait_s: float,
    ) -> None:
        self.run = run
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.max_wait_s = max_wait_s
        self._items: list[tuple[asyncio.Future[R], Job]] = []
        self._bytes = 0
        self._timer: asyncio.Handle | None = None  # the batch's flush, when one is due
        self._soon = False  # ... at the next turn

    def __len__(self) -> int:
        """Jobs waiting in the current batch."""
        return len(self._items)

    async def submit(self, job: Job) -> R:
        """``job``'s result, once its batch has run.

        Raises:
            what the runner set for this job; CancelledError if the batch was closed first.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[R] = loop.create_future()
        self._items.append((fut, job))
        self._bytes += len(job[0])
        if len(self._items) >= self.max_items or self._bytes >= self.max_bytes:
            self.flush()
        elif self._timer is None:
            if self.max_wait_s > 0:
                self._timer = loop.call_later(self.max_wait_s, self.flush)
            else:
                self._timer, self._soon = loop.call_soon(self.flush), True
        return await fut

    def drain(self) -> None:
        """Run the waiting batch at the event loop's next turn, not later (the crawl loop:
        nothing else is being fetched); jobs handed over before that still join."""
        if self._items and not self._soon:
            self._cancel_calls()
            self._timer, self._soon = asyncio.get_running_loop().call_soon(self.flush), True

    def flush(self) -> None:
        """Run the batch waiting now, if any."""
        self._cancel_calls()
        items, self._items, self._bytes = self._items, [], 0
        if items:
            self.run(items)

    def close(self) -> None:
        """Drop the waiting jobs (their callers get CancelledError) and the pending calls."""
        self._cancel_calls()
        items, self._items, self._bytes = self._items, [], 0
        for fut, _ in items:
            fut.cancel()

    def _cancel_calls(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._soon = None, False


class ParseBatch:
    """Batches of pages for ``parse`` (see the module doc).

    Args:
        parse: the parser, ``parse(body, url, content_type, x_robots) -> Page``.
        after: called with each page's body size (bytes) after its parse (the heap trimmer).
        max_pages, max_bytes: the batch's bounds (pages; bytes of bodies).
        max_wait_s: seconds a batch waits at most for more pages; 0: it goes at the event
            loop's next turn.
    """

    def __init__(
        self,
        parse: Parse,
        *,
        after: Callable[[int], None] | None = None,
        max_pages: int = BATCH_MAX_PAGES,
        max_bytes: int = BATCH_MAX_BYTES,
        max_wait_s: float = 0.0,
    ) -> None:
        self._parse = parse
        self._after = after
        self._batcher: Batcher[Page] = Batcher(
            self._run, max_items=max_pages, max_bytes=max_bytes, max_wait_s=max_wait_s
        )
        self.max_wait_s = max_wait_s
        #: batches run so far, and the pages they held
        self.batches = 0
        self.pages = 0

    def __len__(self) -> int:
        """Pages waiting in the current batch."""
        return len(self._batcher)

    async def parse(
        self, body: bytes, url: str, content_type: str | None, x_robots: Sequence[str]
    ) -> Page:
        """The :class:`Page` of ``body``, parsed with the batch it joins.

        Raises:
            what ``parse`` raised for this page; CancelledError if the batch was closed first.
        """
        if len(body) > BATCH_PAGE_MAX_BYTES:
            page = self._parse(body, url, content_type, x_robots)
            if self._after is not None:
                self._after(len(body))
            return page
        return await self._batcher.submit((body, url, content_type, x_robots))

    def drain(self) -> None:
        """Parse the waiting pages at the event loop's next turn (:meth:`Batcher.drain`)."""
        self._batcher.drain()

    def flush(self) -> None:
        """Parse the pages waiting now, in the order they came (idempotent)."""
        self._batcher.flush()

    def close(self) -> None:
        """Drop the waiting pages (their callers get CancelledError) and the pending calls."""
        self._batcher.close()

    def _run(self, items: list[tuple[asyncio.Future[Page], Job]]) -> None:
        self.batches += 1
        self.pages += len(items)
        parse, after = self._parse, self._after
        for fut, (body, url, content_type, x_robots) in items:
            if fut.done():  # (its task was cancelled)
                continue
            try:
                page = parse(body, url, content_type, x_robots)
            except Exception as exc:  # the caller's exception, raised by its await
                fut.set_exception(exc)
            else:
                fut.set_result(page)
            if after is not None:
                after(len(body))
