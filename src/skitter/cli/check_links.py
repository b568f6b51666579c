"""``skitter check-links``: flags, the check run and its report."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from skitter.checklinks import CheckPolicy
from skitter.cli.common import (
    EXIT_CODES,
    add_common_flags,
    add_status_flags,
    check_output_file,
    finished_report,
    folder,
    os_error_line,
    output_failure_line,
    plural,
    positive_float,
    regex,
    settings_from_args,
)
from skitter.cli.progress import run_watched
from skitter.crawler import Crawler
from skitter.errors import ConfigError, OutputError, SkitterError, StateError
from skitter.folder_lock import FolderLock, check_free, lock_folder
from skitter.settings import (
    CrawlSettings,
)
from skitter.state import check_resume_compatible, load_state, save_resumed_state
from skitter.status.session import END_FILES, StatusOptions, write_end_files

log = logging.getLogger("skitter")


def _statuses(text: str) -> frozenset[int]:
    """``"429,999"`` -> {429, 999} (HTTP statuses 100..999)."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or not 100 <= int(part) <= 999:
            raise argparse.ArgumentTypeError(f"not an HTTP status: {part!r}")
        out.add(int(part))
    return frozenset(out)


EXAMPLES = """examples:
  skitter check-links https://example.org/                       # report on stdout
  skitter check-links example.org --check-resources -o links.html --format html
  skitter check-links https://example.org/ --ignore '/private/' --accept 429,999
  skitter check-links https://example.org/ --out check-1         # keep the state...
  skitter check-links --resume --out check-1                     # ...to continue after Ctrl-C"""


def add_parser(sub: Any) -> None:
    """The ``check-links`` subcommand: the crawl flags plus the checker's own."""
    from skitter.checklinks import FORMATS

    c = sub.add_parser(
        "check-links",
        help="find broken links on a site and the pages they are on",
        description=(
            "Crawl the sites of the given URLs politely and check every link found: internal "
            "pages are crawled, links to other hosts are checked once each (HEAD, GET "
            "fallback)."
        ),
        epilog=EXAMPLES + "\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    c.add_argument(
        "seeds", nargs="*", metavar="URL", help="start URL, bare domain name or name:port"
    )
    c.add_argument(
        "--seeds-file", metavar="FILE", help="file of start URLs, one a line; - reads stdin"
    )
    c.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the report to FILE (default: stdout); checked before the crawl starts",
    )
    c.add_argument(
        "--out",
        metavar="DIR",
        type=folder,
        help="keep the check's state and journals here (default: a temporary folder, "
        "removed at the end); a later check in DIR reuses external verdicts",
    )
    c.add_argument("--resume", action="store_true", help="continue the check stored in --out")
    g = c.add_argument_group("checking")
    g.add_argument(
        "--check-resources",
        action="store_true",
        help="also check <img src>, srcset, <script src>, stylesheet/icon <link href>",
    )
    g.add_argument(
        "--check-fragments",
        dest="check_fragments",
        action="store_true",
        help="check page#name against the ids of internal pages (default: on)",
    )
    g.add_argument("--no-check-fragments", dest="check_fragments", action="store_false")
    g.add_argument(
        "--accept",
        type=_statuses,
        metavar="STATUS,...",
        help="final statuses that count as ok, e.g. 429,999",
    )
    g.add_argument(
        "--ignore",
        action="append",
        type=regex,
        metavar="REGEX",
        help="do not check URLs matching REGEX (reported as excluded)",
    )
    g.add_argument(
        "--cache-age",
        type=positive_float,
        metavar="SECONDS",
        help="reuse verdicts of external links from the previous check in --out DIR "
        "up to this old, default 86400 (0 = never)",
    )
    g.add_argument("--format", choices=FORMATS, help="report format, default: text")
    add_common_flags(c)
    add_status_flags(c)


def _prepare_check_dir(out: Path, settings: CrawlSettings, cache_age_s: float) -> list[Any]:
    """For a new check in ``out``: take the reusable verdicts of the previous check there,
    then clear its files. Raises StateError if ``out`` holds a crawl or an unfinished check."""
    from skitter.checklinks import CHECK_FILES, CheckPolicy, collect_cache
    from skitter.state import STATE_FILE, read_json
    from skitter.urls import canonicalize

    if not (out / STATE_FILE).exists():
        return []  # new or foreign folder: the crawler's own checks apply
    stored = load_state(out)
    if not stored.check_links:
        raise StateError(f"output folder {out} holds a crawl, not a link check")
    report = read_json(out / "report.json") if (out / "report.json").exists() else {}
    if report.get("stop_reason") in (None, "", "interrupted", "aborted", "max_time"):
        raise StateError(
            f"output folder {out} holds an unfinished check; continue it with "
            f"'skitter check-links --resume --out {out}' or choose another folder"
        )
    seeds = [u for u in (canonicalize(s) for s in settings.seeds) if u is not None]
    cache = collect_cache(out, CheckPolicy(settings, seeds), cache_age_s, time.time())
    for name in (*CHECK_FILES, *END_FILES):
        (out / name).unlink(missing_ok=True)
    for warc in out.glob("*.warc.gz"):
        warc.unlink()
    return cache


async def _check(
    settings: CrawlSettings,
    cache: list[Any],
    status: StatusOptions,
    keep: bool,
    stats_interval_s: float,
) -> tuple[bool, dict[str, Any]]:
    """Run the check's crawl (observed: display, --status-port, a stats line every
    ``stats_interval_s`` when stderr is not a terminal); returns (interrupted, report.json
    totals). ``keep``: the folder is the user's (--out): metrics.prom and report.html too."""

    def prepare(crawler: Crawler) -> None:
        if cache and isinstance(crawler.policy, CheckPolicy):
            crawler.policy.set_cache(cache, Path(settings.out_dir))

    r = await run_watched(settings, status, prepare, stats_interval_s=stats_interval_s)
    if keep:
        write_end_files(settings.out_dir, r.gauges)
    return r.interrupted, r.snapshot.to_dict()


