"""``skitter index``: a CDXJ index beside each WARC file (``X.warc.gz`` → ``X.cdxj``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from skitter.cli.outcome import error_exit
from skitter.errors import SkitterError


def add_parser(sub: Any) -> None:
    """The ``index`` subcommand."""
    c = sub.add_parser(
        "index",
        help="write a CDXJ index beside each WARC file (for pywb and other replay tools)",
        description=(
            "Write X.cdxj beside each X.warc.gz / X.warc: SURT-keyed, sorted, one line per "
            "response, revisit and resource record, the fields pywb reads. Damaged records "
            "are skipped and reported. Exit code: 0 done, 1 records were skipped and "
            "--strict, 2 usage error or unreadable input."
        ),
    )
    c.add_argument("warcs", nargs="+", metavar="WARC", help="WARC file (.warc or .warc.gz)")
    c.add_argument("--strict", action="store_true", help="exit 1 when damaged records were skipped")


def run(args: argparse.Namespace) -> int:
    """Run ``skitter index``; returns the exit code."""
    from skitter.offline.cdxj import write_index
    from skitter.offline.extract import check_warc
    from skitter.offline.reader import Damage

    skipped = 0
    try:
        for path in args.warcs:
            check_warc(path)
        for path in args.warcs:

            def damage(d: Damage, path: str = path) -> None:
                print(f"skitter: {path}: offset {d.offset}: {d.reason} (skipped)", file=sys.stderr)

            res = write_index(path, on_damage=damage)
            skipped += len(res.skipped)
            print(f"{res.path}: {res.lines:,} lines")
    except (SkitterError, OSError) as exc:
        return error_exit(exc)
    return 1 if skipped and args.strict else 0
