"""A worker's view of a Redis crawl: operator state, the shared page budget, lost leases."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from skitter import distributed as dist
from skitter.errors import FrontierError
from skitter.frontier import Frontier
from skitter.frontier.redis import RedisFrontier
from skitter.frontier.redis_crawl import SharedCrawlFrontier
from skitter.models import Request
from tests.redis_server import RedisServer


class Clock:
    """A fake clock shared by the workers of a test."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[Any]:
    c = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    yield c
    await c.aclose()


async def worker(
    client: Any, crawl: str, clock: Clock, max_pages: int | None = None
) -> SharedCrawlFrontier:
    inner = await RedisFrontier.open(client, crawl, shards=4, buckets=8, lease_ttl_s=10)
    wid = await dist.heartbeat(client, crawl)
    f = SharedCrawlFrontier(inner, client, crawl, worker_id=wid, max_pages=max_pages, clock=clock)
    await f.refresh()
    return f


async def new_crawl(client: Any) -> str:
    crawl = f"w-{uuid.uuid4().hex[:10]}"
    await dist.create_crawl(client, crawl, {}, resume=False)
    return crawl


async def test_is_a_frontier_and_pause_resume_stop(client: Any) -> None:
    crawl = await new_crawl(client)
    clock = Clock()
    f = await worker(client, crawl, clock)
    assert isinstance(f, Frontier)
    await f.add([Request(f"https://h{i}.test/") for i in range(3)])
    await dist.set_state(client, crawl, "paused")
    await f.refresh()
    assert await f.lease(0) is None
    assert not await f.is_finished()
    await dist.set_state(client, crawl, "running")
    await f.refresh()
    held = await f.lease(0)
    assert held is not None
    await dist.set_state(client, crawl, "stopped")
    await f.refresh()
    assert await f.lease(0) is None
    assert not await f.is_finished()  # it still holds a lease
    await f.ack(held, not_before=0, status=200)
    assert await f.is_finished()  # stopped: this worker is done (2 URLs wait for a resume)
    assert (await f.counts()).pending == 2
    await f.aclose()


async def test_page_budget_is_shared_and_non_2xx_gives_it_back(client: Any) -> None:
    crawl = await new_crawl(client)
    clock = Clock()
    a = await worker(client, crawl, clock, max_pages=3)
    b = await worker(client, crawl, clock, max_pages=3)
    await a.add([Request(f"https://h{i}.test/") for i in range(10)])
    la = await a.lease(0)
    lb = await b.lease(0)
    assert la is not None and lb is not None
    await a.ack(la, not_before=0, status=404)  # not a page: budget given back
    await b.ack(lb, not_before=0, status=200)
    got = [await a.lease(0), await b.lease(0)]
    assert all(x is not None for x in got)
    assert await a.lease(0) is None and await b.lease(0) is None  # 3 of 3 taken
    assert not await a.is_finished()  # a still holds one
    for f, lease in zip((a, b), got, strict=True):
        assert lease is not None
        await f.ack(lease, not_before=0, status=200)
    assert not await a.is_finished()  # its last look found reservations: it looks again
    assert await a.lease(0) is None and await b.lease(0) is None  # none reserved: spent
    assert await a.is_finished() and await b.is_finished()
    assert int(await client.get(dist.crawl_key(crawl, "pages"))) == 3
    await a.aclose()
    await b.aclose()


async def test_a_lease_lost_while_frozen_is_refused(client: Any) -> None:
    crawl = await new_crawl(client)
    clock = Clock()
    a = await worker(client, crawl, clock)
    b = await worker(client, crawl, clock)
    await a.add([Request("https://h.test/only")])
    la = await a.lease(0)
    assert la is not None
    clock.t = 10.5  # a was frozen past its lease (10 s)
    lb = await b.lease(clock.t)
    assert lb is not None and lb.request == la.request and lb.token > la.token
    await a.renew_held()  # a wakes up: its renewal fails, the lease is counted lost
    assert a.lost == 1
    with pytest.raises(FrontierError, match="stale"):
        await a.ack(la, not_before=0, status=200)
    await b.ack(lb, not_before=0, status=200)
    assert await a.is_finished() and await b.is_finished()
    assert (await a.counts()).done == 1
    await a.aclose()
    await b.aclose()


async def test_deleted_crawl_stops_its_workers(client: Any) -> None:
    crawl = await new_crawl(client)
    f = await worker(client, crawl, Clock())
    await f.add([Request("https://h.test/")])
    await dist.delete_crawl(client, crawl)
    await f.refresh()
    assert f.state == "stopped"
    assert await f.lease(0) is None and await f.is_finished()
    await f.aclose()
    assert [k async for k in client.scan_iter(match=f"*{crawl}*")] == []


async def test_no_request_starts_near_a_leases_expiry(client: Any, site: Any) -> None:
    """Before each request the guard looks at the lease: far from its expiry, nothing; within
    a third of --lease-ttl (10 s here), renewed first; lost (handed to another worker while
    this one was frozen), given up: nothing is sent, the page budget is given back."""
    from skitter.fetch.aiohttp import AiohttpFetcher
    from skitter.frontier.redis_crawl import LeaseGuardFetcher
    from skitter.settings import FetchSettings
    from tests.integration.test_processes import page_body, slow_page

    site.route("a.test", "/x", slow_page(page_body("/"), 0.0))
    site.route("a.test", "/y", slow_page(page_body("/x"), 0.0))
    crawl = await new_crawl(client)
    clock = Clock()
    clock.t = 1000.0
    a = await worker(client, crawl, clock, max_pages=5)
    await a.add([Request(site.url("a.test", "/x"))])
    lease = await a.lease(clock.t)
    assert lease is not None and lease.expires_at == 1010.0
    settings = FetchSettings(resolve={("a.test", site.port): "127.0.0.1"}, resolve_only=True)
    async with AiohttpFetcher(settings, concurrency=2, host_concurrency=1) as raw:
        guarded = LeaseGuardFetcher(raw, a)
        leases_key = f"{{{crawl}:{a.inner._shard(lease.host)}}}:leases"
        clock.t = 1006.5  # 3.5 s left of 10: far enough (margin 3.33 s)
        assert (await guarded.fetch(lease.request)).status == 200
        assert await client.zscore(leases_key, str(lease.token // 1024)) == 1010.0
        clock.t = 1007.0  # 3 s left: renewed before the request
        assert (await guarded.fetch(lease.request)).status == 200
        assert await client.zscore(leases_key, str(lease.token // 1024)) == 1017.0
        assert len(site.hits) == 2
        clock.t = 1017.5  # frozen past the renewed lease: another worker takes the URL
        b = await worker(client, crawl, clock, max_pages=5)
        lb = await b.lease(clock.t)
        assert lb is not None and lb.request.url == lease.request.url
        with pytest.raises(FrontierError, match="lost before its request"):
            await guarded.fetch(lease.request)
        assert len(site.hits) == 2  # nothing sent
        assert a.lost == 1
        assert int(await client.get(dist.crawl_key(crawl, "pages"))) == 1  # b's only
        with pytest.raises(FrontierError, match="lost before its request"):  # and stays so
            await guarded.fetch(lease.request)
        # a request of no lease of this worker passes untouched
        assert (await guarded.fetch(Request(site.url("a.test", "/y")))).status == 200
    await a.aclose()
    await b.aclose()
