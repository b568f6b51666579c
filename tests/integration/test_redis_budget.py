"""The ``--max-pages`` budget of a Redis crawl stays exact when a worker is killed between
its 2xx ack and the spend of its reservation (the ack script's count in the shard is the
outbox; spends and the dead worker's settle apply it once). Real ``redis-server`` only."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from skitter import distributed as dist
from skitter.frontier.redis import RedisFrontier
from skitter.models import Request
from tests.redis_server import RedisServer

SHARDS = 4


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[Any]:
    c = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    yield c
    await c.aclose()


async def pages(client: Any, crawl: str) -> int:
    return int(await client.get(dist.crawl_key(crawl, "pages")) or 0)


async def test_acked_unspent_page_of_a_dead_worker_stays_spent(client: Any) -> None:
    """Worker 1 reserves 3 pages of --max-pages 5, acks two leases 2xx, spends only the
    first (killed before the second spend), and holds the third in flight. Once it is dead,
    worker 2 gets exactly 5 - 2 pages: the acked-but-unspent page is not returned."""
    crawl = f"t-{uuid.uuid4().hex[:10]}"
    await dist.create_crawl(client, crawl, {}, resume=False)
    f = await RedisFrontier.open(client, crawl, shards=SHARDS, buckets=4, order="rotate")
    await f.add([Request(f"https://h{i}.test/") for i in range(3)])
    await dist.heartbeat(client, crawl, 1)
    await dist.heartbeat(client, crawl, 2)
    assert await dist.take_pages(client, crawl, 5, 1, 60, 3, shards=SHARDS) == 3
    leases = [await f.lease(0) for _ in range(3)]
    assert all(lease is not None for lease in leases)
    first, second = leases[0], leases[1]
    assert first is not None and second is not None
    s1, c1 = await f.ack_spending(first, not_before=0, worker_id=1)
    assert c1 == 1
    await dist.spend_pages(client, crawl, 1, s1, c1)
    await dist.spend_pages(client, crawl, 1, s1, c1)  # sent twice: counts once
    assert await client.hgetall(dist.crawl_key(crawl, "resv")) == {"1": "2"}
    s2, c2 = await f.ack_spending(second, not_before=0, worker_id=1)
    # killed here: acked, not spent; the third lease in flight
    assert await pages(client, crawl) == 3
    await client.zadd(dist.crawl_key(crawl, "workers"), {"1": 1.0})  # its heartbeat stopped
    assert await dist.take_pages(client, crawl, 5, 2, 60, 9, shards=SHARDS) == 3
    assert await client.hgetall(dist.crawl_key(crawl, "resv")) == {"2": "3"}
    assert await pages(client, crawl) == 5
    # the spend arrives late (the worker was frozen, not dead): already applied, nothing
    await dist.spend_pages(client, crawl, 1, s2, c2)
    assert await pages(client, crawl) == 5
    assert await dist.take_pages(client, crawl, 5, 2, 60, shards=SHARDS) == 0
    for _ in range(3):  # worker 2's three pages are recorded
        await dist.confirm_page(client, crawl, 2)
    assert await dist.take_pages(client, crawl, 5, 2, 60, shards=SHARDS) == -1
    assert await pages(client, crawl) == 5  # exactly --max-pages: 2 of worker 1, 3 of 2
    await f.aclose()
    await dist.delete_crawl(client, crawl)
    assert [k async for k in client.scan_iter(match=f"*{crawl}*")] == []


async def test_late_ack_of_a_returned_reservation_is_counted(client: Any) -> None:
    """A worker thought dead (frozen) whose reservations came back acks a page whose lease
    nobody reclaimed: its spend finds no reservation and counts the page again; the ack
    sent twice (reply lost) answers the same count."""
    crawl = f"t-{uuid.uuid4().hex[:10]}"
    await dist.create_crawl(client, crawl, {}, resume=False)
    f = await RedisFrontier.open(client, crawl, shards=SHARDS, buckets=4, order="rotate")
    await f.add([Request("https://a.test/")])
    await dist.heartbeat(client, crawl, 2)
    assert await dist.take_pages(client, crawl, 2, 1, 60, shards=SHARDS) == 1
    lease = await f.lease(0)
    assert lease is not None
    assert await dist.take_pages(client, crawl, 2, 2, 60, 9, shards=SHARDS) == 2  # 1 is dead
    s, c = await f.ack_spending(lease, not_before=0, worker_id=1)
    await dist.spend_pages(client, crawl, 1, s, c)
    assert await pages(client, crawl) == 3  # recorded beyond the budget, but counted
    assert await client.hgetall(dist.crawl_key(crawl, "resv")) == {"2": "2"}
    await f.aclose()
    await dist.delete_crawl(client, crawl)
