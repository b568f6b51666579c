"""``skitter crawl``: flags, one process or ``--processes N``, the end summary."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skitter.cli.common import (
    EXIT_CODES,
    add_common_flags,
    add_out_folder_flag,
    add_status_flags,
    exit_code,
    finished_report,
    no_seed_answered,
    plural,
    processes,
    settings_from_args,
    summary_lines,
    write_stdout,
)
from skitter.cli.flag_types import warc_level
from skitter.cli.focus_flags import add_focus_flags
from skitter.cli.outcome import failure_exit
from skitter.cli.quality_flags import add_quality_flags, quality_from_args
from skitter.errors import ConfigError, SkitterError, StateError
from skitter.export.linkfile import links_name
from skitter.folder_lock import FolderLock, check_free, lock_folder
from skitter.settings import (
    CrawlSettings,
    is_redis_url,
)
from skitter.state import (
    check_resume_compatible,
    checkpoint_limits,
    load_state,
    loosened_limits,
    prepare_new_out_dir,
    resume_limits,
    save_resumed_state,
)
from skitter.stats import StatsSnapshot
from skitter.status.session import (
    StatusOptions,
    announce,
    write_end_files,
)

if TYPE_CHECKING:
    from skitter.crawler import Crawler

EXAMPLES = """examples:
  skitter crawl https://example.org/ --out crawl-1
  skitter crawl example.org --max-depth 2 --max-time 20m --out crawl-2
  skitter crawl --seeds-file domains.txt --scope domain --delay 2 --random-wait --out crawl-3
  skitter crawl --config crawl.toml -v --log-file crawl.log
  skitter crawl --resume --out crawl-1       # after Ctrl-C, kill -9, a crash, --max-time"""


def add_parser(sub: Any) -> None:
    """Register the ``crawl`` subcommand."""
    S = argparse.SUPPRESS
    c = sub.add_parser(
        "crawl",
        help="crawl from seed URLs, write WARC, pages.jsonl, links.tsv, report.json",
        description="Crawl politely from seeds; the output folder also holds the resumable state.",
        epilog=EXAMPLES + "\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=S,
    )
    c.add_argument(
        "seeds",
        nargs="*",
        metavar="SEED",
        help="seed URL, bare domain name (example.org = https://example.org/) or name:port",
    )
    c.add_argument(
        "--seeds-file",
        metavar="FILE",
        help="file of seeds, one a line (# comments); - reads stdin",
    )
    add_out_folder_flag(
        c,
        "output folder (WARC, pages.jsonl, links.tsv, report.json and the resumable state)",
        required=False,  # required, but may come from --config: checked in run()
    )
    c.add_argument("--resume", action="store_true", help="continue the crawl stored in --out")
    c.add_argument(
        "--levels",
        action="store_true",
        help="crawl level by level: fetch every URL of a depth, then extract its links "
        "(levels/NNNN/ in --out; one process)",
    )
    out = add_common_flags(c)
    add_focus_flags(c)
    add_status_flags(c)
    out.add_argument("--no-warc", action="store_true", help="do not write WARC files")
    out.add_argument(
        "--links-compress",
        choices=("none", "zstd"),
        help="zstd: write links.tsv.zst (one zstd frame per checkpoint) instead of links.tsv "
        "(default none; fixed for the life of a crawl)",
    )
    out.add_argument(
        "--warc-level",
        type=warc_level,
        metavar="N",
        help="gzip level of the WARC records, 1-9 (default 2); 1-3 use ISA-L, 4-9 libdeflate: "
        "6 takes about 3 times the CPU of 2 on pages served uncompressed for WARC files about "
        "12%% smaller (bodies served compressed are stored as received at every level)",
    )
    out.add_argument(
        "--processes",
        type=processes,
        metavar="N",
        help="crawler processes, each owning the hosts that hash to it "
        "(default: the number of cores; fixed for the life of a crawl)",
    )
    add_quality_flags(c)


async def _crawl(settings: CrawlSettings, status: StatusOptions, stats_interval_s: float) -> int:
    from skitter.cli.progress import run_watched

    r = await run_watched(settings, status, stats_interval_s=stats_interval_s)
    write_end_files(settings.out_dir, r.gauges)
    return _summary(settings, r.snapshot, r.stop_reason, r.interrupted)


