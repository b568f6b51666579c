"""The crawl loop: lease → robots → fetch → extract → decide → add → write → ack.

A dispatcher leases requests from the frontier whenever a concurrency slot is free and a host
is ready (politeness lives in the frontier's schedule); each lease is processed by one task.

Durability (``kill -9`` at any instant): for every page the WARC exchange, then the page's
links.tsv rows, then its pages.jsonl record are appended (one ``write()`` each, with no
``await`` between the last two), and only then is the lease acked in the frontier. Every few
seconds the frontier is committed and ``checkpoint.json`` records the journal offsets and the
counters as they were just before that commit. On resume, the records past the checkpoint are
marked done in the frontier and their queued links re-added (both idempotent), so no URL is
lost and no recorded URL is fetched again; only requests in flight at the kill are repeated.

Sharded (``shard=``, one of ``--processes N``, see :mod:`skitter.processes`): the crawler
owns only the hosts that hash to it. URLs for other hosts are handed off (written before the
page's rows and record, so the same durability argument holds), handed-off URLs from other
processes are read into the frontier (the read offsets are checkpointed with the frontier
commit), the trap budgets of a host are spent by its owner, and the run does not end when the
frontier is empty: the crawler reports itself idle and ends when the coordinator says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from skitter import __version__
from skitter.checklinks import (
    CHECK_BODY_BYTES,
    HOST_ERROR_KINDS,
    PERMANENT_REDIRECTS,
    CheckPolicy,
    classify_final,
    host_failure,
    status_from_detail,
)
from skitter.errors import BodyTooLarge, FetchError, StateError
from skitter.events import CrawlHooks
from skitter.export.links import LinkRow, format_rows
from skitter.export.pages import PageRecord, iso_utc
from skitter.models import Hop, Lease, Page, Request, Response
from skitter.politeness import (
    backoff_s,
    next_allowed_at,
    parse_retry_after,
    random_wait_factor,
    retry_decision,
)
from skitter.redirects import location_target
from skitter.rules import Decision
from skitter.settings import CrawlSettings
from skitter.sharding import Handoff, Meta, Outgoing, ShardLink
from skitter.state import (
    CHECKPOINT_FILE,
    LINKS_FILE,
    PAGES_FILE,
    REPORT_FILE,
    atomic_write_json,
    read_json,
)
from skitter.stats import Stats, StatsSnapshot
from skitter.traps import TrapGuard
from skitter.urls import canonicalize, host_key, hostname, origin, split_fragment

if TYPE_CHECKING:
    from skitter.build import Components

__all__ = ["Crawler"]

log = logging.getLogger("skitter")

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
CHECKPOINT_EVERY_S = 2.0
REPORT_EVERY_S = 30.0
MAX_REPORTED_URLS = 100


NO_LOCATION = "redirect without Location"

#: Statuses that are redirects only with a Location (RFC 9110 §15.4); 304 is not one.
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


def _no_retry_detail(
    status: int, reason: str, attempts: int, retry_after_s: float | None, cap_s: float
) -> str | None:
    """error_detail of a 429/5xx that is recorded as the final answer (C21: "rate limited")."""
    what = "rate limited" if status == 429 else "server error"
    if reason == "retry_after_too_long" and retry_after_s is not None:
        return (
            f"{what} ({status}): Retry-After {retry_after_s:g} s is longer than the "
            f"{cap_s:g} s cap, not retried"
        )
    if reason == "retries_exhausted":
        return f"{what} ({status}): gave up after {attempts} attempts"
    return None


def record_verdict(
    status: int | None, error: str | None, detail: str | None, first_hop_status: int | None
) -> str:
    """The verdict of one record in the link checker's vocabulary (one vocabulary for
    ``crawl``'s report.json and ``check-links``): a permanent first redirect is
    "redirected", else :func:`skitter.checklinks.classify_final` of the final answer."""
    if first_hop_status in PERMANENT_REDIRECTS:
        return "redirected"
    if status in _REDIRECT_STATUSES and error is None and detail != NO_LOCATION:
        # a redirect the crawl did not follow (offsite, already crawled...): the link
        # works; its target has a record (or a links.tsv decision) of its own
        return "redirected" if status in PERMANENT_REDIRECTS else "ok"
    return classify_final(status, error, detail)[0]


def _is_html(resp: Response) -> bool:
    ct = resp.content_type
    if ct is not None:
        return ct in HTML_TYPES
    head = resp.body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _robots_header_values(resp: Response) -> list[str]:
    return resp.header_all("x-robots-tag")


@dataclass(slots=True)
class _RunState:
    inflight: set[asyncio.Task[None]] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False
    stop_reason: str = ""
    started: float = 0.0
    last_checkpoint: float = 0.0
    last_report: float = 0.0


@dataclass(slots=True)
class _ShardState:
    """A sharded crawler process's view of the hand-off (see :mod:`skitter.sharding`)."""

    handoff: Handoff
    #: inbox offsets whose requests are all in the frontier (what the checkpoint stores)
    consumed_done: list[int]
    idle: bool = False
    #: bumped whenever received requests have been added (idle is re-derived after it)
    gen: int = 0
    receiving: int = 0
    finish: bool = False
    status_seq: int = 0
    #: requested URLs recorded past the checkpoint at resume (no second record for them)
    replayed: set[str] = field(default_factory=set)


