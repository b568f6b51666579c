"""``skitter merge DIR... --out MERGED``: several crawl folders joined into one pages.jsonl,
links.tsv and report.json, one record per URL (logic: :func:`skitter.merge.merge_folders`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from skitter.cli.common import NotAFolderFlag, folder
from skitter.cli.outcome import error_exit
from skitter.errors import SkitterError


def add_parser(sub: Any) -> None:
    """Register the ``merge`` subcommand."""
    m = sub.add_parser(
        "merge",
        help="join crawl folders into one pages.jsonl, links.tsv (.zst) and report.json",
        description="Join the journals of crawl folders (the shards of a --processes crawl, "
        "separate crawls) into MERGED, one record per URL: the latest attempt (fetched_at) "
        "wins; ties go to the folder given later, then to the later line.",
        epilog="exit codes: 0 merged; 2 bad folders or an unwritable MERGED",
    )
    m.add_argument("folders", nargs="+", metavar="DIR", type=Path, help="a crawl folder")
    m.add_argument(
        "--out",
        metavar="MERGED",
        required=True,
        type=lambda text: Path(folder(text)),  # not "": Path("") is the current folder
        help="folder for the merged files (created; a previous merge is replaced)",
    )
    # the output-flag rule: -o/--output is a file, and this command writes a folder
    m.add_argument("-o", "--output", nargs="?", action=NotAFolderFlag, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Merge; print a one-line summary. Returns the exit code."""
    from skitter.merge import merge_folders

    try:
        s = merge_folders(args.folders, args.out)
    except (SkitterError, OSError) as exc:
        return error_exit(exc)
    torn = f"; {s.torn} journal(s) ended in a partial line, left out" if s.torn else ""
    if s.damaged:
        torn += f"; {s.damaged} damaged pages.jsonl line(s) (not a record), left out"
    stale = f", {s.stale_leases} of them of lost leases" if s.stale_leases else ""
    print(
        f"merged {len(s.folders)} folders into {args.out}/: {s.records} records "
        f"({s.superseded} earlier attempts superseded{stale}), {s.links} links.tsv rows{torn}"
    )
    return 0
