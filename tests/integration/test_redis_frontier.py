"""Redis frontier beyond the contract: worker order, server clock, durability, outages,
refusals, the crawl record and the status/control commands. Real ``redis-server`` only."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from skitter import distributed as dist
from skitter.cli import main
from skitter.errors import ConfigError, FetchError, FrontierError
from skitter.frontier.redis import RedisFrontier
from skitter.models import Request, Response
from tests.redis_server import RedisServer, free_port


def cid() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[Any]:
    c = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    yield c
    await c.aclose()


async def test_rotate_order_drains_every_url_once_bfs_per_host(client: Any) -> None:
    f = await RedisFrontier.open(client, cid(), shards=8, buckets=16, order="rotate")
    urls = [f"https://h{i % 20}.test/p{i}" for i in range(600)]
    await f.add([Request(u, depth=i % 3) for i, u in enumerate(urls)])
    got: list[str] = []
    depth: dict[str, int] = {}
    now = 0.0
    while not await f.is_finished():
        lease = await f.lease(now)
        if lease is None:
            nxt = await f.next_ready_at()
            assert nxt is not None and nxt > now
            now = nxt
            continue
        assert lease.request.depth >= depth.get(lease.host, 0)
        depth[lease.host] = lease.request.depth
        got.append(lease.request.url)
        await f.ack(lease, not_before=now + 1)
    assert sorted(got) == sorted(urls)


async def test_server_clock_stores_server_times(client: Any) -> None:
    """A worker whose clock reads 1000.0 still writes not_before on the server's clock."""
    crawl = cid()
    f = await RedisFrontier.open(client, crawl, shards=2, buckets=4, clock=lambda: 1000.0)
    await f.add([Request("https://a.test/1"), Request("https://a.test/2")])
    lease = await f.lease(1000.0)
    assert lease is not None
    assert abs(lease.expires_at - (1000.0 + 300.0)) < 60
    await f.ack(lease, not_before=1000.0 + 3600)
    assert await f.lease(1000.0) is None
    nxt = await f.next_ready_at()
    assert nxt is not None and abs(nxt - 4600.0) < 60
    sec, _ = await client.time()
    stored: list[float] = []
    for s in range(2):
        stored += [float(v) for v in (await client.hgetall(f"{{{crawl}:{s}}}:nb")).values()]
    assert len(stored) == 1 and abs(stored[0] - (sec + 3600)) < 60


async def test_tokens_never_repeat_after_aof_restart(tmp_path: Path) -> None:
    """appendfsync everysec may lose the last second; tokens still never repeat."""
    server = RedisServer(tmp_path / "r", appendfsync="everysec")
    server.start()
    try:
        c = aioredis.Redis.from_url(server.url, decode_responses=True)
        f = await RedisFrontier.open(c, "tok", shards=2, buckets=4, lease_ttl_s=1)
        await f.add([Request(f"https://h{i}.test/") for i in range(20)])
        before = []
        for _ in range(10):
            lease = await f.lease(0)
            assert lease is not None
            before.append(lease.token)
        await c.aclose()
        server.restart()
        c = aioredis.Redis.from_url(server.url, decode_responses=True)
        f = await RedisFrontier.open(c, "tok", shards=2, buckets=4, lease_ttl_s=1)
        after = []
        while (lease := await f.lease(100)) is not None:  # every lease expired by t=100
            after.append(lease.token)
        assert len(after) >= 10
        assert min(after) > max(before)
        await c.aclose()
    finally:
        server.stop()


async def test_appendfsync_always_keeps_every_added_url_across_kill9(
    redis_server_own: RedisServer,
) -> None:
    c = aioredis.Redis.from_url(redis_server_own.url, decode_responses=True)
    f = await RedisFrontier.open(c, "dur", shards=4, buckets=8)
    urls = [f"https://h{i % 7}.test/{i}" for i in range(500)]
    assert (await f.add([Request(u) for u in urls])).added == 500
    await c.aclose()
    redis_server_own.restart()  # kill -9 right after the reply, then load the AOF
    c = aioredis.Redis.from_url(redis_server_own.url, decode_responses=True)
    f = await RedisFrontier.open(c, "dur", shards=4, buckets=8)
    assert (await f.counts()).pending == 500
    assert (await f.add([Request(u) for u in urls])).added == 0
    await c.aclose()


