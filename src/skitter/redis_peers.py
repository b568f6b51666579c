"""The peers of a worker of a Redis crawl (:mod:`skitter.peers` port): ``--ip-concurrency``
counted over every worker, in Redis.

Everything else a Redis crawl shares (the frontier, the page budget, the operator's state,
robots.txt) goes through :class:`skitter.frontier.redis_crawl.SharedCrawlFrontier`; the crawl
loop needs no branch for it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from skitter import distributed as dist
from skitter.peers import Alone, LoopControl

if TYPE_CHECKING:
    from skitter.context import CrawlContext

__all__ = ["RedisIpSlots", "RedisPeers"]


class RedisIpSlots:
    """``limit`` request slots per IP address over every worker of crawl ``crawl_id``
    (:func:`skitter.distributed.acquire_ip`); a slot not given back (a killed worker) is
    freed ``ttl_s`` seconds after it was taken.

    ``call`` runs each Redis exchange (the frontier's :meth:`RedisFrontier.call`: retried
    while Redis is unreachable, up to ``--redis-wait``).

    Raises (from the methods): :class:`skitter.errors.FrontierError` when Redis fails.
    """

    def __init__(
        self,
        client: Any,
        crawl_id: str,
        limit: int,
        ttl_s: float,
        call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
    ) -> None:
        self._r = client
        self._call = call
        self.crawl_id = crawl_id
        self.limit = limit
        self.ttl_s = ttl_s
        self._mine: dict[str, list[str]] = {}  # ip -> holder ids this worker has

    async def try_acquire(self, ip: str) -> bool:
        """Take a slot on ``ip`` if fewer than ``limit`` are held crawl-wide."""
        holder = uuid.uuid4().hex

        async def acquire() -> bool:
            return await dist.acquire_ip(self._r, self.crawl_id, ip, self.limit, holder, self.ttl_s)

        if await self._call(acquire):
            self._mine.setdefault(ip, []).append(holder)
            return True
        return False

    async def release(self, ip: str) -> None:
        """Give back one of this worker's slots on ``ip``."""
        held = self._mine.get(ip)
        if held:
            holder = held.pop()
            if not held:
                del self._mine[ip]

            async def give() -> None:
                await dist.release_ip(self._r, self.crawl_id, ip, holder)

            await self._call(give)


class RedisPeers(Alone):
    """A worker of a Redis crawl: alone for routing and the end (the frontier decides), but
    its ``--ip-concurrency`` slots are shared with every worker (set on :meth:`open`)."""

    def open(self, ctx: CrawlContext, loop: LoopControl) -> None:
        """Take the Redis client of the crawl's frontier for the shared IP slots; stamp
        each pages.jsonl record with its lease's fencing token."""
        from skitter.frontier.redis_crawl import SharedCrawlFrontier

        frontier: Any = ctx.components.frontier
        for _ in range(8):  # under wrappers (e.g. the observer's ObservedFrontier)
            if isinstance(frontier, SharedCrawlFrontier):
                break
            frontier = frontier.inner
        assert isinstance(frontier, SharedCrawlFrontier)
        ctx.components.pages.stamp = frontier.stamp_fence
        s = ctx.settings
        self.ip_slots = RedisIpSlots(
            frontier.client,
            frontier.crawl_id,
            s.politeness.ip_concurrency,
            ttl_s=s.fetch.timeout_s + 30.0,
            call=frontier.inner.call,
        )
