"""Redis frontier figures: bytes per URL of the URL-seen set and of the queues, ops/s.

Starts its own redis-server (loopback, AOF on) in a temporary folder:

    .venv/bin/python bench/redis_frontier_bench.py --urls 100000 1000000 --fsync always

Prints, per size: add rate (URLs/s, batches of 1000), lease+ack rate (one worker, rotate
order), and memory: seen-set and queue bytes per URL (MEMORY USAGE summed over the keys),
and used_memory growth per URL.

Growth mode: one frontier filled in batches of 1000 new URLs through the real add script
(``RedisFrontier.add``), measured at each checkpoint on the way:

    .venv/bin/python bench/redis_frontier_bench.py --grow 1000000 3000000 10000000 \
        [--trim-queue] [--json OUT.json]

At each checkpoint: seen-set bytes (MEMORY USAGE, samples=0, summed over every seen bucket
string), queue bytes (the same over the host queues), used_memory growth since the empty
frontier (INFO memory), all divided by the URLs added so far; and the add rate and Redis CPU
per URL of the last stretch. ``--trim-queue`` deletes the host queues' members after each
checkpoint's measurement (ZREMRANGEBYRANK, keeping each queue's first member, so the host stays
known): the seen set then grows to the last checkpoint while memory stays bounded; its queue
bytes are then those of the URLs added since the previous checkpoint (the members kept are
counted too, a few per host). Redis runs with AOF (appendfsync everysec) and automatic AOF
rewrites off, so no rewrite fork disturbs the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
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


async def grow(
    checkpoints: list[int], hosts: int, trim: bool, out: Path | None
) -> list[dict[str, Any]]:
    """Fill one frontier to each checkpoint in turn; one record per checkpoint."""
    workdir = Path(tempfile.mkdtemp(prefix="rfbench-"))
    server = RedisServer(
        workdir,
        appendfsync="everysec",
        extra=["--auto-aof-rewrite-percentage", "0"],
    )
    server.start()
    rows: list[dict[str, Any]] = []
    try:
        c = aioredis.Redis.from_url(server.url, decode_responses=True)
        f = await RedisFrontier.open(c, "b", lease_ttl_s=1e9, order="rotate")
        m0 = int((await c.info("memory"))["used_memory"])
        added = 0
        trimmed_members = 0
        for n in sorted(checkpoints):
            cpu0, t = await cpu(c), time.perf_counter()
            start = added
            while added < n:
                hi = min(added + 1000, n)
                await f.add(
                    [
                        Request(f"https://h{j % hosts}.example/p/{j}?q={j * 7}")
                        for j in range(added, hi)
                    ]
                )
                added = hi
            add_s, cpu_s = time.perf_counter() - t, await cpu(c) - cpu0
            mem = await c.info("memory")
            seen = await key_bytes(c, "{b:*}:seen:*")
            queues = await key_bytes(c, "{b:*}:q:*")
            queued = 0
            async for key in c.scan_iter(match="{b:*}:q:*", count=1000):
                queued += int(await c.zcard(key))
            row = dict(
                urls=n,
                hosts=hosts,
                seen_bytes=seen,
                seen_b_per_url=round(seen / n, 2),
                queue_bytes=queues,
                queued_urls=queued,
                queue_b_per_queued_url=round(queues / max(queued, 1), 1),
                used_memory_growth=int(mem["used_memory"]) - m0,
                used_memory_b_per_url=round((int(mem["used_memory"]) - m0) / n, 1),
                used_memory_peak=int(mem["used_memory_peak"]),
                trimmed_before=trimmed_members,
                add_urls_per_s=round((n - start) / add_s),
                redis_cpu_us_per_url=round(cpu_s / (n - start) * 1e6, 2),
                loadavg=Path("/proc/loadavg").read_text().split()[:3],
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
            if out is not None:
                out.write_text(json.dumps(rows, indent=1))
            if trim:  # keep each queue's head: the host stays known and ready
                async for key in c.scan_iter(match="{b:*}:q:*", count=1000):
                    trimmed_members += int(await c.zremrangebyrank(key, 1, -1))
        await c.aclose()
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)  # the AOF: GBs at 10 M URLs
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--urls", type=int, nargs="+", default=[100_000])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--fsync", default="always", choices=["always", "everysec"])
    ap.add_argument("--leases", type=int, default=5000)
    ap.add_argument("--grow", type=int, nargs="+", help="growth mode: these checkpoints")
    ap.add_argument("--trim-queue", action="store_true", help="growth mode: see above")
    ap.add_argument("--json", type=Path, help="growth mode: write the records here too")
    a = ap.parse_args()
    if a.grow:
        asyncio.run(grow(a.grow, a.hosts, a.trim_queue, a.json))
        return
    for n in a.urls:
        asyncio.run(run(n, a.fsync, a.hosts, a.leases))


if __name__ == "__main__":
    main()
