"""The ``skitter`` command line.

Exit codes: 0 success; 2 usage error or unusable input/output (one line on stderr, no
traceback); 130 interrupted (the crawl can be resumed).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from skitter import __version__
from skitter.crawler import Crawler
from skitter.errors import ConfigError, SkitterError, StateError
from skitter.settings import (
    CrawlSettings,
    FetchSettings,
    ScopeSettings,
)
from skitter.state import check_resume_compatible, load_state
from skitter.stats import StatsSnapshot

__all__ = ["build_parser", "main", "settings_from_args"]

log = logging.getLogger("skitter")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return v


def _deadline(text: str) -> float:
    """Seconds for a deadline: finite and > 0."""
    v = _positive_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds: {text!r}")
    return v


def _proxy(text: str) -> str:
    """An http:// or https:// proxy URL with a host."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"expected an http:// proxy URL, got {text!r}")
    return text


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return v


def _at_least_one(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return v


def _processes(text: str) -> int:
    """``--processes``: 1 .. 4 x the cores (each process holds ~70 MB and a share of the
    crawl; far more than the cores only adds memory and scheduling, never speed)."""
    from skitter.processes import default_processes

    v = _at_least_one(text)
    cap = 4 * default_processes()
    if v > cap:
        raise argparse.ArgumentTypeError(
            f"at most {cap} (4 x the {cap // 4} cores of this machine): {text!r}"
        )
    return v


def _limit_or_off(text: str) -> int | None:
    """A whole number >= 0 where 0 turns the limit off (None)."""
    v = _positive_int(text)
    return v or None


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.I)