async def _crawl_levels(settings: CrawlSettings) -> int:
    """``crawl --levels`` (:mod:`skitter.offline.levels`), progress per level on a TTY."""
    from skitter.cli.progress import Progress, run_crawler
    from skitter.offline.levels import run_levels

    async def run_one(crawler: Crawler) -> tuple[StatsSnapshot, bool]:
        return await run_crawler(crawler, Progress(not settings.quiet and sys.stderr.isatty()))

    res = await run_levels(replace(settings, processes=1), run_crawler=run_one)
    if res.interrupted:
        print(f"interrupted; resume with: skitter crawl --resume --out {settings.out_dir}",
              file=sys.stderr)  # fmt: skip
        return 130
    if not settings.quiet:
        per = ", ".join(f"{lv['pages']:,}" for lv in res.levels)
        links = links_name(settings.links_compress)
        print(f"{res.pages:,} pages in {len(res.levels)} levels ({per}); output: "
              f"{settings.out_dir}/ (levels/, pages.jsonl, {links}, report.json)")  # fmt: skip
    return 0


def _choose_processes(settings: CrawlSettings, given: int | None) -> CrawlSettings:
    """The number of processes of a new crawl: ``--processes``, else the cores, except with
    ``--max-depth``: hop counts are exact (breadth-first) in one process only."""
    from skitter.processes import default_processes

    if given is None:
        n = 1 if settings.scope.max_depth is not None else default_processes()
        return replace(settings, processes=n)
    if given > 1 and settings.scope.max_depth is not None:
        print(
            "skitter: warning: with --processes > 1 a URL's depth is counted along the path by "
            "which its process first learned of it, which can be longer than the shortest: "
            "--max-depth may keep out a few pages a single process would crawl",
            file=sys.stderr,
        )
    return settings


def _summary(
    settings: CrawlSettings, snap: StatsSnapshot, stop_reason: str, interrupted: bool
) -> int:
    """Print the end-of-crawl lines (unless quiet) from the same totals as report.json;
    returns the exit code: 130 interrupted, 4 no seed got any HTTP response, else 0."""
    out = Path(settings.out_dir)
    totals = snap.to_dict()
    failed: OSError | None = None
    if not settings.quiet:
        lines = summary_lines(totals)
        if stop_reason == "max_pages":
            lines.append(
                f"stopped at --max-pages {settings.max_pages} (2xx pages); more were queued"
            )
        elif stop_reason == "max_time":
            lines.append(
                f"stopped at --max-time ({settings.max_time_s:g} s); more were queued: "
                f"continue with: skitter crawl --resume --out {out}"
            )
        warc = ", *.warc.gz, *.cdxj" if settings.warc else ""
        links = links_name(settings.links_compress)
        lines.append(f"output: {out}/ (pages.jsonl, {links}, report.json{warc})")
        failed = write_stdout(lines)
        if failed is not None:
            print(
                f"skitter: error: cannot write the summary to stdout: "
                f"{failed.strerror or failed} (the crawl's files in {out}/ are not affected)",
                file=sys.stderr,
            )
    code = _summary_code(settings, totals, stop_reason, interrupted)
    return code if failed is None else exit_code(code, 1)


def _summary_code(
    settings: CrawlSettings, totals: dict[str, Any], stop_reason: str, interrupted: bool
) -> int:
    """The exit code of a crawl that ran (see :func:`_summary`); prints its stderr line."""
    out = Path(settings.out_dir)
    if interrupted:
        if settings.frontier == "memory":
            print("interrupted (--frontier memory keeps no state: it cannot be resumed)",
                  file=sys.stderr)  # fmt: skip
        else:
            print(f"interrupted; resume with: skitter crawl --resume --out {out}", file=sys.stderr)
        return 130
    # on Redis this folder holds one worker's share: the others may have fetched every seed
    shared = is_redis_url(settings.frontier)
    if stop_reason in ("done", "finished") and no_seed_answered(totals) and not shared:
        print(
            "skitter: no seed got any HTTP response (see error and error_detail in "
            f"{out / 'pages.jsonl'})",
            file=sys.stderr,
        )
        return 4
    return 0


