"""Frontier benchmark: enqueue N URLs over H hosts, re-add them all, reopen, drain; or
the URL-seen test alone at up to 10^8 fingerprints.

Usage::

    python bench/frontier_bench.py                      # 1,000,000 URLs over 10,000 hosts
    python bench/frontier_bench.py -n 10000000 --hosts 100000 --path /big/disk/f.db
    python bench/frontier_bench.py --backend memory -n 200000
    python bench/frontier_bench.py --seen 100000000 --path /big/disk/seen.db

The 10 M / 100 k run needs about 1.5 GB of disk and ~12 minutes; it is the check that
memory stays bounded (< 500 MB peak RSS): memory grows with hosts, not queued URLs. The
``--seen`` run at 10^8 keys needs ~3.5 GB of disk and ~25 minutes.

Printed figures (rates per wall-clock second and per CPU second of the process; the CPU
figure is the one to compare on a shared, busy machine):

  enqueue        new URLs/s through ``add`` (batches of ``--links`` requests, like a page),
                 each through the URL-seen test (recent set, Bloom filters, exact lookup of
                 Bloom positives)
  duplicates     URLs/s re-adding every URL once (all duplicates, mostly not recent: the
                 exact lookup on disk answers)
  reopen         seconds to open the existing file (rebuilds the seen filter and hosts)
  dequeue        lease+ack pairs/s draining everything (politeness delay 0, fake clock)
  peak RSS       maximum resident set size (VmHWM, else resource.getrusage) of the enqueue
                 process and of the resume + drain process (sqlite runs the drain in a
                 fresh process, as a resumed crawl would)
  disk           database bytes per URL (after the final checkpoint)

``--seen N`` drives the frontier's own URL-seen code (``_seen_test``, ``_insert_seen``,
``_maybe_merge``) with N pseudo-random 64-bit keys, ``--links`` per call, and prints: the
insert rate (test + insert, every N/10 keys and overall), lookups of ``--lookups`` present
keys (not recent: Bloom, then the table) and absent keys (never inserted: how many the
Bloom filters let through, and the check that the exact lookup reported none of them seen:
a false positive costs a lookup, never a new URL), bytes per key, peak RSS, reopen time.

Generating the requests (keys) is outside the timed sections.

Measured: see bench/README.md ("The frontier").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from skitter.frontier import Frontier, MemoryFrontier, SqliteFrontier
from skitter.models import Request


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB.

    ``resource.getrusage`` (Linux reports KiB); but Linux carries ``ru_maxrss`` over a
    fork + exec, so the per-address-space ``VmHWM`` of /proc/self/status is preferred when
    present (the drain runs in a child process).
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def batches(n: int, hosts: int, size: int) -> Iterator[list[Request]]:
    """``n`` distinct requests spread round-robin over ``hosts``, in lists of ``size``."""
    for start in range(0, n, size):
        out = []
        for i in range(start, min(n, start + size)):
            h = i % hosts
            out.append(
                Request(
                    f"https://www.host{h}.example/section/{i // hosts}/page-{i}.html",
                    depth=1 + (i // hosts) % 4,
                    referer=f"https://www.host{h}.example/",
                )
            )
        yield out


async def open_frontier(args: argparse.Namespace) -> Frontier:
    if args.backend == "memory":
        return MemoryFrontier(host_concurrency=args.host_concurrency)
    if args.batch_size is None:
        return SqliteFrontier(args.path, host_concurrency=args.host_concurrency)
    return SqliteFrontier(
        args.path, host_concurrency=args.host_concurrency, batch_size=args.batch_size
    )


class Timer:
    """Accumulates wall and CPU seconds over timed sections."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def __enter__(self) -> Timer:
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._w
        self.cpu += time.process_time() - self._c

    def line(self, label: str, n: int) -> str:
        return (
            f"{label:<11} {n / self.wall:10,.0f} URLs/s wall ({self.wall:.1f} s), "
            f"{n / self.cpu:10,.0f} URLs/s CPU ({self.cpu:.1f} s)   "
            f"peak RSS {peak_rss_mb():,.0f} MB"
        )


async def timed_add(f: Frontier, args: argparse.Namespace) -> tuple[int, Timer]:
    added = 0
    timer = Timer()
    for batch in batches(args.n, args.hosts, args.links):
        with timer:
            added += (await f.add(batch)).added
    with timer:
        await f.flush()
    return added, timer


async def fill(args: argparse.Namespace) -> Frontier:
    """Enqueue N URLs, then re-add them all; returns the (still open) frontier."""
    f = await open_frontier(args)
    added, timer = await timed_add(f, args)
    assert added == args.n, (added, args.n)
    print(timer.line("enqueue", args.n))
    dups, timer = await timed_add(f, args)
    assert dups == 0
    print(timer.line("duplicates", args.n))
    return f


