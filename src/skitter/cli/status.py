"""``skitter status REDIS_URL``: a distributed crawl's counts, once or every N seconds (until
the crawl is over)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from typing import Any

from skitter.cli.common import positive_float
from skitter.distributed import CrawlStatus, check_crawl_id, connect, read_status
from skitter.errors import SkitterError


def add_parser(sub: Any) -> None:
    """Register ``status``."""
    p = sub.add_parser(
        "status",
        help="show a distributed crawl's progress (queued, leased, done, workers)",
        description="Show the progress of a crawl kept in Redis.",
    )
    p.add_argument(
        "redis_url",
        metavar="REDIS_URL",
        help="redis://HOST:PORT/DB (or rediss://, redis+cluster://)",
    )
    p.add_argument(
        "--crawl-id", default="skitter", help="the crawl's key prefix (default: skitter)"
    )
    p.add_argument(
        "--watch",
        type=positive_float,
        metavar="N",
        help="print again every N seconds until the crawl is over (nothing pending or "
        "leased) or interrupted",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per reading")


def render(st: CrawlStatus) -> str:
    """One human-readable line of a :class:`CrawlStatus`."""
    return (
        f"{st.crawl_id}: {st.state}; queued {st.pending}, leased {st.leased}, done {st.done}, "
        f"hosts {st.hosts}, workers alive {st.workers_alive}, {st.pages_per_s:.1f} pages/s "
        f"(last minute; {st.avg_pages_per_s:.1f} over {st.elapsed_s:.0f} s)"
        + (" -- finished" if st.finished else "")
    )


async def _run(args: argparse.Namespace) -> int:
    crawl_id = check_crawl_id(args.crawl_id)
    client = await connect(args.redis_url)
    try:
        while True:
            st = await read_status(client, crawl_id)
            print(json.dumps(asdict(st)) if args.json else render(st), flush=True)
            if args.watch is None or st.finished:
                return 0
            await asyncio.sleep(args.watch)
    finally:
        await client.aclose()


def run(args: argparse.Namespace) -> int:
    """Print the status; exit 0, or 2 with one line on a bad URL or unknown crawl."""
    try:
        return asyncio.run(_run(args))
    except SkitterError as e:
        print(f"skitter: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
