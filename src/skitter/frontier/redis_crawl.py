"""One worker's view of a crawl kept in Redis: a :class:`Frontier` that also obeys the crawl.

:class:`SharedCrawlFrontier` wraps a :class:`~skitter.frontier.redis.RedisFrontier` and
adds what every worker of the crawl must agree on, so the crawl loop needs no Redis branch:

* the operator's state (``skitter control``): ``paused`` -> :meth:`lease` hands out nothing
  and the crawl is not finished; ``stopped`` -> nothing is leased and, once this worker's
  leases are settled, :meth:`is_finished` is True (the worker ends; the crawl can resume);
* the crawl-wide ``--max-pages`` budget: each lease reserves one page in Redis; an ack
  with a 2xx status spends it (counted by the ack's own script first: exact across kills);
  a non-2xx status, a retry or a lost lease gives it back; the reservations of a worker
  whose heartbeat stopped (killed) come back once its leases have expired; a worker finds
  the budget spent for good only when no worker holds any;
* lease renewal: every ``lease_ttl_s / 3`` seconds the leases this worker holds are renewed
  (a frozen worker stops renewing, its leases expire and go to others; its late ack is then
  refused by the fencing token);
* a heartbeat (``skitter status`` counts live workers);
* the fencing token of each lease, stamped on the URL's pages.jsonl record
  (:meth:`stamp_fence`) so ``skitter merge`` keeps the page of the lease Redis accepted;
* the lease guard: no request of a lease starts within :attr:`margin_s` (a third of
  ``--lease-ttl``) of the lease's expiry: :meth:`before_request` renews it first, or gives
  it up when it was lost (:class:`LeaseGuardFetcher` calls it before every request).

The state, the heartbeat and the renewals run in one background task started by
:meth:`start` (real time: ``asyncio.sleep``); :meth:`refresh` does one round at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skitter import distributed as dist
from skitter.errors import FrontierError
from skitter.frontier.base import AddResult, FrontierCounts
from skitter.frontier.redis import RedisFrontier
from skitter.frontier.redis_seen import parse_seen
from skitter.models import Lease, Request, Response

if TYPE_CHECKING:
    from skitter.export.pages import PageRecord
    from skitter.fetch.base import Fetcher
    from skitter.settings import CrawlSettings

__all__ = ["WORKER_FILE", "LeaseGuardFetcher", "SharedCrawlFrontier", "open_worker_frontier"]

#: File of a worker's output folder holding its worker id (kept across resumes).
WORKER_FILE = "worker.json"

log = logging.getLogger("skitter")


class SharedCrawlFrontier:
    """A worker's frontier of crawl ``crawl_id`` (see the module docstring).

    Args:
        inner: the crawl's :class:`RedisFrontier` (opened with a ``clock``).
        client: the Redis client ``inner`` uses.
        crawl_id: the crawl's key prefix.
        worker_id: this worker's id (:func:`skitter.distributed.heartbeat`).
        max_pages: crawl-wide budget of 2xx pages, or None.
        poll_s: seconds between two background rounds (state, heartbeat, renewals).
        clock: the caller's clock (the one the crawl loop passes as ``now``).
        max_hold_s: a lease held longer than this (seconds) is no longer renewed: its task
            ended without settling it (an internal error), so it expires and goes to
            another worker instead of being held for ever.
    """

    def __init__(
        self,
        inner: RedisFrontier,
        client: Any,
        crawl_id: str,
        *,
        worker_id: int,
        max_pages: int | None = None,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        max_hold_s: float = 3600.0,
    ) -> None:
        self.inner = inner
        self._r = client
        self.crawl_id = crawl_id
        self.worker_id = worker_id
        self.max_pages = max_pages
        self.poll_s = poll_s
        self._clock = clock
        self.state = "running"
        self._budget_out = False  # spent for good
        self._budget_wait = False  # none left now, but others hold reservations
        self._held: dict[int, Lease] = {}
        self._held_since: dict[int, float] = {}  # token -> time.monotonic() when leased
        self.max_hold_s = max_hold_s
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._last_renew = 0.0
        #: leases this worker lost (expired and handed out again) while it held them
        self.lost = 0
        # requested URL -> its lease, until the lease is acked/retried (kept even once the
        # lease is lost: the late record still carries its token; the guard refuses it)
        self._open: dict[str, Lease] = {}

    @property
    def client(self) -> Any:
        """The Redis client (shared with the frontier)."""
        return self._r

    @property
    def host_concurrency(self) -> int:
        """Requests of one host leased at once (crawl-wide)."""
        return self.inner.host_concurrency

    async def start(self) -> None:
        """Read the crawl's state once, then keep it, the heartbeat and renewals going."""
        await self.refresh()
        if self._task is None:
            self._task = asyncio.create_task(self._background())

    async def _background(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.poll_s)
            if self._stop.is_set():
                return
            try:
                await self.refresh()
            except FrontierError as e:  # Redis gone past --redis-wait: the loop finds out
                log.warning("%s", e)

    async def refresh(self) -> None:
        """One round: read the state, beat the heart, renew leases due for it."""
        state = await self.inner.call(self._read_state)
        self.state = state or "stopped"  # a deleted crawl stops its workers
        if state is not None:  # (and leaves no heartbeat key behind)
            await self.inner.call(self._beat)
        now = time.monotonic()
        if now - self._last_renew >= self.inner.lease_ttl_s / 3:
            self._last_renew = now
            await self.renew_held()

    async def _read_state(self) -> str | None:
        return await dist.crawl_state(self._r, self.crawl_id)

    async def _beat(self) -> int:
        return await dist.heartbeat(self._r, self.crawl_id, self.worker_id)

    async def renew_held(self) -> None:
        """Renew every lease this worker holds; a lease already handed out again is
        dropped (counted in :attr:`lost`; its ack will be refused)."""
        now = time.monotonic()
        for token, lease in list(self._held.items()):
            if now - self._held_since.get(token, now) > self.max_hold_s:
                # its task died without settling it (an internal error): let it expire
                self._held.pop(token, None)
                self._held_since.pop(token, None)
                self.lost += 1
                log.warning("lease of %s held too long: left to expire", lease.request.url)
                await self._give_back()
                continue
            try:
                self._keep(await self.inner.renew(lease, self._clock()))
            except FrontierError:
                self._held_since.pop(token, None)
                if self._held.pop(token, None) is not None:
                    self.lost += 1
                    log.warning(
                        "lease of %s expired and went to another worker (token %d)",
                        lease.request.url,
                        token,
                    )
                    await self._give_back()

    async def _give_back(self) -> None:
        if self.max_pages is not None:
            await self.inner.call(self._decr)

    async def _decr(self) -> None:
        await dist.give_back_pages(self._r, self.crawl_id, self.worker_id)

    async def _spend(self, shard: int, count: int) -> None:
        await dist.spend_pages(self._r, self.crawl_id, self.worker_id, shard, count)

    @property
    def dead_after_s(self) -> float:
        """Seconds of silence (no heartbeat) after which a worker's page reservations
        return to the budget: twice its leases' life plus 10 s (a worker only slow, on a
        loaded machine, is not taken for dead: a late page of such a worker, acked
        because nobody reclaimed its lease, would be counted beyond ``--max-pages``)."""
        return 2 * self.inner.lease_ttl_s + 10.0

    # -- the Frontier protocol ------------------------------------------------------------

    async def add(self, requests: Sequence[Request], *, force: bool = False) -> AddResult:
        """See :meth:`RedisFrontier.add`."""
        return await self.inner.add(requests, force=force)

    async def lease(self, now: float) -> Lease | None:
        """A lease, or None while the crawl is paused/stopped or its page budget is spent."""
        if self.state != "running" or self._budget_out:
            return None
        if self.max_pages is not None:
            taken = await self.inner.call(self._take)
            self._budget_wait = taken == 0
            if taken <= 0:
                self._budget_out = taken < 0
                return None
        lease = await self.inner.lease(now)
        if lease is None:
            await self._give_back()
            return None
        self._held[lease.token] = lease
        self._held_since[lease.token] = time.monotonic()
        self._open[lease.request.requested_url] = lease
        return lease

    def stamp_fence(self, rec: PageRecord) -> None:
        """Set ``rec.fence`` to the token of the lease its URL is held under (the
        :attr:`PagesWriter.stamp` of a Redis worker); left None for a URL not leased here."""
        lease = self._open.get(rec.url)
        rec.fence = lease.token if lease is not None else None

    def _settled(self, lease: Lease) -> None:
        held = self._open.get(lease.request.requested_url)
        if held is not None and held.token == lease.token:
            del self._open[lease.request.requested_url]

    def _keep(self, lease: Lease) -> None:
        """Keep a renewed ``lease`` (its new expiry) where the old one was."""
        if lease.token in self._held:
            self._held[lease.token] = lease
        held = self._open.get(lease.request.requested_url)
        if held is not None and held.token == lease.token:
            self._open[lease.request.requested_url] = lease

    @property
    def margin_s(self) -> float:
        """Seconds before a lease's expiry within which no request of it starts (a third
        of the lease's life: renewals come every third, so a live worker never gets there)."""
        return self.inner.lease_ttl_s / 3

    async def before_request(self, request: Request) -> None:
        """Called before each request (each hop) of a lease's URL: a lease with less than
        :attr:`margin_s` seconds left is renewed first; one already lost (expired and
        handed to another worker, e.g. while this worker was frozen) is given up.

        A request of no lease of this worker (``requested_url`` not leased here) passes.

        Raises:
            FrontierError: the lease was lost (or Redis stayed unreachable): the request
                must not be made (the crawl loop logs it; the lease is another's now).
        """
        lease = self._open.get(request.requested_url)
        if lease is None:
            return
        if lease.token in self._held:
            lease = self._held[lease.token]
            if lease.expires_at - self._clock() >= self.margin_s:
                return
            try:
                self._keep(await self.inner.renew(lease, self._clock()))
                return
            except FrontierError:
                if self._held.pop(lease.token, None) is not None:
                    self._held_since.pop(lease.token, None)
                    self.lost += 1
                    await self._give_back()
        raise FrontierError(
            f"lease of {request.requested_url} lost before its request (token {lease.token}): "
            "not fetched"
        )

    async def _take(self) -> int:
        assert self.max_pages is not None
        return await dist.take_pages(
            self._r,
            self.crawl_id,
            self.max_pages,
            self.worker_id,
            self.dead_after_s,
            shards=self.inner.shards,
        )

    async def ack(
        self,
        lease: Lease,
        *,
        not_before: float,
        status: int | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> None:
        """See :meth:`RedisFrontier.ack`; a non-2xx outcome gives its page back.

        Raises:
            FrontierError: the lease was lost (its token is stale).
        """
        held = self._held.pop(lease.token, None)
        self._held_since.pop(lease.token, None)
        self._settled(lease)
        # a 2xx page of a reservation: the ack script counts it in the shard (the budget's
        # outbox), so a kill before the spend below loses nothing (settle_dead applies it)
        spends = held is not None and self.max_pages is not None
        spends = spends and status is not None and 200 <= status < 300
        try:
            if spends:
                shard, count = await self.inner.ack_spending(
                    lease, not_before=not_before, worker_id=self.worker_id
                )
            else:
                await self.inner.ack(
                    lease,
                    not_before=not_before,
                    status=status,
                    etag=etag,
                    last_modified=last_modified,
                )
        except FrontierError:
            if held is not None:  # lost before renew_held saw it: its page is not ours
                await self._give_back()
            raise
        if spends:
            await self.inner.call(lambda: self._spend(shard, count))
        elif held is not None and self.max_pages is not None:
            await self._give_back()

    async def retry(self, lease: Lease, *, not_before: float, count_attempt: bool = True) -> None:
        """See :meth:`RedisFrontier.retry`; the page reserved for the lease is given back."""
        held = self._held.pop(lease.token, None)
        self._held_since.pop(lease.token, None)
        self._settled(lease)
        try:
            await self.inner.retry(lease, not_before=not_before, count_attempt=count_attempt)
        finally:
            if held is not None:
                await self._give_back()

    async def release(self, lease: Lease, *, not_before: float) -> None:
        """See :meth:`RedisFrontier.release`."""
        await self.inner.release(lease, not_before=not_before)

    async def renew(self, lease: Lease, now: float) -> Lease:
        """See :meth:`RedisFrontier.renew`."""
        return await self.inner.renew(lease, now)

    async def delay_host(self, host: str, not_before: float) -> None:
        """See :meth:`RedisFrontier.delay_host`."""
        await self.inner.delay_host(host, not_before)

    async def next_ready_at(self) -> float | None:
        """See :meth:`RedisFrontier.next_ready_at` (None while paused or stopped; a poll
        later while the page budget waits for reservations of other workers)."""
        if self.state != "running" or self._budget_out:
            return None
        if self._budget_wait:
            return self._clock() + self.poll_s
        return await self.inner.next_ready_at()

    async def is_finished(self) -> bool:
        """True when the crawl is done (every shard empty twice), or, for this worker,
        when the crawl is stopped or its page budget is spent and it holds no lease."""
        if self.state == "paused":
            return False
        if (self.state == "stopped" or self._budget_out) and not self._held:
            return True
        if self._budget_wait:
            return False  # other workers' reserved pages may come back
        return await self.inner.is_finished()

    async def note_inlinks(self, links: Sequence[tuple[str, str]]) -> int:
        """See :meth:`RedisFrontier.note_inlinks`."""
        return await self.inner.note_inlinks(links)

    async def mark_done(self, urls: Sequence[str]) -> None:
        """See :meth:`RedisFrontier.mark_done`."""
        await self.inner.mark_done(urls)

    async def counts(self) -> FrontierCounts:
        """See :meth:`RedisFrontier.counts` (the whole crawl's)."""
        return await self.inner.counts()

    async def flush(self) -> None:
        """See :meth:`RedisFrontier.flush`."""
        await self.inner.flush()

    async def aclose(self) -> None:
        """Stop the background task, leave the worker list, close the frontier."""
        if self._task is not None:
            # ask the task to end; cancel it only if it is inside a Redis call that lasts
            self._stop.set()
            await asyncio.wait({self._task}, timeout=self.poll_s + 1)
            if not self._task.done():
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=5)
            self._task = None
        with contextlib.suppress(Exception):
            await self._r.zrem(dist.crawl_key(self.crawl_id, "workers"), str(self.worker_id))
        await self.inner.aclose()


