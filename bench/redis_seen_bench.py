"""URL-seen test of the Redis frontier: bytes per URL, exact vs ``--seen bloom:RATE``.

Starts its own redis-server (loopback, AOF everysec) in a temporary folder and marks N new
URLs done (``mark_done``: the seen test and insert only, no queue) over 1 000 hosts:

    .venv/bin/python bench/redis_seen_bench.py --urls 1000000 --rate 0.001

Prints, per mode: MEMORY USAGE of the seen keys summed over the shards, per URL; the Bloom
filter's k and bits per shard; how many of the N new URLs it took for seen (dropped); and
the client's CPU and wall seconds (quote ``cat /proc/loadavg`` beside them).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.redis_server import RedisServer

from skitter.frontier.redis import RedisFrontier


async def measure(url: str, crawl: str, n: int, rate: float | None) -> str:
    """One mode's line of figures."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        f = await RedisFrontier.open(client, crawl, seen_rate=rate, seen_capacity=n)
        cpu, wall = time.process_time(), time.time()
        for i in range(0, n, 2000):
            await f.mark_done(
                [f"https://h{j % 1000}.test/p/{j}" for j in range(i, min(i + 2000, n))]
            )
        cpu, wall = time.process_time() - cpu, time.time() - wall
        pattern = f"{{{crawl}:*}}:bloom" if rate else f"{{{crawl}:*}}:seen:*"
        total = 0
        async for key in client.scan_iter(match=pattern, count=1000):
            total += await client.memory_usage(key, samples=0) or 0
        done = (await f.counts()).done
        mode = f"bloom:{rate:g}" if rate else "exact"
        return (
            f"{mode}: {total} bytes for {n} URLs = {total / n:.2f} B/URL; k={f.seen.k} "
            f"bits/shard={f.seen.bits}; dropped {n - done}; client {cpu:.1f} s CPU, {wall:.1f} s"
        )
    finally:
        await client.aclose()


async def main() -> None:
    """Parse the flags, run both modes, print one line each."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=0.001)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        server = RedisServer(Path(d), appendfsync="everysec")
        server.start()
        try:
            print(await measure(server.url, "exact", a.urls, None), flush=True)
            print(await measure(server.url, "bloom", a.urls, a.rate), flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
