"""The crawl loop: lease, hand the lease to a worker, checkpoint, stop, finish.

A dispatcher leases requests from the frontier whenever a concurrency slot is free and a host
is ready (politeness lives in the frontier's schedule); each lease is processed by one task of
the :class:`skitter.worker.Worker` (robots → fetch → record → extract → decide → add → ack).
The loop does not know what mode it runs in: link checking plugs in as the worker's lease
policy (:mod:`skitter.lease_policy`), other processes of a ``--processes`` crawl as its peers
(:mod:`skitter.peers`).

Pipeline (Scrapy's engine/downloader split): a lease's task holds its host only while
fetching; once the final response is read the worker releases the host to the frontier
(:meth:`skitter.frontier.base.Frontier.release`, politeness gap included) and wakes the loop,
which may lease the host's next URL while the page is judged, archived, parsed
(:mod:`skitter.parse_stage`: in the sibling processes when this one is host-bound) and
recorded. Tasks in that second stage count as in flight until their ack.

Durability (``kill -9`` at any instant): the worker writes each page's WARC exchange, links.tsv
rows and pages.jsonl record before it acks the lease. Every few seconds the frontier is
committed and ``checkpoint.json`` records the journal offsets and the counters as they were
just before that commit. On resume, :mod:`skitter.recovery` marks the records past the
checkpoint done in the frontier and re-adds their queued links (both idempotent), so no URL is
lost and no recorded URL is fetched again; only requests in flight at the kill are repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from skitter.autotune import AutoLimit, FixedLimit, concurrency_limit
from skitter.context import CrawlContext, RobotsNotes
from skitter.duplicates import DuplicateStage
from skitter.errors import FetchError, FrontierError, HookError, OutputError, SkitterError
from skitter.events import CrawlHooks
from skitter.lease_policy import LeasePolicy
from skitter.models import Lease, Request, Response
from skitter.observer import observe_frontier
from skitter.parse_batch import BATCH_MAX_WAIT_S
from skitter.parse_stage import Extract, ParseStage
from skitter.peers import Peers
from skitter.recovery import reconcile
from skitter.recrawl import RecrawlPolicy
from skitter.reporting import (
    build_report,
    parse_counts,
    whole_parse_section,
    whole_tuning_sections,
    write_report,
)
from skitter.settings import CrawlSettings
from skitter.sitemap_phase import read_sitemaps
from skitter.state import CHECKPOINT_FILE, atomic_write_json, resume_limits
from skitter.stats import Stats, StatsSnapshot
from skitter.traps import TrapGuard
from skitter.worker import Worker

if TYPE_CHECKING:
    from skitter.build import Components

__all__ = ["Crawler"]

log = logging.getLogger("skitter")

CHECKPOINT_EVERY_S = 2.0
REPORT_EVERY_S = 30.0


def _remote_extract(c: Components) -> Extract:
    """:meth:`Components.extract` as a picklable function (parsed in sibling processes)."""
    from skitter.links import extract

    return functools.partial(
        extract, bot_token=c.bot_token, resources=c.extract_resources, ids=c.extract_ids
    )


class Crawler:
    """A polite, resumable crawl over a frontier.

    Use::

        async with Crawler.from_settings(settings) as crawler:
            snapshot = await crawler.run()

    ``from_settings`` only stores the settings; entering the context builds the components
    (HTTP session, frontier, writers) through :func:`skitter.build.build_components` and, for
    ``settings.resume``, reconciles the output journals with the frontier.

    Args:
        settings: the crawl.
        hooks: callbacks (:class:`skitter.events.CrawlHooks`).
        clock: seconds (epoch) for politeness schedules.
        peers: the other processes of the crawl (default: none,
            :class:`skitter.peers.Alone`, or the other workers of a Redis crawl;
            ``--processes``:
            :class:`skitter.shard_peers.ShardPeers`).
        policy: the mode's lease policy (default: :func:`skitter.build.lease_policy` of
            ``settings``; link checking: :class:`skitter.checklinks.CheckPolicy`).
        limit: the limit on fetches in flight (default:
            :func:`skitter.autotune.concurrency_limit` of ``settings``).

    Raises (on enter): :class:`skitter.errors.StateError` for an unusable output folder,
    :class:`skitter.errors.ConfigError` for bad settings.
    """

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        hooks: CrawlHooks | None = None,
        clock: Callable[[], float] = time.time,
        peers: Peers | None = None,
        policy: LeasePolicy | None = None,
        limit: FixedLimit | AutoLimit | None = None,
    ) -> None:
        from skitter.build import default_peers, lease_policy

        self.settings = settings
        self.peers: Peers = peers if peers is not None else default_peers(settings)
        self.hooks = hooks or CrawlHooks()
        self.clock = clock
        self.out_dir = Path(settings.out_dir)
        self.policy: LeasePolicy = policy if policy is not None else lease_policy(settings, clock)
        # fetches in flight: --concurrency N or auto (skitter.autotune)
        self.limit = limit if limit is not None else concurrency_limit(settings)
        self._peak = 0
        self._stats = Stats()
        self._traps = TrapGuard(settings.scope)
        self._notes = RobotsNotes()
        q = settings.quality
        if settings.check_links:  # link checking judges links, not content
            q = replace(q, dedup="off", sitemaps="off", sitemap_urls=(), order="bfs")
        elif not settings.extract_links:  # skitter fetch: the seeds only
            q = replace(q, sitemaps="off", sitemap_urls=(), order="bfs")
        self._quality = q
        self._ctx: CrawlContext | None = None
        self._worker: Worker | None = None
        self._parse: ParseStage | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        #: tasks past their fetch (response read, host released): left to finish on interrupt
        self._fetched: set[asyncio.Task[None]] = set()
        #: parse counts of the sessions before a resume (checkpoint "parse")
        self._parse_earlier: dict[str, Any] = {}
        #: concurrency and timeouts sections of the sessions before a resume ("tuning")
        self._tuning_earlier: dict[str, Any] = {}
        self._wake = asyncio.Event()
        #: set by interrupt() and abort(): the sitemap phase abandons its fetches
        self._interrupted = asyncio.Event()
        self._stopping = False
        self._stop_reason = ""
        self._started = 0.0
        self._last_checkpoint = 0.0
        self._last_report = 0.0
        self._finished = False
        #: run() ended and saved the checkpoint and report.json: nothing changed since
        self._saved_at_end = False
        #: an error that stops the crawl (output not writable, a hook with errors="stop")
        self._fatal: BaseException | None = None

    @classmethod
    def from_settings(cls, settings: CrawlSettings, hooks: CrawlHooks | None = None) -> Crawler:
        """A crawler for ``settings`` (components are built on ``async with``)."""
        return cls(settings, hooks=hooks)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Crawler:
        from skitter.build import build_components

        peers = self.peers
        components = await build_components(
            self.settings,
            self._robots_fetch,
            warc_dir=peers.warc_dir,
            warc_prefix=peers.warc_prefix,
        )
        components.frontier = observe_frontier(components.frontier, self.hooks.observer)
        self._ctx = ctx = CrawlContext(
            settings=self.settings,
            components=components,
            hooks=self.hooks,
            clock=self.clock,
            out_dir=self.out_dir,
            stats=self._stats,
            traps=self._traps,
            policy=self.policy,
            peers=peers,
            robots_notes=self._notes,
            quality=self._quality,
            dups=DuplicateStage(self._quality),
            recrawl=self.policy.recrawl if isinstance(self.policy, RecrawlPolicy) else None,
        )
        self._parse = ParseStage(
            components.extract,
            remote=_remote_extract(components),
            executor=self.peers.parse_lanes,
            batch_wait_s=BATCH_MAX_WAIT_S,
        )
        self._worker = Worker(ctx, parse=self._parse, on_release=self._released)
        try:
            # after build_components: the frontier's lock is held before any repair
            peers.open(ctx, self)
            if self.settings.resume:
                cp = await reconcile(ctx)
                self._parse_earlier = cp.get("parse") or {}  # report.json: the whole crawl
                self._tuning_earlier = cp.get("tuning") or {}
        except BaseException:
            await self._close_components()
            raise
        return self

    async def _robots_fetch(self, url: str) -> Response:
        assert self._worker is not None
        return await self._worker.robots_fetch(url)

    async def _close_components(self) -> None:
        if self._parse is not None:
            self._parse.close()
        try:
            if self._ctx is not None:
                await self._ctx.components.aclose()
        finally:
            if self._ctx is not None:
                self._stats = self._ctx.stats
            self._ctx = None
            self.peers.close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._ctx is None:
            return
        try:
            if exc is None:
                if not self._saved_at_end:
                    await self._checkpoint()
                    self._write_report()
            else:
                # the crawl failed: save what can be saved, but let ``exc`` be the error
                with contextlib.suppress(OSError, SkitterError):
                    await self._checkpoint()
                    self._write_report()
        finally:
            if exc is None:
                await self._close_components()
            else:
                # best effort after a failure: the error already said what failed, so the
                # follow-on warnings of closing on a full disk are not repeated
                logging.disable(logging.WARNING)
                try:
                    with contextlib.suppress(OSError, SkitterError):
                        await self._close_components()
                finally:
                    logging.disable(logging.NOTSET)

    @property
    def components(self) -> Components:
        """The built components; raises RuntimeError outside ``async with``."""
        return self._context.components

    @property
    def _context(self) -> CrawlContext:
        if self._ctx is None:
            raise RuntimeError("use 'async with Crawler.from_settings(...)' first")
        return self._ctx

    @property
    def stats(self) -> Stats:
        """The crawl's counters (the checkpointed ones after a resume)."""
        return self._ctx.stats if self._ctx is not None else self._stats

    @property
    def stop_reason(self) -> str:
        """Why the crawl stopped (report.json ``stop_reason``): "done" (the frontier ran
        dry), "max_pages", "max_time", "interrupted" (a signal, :meth:`request_stop`,
        :meth:`abort`, or a fatal error: resumable) or "" while running."""
        return self._stop_reason or ("done" if self._finished else "")

    @property
    def finished(self) -> bool:
        """True once the frontier ran dry (False after a stop or page limit)."""
        return self._finished

    @property
    def inflight(self) -> int:
        """Requests in flight."""
        return len(self._inflight)

    def request_stop(self, reason: str = "interrupted") -> None:
        """Stop leasing new requests; requests in flight finish and are recorded."""
        if not self._stopping:
            self._stopping = True
            self._stop_reason = reason
        self._wake.set()

    def interrupt(self) -> None:
        """Stop promptly (Ctrl-C, SIGTERM): stop leasing and abandon the fetches in flight
        (their leases are not acked: fetched again on resume); the pages whose response is
        already read are still archived and recorded, then the crawl ends as after
        :meth:`request_stop` (checkpoint, report)."""
        self.request_stop("interrupted")
        self._interrupted.set()  # (the sitemap phase's fetches: abandoned too)
        for t in list(self._inflight - self._fetched):
            t.cancel()

    def abort(self) -> None:
        """Cancel the requests in flight (they are fetched again on resume)."""
        self.request_stop("interrupted")
        self._interrupted.set()
        for t in list(self._inflight):
            t.cancel()

    def _released(self) -> None:
        """The worker's ``on_release``: the current task's response is read."""
        task = asyncio.current_task()
        if task is not None:
            self._fetched.add(task)
        self.wake()

    def wake(self) -> None:
        """Make the loop look at the frontier again now (new requests were added)."""
        self._wake.set()

    # ------------------------------------------------------------------ run

    async def run(self, seeds: Sequence[str] = ()) -> StatsSnapshot:
        """Crawl until the frontier is empty, ``max_pages`` is reached or a stop is requested.

        Args:
            seeds: extra seed URLs, added to ``settings.seeds`` (canonicalised; invalid or
                non-HTTP ones are ignored with a warning).
        Returns:
            The final statistics snapshot (also written to report.json).

        Raises:
            OutputError, OSError: an output or state file could not be written (the crawl
                stops at once; what was recorded stays, and it can be resumed).
            HookError: a hook raised and ``CrawlHooks(errors="stop")``.
        """
        ctx = self._context
        worker = self._worker
        assert worker is not None
        frontier = ctx.components.frontier
        peers = self.peers
        inflight = self._inflight
        parse = worker.parse
        self._saved_at_end = False
        self._started = time.monotonic()
        self._last_checkpoint = self._last_report = self._started
        await worker.add_seeds([*self.settings.seeds, *seeds])
        if ctx.recrawl is not None:  # every previous page is asked again
            prev = [p for p in ctx.recrawl.revisits() if not peers.is_foreign(p.url)]
            await ctx.add([Request(url=p.url, depth=p.depth) for p in prev])
        # (sharded: the coordinator's Ctrl-C is obeyed during the phase too)
        listening = asyncio.create_task(peers.listen())
        try:
            await read_sitemaps(
                ctx, worker, self._checkpoint, lambda: self._stopping, self._interrupted
            )
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)
        limit = self.limit
        max_pages = self.settings.max_pages
        max_time = self.settings.max_time_s
        await peers.start(ctx.stats.ok)
        peers_task = asyncio.create_task(peers.run())
        limit_task = asyncio.create_task(limit.run(self._take_peak, self.wake))
        try:
            while True:
                if self._stopping:
                    break
                if max_pages is not None and peers.total_ok(ctx.stats.ok) >= max_pages:
                    self._stop_reason = "max_pages"
                    break
                if max_time is not None and time.monotonic() - self._started >= max_time:
                    self._stop_reason = "max_time"  # in-flight requests finish, then resumable
                    break
                lease: Lease | None = None
                room = len(inflight) < limit.value
                if room and max_pages is not None:
                    room = peers.reserve(ctx.stats.ok, len(inflight), max_pages)
                if room:
                    lease = await frontier.lease(self.clock())
                    if lease is None:
                        peers.publish(ctx.stats.ok, len(inflight))
                # room but no ready host: this process's pages may be parsed by helpers;
                # nothing in flight either: it may parse the pages of a busy helper
                parse.host_bound = room and lease is None
                parse.idle = lease is None and not inflight
                if lease is not None:
                    peers.leased()
                    task = asyncio.create_task(self._guarded(worker, lease))
                    inflight.add(task)
                    self._peak = max(self._peak, len(inflight))
                    task.add_done_callback(self._task_done)
                    continue
                if not inflight:
                    mark = peers.mark()
                    if await frontier.is_finished() and peers.dry(mark, inflight):
                        self._finished = True
                        break
                # nothing is being fetched (the tasks whose response is read are a subset of
                # those in flight): the pages waiting for a batch are parsed now
                if len(inflight) == len(self._fetched):
                    parse.drain()
                await self._maybe_checkpoint()
                timeout = 1.0
                if max_time is not None:
                    timeout = max(0.0, min(timeout, self._started + max_time - time.monotonic()))
                if room:
                    nra = await frontier.next_ready_at()
                    if nra is not None:
                        timeout = min(1.0, max(0.0, nra - self.clock()))
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            if inflight:
                await asyncio.gather(*inflight, return_exceptions=True)
        finally:
            if inflight:
                for t in inflight:
                    t.cancel()
                await asyncio.gather(*inflight, return_exceptions=True)
            peers_task.cancel()
            limit_task.cancel()
            await asyncio.gather(peers_task, limit_task, return_exceptions=True)
            if self._fatal is None:
                await self._checkpoint()
                self._write_report()
                self._saved_at_end = True  # (not again on leaving the ``async with``)
            else:
                # best effort: the disk may still be full; the last checkpoint stays valid
                with contextlib.suppress(OSError, SkitterError):
                    await self._checkpoint()
                    self._write_report()
        if self._fatal is not None:
            raise self._fatal
        return self.snapshot()

    def _take_peak(self) -> int:
        """Most requests in flight since the last call (then reset to the current count)."""
        peak, self._peak = self._peak, len(self._inflight)
        return peak

    def snapshot(self) -> StatsSnapshot:
        """Current statistics (records, statuses, errors, decisions, hosts, depths)."""
        return self.stats.snapshot(self._elapsed())

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self._fetched.discard(task)
        self._wake.set()
        self.peers.publish(self.stats.ok, len(self._inflight))

    async def _guarded(self, worker: Worker, lease: Lease) -> None:
        try:
            await worker.process(lease)
        except asyncio.CancelledError:
            raise
        except FrontierError as e:  # e.g. a lease lost while frozen: its late ack refused
            log.warning("%s", e)
        except (OutputError, HookError, OSError) as exc:
            if isinstance(exc, FetchError):  # a fetch failure that escaped: a bug
                log.exception("internal error while processing %s", lease.request.url)
                return
            # the output cannot be written, or a hook asked to stop: stop now; the lease
            # stays unacked (fetched again on resume) and run() raises the error
            if self._fatal is None:
                self._fatal = exc
            self.abort()
        except Exception:
            # A bug must not kill the crawl: log it and leave the lease to expire (retried).
            log.exception("internal error while processing %s", lease.request.url)

    # ------------------------------------------------------------------ durability

    async def _maybe_checkpoint(self) -> None:
        now = time.monotonic()
        if now - self._last_checkpoint >= CHECKPOINT_EVERY_S:
            await self._checkpoint()
        if now - self._last_report >= REPORT_EVERY_S:
            self._last_report = now
            self._write_report()

    async def _checkpoint(self) -> None:
        """Commit the frontier and record the journal offsets that commit covers."""
        ctx = self._context
        c = ctx.components
        self._last_checkpoint = time.monotonic()
        # captured synchronously: the counters and offsets describe the same instant
        data = {
            "pages_offset": c.pages.offset(),
            "links_offset": c.links.offset(),
            "stats": ctx.stats.to_state(self._elapsed()),
            "traps": ctx.traps.to_state(),
            "robots": c.robots.to_state(),
            "robots_notes": ctx.robots_notes.to_state(),
            **({"duplicates": ctx.dups.to_state()} if ctx.dups is not None else {}),
            "parse": parse_counts(self._parse_section()),
            "tuning": self._tuning_sections(),  # (report.json: the whole crawl)
            # the limits this session runs with (loosened on resume: skitter.recovery)
            "limits": resume_limits(self.settings.scope),
            **self.peers.checkpoint_state(),
        }
        await c.frontier.flush()
        atomic_write_json(self.out_dir / CHECKPOINT_FILE, data, compact=True)
        c.save_cookies()

    def _elapsed(self) -> float:
        return time.monotonic() - self._started if self._started else 0.0

    # ------------------------------------------------------------------ report

    def report(self) -> dict[str, Any]:
        """The report.json document (:func:`skitter.reporting.build_report`): totals, robots
        decisions per host, trap drops, seeds."""
        report = build_report(
            self._context, self.snapshot(), finished=self._finished, stop_reason=self.stop_reason
        )
        return {**report, **self._tuning_sections(), **self._parse_section()}

    def _tuning_sections(self) -> dict[str, Any]:
        """report.json ``concurrency`` and ``timeouts`` of this process, all sessions."""
        d = self._context.components.deadlines
        now = {**self.limit.report_sections(), **(d.report_sections() if d is not None else {})}
        return whole_tuning_sections(now, self._tuning_earlier)

    def _parse_section(self) -> dict[str, Any]:
        """report.json ``parse`` of this process, all sessions."""
        now = self._parse.report_sections() if self._parse is not None else {}
        return whole_parse_section(now, self._parse_earlier)

    def _write_report(self) -> None:
        if self._ctx is None:
            return
        write_report(self._ctx, self.report())