class LeaseGuardFetcher:
    """A :class:`~skitter.fetch.base.Fetcher` that asks the worker's frontier before each
    request (:meth:`SharedCrawlFrontier.before_request`: renew a lease near its expiry,
    refuse one that was lost), then fetches with ``inner``.

    Raises (from :meth:`fetch`): :class:`FrontierError` for a lost lease (nothing sent),
    else what ``inner`` raises.
    """

    def __init__(self, inner: Fetcher, frontier: SharedCrawlFrontier) -> None:
        self.inner = inner
        self.frontier = frontier

    async def fetch(self, request: Request, **kwargs: Any) -> Response:
        """See :meth:`skitter.fetch.base.Fetcher.fetch`."""
        await self.frontier.before_request(request)
        return await self.inner.fetch(request, **kwargs)

    async def aclose(self) -> None:
        """Close ``inner``."""
        await self.inner.aclose()


async def open_worker_frontier(
    settings: CrawlSettings, *, warn: Callable[[str], None] | None = None
) -> SharedCrawlFrontier:
    """Connect to ``settings.frontier`` (a Redis URL), create the crawl (``skitter crawl``;
    on ``resume`` go on with it) or check it exists (``settings.join``: ``skitter worker``),
    register this worker (its id kept in ``out_dir/worker.json`` across resumes) and
    return its started :class:`SharedCrawlFrontier` (server clock, ``rotate`` order).

    Raises:
        ConfigError: bad URL or crawl id, unusable Redis, crawl exists (new crawl) or is
            missing (resume, join).
    """
    from skitter.state import atomic_write_json, settings_to_dict

    crawl_id = dist.check_crawl_id(settings.crawl_id)
    client = await dist.connect(settings.frontier, warn=warn)
    try:
        if settings.join:
            await dist.load_crawl(client, crawl_id)
        else:
            # what a joining worker inherits: its own --out and Redis URL replace these
            shared = replace(settings, frontier="redis", resume=False, quiet=False, join=False)
            await dist.create_crawl(
                client, crawl_id, settings_to_dict(shared), resume=settings.resume
            )
        path = Path(settings.out_dir) / WORKER_FILE
        wid: int | None = None
        if settings.resume and path.exists():
            wid = int(json.loads(path.read_text())["worker_id"])
        wid = await dist.heartbeat(client, crawl_id, wid)
        atomic_write_json(path, {"worker_id": wid, "crawl_id": crawl_id})
        inner = await RedisFrontier.open(
            client,
            crawl_id,
            host_concurrency=settings.politeness.host_concurrency,
            lease_ttl_s=settings.lease_ttl_s,
            clock=time.time,
            redis_wait_s=settings.redis_wait_s,
            warn=warn,
            own_client=True,
            order="rotate",
            seen_rate=parse_seen(settings.seen),
            seen_capacity=settings.seen_capacity,
        )
    except BaseException:
        await client.aclose()
        raise
    f = settings.fetch
    frontier = SharedCrawlFrontier(
        inner,
        client,
        crawl_id,
        worker_id=wid,
        max_pages=settings.max_pages,
        clock=time.time,
        poll_s=min(1.0, settings.lease_ttl_s / 6),
        # one lease covers robots.txt and a redirect chain, each hop at most timeout_s
        max_hold_s=(f.max_redirects + 3) * f.timeout_s + settings.lease_ttl_s,
    )
    await frontier.start()
    return frontier