def _size(text: str) -> int:
    """Bytes from ``10485760``, ``10M``, ``10MiB``, ``512k`` (powers of 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (e.g. 10485760 or 10MiB)")
    n = float(m.group(1))
    unit = (m.group(2) or "b").lower()[0]
    mult = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]
    return int(n * mult)


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c in name for c in " \t\r\n"):
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {text!r}")
    if any(c in text for c in "\r\n\0"):
        raise argparse.ArgumentTypeError(f"control characters in header {text!r}")
    return name.strip(), value.strip()


def _resolve(text: str) -> tuple[str, int, str]:
    parts = text.split(":", 2)
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT:ADDR, got {text!r}")
    host, port_s, addr = parts
    try:
        port = int(port_s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port in --resolve {text!r}") from None
    addr = addr.strip()
    if addr.startswith("[") and addr.endswith("]"):
        addr = addr[1:-1]
    import ipaddress

    try:
        ipaddress.ip_address(addr)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad address in --resolve {text!r}") from None
    if not host or not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"bad host or port in --resolve {text!r}")
    return host.lower(), port, addr


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"bad regular expression {text!r}: {exc}") from None
    return text


def _add_common_flags(c: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add the flags ``crawl`` and ``check-links`` share (scope, politeness, fetching,
    output); returns the "output" group so that a command can add its own there."""
    g = c.add_argument_group("scope")
    g.add_argument("--scope", choices=["host", "domain", "any"], help="default: host")
    g.add_argument("--include", action="append", type=_regex, metavar="REGEX")
    g.add_argument("--exclude", action="append", type=_regex, metavar="REGEX")
    g.add_argument("--max-depth", type=_positive_int, metavar="N", help="hops from a seed")
    g.add_argument(
        "--max-pages",
        type=_at_least_one,
        metavar="N",
        help="stop after N records with a 2xx status",
    )
    g.add_argument("--max-links-per-page", type=_positive_int, metavar="N")
    g.add_argument("--max-seed-links", type=_positive_int, metavar="N")
    g.add_argument("--max-url-length", type=_at_least_one, metavar="N", help="default: 2048")
    g.add_argument("--follow-nofollow", action="store_true")
    g.add_argument(
        "--max-pages-per-host",
        type=_at_least_one,
        metavar="N",
        help="queue at most N distinct URLs per host (links.tsv decision 'limit')",
    )
    g.add_argument(
        "--max-path-depth",
        type=_limit_or_off,
        metavar="N",
        help="drop URLs with more path segments as traps, default 32 (0 = off)",
    )
    g.add_argument(
        "--max-query-variants-per-path",
        type=_limit_or_off,
        metavar="N",
        help="queue at most N distinct queries per scheme+host+path, default 100 (0 = off)",
    )
    g.add_argument(
        "--max-segment-repeats",
        type=_limit_or_off,
        metavar="N",
        help="drop URLs with a path segment repeated more than N times, default 2 (0 = off)",
    )
    g = c.add_argument_group("politeness")
    g.add_argument("--delay", type=_positive_float, metavar="SECONDS", help="per host, default 1.0")
    g.add_argument("--host-concurrency", type=_at_least_one, metavar="N", help="default: 1")
    g.add_argument("--ip-concurrency", type=_at_least_one, metavar="N", help="default: 4")
    g.add_argument("--concurrency", type=_at_least_one, metavar="N", help="default: 64")
    g.add_argument("--retries", type=_positive_int, metavar="N", help="default: 2")
    g.add_argument("--ignore-robots", action="store_true", help="only for your own site")
    g.add_argument("--robots-retry", type=_positive_float, metavar="SECONDS", help="default: 60")
    g.add_argument(
        "--max-crawl-delay",
        type=_positive_float,
        metavar="SECONDS",
        help="cap on robots.txt Crawl-delay, default 30",
    )
    g = c.add_argument_group("fetching")
    g.add_argument(
        "--timeout",
        type=_deadline,
        metavar="SECONDS",
        help="whole-fetch deadline, default 30",
    )
    g.add_argument(
        "--max-body", type=_size, metavar="BYTES", help="decoded size cap, default 10MiB"
    )
    g.add_argument("--user-agent", metavar="UA")
    g.add_argument("--header", action="append", type=_header, metavar="'Name: value'")
    g.add_argument("--proxy", type=_proxy, metavar="URL")
    g.add_argument("--resolve", action="append", type=_resolve, metavar="HOST:PORT:ADDR")
    g.add_argument(
        "--resolve-only",
        action="store_true",
        help="names not given with --resolve fail without any DNS query",
    )
    g.add_argument(
        "--allow-private", action="store_true", help="allow links to loopback/private addresses"
    )
    g = c.add_argument_group("output")
    g.add_argument("--frontier", choices=["sqlite", "memory"], help="default: sqlite")
    g.add_argument(
        "--quiet", "-q", action="store_true", help="no progress display and no end summary"
    )
    g.add_argument("--verbose", "-v", action="store_true", help="log more to stderr")
    return g


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand (defaults are suppressed so that a resume
    can tell given flags from defaults)."""
    S = argparse.SUPPRESS
    parser = _Parser(prog="skitter", description="A polite, fast, resumable web crawler.")
    parser.add_argument("--version", action="version", version=f"skitter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    c = sub.add_parser(
        "crawl",
        help="crawl from seed URLs, write WARC, pages.jsonl, links.tsv, report.json",
        description="Crawl politely from seeds; the output folder also holds the resumable state.",
        epilog="exit codes: 0 done (or --max-pages reached); 2 bad flags, seeds or output "
        "folder; 130 interrupted (resume with --resume --out DIR)",
        argument_default=S,
    )
    c.add_argument("seeds", nargs="*", metavar="SEED", help="seed URL or bare domain name")
    c.add_argument("--seeds-file", metavar="FILE", help="file of seed URLs or domains, one a line")
    c.add_argument("--out", "-o", metavar="DIR", required=True, help="output folder")
    c.add_argument("--resume", action="store_true", help="continue the crawl stored in --out")
    out = _add_common_flags(c)
    out.add_argument("--no-warc", action="store_true", help="do not write WARC files")
    out.add_argument(
        "--processes",
        type=_processes,
        metavar="N",
        help="crawler processes, each owning the hosts that hash to it "
        "(default: the number of cores; fixed for the life of a crawl)",
    )
    _add_check_links(sub)
    return parser


def _read_seeds(args: argparse.Namespace) -> list[str]:
    raw: list[str] = list(getattr(args, "seeds", []) or [])
    path = getattr(args, "seeds_file", None)
    if path is not None:
        try:
            with open(path, encoding="utf-8-sig") as fh:
                lines = fh.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read seeds file {path}: {exc}") from None
        from_file = [t for t in (line.strip() for line in lines) if t and not t.startswith("#")]
        if not from_file:
            raise ConfigError(f"seeds file {path} has no seeds")
        raw.extend(from_file)
    from skitter.urls import canonicalize

    seeds = []
    for s in raw:
        # a bare name means https://NAME/ ; a bare name with a path keeps its path
        url = s if "://" in s else f"https://{s}" if "/" in s else f"https://{s}/"
        if canonicalize(url) is None:
            raise ConfigError(f"not an http(s) URL or domain name: {s!r}")
        seeds.append(url)
    return seeds


def settings_from_args(
    args: argparse.Namespace, base: CrawlSettings | None = None
) -> CrawlSettings:
    """Settings from parsed flags; on resume ``base`` (the stored settings) fills the rest.

    Raises:
        ConfigError: no seeds for a new crawl, unreadable seeds file, bad seed.
    """
    a: dict[str, Any] = vars(args)
    given = set(a)
    b = base or CrawlSettings(out_dir=a["out"])

    def pick(name: str, current: Any) -> Any:
        return a[name] if name in given else current

    seeds = (
        _read_seeds(args)
        if ({"seeds", "seeds_file"} & given and (a.get("seeds") or a.get("seeds_file")))
        else list(b.seeds)
    )
    fetch = b.fetch
    resolve = dict(fetch.resolve)
    if "resolve" in given:
        resolve = {(h, p): addr for h, p, addr in a["resolve"]}
    fetch = FetchSettings(
        user_agent=pick("user_agent", fetch.user_agent),
        headers=tuple(a["header"]) if "header" in given else fetch.headers,
        timeout_s=pick("timeout", fetch.timeout_s),
        connect_timeout_s=min(fetch.connect_timeout_s, pick("timeout", fetch.timeout_s)),
        read_timeout_s=min(fetch.read_timeout_s, pick("timeout", fetch.timeout_s)),
        max_body_bytes=pick("max_body", fetch.max_body_bytes),
        max_redirects=fetch.max_redirects,
        proxy=pick("proxy", fetch.proxy),
        resolve=resolve,
        resolve_only=pick("resolve_only", fetch.resolve_only),
        dns_cache_ttl_s=fetch.dns_cache_ttl_s,
        allow_private=pick("allow_private", fetch.allow_private),
    )
    if not fetch.user_agent.strip():
        raise ConfigError("--user-agent must not be empty")
    p = b.politeness
    politeness = replace(
        p,
        delay_s=pick("delay", p.delay_s),
        host_concurrency=pick("host_concurrency", p.host_concurrency),
        ip_concurrency=pick("ip_concurrency", p.ip_concurrency),
        concurrency=pick("concurrency", p.concurrency),
        retries=pick("retries", p.retries),
        ignore_robots=pick("ignore_robots", p.ignore_robots),
        robots_retry_s=pick("robots_retry", p.robots_retry_s),
        max_crawl_delay_s=pick("max_crawl_delay", p.max_crawl_delay_s),
    )
    sc = b.scope
    scope = ScopeSettings(
        scope=pick("scope", sc.scope),
        include=tuple(a["include"]) if "include" in given else sc.include,
        exclude=tuple(a["exclude"]) if "exclude" in given else sc.exclude,
        max_depth=pick("max_depth", sc.max_depth),
        max_links_per_page=pick("max_links_per_page", sc.max_links_per_page),
        max_seed_links=pick("max_seed_links", sc.max_seed_links),
        max_url_length=pick("max_url_length", sc.max_url_length),
        follow_nofollow=pick("follow_nofollow", sc.follow_nofollow),
        max_pages_per_host=pick("max_pages_per_host", sc.max_pages_per_host),
        max_path_depth=pick("max_path_depth", sc.max_path_depth),
        max_query_variants_per_path=pick(
            "max_query_variants_per_path", sc.max_query_variants_per_path
        ),
        max_segment_repeats=pick("max_segment_repeats", sc.max_segment_repeats),
    )
    return CrawlSettings(
        out_dir=a["out"],
        seeds=tuple(seeds),
        fetch=fetch,
        politeness=politeness,
        scope=scope,
        frontier=pick("frontier", b.frontier),
        max_pages=pick("max_pages", b.max_pages),
        warc=not a["no_warc"] if "no_warc" in given else b.warc,
        warc_max_bytes=b.warc_max_bytes,
        quiet=pick("quiet", False),
        resume=bool(a.get("resume", False)),
        check_links=b.check_links,
        check_resources=b.check_resources,
        check_fragments=b.check_fragments,
        processes=pick("processes", b.processes),
    )


class _Progress:
    """A one-line live display on a terminal (rich), refreshed twice a second, or nothing:
    pages, ok, pages/s, queued, in flight, hosts, errors, robots-blocked."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.live: Any = None
        self._task: asyncio.Task[None] | None = None

    def start(self, crawler: Crawler) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.live import Live

        self.live = Live("", console=Console(stderr=True), refresh_per_second=4, transient=True)
        self.live.start()
        self._task = asyncio.get_running_loop().create_task(self._refresh(crawler))

    async def _refresh(self, crawler: Crawler) -> None:
        while self.live is not None:
            s = crawler.snapshot()
            c = await crawler.components.frontier.counts()
            if self.live is None:
                break
            self.live.update(
                f"pages {s.records:,}  ok {s.ok:,}  {s.pages_per_s:,.1f} pages/s  "
                f"queued {c.pending:,}  in flight {c.leased:,}  hosts {c.hosts:,}  "
                f"errors {s.errors:,}  robots-blocked {s.robots_disallowed:,}"
            )
            await asyncio.sleep(0.5)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.live is not None:
            self.live.stop()
            self.live = None