def _crawl_processes(
    settings: CrawlSettings, status: StatusOptions, stats_interval_s: float
) -> int:
    """``crawl`` with ``--processes`` > 1 (:mod:`skitter.processes`): the display on a TTY and
    the status server follow the merged output (:class:`skitter.status.journal.JournalSource`);
    on no terminal, a stats line every ``stats_interval_s`` (0 = off)."""
    import time

    from skitter.cli.outcome import stats_line
    from skitter.processes import run_processes

    if TYPE_CHECKING:
        from skitter.status.journal import JournalSource
        from skitter.status.server import ServerThread
    p = settings.politeness
    show = not settings.quiet and sys.stderr.isatty()
    # followed only for a reader (the display, the status page): the coordinator keeps no
    # crawl metrics otherwise (it stays small: its resident set adds to the crawlers')
    source: JournalSource | None = None
    if show or status.port is not None:
        from skitter.status.journal import JournalSource

        source = JournalSource(settings.out_dir, delay_s=p.delay_s, target=settings.max_pages)
    thread: ServerThread | None = None
    if status.port is not None:
        assert source is not None
        from skitter.status.server import ServerThread, StatusServer  # aiohttp.web

        thread = ServerThread(
            StatusServer(source, status.host, status.port, title=str(settings.out_dir))
        )
        thread.start()
        if not settings.quiet:
            print(f"status: {thread.server.url}", file=sys.stderr)
    live: Any = None
    meter: Any = None
    url_written = False
    interval = 0.0 if settings.quiet or sys.stderr.isatty() else stats_interval_s
    last_stats = time.monotonic()

    def on_status(t: dict[str, int]) -> None:
        nonlocal live, meter, url_written, last_stats
        if source is not None:
            source.update(t)
        if thread is not None and not url_written:  # the output folder is ready now
            url_written = True
            announce(thread.server, settings.out_dir, quiet=True)
        if interval > 0 and time.monotonic() - last_stats >= interval:
            last_stats = time.monotonic()
            rate = t.get("records", 0) / max(t.get("elapsed_ms", 0) / 1000, 1e-9)
            print(
                stats_line(t.get("records", 0), rate, t.get("queued", 0),
                           t.get("inflight", 0), t.get("errors", 0)),
                file=sys.stderr, flush=True,
            )  # fmt: skip
        if not show or source is None:
            return
        if live is None:
            from rich.console import Console
            from rich.live import Live

            from skitter.status.terminal import RateMeter  # rich: on a terminal only

            meter = RateMeter(window_s=30.0)
            live = Live("", console=Console(stderr=True), auto_refresh=False, transient=True)
            live.start()
        from skitter.status.terminal import render

        tot = source.totals_now()
        hosts = [] if tot.target else source.hosts()
        live.update(render(tot, meter.add(tot.fetched), hosts), refresh=True)

    try:
        outcome = run_processes(settings, on_status=on_status)
    finally:
        if live is not None:
            live.stop()
        if source is not None:
            source.finish()
        if thread is not None:
            thread.stop()
    if outcome.error is not None:
        if outcome.exit_code == 2:
            print(f"skitter: error: {outcome.error}", file=sys.stderr)
            return 2
        print(
            f"skitter: error: {outcome.error}; the crawl stopped; resume with: "
            f"skitter crawl --resume --out {settings.out_dir}",
            file=sys.stderr,
        )
        return 1
    write_end_files(settings.out_dir, (0, 0, 0, 0) if outcome.stop_reason == "done" else None)
    return _summary(settings, outcome.snapshot, outcome.stop_reason, outcome.interrupted)


def _recrawl_settings(args: argparse.Namespace) -> CrawlSettings:
    """``--since PREV``: the previous crawl's settings (seeds, scope, --resolve...) with the
    flags given now applied; PREV is only read.

    Raises:
        StateError: PREV holds no crawl, of another format, or damaged.
    """
    from skitter.recrawl import load_previous

    prev = Path(args.since)
    stored = load_previous(prev, warc=False).settings  # refuses a damaged folder early
    if prev.resolve() == Path(args.out).resolve():
        raise ConfigError("--since and --out must be different folders")
    if Path(args.out).resolve().is_relative_to(prev.resolve()):
        raise ConfigError(f"--out {args.out} is inside --since {prev}, which is only read")
    settings = settings_from_args(args, base=replace(stored, out_dir=args.out, resume=False))
    quality = quality_from_args(args, stored.quality)
    settings = replace(settings, quality=replace(quality, since_dir=str(prev)))
    return _choose_processes(settings, getattr(args, "processes", None))


