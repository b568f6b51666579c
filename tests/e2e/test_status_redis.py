"""End to end: the status server of one worker of a Redis crawl covers the whole cluster.

``skitter crawl --frontier redis://... --status-port 0`` and a ``skitter worker`` share a
real redis-server. The four roots answer only once all four are requested at once (each
worker leases two: one request per host, ``--concurrency 2``), so both workers fetch; the
hosts' other pages are held behind an event. While held, ``/api/status`` counts the records
of both workers' pages.jsonl, ``/metrics`` (prometheus-client's parser) has the serving
worker's own counters and the cluster's frontier gauges, and ``/api/hosts`` lists the hosts
the other worker fetched, and the live page (headless Chromium, loopback only) renders them.
After the crawl, the runs' final snapshots sum to every record.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from skitter.status.cluster_source import ClusterSource
from tests.browser import Browser
from tests.e2e.test_redis_workers import barrier_of_all, finish_all, records
from tests.e2e.test_status_live import gated, samples
from tests.integration.site import Site, links_page
from tests.integration.test_processes import crawl_args, start_cli, wait_for, with_group_killed
from tests.redis_server import RedisServer

pytestmark = pytest.mark.slow

HOSTS = ["a.test", "b.test", "c.test", "d.test"]


def host_counts(out: Path) -> Counter[str]:
    return Counter(r["url"].split("/")[2] for r in records(out))


async def status_url(proc: Any) -> str:
    """The ``status: URL`` line of ``proc``'s stderr (bounded: 20 lines, 60 s)."""
    for _ in range(20):
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if line.startswith("status: http://127.0.0.1:"):
            return line.split(" ", 1)[1].strip()
    raise AssertionError("no status line")


async def get_json(http: aiohttp.ClientSession, url: str, **params: str) -> Any:
    async with http.get(url, params=params) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_status_of_one_worker_covers_the_cluster(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    gate = asyncio.Event()
    barrier = barrier_of_all(len(HOSTS))
    for h in HOSTS:
        u = site.url
        site.route(h, "/", barrier(links_page(u(h, "/1"), u(h, "/2"))))
        for p in ("/1", "/2"):
            site.route(h, p, gated(gate, links_page(u(h, "/"))))
    w1, w2 = tmp_path / "w1", tmp_path / "w2"
    url = redis_server_own.url
    args = crawl_args(site, HOSTS, w1, "--frontier", url, "--crawl-id", "st")
    first = await start_cli(
        *args, "--concurrency", "2", "--retries", "0", "--status-port", "0",
        *(site.url(h, "/") for h in HOSTS),
    )  # fmt: skip
    other: Any = None
    try:
        status = await status_url(first)
        await wait_for(lambda: (w1 / "worker.json").exists(), first)
        other = await start_cli("worker", url, "--out", str(w2), "--crawl-id", "st")
        async with aiohttp.ClientSession() as http:
            body: Any = None
            for _ in range(1200):  # the four roots written and published (bounded)
                body = await get_json(http, status + "api/status")
                on_disk = len(records(w1)) + len(records(w2))
                if on_disk == len(HOSTS) and body["totals"]["fetched"] == on_disk:
                    break
                await asyncio.sleep(0.05)
            t = body["totals"]
            assert t["fetched"] == len(records(w1)) + len(records(w2)) == 4, body
            assert t["by_status_class"] == {"2xx": 4} and t["ok"] == 4
            assert t["workers"] == 2 and t["worker_runs"] == 2
            assert t["queued"] + t["in_flight"] == 8  # the held pages, queued or leased
            assert t["hosts"] == 4 and t["hosts_in_backoff"] == 0
            mine, theirs = host_counts(w1), host_counts(w2)
            assert mine and theirs  # both fetched (the roots' barrier needs both)

            async with http.get(status + "metrics") as r:
                m = samples(await r.text())
            own = m[("skitter_fetches_total", (("status_class", "2xx"),))]
            assert own == len(records(w1))  # this worker's own counter (sum() over workers)
            assert m[("skitter_queued_urls", ())] + m[("skitter_leased_requests", ())] == 8
            assert m[("skitter_active_hosts", ())] == 4

            for _ in range(1200):  # the table's first read (in the background) done: bounded
                page = await get_json(http, status + "api/hosts", sort="host", order="asc")
                if page["complete"]:
                    break
                await asyncio.sleep(0.05)
            assert page["complete"] and page["hosts_loading"] is None
            rows = {r["host"]: r for r in page["rows"]}
            for h in theirs:  # the hosts the other worker fetched are in this one's table
                assert rows[h]["fetched"] == 1 and rows[h]["errors"] == 0
            assert {h: r["fetched"] for h, r in rows.items()} == dict(mine + theirs)
            assert sum(r["queued"] for r in rows.values()) == 8

            async with Browser() as br:  # the page renders the cluster's figures
                await br.goto(status)
                await br.wait_for("document.getElementById('t-fetched').textContent === '4'")
                await br.wait_for("document.getElementById('t-workers').textContent === '2 (2)'")
                await br.wait_for("document.querySelectorAll('#hosts-body tr').length === 4")
                assert br.exceptions == [] and br.outside_requests() == []
        gate.set()
        results = await finish_all([first, other])
        for rc, _, err in results:
            assert rc == 0, err
    finally:
        gate.set()
        for p in (first, other):
            if p is not None and p.returncode is None:
                with_group_killed(p)
                await p.wait()
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:  # after the crawl: both runs' final snapshots, none alive, every record counted
        t2 = await ClusterSource(client, "st").totals()
    finally:
        await client.aclose()
    assert t2.fetched == len(records(w1)) + len(records(w2)) == 12
    assert (t2.workers, t2.worker_runs, t2.queued, t2.in_flight) == (0, 2, 0, 0)