async def _run_crawler(crawler: Crawler, progress: _Progress) -> tuple[StatsSnapshot, bool]:
    """Run an entered crawler with progress and Ctrl-C handling.

    The first SIGINT/SIGTERM stops leasing (requests in flight finish and are recorded), a
    second one aborts them. Returns ``(snapshot, interrupted)``; interrupted means the
    crawl stopped before its frontier ran dry because of a signal.
    """
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            progress.stop()
            print("stopping: finishing requests in flight (Ctrl-C again to abort)", file=sys.stderr)
            crawler.request_stop()
        else:
            crawler.abort()

    handled = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal)
            handled.append(sig)
        except (ValueError, RuntimeError, NotImplementedError):
            pass  # not the main thread (library/test use): no signal handling
    progress.start(crawler)
    try:
        snap = await crawler.run()
    finally:
        progress.stop()
        for sig in handled:
            loop.remove_signal_handler(sig)
    stopped = crawler.report()["stop_reason"] in ("interrupted", "aborted")
    return snap, bool(signals) or (not crawler.finished and stopped)


async def _crawl(settings: CrawlSettings) -> int:
    progress = _Progress(not settings.quiet and sys.stderr.isatty())
    async with Crawler.from_settings(settings) as crawler:
        snap, interrupted = await _run_crawler(crawler, progress)
        stop_reason = crawler.stop_reason
    return _summary(settings, snap, stop_reason, interrupted)


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
    """Print the end-of-crawl lines (unless quiet); returns 130 if interrupted, else 0."""
    out = Path(settings.out_dir)
    if not settings.quiet:
        v = snap.by_verdict
        print(
            f"{snap.records:,} pages: {v.get('ok', 0):,} ok, {v.get('broken', 0):,} broken, "
            f"{v.get('unverified', 0):,} unverified, {v.get('redirected', 0):,} redirected "
            f"({snap.errors:,} without a response); {snap.robots_disallowed:,} more URLs "
            f"blocked by robots.txt; {snap.elapsed_s:,.1f} s = {snap.pages_per_s:,.1f} pages/s"
        )
        if stop_reason == "max_pages":
            print(f"stopped at --max-pages {settings.max_pages} (2xx pages); more were queued")
        print(f"output: {out}/ (pages.jsonl, links.tsv, report.json, *.warc.gz)")
    if interrupted:
        if settings.frontier == "memory":
            print("interrupted (--frontier memory keeps no state: it cannot be resumed)",
                  file=sys.stderr)  # fmt: skip
        else:
            print(f"interrupted; resume with: skitter crawl --resume --out {out}", file=sys.stderr)
        return 130
    return 0


