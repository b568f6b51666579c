"""``skitter extract``: the pages and links of WARC files, as a crawl would write them."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from skitter.cli.common import add_out_folder_flag, at_least_one, size
from skitter.cli.outcome import error_exit
from skitter.errors import ConfigError, SkitterError


def add_parser(sub: Any) -> None:
    """The ``extract`` subcommand."""
    c = sub.add_parser(
        "extract",
        help="extract pages and links from WARC files (offline)",
        description=(
            "Read WARC files (Skitter's, wget's, Heritrix's, Common Crawl's; gzip per record "
            "or whole-file) and write links.tsv, pages.jsonl and report.json into --out, as "
            "a crawl does. Damaged records are skipped and reported. Exit code: 0 done, "
            "1 records were skipped and --strict, 2 usage error or unreadable input."
        ),
    )
    c.add_argument("warcs", nargs="+", metavar="WARC", help="WARC file (.warc or .warc.gz)")
    add_out_folder_flag(c, "output folder", required=True)
    c.add_argument(
        "--scope",
        choices=("host", "domain", "any"),
        default="host",
        help="links in scope (else decision 'scope'): same host / registered domain as a "
        "seed, or any (default: host)",
    )
    c.add_argument(
        "--seed",
        action="append",
        default=[],
        metavar="URL",
        help="a seed defining the scope (repeatable; default: every archived page's host)",
    )
    c.add_argument(
        "--jobs",
        "-j",
        type=at_least_one,
        default=os.cpu_count() or 1,
        help="processes reading files at once (default: the number of cores)",
    )
    c.add_argument(
        "--max-body-size",
        type=size,
        default=10 * 1024 * 1024,
        metavar="BYTES",
        help="decoded body bytes parsed per record (default 10M)",
    )
    c.add_argument("--strict", action="store_true", help="exit 1 when damaged records were skipped")
    c.add_argument(
        "--links-compress",
        choices=("none", "zstd"),
        default="none",
        help="zstd: write links.tsv.zst instead of links.tsv (default none)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``skitter extract``; returns the exit code."""
    from skitter.offline.extract import ExtractOptions, extract_warcs
    from skitter.settings import ScopeSettings
    from skitter.urls import canonicalize

    try:
        seeds = []
        for s in args.seed:
            canon = canonicalize(s if "://" in s else f"https://{s}/")
            if canon is None:
                raise ConfigError(f"not an http(s) URL or domain name: {s!r}")
            seeds.append(canon)
        options = ExtractOptions(
            scope=ScopeSettings(scope=args.scope),
            seeds=tuple(seeds),
            max_body_bytes=args.max_body_size,
            jobs=args.jobs,
        )
        result = extract_warcs(args.warcs, args.out, options)
        links = _compress(Path(args.out), args.links_compress)
    except (SkitterError, OSError) as exc:
        return error_exit(exc)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(
        f"{result.records:,} records in {result.files} files: {result.pages:,} pages, "
        f"{result.links:,} links, {len(result.skipped)} damaged parts skipped; "
        f"{result.elapsed_s:,.1f} s; output: {args.out}/ ({links}, pages.jsonl, report.json)"
    )
    return 1 if result.skipped and args.strict else 0


def _compress(out: Path, compress: str) -> str:
    """links.tsv as links.tsv.zst (``compress`` "zstd"), or an earlier extract's links.tsv.zst
    removed (it would be read instead); returns the links file's name. Raises OSError."""
    from skitter.export.linkfile import LINKS_ZST_FILE, compress_links

    if compress == "zstd":
        return compress_links(out / "links.tsv").name
    (out / LINKS_ZST_FILE).unlink(missing_ok=True)
    return "links.tsv"
