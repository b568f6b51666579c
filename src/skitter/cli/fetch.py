"""``skitter fetch``: fetch a list of URLs politely into WARC + pages.jsonl, no link following."""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from skitter.cli.common import (
    add_common_flags,
    add_out_folder_flag,
    exit_code,
    no_seed_answered,
    plural,
    settings_from_args,
    write_stdout,
)
from skitter.cli.outcome import failure_exit
from skitter.errors import ConfigError, SkitterError


def add_parser(sub: Any) -> None:
    """The ``fetch`` subcommand."""
    c = sub.add_parser(
        "fetch",
        help="fetch a list of URLs into WARC and pages.jsonl (no link extraction)",
        description=(
            "Fetch every URL of a list with the crawler's fetcher, robots.txt, politeness, "
            "retries and resume, into WARC files and pages.jsonl; pages are not parsed and "
            "no link is followed (redirects are; --scope applies to them, default any). "
            "Find the links later with `skitter extract`."
        ),
        epilog="exit codes (the first that applies): 130 interrupted (resume with --resume "
        "--out DIR); 2 bad flags, list or output folder; 1 the output could not be written "
        "(disk full, I/O error: resume); 4 no URL of the list got any HTTP response; 0 done",
        argument_default=argparse.SUPPRESS,
    )
    c.add_argument("--urls", metavar="FILE", help="the URLs, one a line ('-' = stdin)")
    add_out_folder_flag(c, "output folder", required=True)
    c.add_argument("--resume", action="store_true", help="continue the fetch stored in --out")
    add_common_flags(c)


async def _fetch(settings: Any) -> int:
    from skitter.cli.progress import Progress, run_crawler
    from skitter.crawler import Crawler

    progress = Progress(not settings.quiet and sys.stderr.isatty())
    async with Crawler.from_settings(settings) as crawler:
        snap, interrupted = await run_crawler(crawler, progress)
    failed: OSError | None = None
    if not settings.quiet:
        failed = write_stdout([
            f"{plural(snap.records, 'URL')} fetched ({snap.errors:,} without a response) in "
            f"{snap.elapsed_s:,.1f} s; output: {settings.out_dir}/ (pages.jsonl, *.warc.gz)"
        ])  # fmt: skip
        if failed is not None:
            print(
                f"skitter: error: cannot write the summary to stdout: "
                f"{failed.strerror or failed} (the files in {settings.out_dir}/ are not "
                "affected)",
                file=sys.stderr,
            )
    code = _code(crawler, snap, settings, interrupted)
    return code if failed is None else exit_code(code, 1)


def _code(crawler: Any, snap: Any, settings: Any, interrupted: bool) -> int:
    """130 interrupted, 4 no URL answered, else 0 (printing the stderr line)."""
    if interrupted:
        print(f"interrupted; resume with: skitter fetch --resume --out {settings.out_dir}",
              file=sys.stderr)  # fmt: skip
        return 130
    if crawler.stop_reason == "done" and snap.records and no_seed_answered(snap.to_dict()):
        print(
            "skitter: no URL of the list got any HTTP response (see error and error_detail "
            f"in {Path(settings.out_dir) / 'pages.jsonl'})",
            file=sys.stderr,
        )
        return 4
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``skitter fetch``; returns the exit code."""
    from skitter.folder_lock import check_free, lock_folder
    from skitter.offline.urllist import read_url_list
    from skitter.state import check_resume_compatible, load_state, save_resumed_state

    try:
        if getattr(args, "resume", False):
            stored = load_state(Path(args.out))
            settings = settings_from_args(args, base=stored)
            check_resume_compatible(stored, settings)
            held = lock_folder(Path(args.out), "fetch")  # refused while one runs there
            save_resumed_state(Path(args.out), settings)  # the limits given now, for later
        else:
            check_free(Path(args.out))  # a crawl running there: named
            held = None
            src = getattr(args, "urls", None)
            if src is None:
                raise ConfigError("give the URLs with --urls FILE (or --urls - for stdin)")
            if src == "-":
                stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig")
                urls = read_url_list(stdin, "stdin")  # UTF-8 whatever the locale
            else:
                with open(src, encoding="utf-8-sig") as f:
                    urls = read_url_list(f, src)
            settings = settings_from_args(args)
            scope = settings.scope
            if "scope" not in vars(args):
                scope = replace(scope, scope="any")
            settings = replace(settings, seeds=tuple(urls), scope=scope, processes=1)
        settings = replace(settings, extract_links=False)
        try:
            return asyncio.run(_fetch(settings))
        finally:
            if held is not None:
                held.release()
    except (SkitterError, OSError, KeyboardInterrupt) as exc:
        out = getattr(args, "out", None)  # None: refused before --out was checked
        return failure_exit(exc, go_on=_resume_command(str(out)), out=out, message=_fetch_message)


def _fetch_message(exc: SkitterError) -> str:
    """The state's resume hint names this command, not crawl."""
    return str(exc).replace("'skitter crawl --resume ", "'skitter fetch --resume ")


def _resume_command(out: str) -> str:
    return f"skitter fetch --resume --out {out}"