def _crawl_processes(settings: CrawlSettings) -> int:
    """``crawl`` with ``--processes`` > 1 (:mod:`skitter.processes`), progress on a TTY."""
    from skitter.processes import run_processes

    live: Any = None
    on_status = None
    if not settings.quiet and sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        def on_status(t: dict[str, int]) -> None:
            nonlocal live
            if live is None:
                live = Live("", console=Console(stderr=True), auto_refresh=False, transient=True)
                live.start()
            rate = t.get("records", 0) / max(t.get("elapsed_ms", 0) / 1000, 1e-9)
            live.update(
                f"pages {t.get('records', 0):,}  ok {t.get('ok', 0):,}  {rate:,.1f} pages/s  "
                f"in flight {t.get('inflight', 0):,}  hosts {t.get('hosts', 0):,}  "
                f"errors {t.get('errors', 0):,}  robots-blocked "
                f"{t.get('robots_disallowed', 0):,}  ({settings.processes} processes)",
                refresh=True,
            )

    try:
        outcome = run_processes(settings, on_status=on_status)
    finally:
        if live is not None:
            live.stop()
    if outcome.error is not None:
        print(f"skitter: error: {outcome.error}", file=sys.stderr)
        if outcome.exit_code == 2:
            return 2
        print(
            f"the crawl stopped; resume with: skitter crawl --resume --out {settings.out_dir}",
            file=sys.stderr,
        )
        return 1
    return _summary(settings, outcome.snapshot, outcome.stop_reason, outcome.interrupted)