async def drain(f: Frontier, args: argparse.Namespace) -> None:
    """Lease+ack everything (fake clock, politeness delay 0)."""
    timer = Timer()
    with timer:
        now = 0.0
        n = 0
        while True:
            lease = await f.lease(now)
            if lease is None:
                if await f.is_finished():
                    break
                nxt = await f.next_ready_at()
                assert nxt is not None
                now = max(now, nxt)
                continue
            await f.ack(lease, not_before=now, status=200)
            n += 1
        await f.flush()
    assert n == args.n, (n, args.n)
    print(timer.line("dequeue", n))
    await f.aclose()


async def run(args: argparse.Namespace) -> None:
    if args.phase == "drain":  # a fresh process resuming the file, as a restarted crawl would
        t = time.perf_counter()
        f = await open_frontier(args)
        print(f"reopen      {time.perf_counter() - t:10.1f} s   peak RSS {peak_rss_mb():,.0f} MB")
        await drain(f, args)
        size = sum(
            os.path.getsize(args.path + s) for s in ("", "-wal") if os.path.exists(args.path + s)
        )
        print(f"disk        {size / args.n:10,.0f} bytes/URL ({size / 2**20:,.0f} MiB)")
        print(f"peak RSS    {peak_rss_mb():10,.0f} MB (resume + drain process)")
        return
    print(
        f"backend={args.backend} n={args.n:,} hosts={args.hosts:,} links/add={args.links} "
        f"batch_size={args.batch_size} host_concurrency={args.host_concurrency}"
        + (f" path={args.path}" if args.backend == "sqlite" else "")
    )
    f = await fill(args)
    if args.backend == "memory":
        await drain(f, args)
        print(f"peak RSS    {peak_rss_mb():10,.0f} MB")
        return
    await f.aclose()
    print(f"peak RSS    {peak_rss_mb():10,.0f} MB (enqueue process)")
    sys.stdout.flush()
    cmd = [sys.executable, __file__, "--phase", "drain", "-n", str(args.n), "--path", args.path]
    if args.batch_size is not None:
        cmd += ["--batch-size", str(args.batch_size)]
    cmd += ["--host-concurrency", str(args.host_concurrency)]
    subprocess.run(cmd, check=True)


# -- the URL-seen test alone, at up to 10^8 fingerprints -----------------------------------

#: Keys generated per block (one seeded generator per block, so any block can be rebuilt).
_BLOCK = 100_000


def key_block(b: int, absent: bool = False) -> list[int]:
    """Block ``b`` of pseudo-random 64-bit signed keys (like fingerprints); ``absent``: from
    another stream, for keys that are never inserted."""
    keys = array("q")
    keys.frombytes(random.Random(b + (1 << 62) * absent).randbytes(8 * _BLOCK))
    return keys.tolist()


def file_bytes(path: str) -> int:
    return sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))


