"""``skitter worker REDIS_URL --out DIR``: join a crawl kept in Redis (its settings from there)."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from skitter.cli.common import add_status_flags, folder, positive_float
from skitter.cli.crawl import _crawl
from skitter.cli.outcome import failure_exit
from skitter.errors import SkitterError
from skitter.folder_lock import check_free, lock_folder
from skitter.settings import redact_url
from skitter.state import STATE_FILE, settings_from_dict
from skitter.status.session import StatusOptions


def add_parser(sub: Any) -> None:
    """Register ``worker``."""
    p = sub.add_parser(
        "worker",
        help="join a crawl kept in Redis (started with skitter crawl --frontier redis://...)",
        description="Work on a crawl kept in Redis with the crawl's own settings; write this "
        "worker's WARC (skitter-wID-*), pages.jsonl and links.tsv in DIR. Exits 0 when the "
        "crawl has nothing pending or leased (or is stopped).",
        epilog="exit codes: 0 done; 1 Redis unreachable past --redis-wait (run the same "
        "command again to go on); 2 bad URL, password, crawl id or folder; 130 interrupted",
    )
    p.add_argument(
        "redis_url",
        metavar="REDIS_URL",
        help="redis://HOST:PORT/DB (or rediss://, redis+cluster://)",
    )
    p.add_argument(
        "--out", "-o", metavar="DIR", type=folder, required=True, help="this worker's output folder"
    )
    p.add_argument(
        "--crawl-id",
        default="skitter",
        metavar="NAME",
        help="the crawl's key prefix (default: skitter)",
    )
    p.add_argument(
        "--redis-wait",
        type=positive_float,
        default=300.0,
        metavar="S",
        help="seconds to retry while Redis is unreachable (default: 300)",
    )
    p.add_argument(
        "--quiet", "-q", action="store_true", help="no progress display and no end summary"
    )
    p.add_argument("--verbose", "-v", action="store_true", help="log more to stderr")
    add_status_flags(p)  # --status-port: the page covers the whole crawl


async def _settings(args: argparse.Namespace) -> Any:
    from skitter.distributed import check_crawl_id, connect, load_crawl

    crawl_id = check_crawl_id(args.crawl_id)
    client = await connect(args.redis_url)
    try:
        data = await load_crawl(client, crawl_id)
    finally:
        await client.aclose()
    settings = settings_from_dict(data)
    return replace(
        settings,
        out_dir=args.out,
        frontier=args.redis_url,
        crawl_id=crawl_id,
        redis_wait_s=args.redis_wait,
        join=True,
        resume=(Path(args.out) / STATE_FILE).exists(),
        quiet=args.quiet,
        processes=1,
    )


def run(args: argparse.Namespace) -> int:
    """Run ``skitter worker``; returns the exit code."""
    url = redact_url(args.redis_url)
    hint = f"skitter worker {url} --out {args.out} --crawl-id {args.crawl_id}"
    try:
        out = Path(args.out)
        check_free(out)  # a crawl or worker running there: named, nothing changed
        settings = asyncio.run(_settings(args))
        held = lock_folder(out, "worker") if settings.resume else None
        try:
            stats_interval_s = getattr(args, "stats_interval", 60.0)
            return asyncio.run(_crawl(settings, StatusOptions.from_args(args), stats_interval_s))
        finally:
            if held is not None:
                held.release()
    except (SkitterError, OSError, KeyboardInterrupt) as exc:
        lost = f"\nthe worker stopped; the crawl is kept in Redis: {hint}"
        return failure_exit(exc, go_on=hint, lost=lost, verb="go on with")