# ------------------------------------------------------------------ check-links


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


def _add_check_links(sub: Any) -> None:
    """The ``check-links`` subcommand: the crawl flags plus the checker's own."""
    from skitter.checklinks import FORMATS

    c = sub.add_parser(
        "check-links",
        help="find broken links on a site and the pages they are on",
        description=(
            "Crawl the sites of the given URLs politely and check every link found: internal "
            "pages are crawled, links to other hosts are checked once each (HEAD, GET "
            "fallback). Exit code: 0 nothing broken, 1 broken links found, 2 usage or "
            "runtime error, 130 interrupted (resumable with --out)."
        ),
        argument_default=argparse.SUPPRESS,
    )
    c.add_argument("seeds", nargs="*", metavar="URL", help="start URL (or bare domain name)")
    c.add_argument("--seeds-file", metavar="FILE", help="file of start URLs, one a line")
    c.add_argument(
        "--out",
        "-o",
        metavar="DIR",
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
        type=_regex,
        metavar="REGEX",
        help="do not check URLs matching REGEX (reported as excluded)",
    )
    g.add_argument(
        "--cache-age",
        type=_positive_float,
        metavar="SECONDS",
        help="reuse verdicts of external links from the previous check in --out DIR "
        "up to this old, default 86400 (0 = never)",
    )
    g.add_argument("--format", choices=FORMATS, help="report format, default: text")
    g.add_argument("--output", metavar="FILE", help="write the report to FILE (default: stdout)")
    _add_common_flags(c)


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
    if report.get("stop_reason") in (None, "", "interrupted", "aborted"):
        raise StateError(
            f"output folder {out} holds an unfinished check; continue it with "
            f"'skitter check-links --resume --out {out}' or choose another folder"
        )
    seeds = [u for u in (canonicalize(s) for s in settings.seeds) if u is not None]
    cache = collect_cache(out, CheckPolicy(settings, seeds), cache_age_s, time.time())
    for name in CHECK_FILES:
        (out / name).unlink(missing_ok=True)
    for warc in out.glob("*.warc.gz"):
        warc.unlink()
    return cache


