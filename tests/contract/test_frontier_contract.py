"""The frontier contract: one suite run over every backend (memory, sqlite, the routing
frontier of ``--processes`` with one process owning every host, and redis).

Time is a fake clock: plain floats passed as ``now``; nothing sleeps.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from skitter.errors import FrontierError
from skitter.frontier import (
    AddResult,
    Frontier,
    FrontierCounts,
    MemoryFrontier,
    SqliteFrontier,
)
from skitter.frontier.base import _HostKeys
from skitter.frontier.redis import RedisFrontier
from skitter.frontier.routing import RoutingFrontier
from skitter.models import Hop, Lease, Request
from skitter.sharding import Handoff
from skitter.urls import host_key
from tests.redis_server import RedisServer

Factory = Callable[..., Awaitable[Frontier]]


@pytest.fixture(params=["memory", "sqlite", "routing", "redis"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    """A factory ``await make(host_concurrency=1, lease_ttl_s=300.0)`` for the backend.

    Redis: the session's ``redis-server``, a fresh crawl id per frontier, 4 shards (so
    hosts of one test land in different shards and cross-shard ordering is exercised).
    """
    opened: list[Frontier] = []
    client = None
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
    handoffs: list[Handoff] = []

    async def factory(host_concurrency: int = 1, lease_ttl_s: float = 300.0) -> Frontier:
        f: Frontier
        if request.param == "memory":
            f = MemoryFrontier(host_concurrency=host_concurrency, lease_ttl_s=lease_ttl_s)
        elif request.param == "redis":
            f = await RedisFrontier.open(
                client,
                f"contract-{uuid.uuid4().hex[:12]}",
                host_concurrency=host_concurrency,
                lease_ttl_s=lease_ttl_s,
                shards=4,
                buckets=64,
            )
        elif request.param == "routing":  # --processes with one process owning every host
            local = await SqliteFrontier.open(
                str(tmp_path / f"frontier{len(opened)}.db"),
                host_concurrency=host_concurrency,
                lease_ttl_s=lease_ttl_s,
            )
            handoff = Handoff(tmp_path / f"crawl{len(opened)}", 0, 1)
            handoffs.append(handoff)
            f = RoutingFrontier(local, handoff)
        else:
            f = await SqliteFrontier.open(
                str(tmp_path / f"frontier{len(opened)}.db"),
                host_concurrency=host_concurrency,
                lease_ttl_s=lease_ttl_s,
            )
        opened.append(f)
        return f

    yield factory
    for f in opened:
        await f.aclose()
    if client is not None:
        await client.aclose()
    for h in handoffs:
        h.close()


@pytest.fixture
async def fr(make: Factory) -> Frontier:
    return await make()


def u(host: str, path: str = "") -> str:
    return f"https://{host}/{path}"


async def lease_ok(f: Frontier, now: float) -> Lease:
    lease = await f.lease(now)
    assert lease is not None, f"nothing leasable at {now}"
    return lease


async def drain_host_order(f: Frontier, now: float = 0.0) -> list[str]:
    """Lease+ack everything (host ready again immediately); the URLs in lease order."""
    out = []
    while (lease := await f.lease(now)) is not None:
        out.append(lease.request.url)
        await f.ack(lease, not_before=now)
    return out


# -- add / URL-seen ---------------------------------------------------------------------


async def test_protocol_is_implemented(fr: Frontier) -> None:
    assert isinstance(fr, Frontier)


async def test_add_counts_and_dedups_within_batch(fr: Frontier) -> None:
    reqs = [Request(u("a.test", "1")), Request(u("a.test", "2")), Request(u("a.test", "1"))]
    res = await fr.add(reqs)
    assert res == AddResult(2, 1, frozenset({u("a.test", "1"), u("a.test", "2")}))
    assert await fr.counts() == FrontierCounts(pending=2, leased=0, done=0, hosts=1)


async def test_add_is_idempotent(fr: Frontier) -> None:
    reqs = [Request(u(f"h{i % 3}.test", str(i))) for i in range(20)]
    assert (await fr.add(reqs)).added == 20
    again = await fr.add(reqs)
    assert again == AddResult(0, 20, frozenset())
    assert (await fr.add([])) == AddResult(0, 0, frozenset())
    assert (await fr.counts()).pending == 20


async def test_url_seen_in_every_state(fr: Frontier) -> None:
    a, b, c = u("a.test", "a"), u("b.test", "b"), u("c.test", "c")
    await fr.add([Request(a), Request(b), Request(c)])
    la = await lease_ok(fr, 0)
    lb = await lease_ok(fr, 0)
    await fr.ack(lb, not_before=0)
    # pending (c), leased (la), done (lb): all seen, whatever depth/referer the new one has.
    leased_url = la.request.url
    res = await fr.add([Request(x, depth=3, referer=a) for x in (a, b, c)])
    assert res == AddResult(0, 3, frozenset())
    assert leased_url in {a, b, c}
    assert await fr.counts() == FrontierCounts(pending=1, leased=1, done=1, hosts=2)


async def test_invalid_url_raises_value_error(fr: Frontier) -> None:
    with pytest.raises(ValueError):
        await fr.add([Request("not a url")])


# -- lease order --------------------------------------------------------------------------


async def test_within_host_bfs_by_depth_then_fifo(fr: Frontier) -> None:
    await fr.add(
        [
            Request(u("a.test", "d2"), depth=2),
            Request(u("a.test", "d0"), depth=0),
            Request(u("a.test", "d1x"), depth=1),
            Request(u("a.test", "d1y"), depth=1),
        ]
    )
    await fr.add([Request(u("a.test", "d1z"), depth=1), Request(u("a.test", "d0b"), depth=0)])
    assert await drain_host_order(fr) == [
        u("a.test", p) for p in ["d0", "d0b", "d1x", "d1y", "d1z", "d2"]
    ]


async def test_priority_beats_depth(fr: Frontier) -> None:
    await fr.add(
        [
            Request(u("a.test", "p0d0"), depth=0),
            Request(u("a.test", "p1d0"), depth=0, priority=1),
            Request(u("a.test", "pm1d5"), depth=5, priority=-1),
            Request(u("a.test", "p0d1"), depth=1),
        ]
    )
    assert await drain_host_order(fr) == [u("a.test", p) for p in ["pm1d5", "p0d0", "p0d1", "p1d0"]]


async def test_across_hosts_ready_longest_first(fr: Frontier) -> None:
    await fr.add([Request(u(h, str(i))) for h in ("a.test", "b.test", "c.test") for i in (1, 2)])
    leases = {}
    for _ in range(3):
        lease = await lease_ok(fr, 0)
        leases[lease.host] = lease
    assert set(leases) == {"a.test", "b.test", "c.test"}
    await fr.ack(leases["a.test"], not_before=5)
    await fr.ack(leases["b.test"], not_before=3)
    await fr.ack(leases["c.test"], not_before=4)
    order = [(await lease_ok(fr, 10)).host for _ in range(3)]
    assert order == ["b.test", "c.test", "a.test"]


async def test_across_hosts_ties_by_head_depth(fr: Frontier) -> None:
    await fr.add([Request(u("deep.test", "x"), depth=3)])
    await fr.add([Request(u("mid.test", "x"), depth=1)])
    await fr.add([Request(u("top.test", "x"), depth=0)])
    hosts = [(await lease_ok(fr, 0)).host for _ in range(3)]
    assert hosts == ["top.test", "mid.test", "deep.test"]


async def test_seeds_of_many_hosts_all_leasable_at_once(fr: Frontier) -> None:
    await fr.add([Request(u(f"h{i}.test")) for i in range(50)])
    hosts = {(await lease_ok(fr, 0)).host for _ in range(50)}
    assert len(hosts) == 50
    assert await fr.lease(0) is None


# -- politeness -------------------------------------------------------------------------


async def test_ack_not_before_delays_the_host(fr: Frontier) -> None:
    t = 100.0
    await fr.add([Request(u("a.test", "1")), Request(u("a.test", "2"))])
    lease = await lease_ok(fr, t)
    assert await fr.lease(t) is None  # host_concurrency=1: in flight
    await fr.ack(lease, not_before=t + 1)
    assert await fr.lease(t + 0.5) is None
    assert await fr.next_ready_at() == t + 1
    second = await lease_ok(fr, t + 1)
    assert second.request.url == u("a.test", "2")


async def test_not_before_only_moves_forward(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", str(i))) for i in range(3)])
    await fr.delay_host("a.test", 10)
    assert await fr.lease(5) is None
    lease = await lease_ok(fr, 10)
    await fr.ack(lease, not_before=20)
    await fr.delay_host("a.test", 15)  # earlier than current: no effect
    assert await fr.next_ready_at() == 20
    lease = await lease_ok(fr, 20)
    await fr.retry(lease, not_before=12)
    assert (await lease_ok(fr, 20)).request.url == lease.request.url


async def test_delay_host_before_any_url(fr: Frontier) -> None:
    await fr.delay_host("later.test", 50)
    await fr.add([Request(u("later.test")), Request(u("now.test"))])
    assert (await lease_ok(fr, 1)).host == "now.test"
    assert await fr.lease(1) is None  # now.test in flight, later.test waits
    assert await fr.next_ready_at() == 50


async def test_next_ready_at_counts_waiting_hosts(fr: Frontier) -> None:
    await fr.delay_host("later.test", 50)
    await fr.add([Request(u("later.test"))])
    assert await fr.next_ready_at() == 50
    assert await fr.lease(49.9) is None
    assert (await lease_ok(fr, 50)).host == "later.test"


async def test_host_concurrency_two(make: Factory) -> None:
    f = await make(host_concurrency=2)
    await f.add([Request(u("a.test", str(i))) for i in range(5)] + [Request(u("b.test"))])
    first = await lease_ok(f, 0)
    second = await lease_ok(f, 0)
    third = await lease_ok(f, 0)
    by_host = sorted(x.host for x in (first, second, third))
    assert by_host == ["a.test", "a.test", "b.test"]
    assert await f.lease(0) is None  # a.test at its limit, b.test drained
    a_leases = [x for x in (first, second, third) if x.host == "a.test"]
    await f.ack(a_leases[0], not_before=0)
    assert (await lease_ok(f, 0)).host == "a.test"
    assert await f.lease(0) is None
    assert (await f.counts()).leased == 3


async def test_other_hosts_unaffected_by_a_busy_host(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", str(i))) for i in range(3)])
    la = await lease_ok(fr, 0)
    await fr.add([Request(u("b.test", "x"))])
    assert (await lease_ok(fr, 0)).host == "b.test"
    await fr.ack(la, not_before=100)
    await fr.add([Request(u("c.test", "x"))])
    assert (await lease_ok(fr, 1)).host == "c.test"


# -- retry / tokens / expiry / renew ------------------------------------------------------


async def test_retry_puts_back_with_attempts_and_delays_host(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", "1")), Request(u("a.test", "2")), Request(u("b.test"))])
    la = await lease_ok(fr, 0)
    assert la.host == "a.test" and la.attempts == 0
    await fr.retry(la, not_before=30)
    assert (await fr.counts()).pending == 3
    lb = await lease_ok(fr, 1)
    assert lb.host == "b.test"  # the whole a.test host waits
    assert await fr.lease(29) is None
    again = await lease_ok(fr, 30)
    assert again.request == la.request
    assert again.attempts == 1
    assert again.token != la.token
    await fr.retry(again, not_before=31)
    third = await lease_ok(fr, 31)
    assert third.request == la.request and third.attempts == 2


async def test_stale_and_unknown_tokens_rejected(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", "1")), Request(u("a.test", "2"))])
    lease = await lease_ok(fr, 0)
    await fr.ack(lease, not_before=0)
    with pytest.raises(FrontierError):
        await fr.ack(lease, not_before=0)
    with pytest.raises(FrontierError):
        await fr.retry(lease, not_before=0)
    with pytest.raises(FrontierError):
        await fr.renew(lease, 0)
    fake = Lease(Request(u("a.test", "2")), "a.test", token=10**9, expires_at=1e9)
    with pytest.raises(FrontierError):
        await fr.ack(fake, not_before=0)
    second = await lease_ok(fr, 0)
    await fr.retry(second, not_before=0)
    with pytest.raises(FrontierError):
        await fr.ack(second, not_before=0)
    assert await fr.counts() == FrontierCounts(pending=1, leased=0, done=1, hosts=1)


async def test_tokens_increase(fr: Frontier) -> None:
    await fr.add([Request(u(f"h{i}.test")) for i in range(5)])
    tokens = [(await lease_ok(fr, 0)).token for _ in range(5)]
    assert tokens == sorted(tokens) and len(set(tokens)) == 5


async def test_expired_lease_is_leased_again(make: Factory) -> None:
    f = await make(lease_ttl_s=10)
    await f.add([Request(u("a.test", "1"))])
    first = await lease_ok(f, 0)
    assert first.expires_at == 10
    assert await f.lease(10) is None  # not expired yet: now > expires_at is needed
    second = await lease_ok(f, 10.5)
    assert second.request == first.request
    assert second.token > first.token
    assert second.attempts == 0
    assert second.expires_at == 20.5
    with pytest.raises(FrontierError):
        await f.ack(first, not_before=0)
    await f.ack(second, not_before=0)
    assert await f.is_finished()


async def test_expired_lease_frees_host_concurrency(make: Factory) -> None:
    f = await make(lease_ttl_s=5)
    await f.add([Request(u("a.test", "1")), Request(u("a.test", "2"))])
    first = await lease_ok(f, 0)
    assert await f.lease(4) is None
    # at 6 the first lease expired: it is handed out again first (its key is smallest)
    again = await lease_ok(f, 6)
    assert again.request == first.request
    assert (await f.counts()).leased == 1


async def test_renew_extends(make: Factory) -> None:
    f = await make(lease_ttl_s=10)
    await f.add([Request(u("a.test", "1"))])
    lease = await lease_ok(f, 0)
    renewed = await f.renew(lease, 8)
    assert renewed.expires_at == 18
    assert renewed.token == lease.token and renewed.request == lease.request
    assert await f.lease(15) is None  # still held
    await f.ack(renewed, not_before=0)
    assert await f.is_finished()


async def test_renew_after_reclaim_rejected(make: Factory) -> None:
    f = await make(lease_ttl_s=10)
    await f.add([Request(u("a.test", "1"))])
    lease = await lease_ok(f, 0)
    await lease_ok(f, 11)
    with pytest.raises(FrontierError):
        await f.renew(lease, 11)


# -- next_ready_at / is_finished / counts -----------------------------------------------


async def test_next_ready_at(fr: Frontier) -> None:
    assert await fr.next_ready_at() is None
    await fr.add([Request(u("a.test", "1")), Request(u("a.test", "2"))])
    first = await fr.next_ready_at()
    assert first is not None and first <= 0
    lease = await lease_ok(fr, 0)
    assert await fr.next_ready_at() is None  # only host at its concurrency limit
    await fr.ack(lease, not_before=7)
    assert await fr.next_ready_at() == 7
    lease = await lease_ok(fr, 7)
    await fr.ack(lease, not_before=9)
    assert await fr.next_ready_at() is None  # nothing pending


async def test_is_finished(fr: Frontier) -> None:
    assert await fr.is_finished()
    await fr.add([Request(u("a.test"))])
    assert not await fr.is_finished()
    lease = await lease_ok(fr, 0)
    assert not await fr.is_finished()
    await fr.retry(lease, not_before=0)
    assert not await fr.is_finished()
    lease = await lease_ok(fr, 0)
    await fr.ack(lease, not_before=1, status=200)
    assert await fr.is_finished()
    assert await fr.counts() == FrontierCounts(pending=0, leased=0, done=1, hosts=0)


# -- mark_done ----------------------------------------------------------------------------


async def test_mark_done(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", str(i))) for i in range(4)])
    leased = await lease_ok(fr, 0)
    assert leased.request.url == u("a.test", "0")
    await fr.mark_done([u("a.test", "0"), u("a.test", "1"), u("new.test", "x"), u("a.test", "1")])
    assert await fr.counts() == FrontierCounts(pending=2, leased=0, done=3, hosts=1)
    with pytest.raises(FrontierError):  # the lease was revoked
        await fr.ack(leased, not_before=0)
    # marked URLs are seen
    res = await fr.add([Request(u("new.test", "x")), Request(u("a.test", "1"))])
    assert res.added == 0
    assert await drain_host_order(fr) == [u("a.test", "2"), u("a.test", "3")]
    await fr.mark_done([u("a.test", "2")])  # already done: no change
    assert await fr.counts() == FrontierCounts(pending=0, leased=0, done=5, hosts=0)
    assert await fr.is_finished()


async def test_mark_done_head_of_waiting_host(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", "0")), Request(u("a.test", "1"), depth=1)])
    await fr.add([Request(u("b.test", "0"), depth=1)])
    await fr.mark_done([u("a.test", "0")])
    # a.test's head is now depth 1: tie with b.test broken by host order, both leasable
    hosts = {(await lease_ok(fr, 0)).host for _ in range(2)}
    assert hosts == {"a.test", "b.test"}


# -- round trip and force -----------------------------------------------------------------


async def test_request_fields_round_trip(fr: Frontier) -> None:
    req = Request(
        "https://a.test/p?q=1",
        depth=7,
        referer="https://r.test/ü",
        origin_url="https://o.test/start",
        redirects=(Hop("https://o.test/start", 301), Hop("https://a.test/mid", 302)),
        priority=-3,
    )
    plain = Request("https://b.test/")
    await fr.add([req, plain])
    got = {(await lease_ok(fr, 0)).request for _ in range(2)}
    assert got == {req, plain}
    for r in got:
        assert isinstance(r.redirects, tuple)
        assert all(isinstance(h, Hop) for h in r.redirects)


async def test_force_enqueues_seen_url_once(fr: Frontier) -> None:
    a = u("a.test", "start")
    await fr.add([Request(a)])
    la = await lease_ok(fr, 0)
    # a -> 302 (sets a cookie) -> a: the continuation is added while a is still leased
    back = Request(a, origin_url=a, redirects=(Hop(a, 302),))
    assert await fr.add([back]) == AddResult(0, 1, frozenset())  # not forced: seen
    res = await fr.add([back, back], force=True)
    assert res == AddResult(1, 1, frozenset({a}))
    assert (await fr.add([back], force=True)).added == 0  # already pending
    await fr.ack(la, not_before=0)
    lease = await lease_ok(fr, 0)
    assert lease.request == back
    assert (await fr.add([back], force=True)).added == 0  # the forced entry is leased
    await fr.ack(lease, not_before=0)
    # done again: a later loop may force it once more
    assert (await fr.add([back], force=True)).added == 1
    assert await fr.counts() == FrontierCounts(pending=1, leased=0, done=1, hosts=1)


async def test_force_never_duplicates_a_pending_entry(fr: Frontier) -> None:
    c = u("c.test", "x")
    await fr.add([Request(c)])
    # same url and same requested url (origin None means the url itself): pending already
    assert (await fr.add([Request(c, origin_url=c)], force=True)).added == 0
    other = Request(c, origin_url=u("c.test", "elsewhere"))
    assert (await fr.add([other], force=True)).added == 1
    assert (await fr.add([other], force=True)).added == 0
    got = {(await lease_ok(fr, 0)).request for _ in range(1)}
    assert got == {Request(c)}
    assert (await fr.counts()).pending == 1


async def test_force_on_new_url_is_a_plain_add(fr: Frontier) -> None:
    r = Request(u("a.test", "x"), origin_url=u("a.test", "y"))
    assert (await fr.add([r], force=True)).added == 1
    assert (await fr.add([Request(u("a.test", "x"))])).added == 0
    assert (await lease_ok(fr, 0)).request == r


# -- closing ------------------------------------------------------------------------------


async def test_closed_frontier_raises(make: Factory) -> None:
    f = await make()
    await f.aclose()
    with pytest.raises(FrontierError):
        await f.lease(0)
    await f.aclose()  # idempotent


# -- in-link ordering (note_inlinks) ----------------------------------------------------


async def test_inlinks_most_linked_first_within_a_host(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", p), depth=1) for p in ("one", "two", "three", "none")])
    changed = await fr.note_inlinks(
        [
            (u("a.test", "three"), "b.test"),
            (u("a.test", "three"), "c.test"),
            (u("a.test", "three"), "b.test"),  # the same host again: no change
            (u("a.test", "two"), "b.test"),
            (u("a.test", "two"), "a.test"),  # its own host: no change
            (u("a.test", "one"), "d.test"),
            (u("a.test", "unknown"), "b.test"),  # never added: ignored
        ]
    )
    assert changed == 4
    await fr.note_inlinks([(u("a.test", "three"), "d.test"), (u("a.test", "two"), "c.test")])
    order = await drain_host_order(fr)
    assert order == [u("a.test", p) for p in ("three", "two", "one", "none")]


async def test_inlinks_priority_carried_by_the_lease(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", "x"), depth=2, priority=3)])
    assert await fr.note_inlinks([(u("a.test", "x"), "b.test"), (u("a.test", "x"), "c.test")]) == 2
    lease = await lease_ok(fr, 0)
    assert (lease.request.priority, lease.request.depth) == (1, 2)


async def test_inlinks_ignore_leased_and_done(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", "x")), Request(u("a.test", "y"))])
    lease = await lease_ok(fr, 0)
    assert await fr.note_inlinks([(lease.request.url, "b.test")]) == 0
    await fr.ack(lease, not_before=0)
    assert await fr.note_inlinks([(lease.request.url, "b.test")]) == 0
    await fr.mark_done([u("a.test", "y")])
    assert await fr.note_inlinks([(u("a.test", "y"), "b.test")]) == 0
    assert await fr.is_finished()


async def test_inlinks_reorder_a_long_queue_under_politeness(fr: Frontier) -> None:
    """A host with many pending URLs (more than a backend caches); the boosted ones jump
    the queue, each lease waits for the host's politeness delay on the fake clock."""
    paths = [f"p{i:03d}" for i in range(60)]
    await fr.add([Request(u("a.test", p), depth=1) for p in paths])
    now = 0.0
    first = await lease_ok(fr, now)  # p000
    await fr.ack(first, not_before=now + 2)
    boosts = [(u("a.test", "p050"), f"s{k}.test") for k in range(3)]
    boosts += [(u("a.test", "p030"), f"s{k}.test") for k in range(2)]
    boosts += [(u("a.test", "p059"), "s0.test"), (u("a.test", "p001"), "s0.test")]
    assert await fr.note_inlinks(boosts) == 7
    assert await fr.lease(now + 1) is None  # politeness still applies
    order = []
    while (lease := await fr.lease(now := now + 2)) is not None:
        order.append(lease.request.url.rsplit("/", 1)[1])
        await fr.ack(lease, not_before=now + 2)
    assert order[:4] == ["p050", "p030", "p001", "p059"]
    assert order[4:] == [p for p in paths[1:] if p not in ("p050", "p030", "p001", "p059")]


