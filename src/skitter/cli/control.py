"""``skitter control REDIS_URL pause|resume|stop|delete``: steer a distributed crawl."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from skitter.distributed import check_crawl_id, connect, delete_crawl, set_state
from skitter.errors import SkitterError

#: action -> crawl state it sets (delete removes the crawl instead).
ACTIONS = {"pause": "paused", "resume": "running", "stop": "stopped", "delete": ""}


def add_parser(sub: Any) -> None:
    """Register ``control``."""
    p = sub.add_parser(
        "control",
        help="pause, resume, stop or delete a distributed crawl",
        description=(
            "pause: workers lease nothing until resume; stop: workers finish what they hold "
            "and exit 0 (the crawl can be resumed); delete: remove every key of the crawl."
        ),
    )
    p.add_argument(
        "redis_url",
        metavar="REDIS_URL",
        help="redis://HOST:PORT/DB (or rediss://, redis+cluster://)",
    )
    p.add_argument("action", choices=list(ACTIONS))
    p.add_argument(
        "--crawl-id", default="skitter", help="the crawl's key prefix (default: skitter)"
    )


async def _run(args: argparse.Namespace) -> int:
    crawl_id = check_crawl_id(args.crawl_id)
    client = await connect(args.redis_url)
    try:
        if args.action == "delete":
            n = await delete_crawl(client, crawl_id)
            print(f"deleted crawl {crawl_id}: {n} keys")
        else:
            await set_state(client, crawl_id, ACTIONS[args.action])
            print(f"crawl {crawl_id}: {ACTIONS[args.action]}")
        return 0
    finally:
        await client.aclose()


def run(args: argparse.Namespace) -> int:
    """Apply the action; exit 0, or 2 with one line (bad URL, unknown crawl...)."""
    try:
        return asyncio.run(_run(args))
    except SkitterError as e:
        print(f"skitter: {e}", file=sys.stderr)
        return 2