class Crawler:
    """A polite, resumable crawl over a frontier.

    Use::

        async with Crawler.from_settings(settings) as crawler:
            snapshot = await crawler.run()

    ``from_settings`` only stores the settings; entering the context builds the components
    (HTTP session, frontier, writers) through :func:`skitter.build.build_components` and, for
    ``settings.resume``, reconciles the output journals with the frontier.

    Raises (on enter): :class:`skitter.errors.StateError` for an unusable output folder,
    :class:`skitter.errors.ConfigError` for bad settings.
    """

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        hooks: CrawlHooks | None = None,
        clock: Callable[[], float] = time.time,
        shard: ShardLink | None = None,
    ) -> None:
        self.settings = settings
        self.shard = shard
        self._sh: _ShardState | None = None
        self.hooks = hooks or CrawlHooks()
        self.clock = clock
        self.out_dir = Path(settings.out_dir)
        self.stats = Stats()
        self._c: Components | None = None
        self._run = _RunState()
        self._ip_sems: dict[str, asyncio.Semaphore] = {}
        self._host_last_end: dict[str, float] = {}
        self._robots_blocked: dict[str, list[str]] = defaultdict(list)
        self._robots_unreachable: dict[str, list[str]] = defaultdict(list)
        self._traps = TrapGuard(settings.scope)
        #: link-checking policy (``settings.check_links``), else None
        self.check: CheckPolicy | None = None
        if settings.check_links:
            seeds = [u for u in (canonicalize(s) for s in settings.seeds) if u is not None]
            self.check = CheckPolicy(settings, seeds, clock=clock)
            if settings.resume:
                self.check.load_cache(self.out_dir)
        self._finished = False

    @classmethod
    def from_settings(cls, settings: CrawlSettings, hooks: CrawlHooks | None = None) -> Crawler:
        """A crawler for ``settings`` (components are built on ``async with``)."""
        return cls(settings, hooks=hooks)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Crawler:
        from skitter.build import build_components

        link = self.shard
        self._c = await build_components(
            self.settings,
            self._robots_fetch,
            warc_dir=link.out_dir if link is not None else None,
            warc_prefix=link.warc_prefix if link is not None else "skitter",
        )
        try:
            if link is not None:
                # after build_components: the frontier's lock is held before any repair
                h = Handoff(link.out_dir, link.index, link.count)
                self._sh = _ShardState(h, h.read_offsets())
            if self.settings.resume:
                await self._reconcile()
        except BaseException:
            await self._close_components()
            raise
        return self

    async def _close_components(self) -> None:
        try:
            if self._c is not None:
                await self._c.aclose()
        finally:
            self._c = None
            if self._sh is not None:
                self._sh.handoff.close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._c is None:
            return
        try:
            await self._checkpoint()
            self._write_report()
        finally:
            await self._close_components()

    @property
    def components(self) -> Components:
        """The built components; raises RuntimeError outside ``async with``."""
        if self._c is None:
            raise RuntimeError("use 'async with Crawler.from_settings(...)' first")
        return self._c

    @property
    def stop_reason(self) -> str:
        """Why the crawl stopped: "finished", "max_pages", "interrupted", "aborted" or ""."""
        return self._run.stop_reason or ("finished" if self._finished else "")

    @property
    def finished(self) -> bool:
        """True once the frontier ran dry (False after a stop or page limit)."""
        return self._finished

    def request_stop(self, reason: str = "interrupted") -> None:
        """Stop leasing new requests; requests in flight finish and are recorded."""
        if not self._run.stopping:
            self._run.stopping = True
            self._run.stop_reason = reason
        self._run.wake.set()

    def abort(self) -> None:
        """Cancel the requests in flight (they are fetched again on resume)."""
        self.request_stop("aborted")
        for t in list(self._run.inflight):
            t.cancel()

    # ------------------------------------------------------------------ run

    async def run(self, seeds: Sequence[str] = ()) -> StatsSnapshot:
        """Crawl until the frontier is empty, ``max_pages`` is reached or a stop is requested.

        Args:
            seeds: extra seed URLs, added to ``settings.seeds`` (canonicalised; invalid or
                non-HTTP ones are ignored with a warning).
        Returns:
            The final statistics snapshot (also written to report.json).
        """
        c = self.components
        rs = self._run
        rs.started = time.monotonic()
        rs.last_checkpoint = rs.last_report = rs.started
        await self._add_seeds([*self.settings.seeds, *seeds])
        limit = self.settings.politeness.concurrency
        max_pages = self.settings.max_pages
        sh = self._sh
        link = self.shard
        budget = link.budget if link is not None else None
        if budget is not None and link is not None:
            # every process publishes its resumed 2xx count before any of them leases
            budget.publish(self.stats.ok, 0)
            if link.start is not None:
                try:
                    await asyncio.to_thread(link.start.wait, 60.0)
                except threading.BrokenBarrierError:
                    log.warning("not every crawler process started; going on")
        shard_task = asyncio.create_task(self._shard_loop()) if sh is not None else None
        try:
            while True:
                if rs.stopping:
                    break
                if max_pages is not None:
                    total_ok = budget.total_ok() if budget is not None else self.stats.ok
                    if total_ok >= max_pages:
                        rs.stop_reason = "max_pages"
                        break
                lease: Lease | None = None
                room = len(rs.inflight) < limit
                if room and max_pages is not None:
                    if budget is not None:
                        room = budget.reserve(self.stats.ok, len(rs.inflight))
                    elif self.stats.ok + len(rs.inflight) >= max_pages:
                        room = False
                if room:
                    lease = await c.frontier.lease(self.clock())
                    if lease is None and budget is not None:
                        budget.publish(self.stats.ok, len(rs.inflight))
                if lease is not None:
                    if sh is not None:
                        sh.idle = False
                    task = asyncio.create_task(self._guarded(lease))
                    rs.inflight.add(task)
                    task.add_done_callback(self._task_done)
                    continue
                if not rs.inflight:
                    gen = sh.gen if sh is not None else 0
                    if await c.frontier.is_finished():
                        if sh is None:
                            self._finished = True
                            break
                        # idle until the coordinator says every process is (sharding)
                        if gen == sh.gen and not sh.receiving and not rs.inflight:
                            sh.idle = True
                        if sh.finish and sh.idle:
                            self._finished = True
                            break
                await self._maybe_checkpoint()
                timeout = 1.0
                if room:
                    nra = await c.frontier.next_ready_at()
                    if nra is not None:
                        timeout = min(1.0, max(0.0, nra - self.clock()))
                rs.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(rs.wake.wait(), timeout=timeout)
            if rs.inflight:
                await asyncio.gather(*rs.inflight, return_exceptions=True)
        finally:
            if rs.inflight:
                for t in rs.inflight:
                    t.cancel()
                await asyncio.gather(*rs.inflight, return_exceptions=True)
            if shard_task is not None:
                shard_task.cancel()
                await asyncio.gather(shard_task, return_exceptions=True)
            await self._checkpoint()
            self._write_report()
        return self.snapshot()

    def snapshot(self) -> StatsSnapshot:
        """Current statistics (records, statuses, errors, decisions, hosts, depths)."""
        return self.stats.snapshot(time.monotonic() - self._run.started if self._run.started else 0)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._run.inflight.discard(task)
        self._run.wake.set()
        if self.shard is not None and self.shard.budget is not None:
            self.shard.budget.publish(self.stats.ok, len(self._run.inflight))

    async def _guarded(self, lease: Lease) -> None:
        try:
            await self._process(lease)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug must not kill the crawl: log it and leave the lease to expire (retried).
            log.exception("internal error while processing %s", lease.request.url)

    # ------------------------------------------------------------------ sharding

    async def _add(
        self,
        reqs: Sequence[Request],
        *,
        force: bool = False,
        meta: Meta | None = None,
        owners: Sequence[int] | None = None,
    ) -> frozenset[str]:
        """Queue ``reqs``: this process's hosts into its frontier, the others' handed off
        (:mod:`skitter.sharding`, each with ``meta`` if given; ``owners``: each request's
        owning process if the caller knows it already). Returns the URLs queued: new to the
        local frontier, or handed off (the owner's URL-seen test decides there)."""
        c = self.components
        sh = self._sh
        if sh is None:
            return (await c.frontier.add(reqs, force=force)).added_urls
        h = sh.handoff
        local: list[Request] = []
        away: dict[int, list[Outgoing]] = {}
        handed: set[str] = set()
        if owners is None:
            owners = [h.owner_of_url(r.url) for r in reqs]
        for r, j in zip(reqs, owners, strict=True):
            if j == h.index:
                local.append(r)
            else:
                away.setdefault(j, []).append((r, meta) if meta else r)
                handed.add(r.url)
        if not away:
            return (await c.frontier.add(local, force=force)).added_urls
        h.send(away)
        if local:
            handed |= (await c.frontier.add(local, force=force)).added_urls
        return frozenset(handed)

    def _is_foreign(self, canon: str) -> bool:
        """True if another process owns ``canon``'s host (its trap budgets are kept there)."""
        sh = self._sh
        return sh is not None and sh.handoff.owner_of_url(canon) != sh.handoff.index

    async def _shard_loop(self) -> None:
        """Sharded crawl: obey the coordinator, take in handed-off requests, report status."""
        sh = self._sh
        link = self.shard
        assert sh is not None and link is not None
        last_status = 0.0
        last_idle: bool | None = None
        while True:
            try:
                while link.conn.poll():
                    msg = link.conn.recv()
                    if msg == "stop":
                        self.request_stop("interrupted")
                    elif msg == "abort":
                        self.abort()
                    elif msg == "finish":
                        sh.finish = True
                        self._run.wake.set()
            except (EOFError, OSError):
                log.error("the coordinating process is gone: stopping")
                self.abort()
                return
            items = sh.handoff.receive_with_meta()
            if items:
                sh.idle = False
                sh.receiving += 1
                try:
                    await self._admit_received(items)
                finally:
                    sh.receiving -= 1
                sh.gen += 1
                sh.consumed_done = sh.handoff.read_offsets()
                self._run.wake.set()
            now = time.monotonic()
            idle = sh.idle and not self._run.inflight and not sh.receiving
            if idle != last_idle or now - last_status >= 0.25:
                last_status, last_idle = now, idle
                self._send_status(idle)
            await asyncio.sleep(0.02 if idle else 0.05)

    def _send_status(self, idle: bool) -> None:
        """One status message to the coordinator: ``("status", seq, idle, sent bytes per
        destination, read bytes per source, counters)``; idle and the offsets describe one
        instant."""
        sh = self._sh
        link = self.shard
        assert sh is not None and link is not None
        sh.status_seq += 1
        s = self.stats
        counters = {
            "records": s.records,
            "ok": s.ok,
            "errors": sum(s.by_error.values()),
            "robots_disallowed": s.robots_disallowed,
            "inflight": len(self._run.inflight),
            "hosts": len(s.by_host),
        }
        with contextlib.suppress(OSError):
            link.conn.send(
                (
                    "status",
                    sh.status_seq,
                    idle,
                    sh.handoff.sent(),
                    list(sh.consumed_done),
                    counters,
                )
            )

    async def _admit_received(self, items: Sequence[tuple[Request, Meta | None]]) -> None:
        """Queue requests handed off by other processes (with their meta): this process owns
        their hosts, so their trap budgets are spent here; a redirect continuation that is
        not queued ends its chain with a record here (its origin belongs to the sender)."""
        sh = self._sh
        assert sh is not None
        keep: list[Request] = []
        metas: list[Meta | None] = []
        dropped: list[str] = []
        for r, meta in items:
            trap = self._traps.admit(r.url)
            if trap is not None:
                dropped.append(r.url)
                if r.redirects:
                    self._record_unfollowed(r, f"{trap.defence}: {trap.detail}", meta)
                continue
            keep.append(r)
            metas.append(meta)
        # journaled before anything else: a resume spends the budgets of admitted ones only
        sh.handoff.note_dropped(dropped)
        if not keep:
            return
        added = (await self.components.frontier.add(keep)).added_urls
        # the frontier enqueues the first request of a URL in a batch: every other one
        # ending a redirect chain (two chains to one target, read together) is recorded
        followed: set[str] = set()
        for r, meta in zip(keep, metas, strict=True):
            if r.url in added and r.url not in followed:
                followed.add(r.url)
            elif r.redirects:
                self._record_unfollowed(r, "already crawled or queued", meta)

    def _record_unfollowed(self, req: Request, why: str, meta: Meta | None = None) -> None:
        """The record of a handed-off redirect chain whose last target is not fetched; the
        last 3xx response's fields come from the sender's ``meta``
        (:func:`_redirect_meta`), as the sender would have recorded them."""
        sh = self._sh
        if sh is not None and req.requested_url in sh.replayed:
            return  # recorded before the crash this resume recovers from
        last = req.redirects[-1]
        m = meta or {}
        rec = PageRecord(
            url=req.requested_url,
            final_url=last.url,
            status=last.status,
            depth=req.depth,
            content_type=m.get("content_type"),
            bytes=int(m.get("bytes") or 0),
            sha1=m.get("sha1"),
            fetched_at=str(m.get("fetched_at") or iso_utc(time.time())),
            elapsed_s=float(m.get("elapsed_s") or 0.0),
            attempts=int(m.get("attempts") or 1),
            redirects=list(req.redirects[:-1]),
            error=None,
            error_detail=f"redirect to {req.url} not followed: {why}",
        )
        self._write_record(rec, host_key(req.requested_url))

    async def _add_seeds(self, seeds: Sequence[str]) -> None:
        c = self.components
        reqs = []
        for s in seeds:
            url = canonicalize(s)
            if url is None:
                log.warning("ignoring seed %r: not an http(s) URL", s)
                continue
            c.scope.add_seed(url)
            if self.check is not None:
                self.check.add_seed(url)
            c.allow_host(hostname(url))
            if self._is_foreign(url):
                continue  # the process owning its host queues it
            self._traps.note(url)  # seeds are never dropped as traps, but they count
            reqs.append(Request(url=url, depth=0))
        if reqs:
            await c.frontier.add(reqs)

    # ------------------------------------------------------------------ one request

    async def _robots_fetch(self, url: str) -> Response:
        """Fetch a robots.txt (no redirects followed here); archived to WARC, not to pages.

        A file larger than 512 KiB is cut there, not refused (RFC 9309 §2.5: its first
        500 KiB are parsed; the WARC record says ``WARC-Truncated: length``).
        """
        c = self.components
        async with self._ip_slot(url):  # a robots.txt request counts for --ip-concurrency too
            resp = await c.fetcher.fetch(Request(url=url), max_body_bytes=512 * 1024, truncate=True)
        self._host_last_end[host_key(url)] = self.clock()
        if c.warc is not None:
            c.warc.write_exchange(
                url, resp, ip=resp.peer_ip, truncated="length" if resp.truncated else None
            )
        return resp

    @contextlib.asynccontextmanager
    async def _ip_slot(self, url: str) -> AsyncIterator[None]:
        """Hold one of ``--ip-concurrency`` slots of the address ``url``'s host resolves to
        (over every process of a sharded crawl: :class:`skitter.sharding.IpSlots`)."""
        c = self.components
        sem: asyncio.Semaphore | None = None
        try:
            ips = await c.lookup(url)
        except Exception:
            ips = []
        if ips:
            sem = self._ip_sems.get(ips[0])
            if sem is None:
                sem = self._ip_sems[ips[0]] = asyncio.Semaphore(
                    self.settings.politeness.ip_concurrency
                )
        if sem is None:
            yield
            return
        shared = self.shard.ip_slots if self.shard is not None else None
        async with sem:
            if shared is None:
                yield
                return
            ip = ips[0]
            delay = 0.002
            while not shared.try_acquire(ip):  # bounded by the other processes' requests
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)
            try:
                yield
            finally:
                shared.release(ip)

    def _gap_s(self, crawl_delay_s: float | None) -> float:
        p = self.settings.politeness
        jitter = random_wait_factor(p.random_wait)
        return next_allowed_at(0.0, p.delay_s, crawl_delay_s, p.max_crawl_delay_s, jitter)

    async def _process(self, lease: Lease) -> None:
        c = self.components
        p = self.settings.politeness
        req = lease.request
        host = lease.host
        attempts = lease.attempts + 1
        crawl_delay: float | None = None
        if self.check is not None:
            # link checking: a verdict reused from a previous check, or a host known dead
            cached = self.check.cached(req.url) if req.check_only else None
            if cached is not None:
                await self._finish_cached(lease, cached)
                return
            failed = self.check.failed_host(host)
            if failed is not None:
                await self._finish_error(lease, attempts, *failed, not_before=self.clock())
                return
        if not p.ignore_robots:
            chk = await c.robots.check(req.url)
            crawl_delay = chk.crawl_delay_s
            if not chk.allowed:
                if chk.reason == "unreachable":
                    if chk.error_kind in ("dns", "blocked_address") or (
                        self.check is not None and chk.error_kind in HOST_ERROR_KINDS
                    ):
                        # the page could not be fetched either: record the real cause
                        # (a dead host is "dns", not a robots.txt verdict; C27, SSRF)
                        await self._finish_error(
                            lease,
                            attempts,
                            chk.error_kind,
                            f"{chk.error} (robots.txt and page not fetched)",
                            not_before=self.clock(),
                        )
                        return
                    if attempts <= p.retries:
                        # no response at all (connect, TLS, timeout): the --retries backoff;
                        # a 5xx robots.txt: the --robots-retry wait (RFC 9309 §2.3.1.4)
                        wait = backoff_s(attempts) if chk.error_kind else p.robots_retry_s
                        await c.frontier.retry(lease, not_before=self.clock() + wait)
                        return
                    self._note(self._robots_unreachable, origin(req.url), req.url)
                    await self._finish_error(
                        lease,
                        attempts,
                        "robots_unreachable",
                        f"robots.txt unreachable ({chk.error or '5xx or network error'}) "
                        f"after {attempts} attempts: disallow all (RFC 9309 §2.3.1.4)",
                        not_before=self.clock(),
                    )
                    return
                self.stats.robots_disallowed += 1
                self.stats.by_verdict["excluded"] += 1
                self._note(self._robots_blocked, origin(req.url), req.url)
                if req.redirects:
                    # the chain ends at a hop whose target robots.txt forbids
                    await self._finish_redirect_stop(
                        lease, attempts, f"redirect target {req.url} disallowed by robots.txt"
                    )
                else:
                    await c.frontier.ack(lease, not_before=self.clock())
                return
            # a robots.txt fetched just now counts as a request to the host: keep the gap
            # by handing the lease back to the frontier's schedule (no attempt counted)
            last = self._host_last_end.get(host)
            if last is not None:
                ready_at = last + self._gap_s(crawl_delay)
                if ready_at > self.clock():
                    await c.frontier.retry(lease, not_before=ready_at, count_attempt=False)
                    return
        started = time.perf_counter()
        try:
            async with self._ip_slot(req.url):
                if req.check_only and self.check is not None:
                    resp = await self._check_fetch(req, host, crawl_delay)
                else:
                    resp = await c.fetcher.fetch(req)
        except FetchError as exc:
            end = self.clock()
            self._host_last_end[host] = end
            d = retry_decision(None, exc.kind, attempts, p.retries, None, p.max_retry_after_s)
            if d.retry:
                await c.frontier.retry(
                    lease, not_before=end + max(d.wait_s, self._gap_s(crawl_delay))
                )
                return
            if self.check is not None and host_failure(exc.kind, exc.detail):
                self.check.fail_host(host, exc.kind, exc.detail)
            await self._finish_error(
                lease,
                attempts,
                exc.kind,
                exc.detail,
                not_before=end + self._gap_s(crawl_delay),
                elapsed_s=time.perf_counter() - started,
            )
            return
        end = self.clock()
        self._host_last_end[host] = end
        if c.warc is not None and not req.check_only:
            c.warc.write_exchange(req.url, resp, ip=resp.peer_ip)
        gap = self._gap_s(crawl_delay)
        status = resp.status
        detail: str | None = None
        if status == 429 or status >= 500:
            ra = parse_retry_after(resp.header("retry-after"), time.time())
            d = retry_decision(status, None, attempts, p.retries, ra, p.max_retry_after_s)
            if d.retry:
                await c.frontier.retry(lease, not_before=end + max(d.wait_s, gap))
                return
            if ra is not None and ra > 0:
                gap = max(gap, min(ra, p.max_retry_after_s))
            detail = _no_retry_detail(status, d.reason, attempts, ra, p.max_retry_after_s)
        if 300 <= status < 400 and resp.header("location") is not None:
            await self._redirect(lease, resp, attempts, end + gap)
            return
        if status in _REDIRECT_STATUSES:
            detail = NO_LOCATION
        await self._finish_response(lease, resp, attempts, end + gap, detail=detail)

    async def _check_fetch(self, req: Request, host: str, crawl_delay: float | None) -> Response:
        """Fetch a ``check_only`` request: HEAD, then GET if HEAD is refused (C20).

        HEAD is trusted below 400. A HEAD status >= 400, or a HEAD failure other than at
        the DNS/connection level, is confirmed with a GET (after the host's delay) whose
        body is read to :data:`CHECK_BODY_BYTES` at most; a larger body counts by its
        status (``BodyTooLarge`` "(HTTP status N)"), never as an error. A HEAD 429 (or 5xx
        with Retry-After) is returned as is, so the retry, after the wait, is the GET.
        Hosts that refuse HEAD (405/501 while GET works) get GET only from then on.
        """
        c = self.components
        chk = self.check
        assert chk is not None
        head_status: int | None = None
        if req.url not in chk.get_only and host not in chk.no_head_hosts:
            head: Response | None = None
            try:
                head = await c.fetcher.fetch(req, method="HEAD")
            except FetchError as exc:
                if exc.kind in HOST_ERROR_KINDS:
                    raise
                chk.get_only.add(req.url)  # HEAD is unreliable here: GET from now on
            if head is not None:
                if head.status < 400:
                    return head
                head_status = head.status
                chk.get_only.add(req.url)
                if head.status == 429 or (
                    head.status >= 500 and head.header("retry-after") is not None
                ):
                    return head
            self._host_last_end[host] = self.clock()
            await asyncio.sleep(self._gap_s(crawl_delay))
        try:
            resp = await c.fetcher.fetch(req, max_body_bytes=CHECK_BODY_BYTES)
        except BodyTooLarge as exc:
            status = status_from_detail(exc.detail)
            if status is None:
                raise
            resp = Response(url=req.url, status=status)
        if head_status in (405, 501) and resp.status < 400:
            chk.no_head_hosts.add(host)
        return resp

    async def _finish_cached(self, lease: Lease, cached: dict[str, Any]) -> None:
        """Record a verdict reused from a previous check (``--cache-age``); no request."""
        req = lease.request
        hops = [*req.redirects]
        hops += [Hop(h["url"], int(h["status"])) for h in cached.get("redirects") or ()]
        rec = PageRecord(
            url=req.requested_url,
            final_url=cached["final_url"],
            status=cached.get("status"),
            depth=req.depth,
            content_type=cached.get("content_type"),
            bytes=int(cached.get("bytes") or 0),
            sha1=cached.get("sha1"),
            fetched_at=cached["fetched_at"],
            elapsed_s=0.0,
            attempts=0,
            redirects=hops,
            error=None,
            error_detail="verdict reused from a previous check (--cache-age)",
        )
        self._write_record(rec, host_key(req.requested_url))
        await self.components.frontier.ack(lease, not_before=self.clock())

    async def _redirect(
        self, lease: Lease, resp: Response, attempts: int, not_before: float
    ) -> None:
        c = self.components
        req = lease.request
        target = location_target(req.url, resp.header("location"))
        canon = canonicalize(target) if target else None
        hops = (*req.redirects, Hop(req.url, resp.status))
        if canon is None:
            # unusable or non-HTTP Location: the 3xx is the final response
            loc = (resp.header("location") or "").strip()
            await self._finish_response(
                lease,
                resp,
                attempts,
                not_before,
                detail=f"redirect to an unusable or non-http(s) Location: {loc[:200]!r}",
            )
            return
        fragment = split_fragment(target or "")[1]
        if len(hops) > self.settings.fetch.max_redirects:
            await self._finish_error(
                lease,
                attempts,
                "too_many_redirects",
                f"more than {self.settings.fetch.max_redirects} redirects",
                not_before,
                hops=hops,
                final=req.url,
            )
            return
        visited = [h.url for h in hops]
        force = False
        if canon in visited:
            # a loop; a cookie-setting self-redirect is followed once (RFC 6265 login dances)
            if resp.header_all("set-cookie") and visited.count(canon) == 1:
                force = True
            else:
                await self._finish_error(
                    lease,
                    attempts,
                    "too_many_redirects",
                    f"redirect loop back to {canon}",
                    not_before,
                    hops=hops,
                    final=req.url,
                )
                return
        detail = ""
        check_only = req.check_only
        offsite_checked = False
        if self.check is not None and not c.scope.in_scope(canon):
            # link checking follows a redirect anywhere it may check (as check_only)
            offsite_checked = self.check.check_only_for("scope", canon, "redirect") is not None
            check_only = check_only or offsite_checked
        if not offsite_checked and not c.scope.in_scope(canon):
            decision = Decision.SCOPE.value
            detail = "out of scope (offsite)"
        elif (
            self.settings.scope.max_url_length is not None
            and len(canon) > self.settings.scope.max_url_length
        ):
            decision = Decision.URL_LENGTH.value
            detail = f"URL longer than {self.settings.scope.max_url_length} characters"
        elif (
            not force
            and not self._is_foreign(canon)
            and (trap := self._traps.admit(canon)) is not None
        ):
            decision = trap.decision.value
            detail = f"{trap.defence}: {trap.detail}"
        else:
            cont = Request(
                url=canon,
                depth=req.depth,
                referer=req.referer,
                origin_url=req.requested_url,
                redirects=hops,
                priority=req.priority,
                check_only=check_only,
            )
            meta = _redirect_meta(resp, attempts) if self._is_foreign(canon) else None
            added = await self._add([cont], force=force, meta=meta)
            decision = Decision.QUEUED.value if canon in added else Decision.SEEN.value
        row = LinkRow(req.url, canon, fragment, "", "redirect", False, decision)
        if decision == Decision.QUEUED.value:
            c.links.write_rows([row])
            self.stats.count_decisions(Counter({decision: 1}))
            await c.frontier.ack(lease, not_before=not_before, status=resp.status)
            return
        # not followed: the chain ends here, with this 3xx as the final response
        if decision == Decision.SEEN.value:
            detail = "already crawled or queued"
        await self._finish_response(
            lease,
            resp,
            attempts,
            not_before,
            extra_rows=[row],
            detail=f"redirect to {canon} not followed: {detail}",
        )

    async def _finish_redirect_stop(self, lease: Lease, attempts: int, detail: str | None) -> None:
        """Record a redirect chain whose next hop may not be fetched (robots)."""
        req = lease.request
        last = req.redirects[-1]
        rec = PageRecord(
            url=req.requested_url,
            final_url=last.url,
            status=last.status,
            depth=req.depth,
            content_type=None,
            bytes=0,
            sha1=None,
            fetched_at=iso_utc(time.time()),
            elapsed_s=0.0,
            attempts=attempts,
            redirects=list(req.redirects[:-1]),
            error=None,
            error_detail=detail,
        )
        self._write_record(rec, host_key(req.requested_url))
        await self.components.frontier.ack(lease, not_before=self.clock())

    async def _finish_error(
        self,
        lease: Lease,
        attempts: int,
        kind: str,
        detail: str,
        not_before: float,
        *,
        hops: tuple[Hop, ...] | None = None,
        final: str | None = None,
        elapsed_s: float = 0.0,
    ) -> None:
        """Record a final outcome without an HTTP response (``elapsed_s``: the failed
        fetch's seconds; 0 when nothing was sent), ack the lease, call ``on_error``."""
        req = lease.request
        rec = PageRecord(
            url=req.requested_url,
            final_url=final or req.url,
            status=None,
            depth=req.depth,
            content_type=None,
            bytes=0,
            sha1=None,
            fetched_at=iso_utc(time.time()),
            elapsed_s=elapsed_s,
            attempts=attempts,
            redirects=list(hops if hops is not None else req.redirects),
            error=kind,
            error_detail=detail,
        )
        self._write_record(rec, host_key(req.requested_url))
        await self.components.frontier.ack(lease, not_before=not_before)
        if self.hooks.on_error is not None:
            await _maybe_await(self.hooks.on_error(rec))

    async def _finish_response(
        self,
        lease: Lease,
        resp: Response,
        attempts: int,
        not_before: float,
        *,
        extra_rows: Sequence[LinkRow] = (),
        detail: str | None = None,
    ) -> None:
        c = self.components
        req = lease.request
        page: Page | None = None
        # links.tsv rows as their 7 fields (see format_rows): no LinkRow per link
        rows: list[Sequence[Any]] = [r.fields() for r in extra_rows]
        decisions: Counter[str] = Counter(r.decision for r in extra_rows)
        if resp.body and not req.check_only and _is_html(resp) and not (300 <= resp.status < 400):
            page = c.extract(
                resp.body, req.url, resp.header("content-type"), _robots_header_values(resp)
            )
            new_rows, new_decisions = await self._decide_links(req, page)
            rows.extend(new_rows)
            decisions.update(new_decisions)
        rec = PageRecord(
            url=req.requested_url,
            final_url=req.url,
            status=resp.status,
            depth=req.depth,
            content_type=resp.content_type,
            bytes=len(resp.body),
            sha1=hashlib.sha1(resp.body).hexdigest(),
            fetched_at=iso_utc(time.time()),
            elapsed_s=resp.elapsed_s,
            attempts=attempts,
            redirects=list(req.redirects),
            error=None,
            error_detail=detail,
        )
        # no await between these writes: the page's rows and record land together
        if c.anchors is not None and page is not None:
            c.anchors.write(req.url, page.ids)
        if rows:
            c.links.write_text(format_rows(rows))
            self.stats.count_decisions(decisions)
        self._write_record(rec, host_key(req.requested_url))
        await c.frontier.ack(
            lease,
            not_before=not_before,
            status=resp.status,
            etag=resp.header("etag"),
            last_modified=resp.header("last-modified"),
        )
        if self.hooks.on_page is not None:
            await _maybe_await(self.hooks.on_page(rec, resp, page))

    async def _decide_links(self, req: Request, page: Page) -> tuple[list[list[Any]], Counter[str]]:
        """Decide every link of ``page`` (document order), queue the new ones; returns the
        links.tsv rows (as their 7 fields, see :func:`format_rows`) and their decision
        counts. Runs for every link: kept lean."""
        c = self.components
        decide = c.scope.decide
        admit = self._traps.admit
        # sharded: each queued URL's owner, found once (trap budgets are the owner's)
        handoff = self._sh.handoff if self._sh is not None else None
        owners: list[int] | None = [] if handoff is not None else None
        owner = -1
        check = self.check
        link_filter = self.hooks.link_filter
        queued, seen_v = Decision.QUEUED, Decision.SEEN.value
        child_depth = req.depth + 1
        is_seed_page = req.depth == 0 and not req.redirects
        fields: list[list[Any]] = []
        pending: dict[str, int] = {}
        to_add: list[Request] = []
        source = req.url
        page_nofollow = page.nofollow
        for i, link in enumerate(page.links):
            nofollow = link.nofollow or page_nofollow
            decision, canon = decide(
                link.url, depth=child_depth, nofollow=nofollow, index=i, is_seed_page=is_seed_page
            )
            check_only = False
            if check is not None and canon is not None:
                co = check.check_only_for(decision.value, canon, link.kind)
                if co is not None:  # link checking: checked (check_only) or crawled
                    decision, check_only = queued, co
            fragment = ""
            if link.url is not None:
                target_nofrag, _, fragment = link.url.partition("#")  # split_fragment
            else:
                target_nofrag = link.raw
            if decision is queued and link_filter is not None:
                keep = link_filter(source, link)
                if inspect.isawaitable(keep):
                    keep = await keep
                if not keep:
                    decision = Decision.SCOPE
            dec = decision.value
            if decision is queued and canon is not None:
                if canon in pending or canon == source:
                    dec = seen_v
                elif (
                    handoff is None or (owner := handoff.owner_of_url(canon)) == handoff.index
                ) and (trap := admit(canon)) is not None:
                    dec = trap.decision.value
                else:
                    pending[canon] = len(fields)
                    to_add.append(
                        Request(url=canon, depth=child_depth, referer=source, check_only=check_only)
                    )
                    if owners is not None:
                        owners.append(owner)
            target = canon if canon is not None else target_nofrag
            fields.append([source, target, fragment, link.anchor, link.kind, nofollow, dec])
        if to_add:
            added = await self._add(to_add, owners=owners)
            for canon, idx in pending.items():
                if canon not in added:
                    fields[idx][6] = seen_v
        return fields, Counter([f[6] for f in fields])

    def _write_record(self, rec: PageRecord, host: str) -> None:
        self.components.pages.write(rec)
        first = rec.redirects[0].status if rec.redirects else None
        verdict = record_verdict(rec.status, rec.error, rec.error_detail, first)
        self.stats.count_record(host, rec.depth, rec.status, rec.error, rec.bytes, verdict)

    def _note(self, where: dict[str, list[str]], host: str, url: str) -> None:
        lst = where[host]
        if len(lst) < MAX_REPORTED_URLS:
            lst.append(url)

    # ------------------------------------------------------------------ durability

    async def _maybe_checkpoint(self) -> None:
        now = time.monotonic()
        if now - self._run.last_checkpoint >= CHECKPOINT_EVERY_S:
            await self._checkpoint()
        if now - self._run.last_report >= REPORT_EVERY_S:
            self._run.last_report = now
            self._write_report()

    async def _checkpoint(self) -> None:
        """Commit the frontier and record the journal offsets that commit covers."""
        c = self.components
        self._run.last_checkpoint = time.monotonic()
        # captured synchronously: the counters and offsets describe the same instant
        data = {
            "pages_offset": c.pages.offset(),
            "links_offset": c.links.offset(),
            "stats": self.stats.to_state(self._elapsed()),
            "traps": self._traps.to_state(),
        }
        if self._sh is not None:
            data["handoff"] = {
                "consumed": {str(k): v for k, v in enumerate(self._sh.consumed_done) if v}
            }
        await c.frontier.flush()
        atomic_write_json(self.out_dir / CHECKPOINT_FILE, data)
        c.save_cookies()

    def _elapsed(self) -> float:
        return time.monotonic() - self._run.started if self._run.started else 0.0

    async def _reconcile(self) -> None:
        """Bring the frontier up to date with the journals after a crash (see module doc)."""
        c = self.components
        cp_path = self.out_dir / CHECKPOINT_FILE
        cp: dict[str, Any] = read_json(cp_path) if cp_path.exists() else {}
        pages_off = int(cp.get("pages_offset", 0))
        links_off = int(cp.get("links_offset", 0))
        self.stats = Stats.from_state(cp.get("stats", {}))
        self._traps.load_state(cp.get("traps") or {})
        if self._sh is not None:
            self._sh.handoff.load_state(cp.get("handoff") or {})
            self._sh.consumed_done = self._sh.handoff.read_offsets()
        pages_path = self.out_dir / PAGES_FILE
        links_path = self.out_dir / LINKS_FILE
        recorded: dict[str, int] = {}  # final_url / url -> depth
        done_urls: list[str] = []
        if pages_path.exists():
            size = pages_path.stat().st_size
            if pages_off > size:
                raise StateError(f"{pages_path} is shorter than its checkpoint; state is damaged")
            with open(pages_path, "rb") as fh:
                fh.seek(pages_off)
                for line in fh:
                    if not line.endswith(b"\n"):
                        break
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    depth = int(r.get("depth") or 0)
                    recorded[r["final_url"]] = depth
                    recorded[r["url"]] = depth
                    done_urls.append(r["url"])
                    done_urls.append(r["final_url"])
                    done_urls.extend(h["url"] for h in r.get("redirects") or ())
                    hops = r.get("redirects") or ()
                    self.stats.count_record(
                        host_key(r["url"]),
                        depth,
                        r.get("status"),
                        r.get("error"),
                        int(r.get("bytes") or 0),
                        record_verdict(
                            r.get("status"),
                            r.get("error"),
                            r.get("error_detail"),
                            hops[0]["status"] if hops else None,
                        ),
                    )
        if done_urls:
            await c.frontier.mark_done(sorted(set(done_urls)))
        readd: list[Request] = []
        if links_path.exists():
            readd = self._reconcile_links(links_path, links_off, recorded)
        if readd:
            await self._add(readd)
        # the trap budgets (distinct queued URLs per path / host) are rebuilt from links.tsv
        self._traps.replay_links(links_path)
        if self._sh is not None:
            # ... and, sharded, from what other processes handed over (their links.tsv
            # rows say "queued" for this process's hosts; the budgets are spent here)
            self._traps.replay(r.url for r in self._sh.handoff.replay_admitted())
            self._sh.replayed = set(recorded)
        await c.frontier.flush()
        log.info(
            "resume: %d records and %d queued links replayed past the checkpoint",
            len(set(done_urls)),
            len(readd),
        )

    def _reconcile_links(self, path: Path, offset: int, recorded: dict[str, int]) -> list[Request]:
        """Replay links.tsv rows past ``offset``; cut a trailing block whose page has no record."""
        from skitter.export.links import parse_row

        rows: list[tuple[int, LinkRow]] = []
        with open(path, "rb") as fh:
            fh.seek(offset)
            pos = offset
            for line in fh:
                start = pos
                pos += len(line)
                if not line.endswith(b"\n"):
                    break
                if start == 0 and line.startswith(b"source\t"):
                    continue
                row = parse_row(line.decode("utf-8", errors="replace"))
                if row is not None:
                    rows.append((start, row))
        # rows of the page being written at the kill (no record) can only be the last block
        if rows and rows[-1][1].source not in recorded:
            src = rows[-1][1].source
            cut = len(rows)
            while cut > 0 and rows[cut - 1][1].source == src:
                cut -= 1
            cut_at = rows[cut][0]
            rows = rows[:cut]
            with open(path, "r+b") as fh:
                fh.truncate(cut_at)
        readd: list[Request] = []
        decisions: Counter[str] = Counter()
        for _, row in rows:
            decisions[row.decision] += 1
            if row.decision == Decision.QUEUED.value and row.kind != "redirect":
                depth = recorded.get(row.source)
                if depth is not None:
                    readd.append(
                        Request(
                            url=row.target,
                            depth=depth + 1,
                            referer=row.source,
                            check_only=self._replay_check_only(row, depth + 1),
                        )
                    )
        self.stats.count_decisions(decisions)
        return readd

    def _replay_check_only(self, row: LinkRow, depth: int) -> bool:
        """Was this queued links.tsv row a check_only request? (decided again, for resume)"""
        if self.check is None:
            return False
        decision, canon = self.components.scope.decide(
            row.target, depth=depth, nofollow=row.nofollow, index=0, is_seed_page=False
        )
        if canon is None:
            return False
        return bool(self.check.check_only_for(decision.value, canon, row.kind))

    # ------------------------------------------------------------------ report

    def report(self) -> dict[str, Any]:
        """The report.json document: totals, robots decisions per host, frontier state,
        and "traps": per trap defence its limit, drop count and first 100 dropped URLs
        (see :meth:`skitter.traps.TrapGuard.report`)."""
        c = self.components
        snap = self.snapshot()
        robots = c.robots.snapshot()
        for org, urls in self._robots_blocked.items():
            robots.setdefault(org, {})["disallowed_urls"] = urls
        for org, urls in self._robots_unreachable.items():
            robots.setdefault(org, {})["unreachable_urls"] = urls
        return {
            "skitter": __version__,
            "out_dir": str(self.out_dir),
            "finished": self._finished,
            "stop_reason": self.stop_reason,
            "totals": snap.to_dict(),
            "robots": robots,
            "traps": self._traps.report(),
            "seeds": list(self.settings.seeds),
        }

    def _write_report(self) -> None:
        if self._c is None:
            return
        atomic_write_json(self.out_dir / REPORT_FILE, self.report())


def _redirect_meta(resp: Response, attempts: int) -> Meta:
    """The pages.jsonl fields of a 3xx response whose chain continues in another process
    (which records the chain if it does not follow it; :meth:`Crawler._record_unfollowed`)."""
    return {
        "content_type": resp.content_type,
        "bytes": len(resp.body),
        "sha1": hashlib.sha1(resp.body).hexdigest(),
        "elapsed_s": resp.elapsed_s,
        "attempts": attempts,
        "fetched_at": iso_utc(time.time()),
    }


async def _maybe_await(value: object) -> None:
    if inspect.isawaitable(value):
        await value