async def _check(settings: CrawlSettings, cache: list[Any]) -> tuple[bool, float]:
    """Run the check's crawl; returns (interrupted, seconds)."""
    progress = _Progress(not settings.quiet and sys.stderr.isatty())
    async with Crawler.from_settings(settings) as crawler:
        if cache and crawler.check is not None:
            crawler.check.set_cache(cache, Path(settings.out_dir))
        snap, interrupted = await _run_crawler(crawler, progress)
    return interrupted, snap.elapsed_s


def _check_links_command(args: argparse.Namespace) -> int:
    """``skitter check-links``: exit 0 nothing broken, 1 broken links, 2 error, 130 stopped."""
    import shutil
    import tempfile

    from skitter.checklinks import format_report, load_report
    from skitter.rules import ScopeRule
    from skitter.urls import canonicalize

    resume = bool(getattr(args, "resume", False))
    temp: str | None = None
    try:
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
        else:
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
        interrupted, elapsed = asyncio.run(_check(settings, cache))
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
        target = getattr(args, "output", None)
        if target is None:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            Path(target).write_text(text, encoding="utf-8")
        if not settings.quiet and (target is not None or not sys.stdout.isatty()):
            s = report.summary
            print(
                f"{s['checked']:,} links checked in {elapsed:,.1f} s: {s['broken']:,} broken, "
                f"{s['unverified']:,} unverified, {s['redirected']:,} redirected"
                + (f"; report: {target}" if target else ""),
                file=sys.stderr,
            )
        return 1 if report.summary["broken"] else 0
    except SkitterError as exc:
        print(f"skitter: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        print(_os_error_line(exc), file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: exit 2, never 1 ("broken links found")
        log.exception("internal error")
        print(f"skitter: internal error: {exc!r}", file=sys.stderr)
        return 2
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``skitter`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="skitter: %(levelname)s: %(message)s",
    )
    if args.command == "check-links":
        return _check_links_command(args)
    try:
        if getattr(args, "resume", False):
            stored = load_state(Path(args.out))
            settings = settings_from_args(args, base=stored)
            check_resume_compatible(stored, settings)
        else:
            settings = settings_from_args(args)
            if not settings.seeds:
                raise ConfigError("no seeds: give SEED URLs or --seeds-file")
            settings = _choose_processes(settings, getattr(args, "processes", None))
        from skitter.rules import ScopeRule
        from skitter.urls import canonicalize

        ScopeRule(settings.scope, [u for u in map(canonicalize, settings.seeds) if u])
        if settings.processes > 1:
            return _crawl_processes(settings)
        return asyncio.run(_crawl(settings))
    except SkitterError as exc:
        print(f"skitter: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted; resume with: skitter crawl --resume --out {args.out}", file=sys.stderr)
        return 130
    except OSError as exc:
        print(_os_error_line(exc), file=sys.stderr)
        return 2


def _os_error_line(exc: OSError) -> str:
    """The one-line message of an I/O error: "skitter: error: REASON: FILE" (no ": FILE"
    when the error names none)."""
    name = getattr(exc, "filename", None)
    return f"skitter: error: {exc.strerror or exc}" + (f": {name}" if name else "")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
