"""The Redis cluster status (skitter.status.cluster / cluster_source) on a real redis-server:
two worker runs publish, the source sums them; a batch replayed after a lost reply counts
once; a run that stops publishing (killed) keeps its last counts; the host table merges
the workers' rows and is read again only for the hosts that changed; the first read of a
large table runs in the background while /api/hosts answers from the rows read so far."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from skitter.status.cluster import ClusterPublisher, stat_key
from skitter.status.cluster_source import ClusterSource
from skitter.status.server import StatusServer
from skitter.status.source import LiveState
from tests.redis_server import RedisServer


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[Any]:
    c = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        yield c
    finally:
        await c.aclose()


def rec(live: LiveState, host: str, status: int | None, error: str | None = None) -> None:
    live.record(host, status, error, "text/html" if status else None, 100, 0.5, 1)


async def test_totals_are_summed_over_runs_and_kept_after_they_end(client: Any) -> None:
    crawl = "stat-sum"
    a, b = LiveState(delay_s=1.0), LiveState(delay_s=1.0)
    pa = ClusterPublisher(a, client, crawl, 1, interval_s=600)
    pb = ClusterPublisher(b, client, crawl, 2, interval_s=600)
    a.queued({"x.test": 3, "y.test": 1})
    rec(a, "x.test", 200)
    rec(a, "x.test", 404)
    rec(b, "x.test", None, "timeout")
    rec(b, "z.test", 200)
    b.robots("z.test", "disallowed", "ok")
    assert await pa.publish() and await pb.publish()
    src = ClusterSource(client, crawl)
    t = await src.totals()
    assert (t.fetched, t.ok, t.errors, t.bytes, t.robots_disallowed) == (4, 2, 1, 400, 1)
    assert t.by_status_class == {"2xx": 2, "4xx": 1}
    assert t.by_error == {"timeout": 1}
    assert (t.workers, t.worker_runs) == (2, 2)

    # a lost reply: the same batch sent again is applied once
    rec(a, "x.test", 200)
    batches = pa._batches(None)
    for args in (batches[0], list(batches[0])):
        await pa._script(keys=[stat_key(crawl, "w")], args=args)
    page = await src.host_page("host", "asc", "", 1, 50)
    rows = {r["host"]: r for r in page["rows"]}
    assert rows["x.test"]["fetched"] == 4 and rows["x.test"]["errors"] == 1
    assert rows["x.test"]["queued"] == 0  # 3 queued, 4 fetched (one was b's): never below 0
    assert rows["x.test"]["last_error"] == "timeout"
    assert rows["z.test"]["robots"] == "ok" and rows["z.test"]["robots_disallowed"] == 1
    assert (await src.totals()).fetched == 5

    # b ends cleanly, a stops publishing (as if killed): both runs' counts stay
    rec(b, "z.test", 200)
    await pb.close("finished")
    t = await src.totals()
    assert (t.fetched, t.workers, t.worker_runs) == (6, 1, 2)
    await client.delete(stat_key(crawl, f"live:{pa.run}"))  # its expiry, without waiting
    t = await src.totals()
    assert (t.fetched, t.workers, t.worker_runs) == (6, 0, 2)


async def test_backoff_and_incremental_host_reads(client: Any) -> None:
    crawl = "stat-hosts"
    a = LiveState(delay_s=0.5)
    pa = ClusterPublisher(a, client, crawl, 1, interval_s=600)
    for i in range(2500):  # more than a script batch and a read chunk
        rec(a, f"h{i:05d}.test", 200)
    a.wait("h00007.test", 30.0, "backoff", time.time() + 30.0)
    assert await pa.publish()
    src = ClusterSource(client, crawl)
    assert await src.refresh() == 2500
    assert await src.refresh() == 0  # nothing changed: nothing read
    t = await src.totals()
    assert t.hosts_in_backoff == 1 and t.fetched == 2500
    page = await src.host_page("backoff_until", "desc", "", 1, 5)
    top = page["rows"][0]
    assert top["host"] == "h00007.test" and top["delay_cause"] == "backoff"
    assert abs(top["backoff_until"] - (time.time() + 30.0)) < 5.0
    assert page["total"] == 2500 and page["pages"] == 500
    # the backoff ends (a later schedule by the same worker): one host read again
    a.wait("h00007.test", 0.5, "delay", None)
    rec(a, "h00008.test", 503)
    assert await pa.publish()
    assert await src.refresh() == 2
    assert (await src.totals()).hosts_in_backoff == 0
    page = await src.host_page("fetched", "desc", "h00008", 1, 50)
    assert [(r["host"], r["fetched"], r["last_error"]) for r in page["rows"]] == [
        ("h00008.test", 2, "503")
    ]
    m = await src.metrics_text()  # a reader that is no worker: the gauges only
    assert "skitter_hosts_in_backoff 0.0" in m


async def test_first_hosts_answer_does_not_wait_for_the_whole_table(client: Any) -> None:
    crawl = "stat-load"
    a = LiveState(delay_s=0.5)
    pa = ClusterPublisher(a, client, crawl, 1, interval_s=600)
    for i in range(3000):
        rec(a, f"h{i:05d}.test", 200)
    assert await pa.publish()
    src = ClusterSource(client, crawl, load_chunk=500)
    first: list[str] = []
    got_first, release = asyncio.Event(), asyncio.Event()

    async def hold(hosts: list[str]) -> None:  # the reader stops after its first batch
        if not first:
            first.extend(hosts)
            got_first.set()
            await release.wait()

    src.after_batch = hold
    url_args = {"sort": "host", "order": "asc", "per_page": "1000"}
    async with StatusServer(src, "127.0.0.1", 0) as srv, aiohttp.ClientSession() as http:
        src.start()
        await got_first.wait()
        assert 0 < len(first) < 3000
        # a host written while the reader is held: read again once the table is whole
        rec(a, "h02999.test", 503)
        assert await pa.publish()
        async with http.get(srv.url + "api/hosts", params=url_args) as r:
            page = await r.json()
        assert page["complete"] is False and not src.complete
        assert page["hosts_loading"] == {"read": len(first), "of": 3000}
        assert page["total"] == page["hosts_total"] == len(first)
        assert [row["host"] for row in page["rows"]] == sorted(first)[:1000]
        release.set()
        assert await src.wait_loaded() >= 3000  # an HSCAN may return a row twice
        async with http.get(srv.url + "api/hosts", params={**url_args, "page": "3"}) as r:
            page = await r.json()
        assert page["complete"] is True and page["hosts_loading"] is None
        assert page["total"] == page["hosts_total"] == 3000
        last = page["rows"][-1]
        assert (last["host"], last["fetched"], last["last_error"]) == ("h02999.test", 2, "503")