async def test_inlinks_after_partial_drain(fr: Frontier) -> None:
    await fr.add([Request(u("a.test", f"p{i:02d}")) for i in range(30)])
    got = []
    for _ in range(10):
        lease = await lease_ok(fr, 0)
        got.append(lease.request.url)
        await fr.ack(lease, not_before=0)
    assert await fr.note_inlinks([(u("a.test", "p25"), "b.test")]) == 1
    rest = await drain_host_order(fr)
    assert rest[0] == u("a.test", "p25")
    assert sorted(got + rest) == sorted(u("a.test", f"p{i:02d}") for i in range(30))


# -- bulk -------------------------------------------------------------------------------


async def test_10k_urls_over_100_hosts_drain_exactly_once(make: Factory) -> None:
    f = await make(host_concurrency=2, lease_ttl_s=1000)
    rnd = random.Random(7)
    urls = [u(f"h{i % 100}.test", f"p{i}") for i in range(10_000)]
    rnd.shuffle(urls)
    for i in range(0, len(urls), 250):
        part = [Request(x, depth=rnd.randrange(4)) for x in urls[i : i + 250]]
        assert (await f.add(part)).added == len(part)
    assert (await f.add([Request(x) for x in urls[:500]])).duplicates == 500
    got: list[str] = []
    now = 0.0
    last_depth: dict[str, int] = {}
    while not await f.is_finished():
        lease = await f.lease(now)
        if lease is None:
            nxt = await f.next_ready_at()
            assert nxt is not None and nxt > now
            now = nxt
            continue
        got.append(lease.request.url)
        # BFS within a host: depths never decrease (everything was added up front)
        if lease.attempts == 0:
            assert lease.request.depth >= last_depth.get(lease.host, 0)
            last_depth[lease.host] = lease.request.depth
        if rnd.random() < 0.05 and lease.attempts == 0:
            await f.retry(lease, not_before=now + 0.5)
            got.pop()
        else:
            await f.ack(lease, not_before=now + 1)
    assert len(got) == len(set(got)) == 10_000
    assert set(got) == set(urls)
    assert await f.counts() == FrontierCounts(pending=0, leased=0, done=10_000, hosts=0)


# -- host keys ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://a.test",
        "https://a.test/x",
        "https://a.test?x/y",
        "https://a.test#f/g",
        "https://u:p@a.test:8080/x",
        "http://A.TEST:80/x",
        "https://a.test\\b/c",
        "https://[::1]:8080/x/y",
        "https://xn--bcher-kva.test/a/b",
    ],
)
def test_memoised_host_key_matches_host_key(url: str) -> None:
    keys = _HostKeys(limit=3)
    for _ in range(2):
        assert keys(url) == host_key(url)
        assert keys(url + "/more") == host_key(url + "/more")
