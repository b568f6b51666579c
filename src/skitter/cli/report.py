"""``skitter report OUT_DIR``: write OUT_DIR/report.html (and metrics.prom) from a crawl's
output folder, finished or interrupted."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from skitter.cli.common import os_error_line
from skitter.errors import StateError
from skitter.folder_lock import check_free


def add_parser(sub: Any) -> None:
    """Register the ``report`` subcommand."""
    c = sub.add_parser(
        "report",
        help="write report.html (charts and tables) from a crawl's output folder",
        description="Write OUT_DIR/report.html, one self-contained page with charts and "
        "tables, from pages.jsonl, links.tsv and report.json of any finished or interrupted "
        "crawl; also OUT_DIR/metrics.prom (Prometheus textfile format).",
        epilog="exit codes: 0 written; 2 not a crawl output folder or not writable",
    )
    c.add_argument("out_dir", metavar="OUT_DIR", help="the crawl's --out folder")
    c.add_argument("--quiet", "-q", action="store_true", help="do not print the path of the report")


def run(args: argparse.Namespace) -> int:
    """Write the report; returns the exit code."""
    from skitter.report import write_report
    from skitter.status.metrics import CrawlMetrics

    out = Path(args.out_dir)
    if not out.is_dir():
        print(f"skitter: error: not a folder: {out}", file=sys.stderr)
        return 2
    try:
        check_free(out)  # a running crawl writes these files itself at its end
        path = write_report(out)
        CrawlMetrics.from_output(out).write_textfile(out / "metrics.prom")
    except StateError as exc:
        print(f"skitter: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"skitter: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(os_error_line(exc), file=sys.stderr)
        return 2
    if not args.quiet:
        print(path)
    return 0