async def test_outage_shorter_than_redis_wait_is_survived(
    redis_server_own: RedisServer,
) -> None:
    c = aioredis.Redis.from_url(redis_server_own.url, decode_responses=True)
    warned = asyncio.Event()
    lines: list[str] = []

    def warn(line: str) -> None:
        lines.append(line)
        warned.set()

    f = await RedisFrontier.open(c, "out", shards=2, buckets=4, redis_wait_s=120, warn=warn)
    await f.add([Request("https://a.test/1")])
    redis_server_own.kill9()
    task = asyncio.create_task(f.add([Request("https://a.test/2")]))
    await warned.wait()
    redis_server_own.start()
    assert (await task).added == 1
    assert len(lines) == 1 and "Redis unreachable" in lines[0]
    assert (await f.counts()).pending == 2
    await c.aclose()


async def test_outage_longer_than_redis_wait_fails(redis_server_own: RedisServer) -> None:
    c = aioredis.Redis.from_url(redis_server_own.url, decode_responses=True)
    f = await RedisFrontier.open(c, "out2", shards=2, buckets=4, redis_wait_s=0.5)
    redis_server_own.kill9()
    with pytest.raises(FrontierError, match=r"unreachable for 0\.5 s"):
        await f.lease(0)
    await c.aclose()


async def test_connect_refuses_evicting_policy(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "r", maxmemory_policy="allkeys-lru")
    server.start()
    try:
        with pytest.raises(ConfigError, match="maxmemory-policy allkeys-lru") as e:
            await dist.connect(server.url)
        assert "\n" not in str(e.value)
    finally:
        server.stop()


