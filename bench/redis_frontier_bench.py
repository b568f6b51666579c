"""Redis frontier figures: bytes per URL of the URL-seen set and of the queues, ops/s.

Starts its own redis-server (loopback, AOF on) in a temporary folder:

    .venv/bin/python bench/redis_frontier_bench.py --urls 100000 1000000 --fsync always

Prints, per size: add rate (URLs/s, batches of 1000), lease+ack rate (one worker, rotate
order), and memory: seen-set and queue bytes per URL (MEMORY USAGE summed over the keys),
and used_memory growth per URL.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.redis_server import RedisServer

from skitter.frontier.redis import RedisFrontier
from skitter.models import Request


async def key_bytes(c: Any, pattern: str) -> int:
    total = 0
    async for key in c.scan_iter(match=pattern, count=1000):
        total += int(await c.memory_usage(key, samples=0) or 0)
    return total


async def cpu(c: Any) -> float:
    """Redis server CPU seconds (user + system) so far."""
    info = await c.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def calls(c: Any) -> int:
    """Commands the server has processed so far (INFO stats)."""
    return int((await c.info("stats"))["total_commands_processed"])


async def run(n: int, fsync: str, hosts: int, leases: int) -> None:
    server = RedisServer(Path(tempfile.mkdtemp(prefix="rfbench-")), appendfsync=fsync)
    server.start()
    try:
        c = aioredis.Redis.from_url(server.url, decode_responses=True)
        f = await RedisFrontier.open(c, "b", lease_ttl_s=1e9, order="rotate")
        m0 = int((await c.info("memory"))["used_memory"])
        cpu0 = await cpu(c)
        t = time.perf_counter()
        for i in range(0, n, 1000):
            await f.add(
                [
                    Request(f"https://h{j % hosts}.example/p/{j}?q={j * 7}")
                    for j in range(i, i + 1000)
                ]
            )
        add_s = time.perf_counter() - t
        cpu_add = await cpu(c) - cpu0
        cpu0 = await cpu(c)
        t = time.perf_counter()
        for i in range(0, n, 1000):  # the same URLs again: every one a duplicate
            await f.add(
                [
                    Request(f"https://h{j % hosts}.example/p/{j}?q={j * 7}")
                    for j in range(i, i + 1000)
                ]
            )
        dup_s = time.perf_counter() - t
        cpu_dup = await cpu(c) - cpu0
        m1 = int((await c.info("memory"))["used_memory"])
        seen = await key_bytes(c, "{b:*}:seen:*")
        queues = await key_bytes(c, "{b:*}:q:*")
        cpu1 = await cpu(c)
        cmd1 = await calls(c)
        t = time.perf_counter()
        done = 0
        while done < leases:
            lease = await f.lease(0.0)
            if lease is None:
                break
            await f.ack(lease, not_before=0.0)
            done += 1
        la_s = time.perf_counter() - t
        cpu_la = await cpu(c) - cpu1
        cmds = await calls(c) - cmd1
        print(
            f"{n:>9} URLs, {hosts} hosts, appendfsync {fsync}: add {n / add_s:,.0f} URLs/s; "
            f"lease+ack {done / la_s:,.0f}/s; seen {seen / n:.1f} B/URL; "
            f"queue {queues / n:.1f} B/URL; used_memory +{(m1 - m0) / n:.1f} B/URL; "
            f"duplicates {n / dup_s:,.0f} URLs/s; "
            f"Redis CPU {cpu_add / n * 1e6:.1f} us/URL added, "
            f"{cpu_dup / n * 1e6:.1f} us/duplicate, "
            f"{cpu_la / max(done, 1) * 1e6:.1f} us and {cmds / max(done, 1):.1f} commands "
            "per lease+ack"
        )
        await c.aclose()
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--urls", type=int, nargs="+", default=[100_000])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--fsync", default="always", choices=["always", "everysec"])
    ap.add_argument("--leases", type=int, default=5000)
    a = ap.parse_args()
    for n in a.urls:
        asyncio.run(run(n, a.fsync, a.hosts, a.leases))


if __name__ == "__main__":
    main()
