"""Processing one lease: robots → fetch → record → extract → decide → add → ack.

:class:`Worker` takes a lease from the crawl loop (:mod:`skitter.crawler`) and carries it to
its end: a pages.jsonl record and an ack, or a retry (``retry_decision``; a 429/5xx is
retried after the wait, RFC 9110 §10.2.3 Retry-After, capped). Redirects continue as new
requests (:mod:`skitter.continuations`). The mode's differences come from the lease policy
(:mod:`skitter.lease_policy`); who owns a host (whose trap budgets apply) from the peers
(:mod:`skitter.peers`). New URLs are queued through the frontier alone: under ``--processes``
it routes other processes' hosts to them (:mod:`skitter.frontier.routing`).

Durability (``kill -9`` at any instant): for every page the WARC exchange, then the page's
links.tsv rows, then its pages.jsonl record are appended (one ``write()`` each, with no
``await`` between the last two), and only then is the lease acked in the frontier. The host
itself is released earlier, when the final response has been read (the crawl pipeline,
:mod:`skitter.crawler`): a release frees the host's fetch slot, not the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from skitter.context import CrawlContext
from skitter.continuations import follow_redirect
from skitter.duplicates import PageVerdict
from skitter.errors import FetchError, FrontierError
from skitter.events import call_hook
from skitter.export.links import LinkRow, format_rows
from skitter.export.pages import PageRecord, iso_utc
from skitter.link_decisions import decide_links, rows_as
from skitter.logs import logged, politeness
from skitter.models import Hop, Lease, Page, Request, Response
from skitter.parse_stage import ParseStage
from skitter.politeness import (
    backoff_s,
    next_allowed_at,
    parse_retry_after,
    random_wait_factor,
    retry_decision,
)
from skitter.redirects import NO_LOCATION, REDIRECT_STATUSES
from skitter.rules import Decision
from skitter.urls import canonicalize, host_key, hostname, origin

__all__ = ["HTML_TYPES", "Worker", "maybe_await"]

log = logging.getLogger("skitter")

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


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


def _is_html(resp: Response) -> bool:
    ct = resp.content_type
    if ct is not None:
        return ct in HTML_TYPES
    head = resp.body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _robots_header_values(resp: Response) -> list[str]:
    return resp.header_all("x-robots-tag")


async def maybe_await(value: object) -> None:
    """Await ``value`` if it is awaitable (a hook may be a function or a coroutine one)."""
    if inspect.isawaitable(value):
        await value


class Worker:
    """Processes leases of one crawl (one instance per crawl; one task per lease).

    Args:
        ctx: the crawl's shared state (:class:`skitter.context.CrawlContext`).
        parse: the parse step (:class:`skitter.parse_stage.ParseStage`; default inline).
        on_release: called when a lease's host slot is handed back to the frontier
            (response read, page not yet processed): the crawl loop's wake-up.
    """

    def __init__(
        self,
        ctx: CrawlContext,
        *,
        parse: ParseStage | None = None,
        on_release: Callable[[], None] | None = None,
    ) -> None:
        self.ctx = ctx
        #: the parse step (inline by default; helpers under --processes: skitter.parse_stage)
        self.parse = parse if parse is not None else ParseStage(ctx.components.extract)
        #: called when a host's slot is handed back before the page is processed (the crawl
        #: loop looks at the frontier again)
        self._on_release = on_release or (lambda: None)
        self._ip_sems: dict[str, asyncio.Semaphore] = {}
        self._host_last_end: dict[str, float] = {}
        # pages: the file-type focus and adaptive deadlines wrap the fetcher (skitter.build)
        self._page_fetcher = ctx.components.page_fetcher or ctx.components.fetcher

    async def add_seeds(self, seeds: Sequence[str]) -> None:
        """Queue the seed URLs (canonicalised; invalid or non-HTTP ones are ignored with a
        warning); each extends the scope and may be fetched even at a private address."""
        ctx = self.ctx
        c = ctx.components
        reqs = []
        for s in seeds:
            url = canonicalize(s)
            if url is None:
                log.warning("ignoring seed %r: not an http(s) URL", s)
                continue
            c.scope.add_seed(url)
            ctx.policy.add_seed(url)
            c.allow_host(hostname(url))
            if ctx.peers.is_foreign(url):
                continue  # the process owning its host queues it
            ctx.traps.note(url)  # seeds are never dropped as traps, but they count
            reqs.append(Request(url=url, depth=0))
        if reqs:
            await c.frontier.add(reqs)

    async def robots_fetch(self, url: str) -> Response:
        """Fetch a robots.txt (no redirects followed here); archived to WARC, not to pages.

        A file larger than 512 KiB is cut there, not refused (RFC 9309 §2.5: its first
        500 KiB are parsed; the WARC record says ``WARC-Truncated: length``).
        """
        c = self.ctx.components
        async with self._ip_slot(url):  # a robots.txt request counts for --ip-concurrency too
            resp = await logged(c.fetcher, 1).fetch(
                Request(url=url), max_body_bytes=512 * 1024, truncate=True
            )
        self._host_last_end[host_key(url)] = self.ctx.clock()
        if c.warc is not None:
            c.warc.write_exchange(
                url, resp, ip=resp.peer_ip, truncated="length" if resp.truncated else None
            )
        return resp

    async def fetch_aside(self, url: str, max_body_bytes: int) -> Response | None:
        """GET a URL that is not a page of the crawl (a sitemap) after its host's politeness
        gap (``--delay``, robots.txt Crawl-delay, ``--ip-concurrency``), its body cut at
        ``max_body_bytes`` (bytes); archived to the WARC like robots.txt, no pages.jsonl
        record. None when the fetch failed (logged)."""
        c = self.ctx.components
        host = host_key(url)
        gap = self.gap_s(c.robots.crawl_delay(url))
        last = self._host_last_end.get(host)
        if last is not None and last + gap > self.ctx.clock():
            await asyncio.sleep(last + gap - self.ctx.clock())
        resp: Response | None = None
        try:
            async with self._ip_slot(url):
                resp = await c.fetcher.fetch(
                    Request(url=url), max_body_bytes=max_body_bytes, truncate=True
                )
        except FetchError as exc:
            log.info("%s: %s", url, exc)
        self._host_last_end[host] = self.ctx.clock()
        if resp is not None and c.warc is not None:
            c.warc.write_exchange(
                url, resp, ip=resp.peer_ip, truncated="length" if resp.truncated else None
            )
        return resp

    @contextlib.asynccontextmanager
    async def _ip_slot(self, url: str) -> AsyncIterator[None]:
        """Hold one of ``--ip-concurrency`` slots of the address ``url``'s host resolves to
        (over every process of a sharded crawl: :class:`skitter.sharding.IpSlots`)."""
        c = self.ctx.components
        sem: asyncio.Semaphore | None = None
        try:
            ips = await c.lookup(url)
        except Exception:
            ips = []
        if ips:
            sem = self._ip_sems.get(ips[0])
            if sem is None:
                sem = self._ip_sems[ips[0]] = asyncio.Semaphore(
                    self.ctx.settings.politeness.ip_concurrency
                )
        if sem is None:
            yield
            return
        shared = self.ctx.peers.ip_slots
        async with sem:
            if shared is None:
                yield
                return
            ip = ips[0]
            delay = 0.002
            while not await _maybe(shared.try_acquire(ip)):  # bounded by the others' requests
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)
            try:
                yield
            finally:
                await _maybe(shared.release(ip))

    def gap_s(self, crawl_delay_s: float | None) -> float:
        """Seconds between two requests to a host (``--delay``, its crawl-delay, the cap)."""
        p = self.ctx.settings.politeness
        jitter = random_wait_factor(p.random_wait)
        return next_allowed_at(0.0, p.delay_s, crawl_delay_s, p.max_crawl_delay_s, jitter)

    def log_gap(self, host: str, gap_s: float, crawl_delay_s: float | None) -> None:
        """Log (``skitter.politeness``, INFO) the wait before the next request to ``host``
        and its cause: ``--delay`` (with ``--random-wait``) or the robots.txt Crawl-delay."""
        if not politeness.isEnabledFor(logging.INFO):
            return
        p = self.ctx.settings.politeness
        if crawl_delay_s is not None and gap_s == min(crawl_delay_s, p.max_crawl_delay_s):
            capped = " (capped by --max-crawl-delay)" if crawl_delay_s > p.max_crawl_delay_s else ""
            cause = f"robots.txt Crawl-delay {crawl_delay_s:g} s{capped}"
        else:
            cause = f"--delay {p.delay_s:g} s" + (" with --random-wait" if p.random_wait else "")
        politeness.info("delay %s: next request in %.2f s (%s)", host, gap_s, cause)

    def log_backoff(self, host: str, url: str, wait_s: float, cause: str, attempts: int) -> None:
        """Log (``skitter.politeness``, INFO) a retry: its wait, cause and attempt."""
        politeness.info(
            "backoff %s: %s retried in %.2f s after %s (attempt %d failed)",
            host, url, wait_s, cause, attempts,
        )  # fmt: skip

    async def _pause(self, host: str, crawl_delay_s: float | None) -> None:
        """Count a request to ``host`` as ended now and wait its politeness gap."""
        self._host_last_end[host] = self.ctx.clock()
        await asyncio.sleep(self.gap_s(crawl_delay_s))

    async def process(self, lease: Lease) -> None:
        """Process one lease to its end: a record and an ack, or a retry (see module doc).

        Raises only what a bug raises (fetch errors are recorded or retried)."""
        c = self.ctx.components
        p = self.ctx.settings.politeness
        req = lease.request
        host = lease.host
        attempts = lease.attempts + 1
        crawl_delay: float | None = None
        policy = self.ctx.policy
        notes = self.ctx.robots_notes
        # the mode's shortcuts (link checking: a verdict reused, a host known dead)
        reused = policy.reused_record(req)
        if reused is not None:
            targets = policy.fragment_targets(reused.final_url)
            if c.anchors is not None and targets is not None:
                c.anchors.write(reused.final_url, targets[0], cut=targets[1])
            self.ctx.write_record(reused, host_key(req.requested_url))
            await c.frontier.ack(lease, not_before=self.ctx.clock())
            return
        failed = policy.failed_host(host)
        if failed is not None:
            await self.finish_error(lease, attempts, *failed, not_before=self.ctx.clock())
            return
        if not p.ignore_robots:
            # counted once per URL (below), not once per lease of it
            chk = await c.robots.check(req.url, count=False)
            crawl_delay = chk.crawl_delay_s
            self.ctx.hooks.observer.on_robots(host, chk.reason, crawl_delay)
            if not chk.allowed:
                if chk.reason == "unreachable":
                    kind = chk.error_kind
                    if kind is not None and policy.robots_failure_is_final(kind):
                        # the page could not be fetched either: record the real cause
                        # (a dead host is "dns", not a robots.txt verdict; C27, SSRF)
                        c.robots.tally(req.url, False)
                        await self.finish_error(
                            lease,
                            attempts,
                            kind,
                            f"{chk.error} (robots.txt and page not fetched)",
                            not_before=self.ctx.clock(),
                        )
                        return
                    if attempts <= p.retries:
                        # no response at all (connect, TLS, timeout): the --retries backoff;
                        # a 5xx robots.txt: the --robots-retry wait (RFC 9309 §2.3.1.4)
                        wait = backoff_s(attempts) if kind else p.robots_retry_s
                        self.log_backoff(host, req.url, wait, "robots.txt unreachable", attempts)
                        await c.frontier.retry(lease, not_before=self.ctx.clock() + wait)
                        return
                    notes.note(notes.unreachable, origin(req.url), req.url)
                    c.robots.tally(req.url, False)
                    await self.finish_error(
                        lease,
                        attempts,
                        "robots_unreachable",
                        f"robots.txt unreachable ({chk.error or '5xx or network error'}) "
                        f"after {attempts} attempts: disallow all (RFC 9309 §2.3.1.4)",
                        not_before=self.ctx.clock(),
                    )
                    return
                c.robots.tally(req.url, False)
                self.ctx.stats.robots_disallowed += 1
                self.ctx.stats.by_verdict["excluded"] += 1
                notes.note(notes.blocked, origin(req.url), req.url)
                if req.redirects:
                    # the chain ends at a hop whose target robots.txt forbids
                    await self.finish_redirect_stop(
                        lease, attempts, f"redirect target {req.url} disallowed by robots.txt"
                    )
                else:
                    await c.frontier.ack(lease, not_before=self.ctx.clock())
                return
            # a robots.txt fetched just now counts as a request to the host: keep the gap
            # by handing the lease back to the frontier's schedule (no attempt counted)
            last = self._host_last_end.get(host)
            if last is not None:
                ready_at = last + self.gap_s(crawl_delay)
                if ready_at > self.ctx.clock():
                    await c.frontier.retry(lease, not_before=ready_at, count_attempt=False)
                    return
        started = time.perf_counter()
        try:
            async with self._ip_slot(req.url):
                resp = await policy.fetch(
                    logged(self._page_fetcher, attempts),
                    req,
                    host,
                    functools.partial(self._pause, host, crawl_delay),
                )
        except FetchError as exc:
            end = self.ctx.clock()
            self._host_last_end[host] = end
            d = retry_decision(None, exc.kind, attempts, p.retries, None, p.max_retry_after_s)
            if d.retry:
                wait = max(d.wait_s, self.gap_s(crawl_delay))
                self.log_backoff(host, req.url, wait, exc.kind, attempts)
                await c.frontier.retry(lease, not_before=end + wait)
                return
            policy.fetch_failed(host, exc.kind, exc.detail)
            self._tally_allowed(req.url)
            await self.finish_error(
                lease,
                attempts,
                exc.kind,
                exc.detail,
                not_before=end + self.gap_s(crawl_delay),
                elapsed_s=time.perf_counter() - started,
            )
            return
        end = self.ctx.clock()
        self._host_last_end[host] = end
        gap = self.gap_s(crawl_delay)
        self.log_gap(host, gap, crawl_delay)
        status = resp.status
        detail: str | None = resp.note  # e.g. a Content-Encoding that was not applied
        archive = c.warc is not None and not req.check_only and c.focus.archive(req.url, resp)
        if status == 429 or status >= 500:
            ra = parse_retry_after(resp.header("retry-after"), time.time())
            d = retry_decision(status, None, attempts, p.retries, ra, p.max_retry_after_s)
            if d.retry:
                if archive:
                    self._archive(req, resp, None)
                wait = max(d.wait_s, gap)
                cause = f"HTTP {status}" + (f", Retry-After {ra:g} s" if ra is not None else "")
                self.log_backoff(host, req.url, wait, cause, attempts)
                await c.frontier.retry(lease, not_before=end + wait)
                return
            if ra is not None and ra > 0:
                gap = max(gap, min(ra, p.max_retry_after_s))
            detail = _no_retry_detail(status, d.reason, attempts, ra, p.max_retry_after_s)
        # the pipeline's hand-over: the response is final and read, so the host's slot goes
        # back to the frontier (its next request may start after the gap) while this page
        # is judged, archived, parsed and recorded; the lease is acked only after that
        with contextlib.suppress(FrontierError):  # a lease lost meanwhile: its ack says so
            await c.frontier.release(lease, not_before=end + gap)
        self._on_release()
        verdict = self._judge_content(req, host, resp)  # a dropped (empty) body: no verdict
        if archive:
            self._archive(req, resp, verdict)
        self._tally_allowed(req.url)
        if 300 <= status < 400 and resp.header("location") is not None:
            await follow_redirect(self, lease, resp, attempts, end + gap)
            return
        if status in REDIRECT_STATUSES:
            detail = NO_LOCATION
        await self.finish_response(lease, resp, attempts, end + gap, detail=detail, verdict=verdict)

    def _tally_allowed(self, url: str) -> None:
        """Count robots.txt's "allowed" for ``url`` once its fetch is final (recorded, or a
        redirect hop handed on): with the record, so a checkpoint's counts and the records
        before it agree, and :func:`skitter.recovery.reconcile` counts the ones past it."""
        if not self.ctx.settings.politeness.ignore_robots:
            self.ctx.components.robots.tally(url, True)

    def _judge_content(self, req: Request, host: str, resp: Response) -> PageVerdict | None:
        """The duplicate stage's verdict on a 2xx page (None when dedup is off or the
        response is not a page's 2xx)."""
        dups = self.ctx.dups
        if dups is None or not dups.enabled or req.check_only or not 200 <= resp.status < 300:
            return None
        ct = resp.header("content-type")
        return dups.examine(req.url, host, resp.body, resp.raw_body, ct, _is_html(resp))

    def _archive(self, req: Request, resp: Response, verdict: PageVerdict | None) -> None:
        """Write the exchange to the WARC: a revisit for an identical payload (dedup) or a
        304 of a recrawl, else the response."""
        c = self.ctx.components
        assert c.warc is not None
        revisit = verdict.revisit if verdict is not None else None
        if resp.status == 304 and self.ctx.recrawl is not None:
            revisit = self.ctx.recrawl.not_modified(req.url)
        written = c.warc.write_exchange(
            req.url,
            resp,
            ip=resp.peer_ip,
            revisit=revisit,
            payload_sha1=verdict.payload_sha1 or None if verdict is not None else None,
        )
        dups = self.ctx.dups
        if dups is not None and verdict is not None:
            if revisit is not None:
                dups.revisits += 1
            else:
                dups.captured(req.url, verdict, written.date)

    async def finish_redirect_stop(self, lease: Lease, attempts: int, detail: str | None) -> None:
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
        self.ctx.write_record(rec, host_key(req.requested_url))
        await self.ctx.components.frontier.ack(lease, not_before=self.ctx.clock())

    async def finish_error(
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
        self.ctx.write_record(rec, host_key(req.requested_url))
        await self.ctx.components.frontier.ack(lease, not_before=not_before)
        if self.ctx.hooks.on_error is not None:
            await call_hook(self.ctx.hooks, "on_error", rec.url, rec)

    async def finish_response(
        self,
        lease: Lease,
        resp: Response,
        attempts: int,
        not_before: float,
        *,
        extra_rows: Sequence[LinkRow] = (),
        detail: str | None = None,
        verdict: PageVerdict | None = None,
    ) -> None:
        """Record an HTTP response as the lease's final answer: an HTML body (not of a
        ``check_only`` request, not a 3xx) is parsed and its links decided and queued (a
        duplicate page's links, and page links under ``--sitemaps only``, are recorded,
        not queued; a recrawl's 304 brings the previous links of the page); then the rows
        (``extra_rows`` first) and the record are written, the lease acked (``not_before``:
        the host's next slot, seconds) and ``on_page`` called."""
        c = self.ctx.components
        req = lease.request
        page: Page | None = None
        # links.tsv rows as their 7 fields (see format_rows): no LinkRow per link
        rows: list[Sequence[Any]] = [r.fields() for r in extra_rows]
        decisions: Counter[str] = Counter(r.decision for r in extra_rows)
        if (
            resp.body
            and not req.check_only
            and self.ctx.policy.parses_pages
            and _is_html(resp)
            and not (300 <= resp.status < 400)
        ):
            page = await self.parse.parse(
                resp.body, req.url, resp.header("content-type"), _robots_header_values(resp)
            )
            if verdict is not None and verdict.duplicate is not None:
                new_rows, new_decisions = rows_as(req.url, page, Decision.DUPLICATE.value)
            elif self.ctx.quality.sitemaps == "only":  # sitemap entries only
                new_rows, new_decisions = rows_as(req.url, page, Decision.SCOPE.value)
            else:
                new_rows, new_decisions = await decide_links(self.ctx, req, page)
            rows.extend(new_rows)
            decisions.update(new_decisions)
        elif resp.status == 304 and self.ctx.recrawl is not None and not req.check_only:
            # unchanged: its previous links are still the page's links, and are followed
            new_rows, new_decisions = await decide_links(
                self.ctx, req, self.ctx.recrawl.previous_page(req.url)
            )
            rows.extend(new_rows)
            decisions.update(new_decisions)
        # the focus port counts and saves the response (before its record: crash-safe)
        dropped = c.focus.outcome(req, resp, self.ctx.stats.by_focus)
        etag, last_modified = resp.header("etag"), resp.header("last-modified")
        rec = PageRecord(
            url=req.requested_url,
            final_url=req.url,
            status=resp.status,
            depth=req.depth,
            content_type=resp.content_type,
            bytes=len(resp.body),
            sha1=verdict.sha1 if verdict is not None else hashlib.sha1(resp.body).hexdigest(),
            fetched_at=iso_utc(time.time()),
            elapsed_s=resp.elapsed_s,
            attempts=attempts,
            redirects=list(req.redirects),
            error=dropped[0] if dropped else None,
            error_detail=dropped[1] if dropped else detail,
            duplicate=dup.kind if (dup := verdict and verdict.duplicate) else None,
            duplicate_of=dup.of if dup else None,
            simhash=verdict.simhash if verdict is not None else None,
            etag=etag,
            last_modified=last_modified,
        )
        # no await between these writes: the page's rows and record land together
        if c.anchors is not None and page is not None:
            c.anchors.write(req.url, page.ids)
        elif c.anchors is not None and req.check_only:
            targets = self.ctx.policy.fragment_targets(req.url)  # an external page's ids
            if targets is not None:
                c.anchors.write(req.url, targets[0], cut=targets[1])
        if rows:
            c.links.write_text(format_rows(rows))
            self.ctx.stats.count_decisions(decisions)
        self.ctx.write_record(rec, host_key(req.requested_url))
        await c.frontier.ack(
            lease,
            not_before=not_before,
            status=resp.status,
            etag=etag,
            last_modified=last_modified,
        )
        if self.ctx.hooks.on_page is not None:
            await call_hook(self.ctx.hooks, "on_page", rec.url, rec, resp, page)


T = TypeVar("T")


async def _maybe(value: T | Awaitable[T]) -> T:
    """``value``, awaited first if it is awaitable (shared slots in Redis are async)."""
    if inspect.isawaitable(value):
        return await value
    return value