def run(args: argparse.Namespace) -> int:
    """Run ``skitter crawl``; returns the exit code."""
    try:
        if getattr(args, "out", None) is None:
            raise ConfigError("the following arguments are required: --out DIR")
        if getattr(args, "resume", False):
            stored = load_state(Path(args.out))
            settings = settings_from_args(args, base=stored)
            settings = replace(settings, quality=quality_from_args(args, stored.quality))
            check_resume_compatible(stored, settings)
            if getattr(args, "levels", False):
                from skitter.offline.levels import is_levels_crawl

                if not is_levels_crawl(args.out):  # a flag error comes before "finished"
                    raise ConfigError(
                        f"{args.out} is not a --levels crawl; continue it with "
                        f"'skitter crawl --resume --out {args.out}'"
                    )
            done = finished_report(args.out)
            loosened = _limits_loosened(Path(args.out), stored, settings)
            if done is not None and loosened:
                if stored.processes > 1:  # its shards' journals are gone (merged, sealed)
                    raise StateError(
                        f"the crawl in {args.out} is finished and its processes' journals are "
                        f"merged: --{loosened[0]} cannot be raised any more (start a new crawl)"
                    )
                done = None  # one process: the links the old limits left out are crawled now
            if done is not None:
                # nothing left to crawl: say so and touch no file of the crawl
                _write_missing_end_files(args.out)
                records = int(done.get("totals", {}).get("records", 0))
                print(
                    f"the crawl in {args.out} is finished ({plural(records, 'page')}); "
                    "nothing to resume",
                    file=sys.stderr,
                )
                return 0
        elif getattr(args, "since", None):
            settings = _recrawl_settings(args)
        else:
            settings = settings_from_args(args)
            settings = replace(settings, quality=quality_from_args(args, settings.quality))
            if not settings.seeds:
                raise ConfigError("no seeds: give SEED URLs or --seeds-file")
            settings = _choose_processes(settings, getattr(args, "processes", None))
        if is_redis_url(settings.frontier):  # one process; more machines join as workers
            settings = replace(settings, processes=1)
        if settings.focus.save_files is not None:  # before the output folder is made
            from skitter.savefiles import check_root

            check_root(settings.focus.save_files)
        from skitter.rules import ScopeRule
        from skitter.urls import canonicalize

        ScopeRule(settings.scope, [u for u in map(canonicalize, settings.seeds) if u])
        lock = _lock_out_dir(settings)  # before anything in the folder is read for writing
        try:
            return _run_locked(args, settings)
        finally:
            lock.release()
    except (SkitterError, OSError, KeyboardInterrupt) as exc:
        out = getattr(args, "out", None)  # None: refused before --out was checked
        resume = _resume_command(str(out))
        # Redis lost past --redis-wait: the crawl is kept there
        lost = f"; the crawl stopped; resume with: {resume} (or join it with skitter worker)"
        return failure_exit(exc, go_on=resume, out=out, lost=lost)


def _limits_loosened(out: Path, stored: CrawlSettings, given: CrawlSettings) -> list[str]:
    """The limits on what is queued (``--max-depth``, the link caps, ``--max-pages-per-host``,
    the trap limits) that ``given`` raises or lifts, as flag names: compared with those the
    crawl last ran with (its checkpoint; what it does not say: the stored settings)."""
    before = {**resume_limits(stored.scope), **(checkpoint_limits(out) or {})}
    return loosened_limits(before, resume_limits(given.scope))


def _lock_out_dir(settings: CrawlSettings) -> FolderLock:
    """Take the output folder's lock (:mod:`skitter.folder_lock`): a crawl running there
    (``--resume`` or a new crawl into its folder) is refused, naming its pid, and nothing in
    the folder is changed. A new crawl's folder is created (checked empty) first. On resume,
    state.json then takes the limits given now (:func:`skitter.state.save_resumed_state`).

    Raises:
        StateError: the folder is in use, or not empty for a new crawl.
    """
    out = Path(settings.out_dir)
    if settings.resume:
        lock = lock_folder(out)
        try:
            save_resumed_state(out, settings)
        except BaseException:
            lock.release()
            raise
        return lock
    check_free(out)
    prepare_new_out_dir(out)
    return lock_folder(out)


def _run_locked(args: argparse.Namespace, settings: CrawlSettings) -> int:
    """The crawl of :func:`run`, its folder locked (asyncio is imported only by the crawls
    that run here: the coordinator of ``--processes`` stays without it)."""
    from skitter.runtime import tune_gc

    status = StatusOptions.from_args(args)
    if getattr(args, "levels", False) or (settings.resume and _is_levels_crawl(args.out)):
        import asyncio

        return asyncio.run(_crawl_levels(settings))
    if settings.processes > 1:
        return _crawl_processes(settings, status, getattr(args, "stats_interval", 60.0))
    import asyncio

    tune_gc()
    return asyncio.run(_crawl(settings, status, getattr(args, "stats_interval", 60.0)))


def _write_missing_end_files(out: str) -> None:
    """Write metrics.prom and report.html of a finished crawl when one is missing: killed after
    it finished, before its end files (they are made from its files alone)."""
    path = Path(out)
    if all((path / name).exists() for name in ("metrics.prom", "report.html")):
        return
    if not _is_levels_crawl(out):  # (a --levels crawl writes none)
        with lock_folder(path):
            write_end_files(out, (0, 0, 0, 0))


def _is_levels_crawl(out: str) -> bool:
    from skitter.offline.levels import is_levels_crawl  # (imports the crawler)

    return is_levels_crawl(out)


def _resume_command(out: str) -> str:
    return f"skitter crawl --resume --out {out}"
