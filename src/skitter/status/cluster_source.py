"""The status source of a whole Redis crawl, read from what its workers publish.

:class:`ClusterSource` is what ``--status-port`` serves on a worker of a Redis crawl
(``skitter crawl --frontier redis://...`` or ``skitter worker``): the record totals and
breakdowns summed over every worker run's snapshot (live, finished or dead: see
:mod:`skitter.status.cluster`), the frontier figures (queued, leased, active hosts) from the
Redis frontier, hosts in backoff counted in Redis, and the per-host table kept in memory and
refreshed with only the hosts changed since the last read (one ``ZRANGEBYSCORE`` on a
change index, then ``HMGET`` of those hosts).

The first read of the table (100,000 hosts: about a second of CPU) runs in the background
from :meth:`ClusterSource.start` (``HSCAN`` in batches of :data:`LOAD_CHUNK`): meanwhile
``/api/hosts`` answers at once from the rows read so far with ``complete: false`` and
``hosts_loading: {"read": N, "of": M}``.

``/metrics`` on a worker exports THIS worker run's own counters and histogram (so that
Prometheus's ``sum()`` over the scraped workers counts every fetch once) and the frontier
gauges of the cluster (the same value on every worker: aggregate them with ``max()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from skitter.status.cluster import ClusterPublisher, stat_key
from skitter.status.server import check_page, host_page, page_of, sort_hosts
from skitter.status.source import HostRow, LiveState, Totals

__all__ = ["ClusterSource", "ClusterStatus", "row_of"]

log = logging.getLogger("skitter")

#: Hosts read per ``HMGET`` while catching up with the change index.
CHUNK = 2000

#: Hosts asked per ``HSCAN`` while reading the whole table the first time (one batch is
#: parsed without yielding the event loop: about 50 ms of CPU).
LOAD_CHUNK = 5000

_SUMMED = ("fetched", "ok", "errors", "bytes", "robots_disallowed")
_BREAKDOWNS = ("by_status_class", "by_status", "by_error", "by_content_type")


def row_of(host: str, raw: str, skew_s: float) -> HostRow:
    """A :class:`HostRow` from its ``{CRAWL}:stat:h`` JSON (see :mod:`skitter.status.cluster`);
    ``skew_s`` = Redis clock minus ours (the stored backoff time is Redis's)."""
    r = json.loads(raw)
    added, fetched, errors, nbytes, fetch_s, disallowed = (r[k] for k in range(6))
    until = float(r[8])
    return HostRow(
        host,
        queued=max(0, int(added) - int(fetched) - int(disallowed)),
        fetched=int(fetched),
        errors=int(errors),
        bytes=int(nbytes),
        avg_s=float(fetch_s) / fetched if fetched else 0.0,
        delay_s=float(r[6]),
        delay_cause=str(r[7]),
        backoff_until=until - skew_s if until > 0 else None,
        robots=str(r[9]),
        robots_disallowed=int(disallowed),
        last_error=str(r[10]) or None,
    )


class ClusterSource:
    """A :class:`~skitter.status.source.StatusSource` covering every worker of crawl
    ``crawl_id`` (see the module docstring).

    Args:
        client: a ``redis.asyncio`` client with ``decode_responses=True``.
        crawl_id: the crawl's key prefix.
        live: this worker run's own live state (its metrics are ``/metrics``' counters;
            its frontier counts callable, when attached, gives queued/leased/hosts); None
            reads the frontier counts from Redis directly (a reader that is no worker).
        target: records the crawl ends at (--max-pages), when known.
        load_chunk: hosts asked per ``HSCAN`` of the first read (a hint to Redis).

    Attributes:
        after_batch: None, or an async callable awaited with the hosts of each batch of the
            first read once they are in the table (a hook: a test holds the reader there).

    Raises (from the methods): ``redis.exceptions.RedisError`` when Redis fails.
    """

    def __init__(
        self,
        client: Any,
        crawl_id: str,
        live: LiveState | None = None,
        *,
        target: int | None = None,
        load_chunk: int = LOAD_CHUNK,
    ) -> None:
        self.client = client
        self.crawl_id = crawl_id
        self.live = live if live is not None else LiveState()
        self._own_counts = live is not None
        self.target = target
        self._rows: dict[str, HostRow] = {}
        self._ver = 0.0
        self._sorted: tuple[tuple[str, str, str, int], list[HostRow]] | None = None
        self._gen = 0  # bumped whenever rows change: the sorted cache's validity
        self._lock = asyncio.Lock()
        self._counts: Callable[[], Awaitable[tuple[int, int, int]]] | None = None
        self.load_chunk = load_chunk
        self.after_batch: Callable[[list[str]], Awaitable[None]] | None = None
        self._loaded = False  # the whole table has been read once
        self._background = False  # start() called: the first read runs in a task
        self._load_task: asyncio.Task[int] | None = None
        self._expected = 0  # hosts in the table when the first read began

    async def _frontier_counts(self) -> tuple[int, int, int]:
        counts = self.live._counts if self._own_counts else None
        if counts is not None:
            return await counts()
        if self._counts is None:
            from skitter.frontier.redis import RedisFrontier

            frontier = await RedisFrontier.open(self.client, self.crawl_id)

            async def read() -> tuple[int, int, int]:
                c = await frontier.counts()
                return (c.pending, c.leased, c.hosts)

            self._counts = read
        return await self._counts()

    async def _skew(self) -> tuple[float, float]:
        """(Redis server time, Redis minus our clock), seconds."""
        sec, usec = await self.client.time()
        server = float(sec) + float(usec) / 1e6
        return server, server - self.live._clock()

    # ------------------------------------------------------------------ StatusSource

    async def totals(self) -> Totals:
        """See :meth:`~skitter.status.source.StatusSource.totals`: records summed over every
        worker run, frontier counts of the crawl, hosts in backoff now."""
        queued, leased, hosts = await self._frontier_counts()
        server, _ = await self._skew()
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(stat_key(self.crawl_id, "w"))
        pipe.zcount(stat_key(self.crawl_id, "bo"), f"({server!r}", "+inf")
        pipe.hget(f"{{{self.crawl_id}}}:meta", "created")
        snaps, backoff, created = await pipe.execute()
        runs = sorted(snaps)
        pipe = self.client.pipeline(transaction=False)
        for run in runs:
            pipe.exists(stat_key(self.crawl_id, f"live:{run}"))
        alive = await pipe.execute() if runs else []
        t = Totals(
            state=self.live.state,
            queued=queued,
            in_flight=leased,
            hosts=hosts,
            hosts_in_backoff=int(backoff),
            elapsed_s=max(0.0, server - float(created)) if created else 0.0,
            target=self.target,
            workers=sum(1 for a in alive if a),
            worker_runs=len(runs),
        )
        breakdowns: dict[str, Counter[str]] = {k: Counter() for k in _BREAKDOWNS}
        for run in runs:
            snap = json.loads(snaps[run]).get("totals", {})
            for k in _SUMMED:
                setattr(t, k, getattr(t, k) + int(snap.get(k, 0)))
            for k in _BREAKDOWNS:
                breakdowns[k].update({str(a): int(n) for a, n in snap.get(k, {}).items()})
        for k in _BREAKDOWNS:
            setattr(t, k, dict(breakdowns[k]))
        return t

    def hosts(self) -> Sequence[HostRow]:
        """See :meth:`~skitter.status.source.StatusSource.hosts`: the rows as of the last
        :meth:`refresh` (the server calls :meth:`host_page`, which refreshes first)."""
        return list(self._rows.values())

    @property
    def complete(self) -> bool:
        """True once the whole host table has been read (later reads are changes only)."""
        return self._loaded

    def start(self) -> None:
        """Begin the first read of the host table in a background task (call with the event
        loop running; again after a failed read to retry it). Until it ends,
        :meth:`host_page` answers from the rows read so far."""
        self._background = True
        if self._loaded or (self._load_task is not None and not self._load_task.done()):
            return
        self._load_task = asyncio.create_task(self._load_bg(), name="status-hosts-load")

    async def wait_loaded(self) -> int:
        """Wait for the background first read (see :meth:`start`); returns the rows it read
        (0 when it failed: then :attr:`complete` stays false)."""
        if self._load_task is None:
            return 0
        return await asyncio.shield(self._load_task)

    async def stop(self) -> None:
        """Cancel a background first read still running (see :meth:`start`)."""
        task, self._load_task = self._load_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _load_bg(self) -> int:
        try:
            async with self._lock:
                return 0 if self._loaded else await self._load()
        except Exception as exc:  # a Redis error: logged; the next host_page retries
            log.warning("status: reading the host table from Redis failed: %s", exc)
            return 0

    async def _load(self) -> int:
        """Read every host row (``HSCAN`` batches, yielding between them), then move the
        change cursor to the version read BEFORE the scan: a host written during the scan
        has a later version, so the next :meth:`refresh` reads it again. Returns the rows
        read (a row may come twice: the table is a dict)."""
        _, skew = await self._skew()
        pipe = self.client.pipeline(transaction=False)
        pipe.get(stat_key(self.crawl_id, "ver"))
        pipe.hlen(stat_key(self.crawl_id, "h"))
        ver, self._expected = await pipe.execute()
        key, cursor, n = stat_key(self.crawl_id, "h"), 0, 0
        while True:  # bounded: a full HSCAN iteration ends with cursor 0
            cursor, got = await self.client.hscan(key, cursor, count=self.load_chunk)
            for host, raw in got.items():
                self._rows[host] = row_of(host, raw, skew)
            n += len(got)
            self._gen += 1
            if self.after_batch is not None:
                await self.after_batch(list(got))
            if int(cursor) == 0:
                break
        self._ver = float(ver or 0)
        self._loaded = True
        return n

    async def refresh(self) -> int:
        """Read the hosts changed since the last call (all of them the first time, or wait
        for the background first read: see :meth:`start`); returns how many were read."""
        if not self._loaded and self._load_task is not None and not self._load_task.done():
            n = await self.wait_loaded()
            if self._loaded:
                return n
        async with self._lock:
            if not self._loaded:
                return await self._load()
            _, skew = await self._skew()
            chg, rows = stat_key(self.crawl_id, "chg"), stat_key(self.crawl_id, "h")
            n = 0
            while True:  # bounded: each round moves the cursor past CHUNK versions
                got = await self.client.zrangebyscore(
                    chg, f"({self._ver!r}", "+inf", start=0, num=CHUNK, withscores=True
                )
                if not got:
                    return n
                hosts = [h for h, _ in got]
                raws = await self.client.hmget(rows, hosts)
                for host, raw in zip(hosts, raws, strict=True):
                    if raw is not None:
                        self._rows[host] = row_of(host, raw, skew)
                n += len(hosts)
                self._gen += 1
                self._ver = float(got[-1][1])  # versions are unique: a cursor
                if len(got) < CHUNK:
                    return n

    async def host_page(
        self, sort: str, order: str, q: str, page: int, per_page: int
    ) -> dict[str, Any]:
        """One page of the host table (:func:`skitter.status.server.host_page`), after
        :meth:`refresh`; while the background first read runs (:meth:`start`), at once
        from the rows read so far, with ``complete`` false and ``hosts_loading``.

        Raises:
            skitter.status.server.BadQuery: a bad sort, order, page or per_page.
        """
        check_page(page, per_page)
        loading: dict[str, int] | None = None
        if self._loaded or not self._background:
            await self.refresh()
        if not self._loaded:  # reading in the background (restarted if it failed)
            self.start()
            read = len(self._rows)
            loading = {"read": read, "of": max(read, int(self._expected))}
        key = (sort, order, q, self._gen)
        if self._sorted is None or self._sorted[0] != key:
            # sorted once per change of the rows or of the query; its pages are slices
            self._sorted = (key, sort_hosts(list(self._rows.values()), sort, order, q))
        rows = self._sorted[1]
        return page_of(rows, len(self._rows), sort, order, q, page, per_page, loading)

    async def metrics_text(self) -> str:
        """See :meth:`~skitter.status.source.StatusSource.metrics_text`: this worker run's
        counters, the cluster's frontier gauges (see the module docstring)."""
        t = await self.totals()
        self.live.metrics.set_frontier(t.queued, t.in_flight, t.hosts, t.hosts_in_backoff)
        return self.live.metrics.text()


class ClusterStatus:
    """The status parts of one worker of a Redis crawl: before :meth:`bind` it shows the
    worker's own :class:`LiveState`; after, the :class:`ClusterSource` of the whole crawl,
    while a :class:`~skitter.status.cluster.ClusterPublisher` sends the worker's figures.

    Args:
        live: the worker's live state (the crawl's observer).
        target: records the crawl ends at (--max-pages), when known.
        interval_s: seconds between two published batches.
    """

    def __init__(self, live: LiveState, target: int | None = None, interval_s: float = 1.0):
        self.live = live
        self.target = target
        self.interval_s = interval_s
        self.source: ClusterSource | None = None
        self.publisher: ClusterPublisher | None = None

    def bind(self, frontier: Any) -> None:
        """Start publishing to the crawl of ``frontier`` (a
        :class:`~skitter.frontier.redis_crawl.SharedCrawlFrontier`, possibly wrapped: its
        ``inner`` chain is followed) and serve the whole crawl from then on. Another
        frontier (none of a Redis crawl's) leaves the worker's own figures shown.
        """
        from skitter.frontier.redis_crawl import SharedCrawlFrontier

        for _ in range(8):
            if isinstance(frontier, SharedCrawlFrontier):
                break
            frontier = getattr(frontier, "inner", frontier)
        if not isinstance(frontier, SharedCrawlFrontier):
            log.warning("the status page shows this process only (no Redis crawl frontier)")
            return
        client, crawl_id = frontier.client, frontier.crawl_id
        self.source = ClusterSource(client, crawl_id, self.live, target=self.target)
        self.source.start()  # the host table read in the background: the page answers now
        self.publisher = ClusterPublisher(
            self.live, client, crawl_id, frontier.worker_id, interval_s=self.interval_s
        )
        self.publisher.start()

    async def close(self, state: str) -> None:
        """Publish the final snapshot (``state``: finished or stopped) and stop."""
        if self.source is not None:
            await self.source.stop()
        if self.publisher is not None:
            await self.publisher.close(state)

    async def totals(self) -> Totals:
        """See :meth:`~skitter.status.source.StatusSource.totals`."""
        return await (self.source or self.live).totals()

    def hosts(self) -> Sequence[HostRow]:
        """See :meth:`~skitter.status.source.StatusSource.hosts`."""
        return (self.source or self.live).hosts()

    async def host_page(
        self, sort: str, order: str, q: str, page: int, per_page: int
    ) -> dict[str, Any]:
        """See :meth:`ClusterSource.host_page` (the worker's own rows before :meth:`bind`)."""
        if self.source is not None:
            return await self.source.host_page(sort, order, q, page, per_page)
        return host_page(list(self.live.hosts()), sort, order, q, page, per_page)

    async def metrics_text(self) -> str:
        """See :meth:`ClusterSource.metrics_text`."""
        return await (self.source or self.live).metrics_text()
