"""``crawl`` flags for duplicate pages, sitemaps and fetch order (``QualitySettings``)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from skitter.cli.common import positive_int, size
from skitter.settings import QualitySettings

__all__ = ["add_quality_flags", "quality_from_args"]


def _distance(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of bits 0..31, got {text!r}") from None
    if not 0 <= n <= 31:
        raise argparse.ArgumentTypeError(f"expected a number of bits 0..31, got {n}")
    return n


def _ratio_or_off(text: str) -> float | None:
    if text.strip().lower() == "off":
        return None
    try:
        r = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a ratio 0..1 or 'off', got {text!r}") from None
    if not 0.0 < r <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a ratio in (0, 1] or 'off', got {text}")
    return r


def _http_url(text: str) -> str:
    from skitter.urls import canonicalize, is_http

    url = canonicalize(text.strip())
    if url is None or not is_http(url):
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r}")
    return url


def add_quality_flags(c: argparse.ArgumentParser) -> None:
    """Add the duplicate / sitemap / order flags to the ``crawl`` parser."""
    g = c.add_argument_group("duplicates, sitemaps, order")
    g.add_argument(
        "--dedup",
        choices=["off", "exact", "near"],
        help="duplicate pages: same decoded body (exact, default) or also SimHash (near)",
    )
    g.add_argument(
        "--near-dup-distance",
        type=_distance,
        metavar="BITS",
        help="SimHash bits that may differ for a near duplicate, default 3",
    )
    g.add_argument(
        "--max-duplicate-ratio",
        type=_ratio_or_off,
        metavar="R",
        help="stop queueing a host whose pages are more than R duplicates "
        "(after 50 pages), default 0.5 ('off' to disable)",
    )
    g.add_argument(
        "--sitemaps",
        choices=["robots", "also", "only", "off"],
        help="read sitemaps named by robots.txt (robots, default), also /sitemap.xml (also), "
        "crawl sitemap entries only (only), none (off)",
    )
    g.add_argument(
        "--sitemap",
        action="append",
        type=_http_url,
        metavar="URL",
        help="read this sitemap too (repeatable)",
    )
    g.add_argument(
        "--max-sitemap-bytes",
        type=size,
        metavar="BYTES",
        help="decoded size cap of one sitemap, default 50MiB",
    )
    g.add_argument(
        "--max-sitemap-depth",
        type=positive_int,
        metavar="N",
        help="sitemap index nesting read, default 5",
    )
    g.add_argument(
        "--since",
        metavar="DIR",
        help="recrawl the pages of the crawl in DIR (only read) with conditional requests; "
        "its seeds, scope and --resolve are used",
    )
    g.add_argument(
        "--order",
        choices=["bfs", "inlinks"],
        help="fetch order within a host: by depth (bfs, default) or most in-linked first",
    )


def quality_from_args(args: argparse.Namespace, base: QualitySettings) -> QualitySettings:
    """``base`` with the flags given on the command line applied."""
    a: dict[str, Any] = vars(args)
    q = base
    names = {
        "dedup": "dedup",
        "near_dup_distance": "near_dup_distance",
        "max_duplicate_ratio": "max_duplicate_ratio",
        "sitemaps": "sitemaps",
        "max_sitemap_bytes": "max_sitemap_bytes",
        "max_sitemap_depth": "max_sitemap_depth",
        "order": "order",
    }
    changes: dict[str, Any] = {field: a[flag] for flag, field in names.items() if flag in a}
    if "sitemap" in a:
        changes["sitemap_urls"] = tuple(a["sitemap"])
    return replace(q, **changes) if changes else q