def _write_report(text: str, target: str | None) -> None:
    """The report to stdout or to ``target`` (through a temporary file and a rename, so a
    failed write leaves neither a partial report nor a stray temporary file; a device or
    FIFO such as /dev/stdout is written in place, a symlink's target through the rename).

    Raises:
        OSError: the report could not be written.
    """
    import os

    if target is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(os.path.realpath(target))  # a symlink's target is written, not replaced
    if path.exists() and not path.is_file():
        # /dev/stdout, a FIFO, a device: written in place (a rename would replace it)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    tmp = path.with_name(f".{path.name}.skitter-tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def run(args: argparse.Namespace) -> int:
    """``skitter check-links``: exit 0 nothing broken, 1 broken links (or the report could
    not be written), 2 usage error, 4 no start URL answered, 130 interrupted."""
    import shutil
    import tempfile

    from skitter.checklinks import format_report, load_report
    from skitter.rules import ScopeRule
    from skitter.urls import canonicalize

    resume = bool(getattr(args, "resume", False))
    temp: str | None = None
    keep_temp = False
    target: str | None = getattr(args, "output", None)
    held: FolderLock | None = None
    try:
        if target is not None:
            check_output_file(target)
        if getattr(args, "out", None) is None:
            if resume:
                raise ConfigError("--resume needs --out DIR (the folder of the check)")
            temp = tempfile.mkdtemp(prefix="skitter-check-")
            args.out = str(Path(temp) / "check")
        out = Path(args.out)
        if getattr(args, "ignore", None):
            args.exclude = [*(getattr(args, "exclude", None) or []), *args.ignore]
        cache: list[Any] = []
        if resume:
            stored = load_state(out)
            if not stored.check_links:
                raise StateError(f"{out} holds a crawl, not a link check")
            settings = settings_from_args(args, base=stored)
            check_resume_compatible(stored, settings)
            held = lock_folder(out, "check-links")  # refused while one runs there
            save_resumed_state(out, settings)  # the limits given now, for later resumes
        else:
            check_free(out)  # a crawl or check running there: named
            settings = settings_from_args(args)
            if not settings.seeds:
                raise ConfigError("no URLs: give start URLs or --seeds-file")
            settings = replace(
                settings,
                warc=False,
                check_links=True,
                check_resources=bool(getattr(args, "check_resources", False)),
                check_fragments=bool(getattr(args, "check_fragments", True)),
            )
            cache = _prepare_check_dir(out, settings, getattr(args, "cache_age", 86400.0))
        ScopeRule(settings.scope, [u for u in map(canonicalize, settings.seeds) if u])
        done = finished_report(str(out)) if resume else None
        if done is not None:  # a finished check: only its report is (re)written
            interrupted, totals = False, dict(done.get("totals", {}))
        else:
            status = StatusOptions.from_args(args)
            interrupted, totals = asyncio.run(
                _check(
                    settings, cache, status, temp is None, getattr(args, "stats_interval", 60.0)
                )
            )
        if interrupted:
            if temp is None:
                print(
                    f"interrupted; resume with: skitter check-links --resume --out {out}",
                    file=sys.stderr,
                )
            else:
                print("interrupted (no --out: nothing kept)", file=sys.stderr)
            return 130
        report = load_report(
            out,
            accept=getattr(args, "accept", frozenset()),
            check_fragments=settings.check_fragments,
        )
        text = format_report(report, getattr(args, "format", "text"))
        try:
            _write_report(text, target)
        except OSError as exc:
            keep_temp = True  # never lose the results because the report could not be written
            fmt = getattr(args, "format", "text")
            print(
                f"{os_error_line(exc)}; the results are kept: write the report with: "
                f"skitter check-links --resume --out {out} --format {fmt} -o FILE",
                file=sys.stderr,
            )
            return 1
        s = report.summary
        if not settings.quiet and (target is not None or not sys.stdout.isatty()):
            print(
                f"{plural(s['checked'], 'link')} checked in {float(totals['elapsed_s']):,.1f} s: "
                f"{s['broken']:,} broken, {s['unverified']:,} unverified, "
                f"{s['redirected']:,} redirected" + (f"; report: {target}" if target else ""),
                file=sys.stderr,
            )
        for seed in report.seeds_unanswered:
            print(f"skitter: start URL got no HTTP response: {seed}", file=sys.stderr)
        if report.no_seed_answered:
            # unreachable, or refused by robots.txt: nothing could be checked from them
            print("skitter: no start URL got any HTTP response", file=sys.stderr)
            return 4
        return 1 if s["broken"] else 0
    except OutputError as exc:
        keep_temp = True
        again = f"skitter check-links --resume --out {args.out}"
        print(output_failure_line(exc, again), file=sys.stderr)
        return 1
    except SkitterError as exc:
        print(f"skitter: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if (Path(args.out) / "state.json").exists():  # the check had started: output failed
            keep_temp = True
            again = f"skitter check-links --resume --out {args.out}"
            print(output_failure_line(exc, again), file=sys.stderr)
            return 1
        print(os_error_line(exc), file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: exit 2, never 1 ("broken links found")
        log.exception("internal error")
        print(f"skitter: internal error: {exc!r}", file=sys.stderr)
        return 2
    finally:
        if held is not None:
            held.release()
        if temp is not None and not keep_temp:
            shutil.rmtree(temp, ignore_errors=True)
