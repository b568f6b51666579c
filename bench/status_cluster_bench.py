"""How fast ``/api/hosts`` answers on a Redis crawl's status server with 100,000 hosts.

    python bench/status_cluster_bench.py [--hosts 100000] [--workers 2] [--requests 5]

Starts its own redis-server (tests/redis_server.py: loopback, a free port, AOF on; stopped at
the end), has ``--workers`` worker runs publish (skitter.status.cluster.ClusterPublisher) rows
for ``--hosts`` hosts (each host fetched by one of them, every 50th in backoff), serves a
ClusterSource with the StatusServer and times over HTTP: the first /api/hosts (the whole
table read from Redis once, in the background: that answer comes from the rows read so
far, ``complete: false``), the time until the table is complete (polled every 50 ms), then
``--requests`` each of sorts by fetched, host, backoff_until and a search, and the same
after 1,000 hosts changed (only those are read again). Also the time to publish, and
/api/status. Quote ``cat /proc/loadavg`` with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from tests.redis_server import RedisServer  # noqa: E402

from skitter.status.cluster import ClusterPublisher  # noqa: E402
from skitter.status.cluster_source import ClusterSource  # noqa: E402
from skitter.status.server import StatusServer  # noqa: E402
from skitter.status.source import LiveState  # noqa: E402


async def timed(http: aiohttp.ClientSession, url: str, n: int) -> float:
    """Median seconds of ``n`` GETs of ``url``."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        async with http.get(url) as r:
            await r.read()
            assert r.status == 200, r.status
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def main(hosts: int, workers: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis", appendfsync="everysec")
        server.start()
        try:
            await bench(server.url, hosts, workers, requests)
        finally:
            server.stop()


async def bench(url: str, hosts: int, workers: int, requests: int) -> None:
    client = aioredis.Redis.from_url(url, decode_responses=True)
    lives = [LiveState(delay_s=1.0) for _ in range(workers)]
    pubs = [
        ClusterPublisher(lv, client, "bench", k + 1, interval_s=600) for k, lv in enumerate(lives)
    ]
    now = time.time()
    for i in range(hosts):
        lv = lives[i % workers]
        h = f"host{i:06d}.test"
        lv.queued({h: 3})
        lv.record(h, 200 if i % 7 else 503, None, "text/html", 1000 + i % 5000, 0.1, 1)
        if i % 50 == 0:
            lv.wait(h, 30.0, "backoff", now + 30.0)
    t0, c0 = time.perf_counter(), time.process_time()
    for p in pubs:
        assert await p.publish()
    print(
        f"publish {hosts:,} hosts from {workers} workers: {time.perf_counter() - t0:.2f} s "
        f"({time.process_time() - c0:.2f} CPU s in the workers' side)"
    )
    src = ClusterSource(client, "bench")
    async with StatusServer(src, "127.0.0.1", 0) as srv, aiohttp.ClientSession() as http:
        base = srv.url + "api/hosts"
        c0, t0 = time.process_time(), time.perf_counter()  # the server runs in this process
        src.start()  # as ClusterStatus.bind does: the first read in the background
        async with http.get(base + "?sort=fetched&order=desc") as r:
            body = await r.json()
        first = time.perf_counter() - t0
        print(
            f"first /api/hosts: {first * 1000:.0f} ms, complete={body['complete']}, "
            f"{body['hosts_total']:,} rows so far"
        )
        for _ in range(2000):  # bounded: 100 s
            async with http.get(base + "?sort=fetched&order=desc") as r:
                if (await r.json())["complete"]:
                    break
            await asyncio.sleep(0.05)
        whole, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            f"table complete ({hosts:,} rows read once): {whole * 1000:.0f} ms "
            f"({cpu:.2f} CPU s in the server)"
        )
        for q in ("sort=fetched&order=desc", "sort=host&order=asc",
                  "sort=backoff_until&order=desc", "q=host0999&sort=fetched"):  # fmt: skip
            ms = await timed(http, f"{base}?{q}&page=3&per_page=100", requests) * 1000
            print(f"/api/hosts?{q}: median {ms:.0f} ms")
        for i in range(0, 1000):
            lives[i % workers].record(f"host{i * 97 % hosts:06d}.test", 200, None, None, 10, 0.1, 1)
        c0 = time.process_time()
        for p in pubs:
            assert await p.publish()
        cpu = (time.process_time() - c0) * 1000
        print(f"publish 1,000 changed hosts: {cpu:.0f} ms CPU on the workers' side")
        ms = await timed(http, base + "?sort=fetched&order=desc", 1) * 1000
        print(f"/api/hosts after 1,000 hosts changed (reads those only): {ms:.0f} ms")
        ms = await timed(http, srv.url + "api/status", requests) * 1000
        print(f"/api/status: median {ms:.0f} ms")
    await client.aclose()
    print("loadavg:", Path("/proc/loadavg").read_text().strip())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--requests", type=int, default=5)
    a = ap.parse_args()
    asyncio.run(main(a.hosts, a.workers, a.requests))
