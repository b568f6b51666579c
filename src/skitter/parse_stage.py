"""The parse stage of the crawl pipeline: HTML bodies parsed here or in helper processes.

A crawl's pipeline has two stages (Scrapy's engine/downloader split): the *fetch* stage
(robots → fetch → response read), after which the host's slot is handed back to the
frontier (:meth:`skitter.frontier.base.Frontier.release`) so the next request to the host
may start, and the *processing* stage (parse → decide links → write rows and record → ack).
:class:`ParseStage` runs the parse step of the second stage: inline on the event loop, or,
in a crawler process of ``--processes N`` (``workers = N - 1``), in a small pool of helper
processes when the loop is *host-bound*: the last lease attempt found room under the
concurrency limit but no ready host (one busy host), so this process's core is the
bottleneck while the other processes' cores idle. With many ready hosts every process is
busy with its own hosts and pages are parsed inline (no pickling cost). The pool takes at
most ``2 × workers`` pages at once; past that the loop parses inline too, so both keep busy.
Pages larger than :data:`skitter.html_chunks.SEGMENT_MIN_BYTES` are always parsed inline
(segment by segment): a helper would hold two more copies of their bytes (the pickle and its
own), the jump in memory that segmenting avoids. Every :data:`TRIM_EVERY_BYTES` of HTML parsed
in a process, and after each such large page, the C heap is trimmed
(:func:`skitter.runtime.trim_heap`).

Durability is not touched: a helper only returns the parsed :class:`~skitter.models.Page`;
the crawler process writes the rows and the record and acks, as before. A helper exits when
its crawler process is gone (``kill -9``) and ignores SIGINT (the crawler stops it); helpers
are forked from the crawler process when first needed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from skitter.html_chunks import SEGMENT_MIN_BYTES
from skitter.models import Page
from skitter.runtime import trim_heap

__all__ = ["TRIM_EVERY_BYTES", "Extract", "ParseStage"]

log = logging.getLogger("skitter")

#: The C heap is trimmed (:func:`skitter.runtime.trim_heap`) after every this many bytes of
#: HTML parsed in a process (here or in a helper): parse trees are freed into glibc's heap,
#: which keeps them otherwise (rust-doc -p1: peak RSS 153 MB without, see issue 16).
TRIM_EVERY_BYTES = 32 * 1024 * 1024

#: ``extract(body, url, content_type, x_robots) -> Page``; picklable (a module function or
#: a :func:`functools.partial` of one) to run in a helper process.
Extract = Callable[[bytes, str, "str | None", Sequence[str]], Page]


def _watch_parent(parent: int) -> None:  # pragma: no cover - runs in a helper process
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)  # the crawler process is gone (kill -9): nothing to finish here


class _Trimmer:
    """Counts the bytes parsed in this process; trims the C heap every
    :data:`TRIM_EVERY_BYTES`, and after every page larger than
    :data:`~skitter.html_chunks.SEGMENT_MIN_BYTES` (whose segment trees just went back to
    the heap: the next large page starts from a smaller resident set)."""

    __slots__ = ("since",)

    def __init__(self) -> None:
        self.since = 0

    def parsed(self, nbytes: int) -> None:
        """Count ``nbytes`` of HTML parsed (bytes); trim the C heap when due."""
        self.since += nbytes
        if self.since >= TRIM_EVERY_BYTES or nbytes > SEGMENT_MIN_BYTES:
            self.since = 0
            trim_heap()


_helper_trimmer = _Trimmer()  # in a helper process


def _helper_init(parent: int) -> None:  # pragma: no cover - runs in a helper process
    # what the fork inherited stays shared: no collection here scans (writes into) it
    gc.freeze()
    # forked from the crawler: its signal handling (the event loop's wake-up fd) is not ours
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _parse_job(
    extract: Extract, body: bytes, url: str, ct: str | None, xr: Sequence[str]
) -> tuple[int, Page]:  # pragma: no cover - runs in a helper process
    page = extract(body, url, ct, xr)
    _helper_trimmer.parsed(len(body))
    return os.getpid(), page


class ParseStage:
    """Parse HTML bodies inline, or in ``workers`` helper processes when host-bound.

    Args:
        extract: the parser run inline (see :data:`Extract`).
        workers: helper processes (0: always inline); started on first use.
        remote: the same parser, picklable, for the helpers (None: always inline).

    Attributes:
        host_bound: set by the crawl loop: True when its last lease attempt had room but no
            ready host.
    """

    def __init__(self, extract: Extract, workers: int = 0, remote: Extract | None = None) -> None:
        self.extract = extract
        self.remote = remote
        self.workers = max(0, workers) if remote is not None else 0
        self.host_bound = False
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._pending = 0
        self._here = 0
        self._elsewhere: Counter[int] = Counter()
        self._trimmer = _Trimmer()

    def _use_pool(self, size: int) -> concurrent.futures.ProcessPoolExecutor | None:
        if not self.workers or not self.host_bound or self._pending >= 2 * self.workers:
            return None
        if size > SEGMENT_MIN_BYTES:
            # parsed here segment by segment (bounded memory, skitter.html_chunks): sent to a
            # helper, its bytes would be copied twice more (the pickle, the helper's copy)
            return None
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self.workers,
                # fork: no resource tracker to complain after a kill -9, no re-import
                mp_context=multiprocessing.get_context("fork"),
                initializer=_helper_init,
                initargs=(os.getpid(),),
            )
        return self._pool

    async def parse(
        self, body: bytes, url: str, content_type: str | None, x_robots: Sequence[str]
    ) -> Page:
        """The :class:`Page` of an HTML ``body`` fetched from ``url`` (see :data:`Extract`).

        Raises what ``extract`` raises (a helper's exception is re-raised here). A helper
        pool that broke (a helper killed) is dropped: this and later pages are parsed inline.
        """
        pool = self._use_pool(len(body))
        remote = self.remote
        if pool is not None and remote is not None:
            self._pending += 1
            try:
                loop = asyncio.get_running_loop()
                pid, page = await loop.run_in_executor(
                    pool, _parse_job, remote, body, url, content_type, x_robots
                )
                self._elsewhere[pid] += 1
                return page
            except BrokenProcessPool:
                log.warning("the parse helper processes stopped: parsing in the crawler")
                self.workers = 0
                self._shutdown()
            finally:
                self._pending -= 1
        self._here += 1
        page = self.extract(body, url, content_type, x_robots)
        self._trimmer.parsed(len(body))
        return page

    def report_sections(self) -> dict[str, Any]:
        """``{"parse": {"pid", "here", "helpers": {pid: pages}}}`` (pages parsed in this
        process and in each helper) when helpers are allowed, else ``{}``."""
        if not self.workers and not self._elsewhere:
            return {}
        helpers = {str(p): n for p, n in sorted(self._elsewhere.items())}
        return {"parse": {"pid": os.getpid(), "here": self._here, "helpers": helpers}}

    def _shutdown(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the helper processes (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
