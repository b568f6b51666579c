"""Frontier.release: a lease's host slot handed back before its ack (the crawl pipeline)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from skitter.errors import FrontierError
from skitter.frontier.base import Frontier
from skitter.frontier.memory import MemoryFrontier
from skitter.frontier.redis import RedisFrontier
from skitter.frontier.routing import RoutingFrontier
from skitter.frontier.sqlite import SqliteFrontier
from skitter.models import Lease, Request
from skitter.sharding import Handoff
from tests.redis_server import RedisServer

Factory = Callable[..., Awaitable[Frontier]]


@pytest.fixture(params=["memory", "sqlite", "routing", "redis"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    opened: list[Frontier] = []
    handoffs: list[Handoff] = []
    client = None
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        client = aioredis.Redis.from_url(server.url, decode_responses=True)

    async def factory(host_concurrency: int = 1, lease_ttl_s: float = 300.0) -> Frontier:
        f: Frontier
        if request.param == "memory":
            f = MemoryFrontier(host_concurrency=host_concurrency, lease_ttl_s=lease_ttl_s)
        elif request.param == "redis":
            f = await RedisFrontier.open(
                client,
                f"release-{uuid.uuid4().hex[:12]}",
                host_concurrency=host_concurrency,
                lease_ttl_s=lease_ttl_s,
                shards=4,
                buckets=64,
            )
        else:
            f = await SqliteFrontier.open(
                str(tmp_path / f"f{len(opened)}.db"),
                host_concurrency=host_concurrency,
                lease_ttl_s=lease_ttl_s,
            )
            if request.param == "routing":
                handoff = Handoff(tmp_path / f"crawl{len(opened)}", 0, 1)
                handoffs.append(handoff)
                f = RoutingFrontier(f, handoff)
        opened.append(f)
        return f

    yield factory
    for f in opened:
        await f.aclose()
    for h in handoffs:
        h.close()
    if client is not None:
        await client.aclose()


def u(path: str, host: str = "a.test") -> str:
    return f"https://{host}/{path}"


async def lease_ok(f: Frontier, now: float) -> Lease:
    lease = await f.lease(now)
    assert lease is not None, f"nothing leasable at {now}"
    return lease


async def test_release_frees_the_host_at_not_before_and_keeps_the_lease(make: Factory) -> None:
    f = await make()
    await f.add([Request(u("1")), Request(u("2")), Request(u("3"))])
    a = await lease_ok(f, 0)
    assert await f.lease(0) is None  # one request in flight per host
    await f.release(a, not_before=5.0)
    assert await f.lease(4.9) is None  # the politeness gap still holds
    assert await f.next_ready_at() == 5.0
    b = await lease_ok(f, 5.0)
    assert b.request.url == u("2")
    counts = await f.counts()
    assert (counts.leased, counts.pending, counts.done) == (2, 1, 0)  # a is still leased
    assert not await f.is_finished()
    # a's ack frees no second slot: b still holds the host
    await f.ack(a, not_before=5.0)
    assert await f.lease(6.0) is None
    await f.ack(b, not_before=6.0)
    c = await lease_ok(f, 6.0)
    await f.ack(c, not_before=6.0)
    assert await f.is_finished()
    assert (await f.counts()).done == 3


async def test_release_twice_is_one_release_and_a_stale_token_is_refused(make: Factory) -> None:
    f = await make()
    await f.add([Request(u("1")), Request(u("2")), Request(u("3"))])
    a = await lease_ok(f, 0)
    await f.release(a, not_before=0.0)
    await f.release(a, not_before=0.0)
    b = await lease_ok(f, 0)
    assert await f.lease(0) is None  # still one request being fetched: b
    await f.ack(a, not_before=0.0)
    with pytest.raises(FrontierError):
        await f.release(a, not_before=0.0)
    await f.release(b, not_before=0.0)
    await f.retry(b, not_before=1.0)  # a retry after a release frees nothing more
    c = await lease_ok(f, 1.0)
    assert c.request.url in {u("2"), u("3")}
    assert await f.lease(1.0) is None


async def test_an_expired_released_lease_is_leased_again(make: Factory) -> None:
    f = await make(lease_ttl_s=10.0)
    await f.add([Request(u("1")), Request(u("2"))])
    a = await lease_ok(f, 0)
    await f.release(a, not_before=0.0)
    b = await lease_ok(f, 1.0)
    await f.ack(b, not_before=1.0)
    # a's processing never ended (a crash): its lease expires and it is fetched again
    again = await lease_ok(f, 11.0)
    assert again.request.url == u("1")
    assert await f.lease(11.0) is None
    with pytest.raises(FrontierError):
        await f.ack(a, not_before=11.0)
    await f.ack(again, not_before=11.0)
    assert await f.is_finished()


async def test_other_hosts_and_host_concurrency_two(make: Factory) -> None:
    f = await make(host_concurrency=2)
    await f.add([Request(u(str(i))) for i in range(4)])
    a = await lease_ok(f, 0)
    b = await lease_ok(f, 0)
    assert await f.lease(0) is None
    await f.release(a, not_before=0.0)
    c = await lease_ok(f, 0)
    assert await f.lease(0) is None  # b and c are being fetched
    for lease in (a, b, c):
        await f.ack(lease, not_before=0.0)
    d = await lease_ok(f, 0)
    await f.ack(d, not_before=0.0)
    assert await f.is_finished()