async def test_connect_refused_password_and_bad_urls(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "r", password="s3cret")
    server.start()
    try:
        ok = await dist.connect(server.url)
        await ok.aclose()
        wrong = server.url.replace("s3cret", "nope")
        with pytest.raises(ConfigError, match="refused the password") as e:
            await dist.connect(wrong)
        assert "nope" not in str(e.value)
        with pytest.raises(ConfigError, match="refused the password"):
            await dist.connect(f"redis://127.0.0.1:{server.port}/0")
    finally:
        server.stop()
    with pytest.raises(ConfigError, match="cannot connect"):
        await dist.connect(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(ConfigError, match="bad Redis URL"):
        await dist.connect("http://127.0.0.1:6379/0")
    with pytest.raises(ConfigError, match="bad Redis URL"):
        await dist.connect("redis://127.0.0.1:6379/x")


async def test_crawl_record_budget_and_ip_tokens(client: Any) -> None:
    crawl = cid()
    await dist.create_crawl(client, crawl, {"x": 1}, resume=False)
    with pytest.raises(ConfigError, match="already exists"):
        await dist.create_crawl(client, crawl, {"x": 1}, resume=False)
    await dist.create_crawl(client, crawl, {"x": 2}, resume=True)
    assert await dist.load_crawl(client, crawl) == {"x": 2}  # the resume's (limits may change)
    with pytest.raises(ConfigError, match="no crawl"):
        await dist.create_crawl(client, cid(), {}, resume=True)
    await dist.heartbeat(client, crawl, 1)
    await dist.heartbeat(client, crawl, 2)
    assert await dist.take_pages(client, crawl, 5, 1, 60, 3) == 3
    assert await dist.take_pages(client, crawl, 5, 2, 60, 3) == 2
    assert await dist.take_pages(client, crawl, 5, 1, 60) == 0  # reserved: may come back
    await dist.give_back_pages(client, crawl, 2)
    await dist.confirm_page(client, crawl, 2)
    assert await dist.take_pages(client, crawl, 5, 1, 60) == 1
    assert await client.hgetall(dist.crawl_key(crawl, "resv")) == {"1": "4"}
    # worker 1 falls silent: after dead_after_s its 4 reservations come back to worker 2
    await client.zadd(dist.crawl_key(crawl, "workers"), {"1": 1.0})
    assert await dist.take_pages(client, crawl, 5, 2, 60, 9) == 4
    await dist.confirm_page(client, crawl, 1)  # a late page of worker 1: counted again
    assert int(await client.get(dist.crawl_key(crawl, "pages"))) == 6
    for _ in range(4):
        await dist.confirm_page(client, crawl, 2)
    assert await dist.take_pages(client, crawl, 5, 2, 60) == -1  # spent for good
    assert await dist.acquire_ip(client, crawl, "10.0.0.1", 2, "a", 60)
    assert await dist.acquire_ip(client, crawl, "10.0.0.1", 2, "b", 60)
    assert not await dist.acquire_ip(client, crawl, "10.0.0.1", 2, "c", 60)
    await dist.release_ip(client, crawl, "10.0.0.1", "a")
    assert await dist.acquire_ip(client, crawl, "10.0.0.1", 2, "c", 60)
    assert await dist.acquire_ip(client, crawl, "10.0.0.2", 1, "d", -1)  # expired at once
    assert await dist.acquire_ip(client, crawl, "10.0.0.2", 1, "e", 60)


def test_status_and_control_commands(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    crawl = cid()

    async def setup() -> None:
        c = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
        await dist.create_crawl(c, crawl, {}, resume=False)
        f = await RedisFrontier.open(c, crawl)
        await f.add([Request(f"https://h{i}.test/") for i in range(3)])
        lease = await f.lease(0)
        assert lease is not None
        await f.ack(lease, not_before=0)
        await dist.heartbeat(c, crawl)
        await c.aclose()

    asyncio.run(setup())
    url = redis_server.url
    assert main(["status", url, "--crawl-id", crawl, "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert (st["state"], st["pending"], st["leased"], st["done"], st["hosts"]) == (
        "running",
        2,
        0,
        1,
        2,
    )
    assert st["workers_alive"] == 1
    assert main(["control", url, "pause", "--crawl-id", crawl]) == 0
    assert main(["status", url, "--crawl-id", crawl]) == 0
    assert f"{crawl}: paused; queued 2, leased 0, done 1" in capsys.readouterr().out
    assert main(["control", url, "delete", "--crawl-id", crawl]) == 0
    capsys.readouterr()
    assert main(["status", url, "--crawl-id", crawl]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no crawl" in err

    async def leftovers() -> list[str]:
        c = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
        keys = [k async for k in c.scan_iter(match=f"*{crawl}*")]
        await c.aclose()
        return keys

    assert asyncio.run(leftovers()) == []
    assert main(["control", "redis://127.0.0.1:1/0", "stop"]) == 2
    assert "cannot connect to Redis" in capsys.readouterr().err


async def test_robots_txt_fetched_once_for_all_workers(client: Any) -> None:
    crawl = cid()
    calls: list[str] = []
    release = asyncio.Event()

    async def fetch(url: str) -> Response:
        calls.append(url)
        await release.wait()
        return Response(
            url,
            200,
            headers=(("Content-Type", "text/plain"),),
            body=b"User-agent: *\nDisallow: /x\n",
        )

    a = dist.shared_robots_fetch(fetch, client, crawl, ttl_s=60, retry_s=5, poll_s=0.01)
    b = dist.shared_robots_fetch(fetch, client, crawl, ttl_s=60, retry_s=5, poll_s=0.01)
    ta = asyncio.create_task(a("https://h.test/robots.txt"))
    while not calls:  # a holds the lock and is fetching
        await asyncio.sleep(0)
    tb = asyncio.create_task(b("https://h.test/robots.txt"))
    release.set()
    ra, rb = await ta, await tb
    assert calls == ["https://h.test/robots.txt"]
    assert rb.body == ra.body and rb.status == 200 and rb.headers == ra.headers
    ttl = await client.pttl(dist.crawl_key(crawl, "robots:https://h.test/robots.txt"))
    assert 0 < ttl <= 60_000


async def test_robots_fetch_failure_is_not_shared(client: Any) -> None:
    crawl = cid()
    calls: list[str] = []

    async def fetch(url: str) -> Response:
        calls.append(url)
        if len(calls) == 1:
            raise FetchError("refused")
        return Response(url, 404)

    a = dist.shared_robots_fetch(fetch, client, crawl, ttl_s=60, retry_s=5, poll_s=0.01)
    with pytest.raises(FetchError):
        await a("https://h.test/robots.txt")
    assert (await a("https://h.test/robots.txt")).status == 404
    assert len(calls) == 2


async def test_ack_sent_again_after_a_lost_reply_is_not_stale(client: Any) -> None:
    """Redis restarted after running an ack but before its reply: the client sends it again
    (flag ``1``) and is told it was done, while a plain second ack is still refused."""
    f = await RedisFrontier.open(client, cid(), shards=1, buckets=4)
    await f.add([Request("https://a.test/1")])
    lease = await f.lease(0)
    assert lease is not None
    await f.ack(lease, not_before=0)
    tok = str(lease.token // 1024)
    again = await f._script("ack", 0, [tok, lease.host, "0", "1"])
    assert int(again[1]) == 2
    with pytest.raises(FrontierError, match="stale"):
        await f.ack(lease, not_before=0)
    assert (await f.counts()).done == 1


def test_recent_rate_counts_the_last_minute_only() -> None:
    # bucket = seconds // 5; now 503 s: buckets 89..100 count, from 445 s to now (58 s)
    buckets = [{"100": "10", "88": "99"}, {"89": "19"}, {}]
    assert dist.recent_rate(buckets, 503.0, 10_000.0) == pytest.approx(29 / 58)
    assert dist.recent_rate(buckets, 503.0, 20.0) == pytest.approx(29 / 20)  # a young crawl
    assert dist.recent_rate(buckets, 503.0, 0.0) == 0.0


async def test_status_pages_per_s_is_over_the_last_minute(client: Any) -> None:
    """Acks count in the shards' 5-second buckets; an old bucket is dropped when a new one
    starts; status divides the last minute's acks by the minute, not the crawl's life."""
    crawl = cid()
    await dist.create_crawl(client, crawl, {}, resume=False)
    await client.hset(dist.crawl_key(crawl, "meta"), "created", "1000.0")  # long ago
    f = await RedisFrontier.open(client, crawl, shards=4, buckets=4)
    await f.add([Request(f"https://h{i}.test/") for i in range(6)])
    leases = [await f.lease(0) for _ in range(6)]
    assert all(leases)
    rate_keys = [f"{{{crawl}:{s}}}:rate" for s in range(4)]
    shard0 = next(i for i, le in enumerate(leases) if f._shard(le.host) == 0)  # type: ignore[union-attr]
    for i, le in enumerate(leases):
        if i != shard0:
            assert le is not None
            await f.ack(le, not_before=0)
    counts = [await client.hgetall(k) for k in rate_keys]
    assert sum(int(n) for c in counts for n in c.values()) == 5
    # shard 0: only a bucket of an hour ago; its next ack starts a bucket and drops it
    sec, _ = await client.time()
    old = str(int(sec) // 5 - 720)
    await client.delete(rate_keys[0])
    await client.hset(rate_keys[0], old, 5000)
    lease0 = leases[shard0]
    assert lease0 is not None
    await f.ack(lease0, not_before=0)
    got = await client.hgetall(rate_keys[0])
    assert old not in got and sum(int(n) for n in got.values()) == 1
    await client.hset(rate_keys[1], old, 7000)  # kept until shard 1 starts a bucket: not read
    st = await dist.read_status(client, crawl)
    assert 6 / 60 <= st.pages_per_s <= 6 / 55
    assert st.avg_pages_per_s == pytest.approx(6 / st.elapsed_s)
    assert st.finished


async def test_status_watch_ends_when_the_crawl_is_over(
    client: Any, redis_server: RedisServer
) -> None:
    from tests.integration.test_processes import finish, start_cli

    crawl = cid()
    await dist.create_crawl(client, crawl, {}, resume=False)
    f = await RedisFrontier.open(client, crawl, shards=2, buckets=4)
    await f.add([Request(f"https://h{i}.test/") for i in range(3)])
    proc = await start_cli(
        "status", redis_server.url, "--crawl-id", crawl, "--watch", "0.05", "--json"
    )
    assert proc.stdout is not None
    first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
    assert (first["pending"], first["done"]) == (3, 0)
    while (lease := await f.lease(0)) is not None:
        await f.ack(lease, not_before=0)
    rc, out, err = await finish(proc, 60)
    assert rc == 0, err
    last = json.loads(out.splitlines()[-1])
    assert (last["pending"], last["leased"], last["done"]) == (0, 0, 3)
    assert last["pages_per_s"] > 0


async def test_bloom_seen_drops_new_urls_at_the_formula_rate(client: Any) -> None:
    """--seen bloom:0.01 sized for 20 000 URLs (one shard, so the formula is exact): the
    20 000 URLs added are kept (bar the filter's own false positives while it fills); then
    4 000 other URLs are added one after another (each kept one is inserted too): the number
    taken for seen is the sum of (1 - e^(-kn/m))^k over them, n the URLs in the filter at
    each, within 4 standard deviations (fingerprints are deterministic: the same count every
    run)."""
    from skitter.frontier.redis_seen import SeenSpec

    crawl = cid()
    n = 20_000
    f = await RedisFrontier.open(
        client, crawl, shards=1, buckets=4, seen_rate=0.01, seen_capacity=n
    )
    assert f.seen == SeenSpec.for_rate(0.01, n, 1) and f.seen.bloom
    assert (f.seen.k, f.seen.bits) == (7, 191702)  # m = ceil(-n ln 0.01 / (ln 2)^2)
    kept = 0
    for i in range(0, n, 1000):
        res = await f.add([Request(f"https://a.test/in/{j}") for j in range(i, i + 1000)])
        kept += res.added
    filling = sum(f.seen.expected_rate(j) for j in range(n))  # expected drops while filling
    assert n - kept <= filling + 4 * math.sqrt(filling) + 1
    assert (await f.add([Request(f"https://a.test/in/{j}") for j in range(50)])).added == 0
    assert 0.009 < f.seen.expected_rate(kept) < 0.011  # at capacity: about the rate asked
    trials, dropped = 4000, 0
    for i in range(0, trials, 1000):
        res = await f.add([Request(f"https://b.test/out/{j}") for j in range(i, i + 1000)])
        dropped += res.duplicates
    probs = [f.seen.expected_rate(kept + j) for j in range(trials)]
    mean = sum(probs)
    sd = math.sqrt(sum(q * (1 - q) for q in probs))
    assert abs(dropped - mean) <= 4 * sd + 1, (dropped, mean, sd)
    assert await client.strlen(f"{{{crawl}:0}}:bloom") == math.ceil(191702 / 8)
    # allocated at its full length when the crawl was created, not grown (over-allocated)
    assert await client.memory_usage(f"{{{crawl}:0}}:bloom") < 191702 / 8 * 1.05
    assert await client.exists(f"{{{crawl}:0}}:seen:0") == 0  # no exact set beside it


async def test_seen_setting_is_the_crawls_for_joining_workers(client: Any) -> None:
    crawl = cid()
    a = await RedisFrontier.open(client, crawl, shards=4, seen_rate=0.001, seen_capacity=10_000)
    b = await RedisFrontier.open(client, crawl, shards=4)  # a joining worker asks nothing
    assert b.seen == a.seen and b.seen.bloom
    assert await client.hget(f"{{{crawl}}}:frontier", "seen") == a.seen.encode()
    urls = [f"https://h{i % 7}.test/{i}" for i in range(300)]
    assert (await a.add([Request(u) for u in urls])).added >= 299
    assert (await b.add([Request(u) for u in urls])).added == 0  # b sees a's URLs
    await b.mark_done(["https://new.test/x"])
    assert (await a.add([Request("https://new.test/x")])).added == 0
    exact = await RedisFrontier.open(client, cid(), shards=4, seen_rate=None)
    assert not exact.seen.bloom


def test_bad_seen_spellings_exit_2_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    for flags in (
        ["--seen", "blom:0.01"],
        ["--seen", "bloom:0"],
        ["--seen", "bloom:1"],
        ["--seen", "bloom:x"],
        ["--seen", "bloom"],
        ["--seen-capacity", "0"],
        ["--seen", "bloom:0.01"],  # not on a Redis frontier
    ):
        p = subprocess.run(
            [sys.executable, "-m", "skitter", "crawl", "--out", str(tmp_path / "o"), *flags,
             "http://a.test/"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert p.returncode == 2, (flags, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
        assert "--seen" in p.stderr
        assert not (tmp_path / "o").exists()