def seen_test(args: argparse.Namespace) -> None:
    """Insert ``--seen`` keys through the frontier's URL-seen path, then look keys up.

    The path is the one :meth:`SqliteFrontier.add` takes for each call, on keys instead of
    URLs: the seen test (recent set, Bloom filters, exact lookup of every Bloom positive),
    then the insert of the new keys into the ``seen`` levels, batched commits, merges.
    """
    n = args.seen
    size = args.links
    f = (
        SqliteFrontier(args.path)
        if args.batch_size is None
        else SqliteFrontier(args.path, batch_size=args.batch_size)
    )
    print(f"seen test: {n:,} keys, {size} per call, path={args.path}")
    timer = Timer()
    collisions = 0
    seq = 0
    report_every = max(_BLOCK, n // 10 // _BLOCK * _BLOCK)
    last = (0, 0.0, 0.0)
    for b in range(n // _BLOCK):
        keys = key_block(b)
        with timer:
            for i in range(0, _BLOCK, size):
                part = keys[i : i + size]
                with f._guard() as db:
                    known = f._seen_test(part)
                    rows = []
                    for k in part:
                        if k in known:
                            continue
                        seq += 1
                        rows.append((k, seq))
                        known.add(k)
                    collisions += len(part) - len(rows)
                    f._insert_seen(db, rows)
                    f._maybe_merge(db)
        done = (b + 1) * _BLOCK
        if done % report_every == 0 or done == n:
            dn, dw, dc = done - last[0], timer.wall - last[1], timer.cpu - last[2]
            last = (done, timer.wall, timer.cpu)
            print(
                f"  {done:>13,} keys: last {dn:,} at {dn / dw:9,.0f}/s wall {dn / dc:9,.0f}/s CPU;"
                f" levels {f._level_rows}; {file_bytes(args.path) / done:5.1f} B/key;"
                f" RSS {peak_rss_mb():,.0f} MB; load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    with timer:
        asyncio.run(f.flush())
    print(
        f"insert      {n / timer.wall:10,.0f} keys/s wall ({timer.wall:.1f} s), "
        f"{n / timer.cpu:10,.0f} keys/s CPU ({timer.cpu:.1f} s); "
        f"keys found already seen: {collisions} (64-bit collisions)"
    )

    # Lookups: present keys (forgotten by the recent set: Bloom, then the exact table) and
    # absent keys (never inserted: a Bloom positive must come back "not seen").
    m = args.lookups
    blocks = n // _BLOCK
    rnd = random.Random(12345)
    present: list[int] = []
    while len(present) < m:
        present += rnd.sample(key_block(rnd.randrange(blocks)), min(1000, m - len(present)))
    absent: list[int] = []
    b = 0
    while len(absent) < m:
        absent += key_block(b, absent=True)[: m - len(absent)]
        b += 1
    seen = f._seen
    for label, keys in (("present", present), ("absent", absent)):
        seen._young.clear()
        seen._old.clear()
        timer = Timer()
        found = 0
        with timer:
            for i in range(0, m, size):
                with f._guard():
                    found += len(f._seen_test(keys[i : i + size]))
        extra = ""
        if label == "absent":
            positives = sum(1 for k in keys if seen.maybe(k))
            extra = (
                f"; Bloom positives {positives:,} ({positives / m:.2e}), "
                f"reported seen {found} (must be 0)"
            )
            assert found == 0, "a never-inserted key was reported seen"
        else:
            assert found == m, (found, m)
        print(
            f"lookup {label:<7} {m / timer.wall:10,.0f} keys/s wall, "
            f"{m / timer.cpu:10,.0f} keys/s CPU ({timer.cpu:.1f} s){extra}"
        )
    asyncio.run(f.aclose())
    size_b = file_bytes(args.path)
    print(f"disk        {size_b / n:10.1f} bytes/key ({size_b / 2**20:,.0f} MiB)")
    print(f"peak RSS    {peak_rss_mb():10,.0f} MB")
    sys.stdout.flush()
    cmd = [sys.executable, __file__, "--phase", "seen-reopen", "--path", args.path]
    subprocess.run(cmd, check=True)


def seen_reopen(args: argparse.Namespace) -> None:
    """Open an existing frontier file in this fresh process (rebuilds the Bloom filter)."""
    t = time.perf_counter()
    c = time.process_time()
    g = SqliteFrontier(args.path)
    print(
        f"reopen      {time.perf_counter() - t:10.1f} s wall, {time.process_time() - c:.1f} s CPU"
        f" (rebuilds the Bloom filter)   peak RSS {peak_rss_mb():,.0f} MB"
    )
    asyncio.run(g.aclose())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("-n", type=int, default=1_000_000, help="URLs (default 1,000,000)")
    p.add_argument("--hosts", type=int, default=10_000, help="hosts (default 10,000)")
    p.add_argument("--links", type=int, default=100, help="requests per add() (default 100)")
    p.add_argument("--backend", choices=["sqlite", "memory"], default="sqlite")
    p.add_argument("--path", help="database file (default: a fresh temporary file)")
    p.add_argument(
        "--batch-size", type=int, help="sqlite rows per commit (default: the frontier's)"
    )
    p.add_argument("--host-concurrency", type=int, default=1)
    p.add_argument(
        "--seen",
        type=int,
        metavar="N",
        help="measure the URL-seen test alone with N keys (e.g. 100000000), sqlite only",
    )
    p.add_argument("--lookups", type=int, default=1_000_000, help="keys per lookup test")
    p.add_argument(
        "--phase", choices=["all", "drain", "seen-reopen"], default="all", help=argparse.SUPPRESS
    )
    args = p.parse_args()
    if args.phase == "seen-reopen":
        seen_reopen(args)
        return
    if args.seen is not None:
        with tempfile.TemporaryDirectory(prefix="frontier-bench-") as tmp:
            if args.path is None:
                args.path = os.path.join(tmp, "seen.db")
            elif os.path.exists(args.path):
                sys.exit(f"{args.path} exists; the benchmark needs a fresh file")
            seen_test(args)
        return
    if args.phase == "drain":
        asyncio.run(run(args))
        return
    with tempfile.TemporaryDirectory(prefix="frontier-bench-") as tmp:
        if args.path is None:
            args.path = os.path.join(tmp, "frontier.db")
        elif os.path.exists(args.path):
            sys.exit(f"{args.path} exists; the benchmark needs a fresh file")
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
