"""Shared pieces of the command line: the one-line-error parser, the flags
every crawling command takes, and settings built from parsed flags (flag value types:
:mod:`skitter.cli.flag_types`; exit codes, summaries and error lines:
:mod:`skitter.cli.outcome`, re-exported here)."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from skitter.cli.flag_types import at_least_one as at_least_one
from skitter.cli.flag_types import deadline as deadline
from skitter.cli.flag_types import duration as duration
from skitter.cli.flag_types import duration_or_off as duration_or_off
from skitter.cli.flag_types import folder as folder
from skitter.cli.flag_types import header as header
from skitter.cli.flag_types import limit_or_off as limit_or_off
from skitter.cli.flag_types import positive_float as positive_float
from skitter.cli.flag_types import positive_int as positive_int
from skitter.cli.flag_types import processes as processes
from skitter.cli.flag_types import proxy as proxy
from skitter.cli.flag_types import regex as regex
from skitter.cli.flag_types import resolve as resolve
from skitter.cli.flag_types import size as size
from skitter.cli.flag_types import tcp_port as tcp_port
from skitter.cli.focus_flags import AutoOr, focus_from_args
from skitter.cli.outcome import EXIT_CODES as EXIT_CODES
from skitter.cli.outcome import exit_code as exit_code
from skitter.cli.outcome import finished_report as finished_report
from skitter.cli.outcome import no_seed_answered as no_seed_answered
from skitter.cli.outcome import os_error_line as os_error_line
from skitter.cli.outcome import output_failure_line as output_failure_line
from skitter.cli.outcome import plural as plural
from skitter.cli.outcome import summary_lines as summary_lines
from skitter.cli.outcome import write_stdout as write_stdout
from skitter.errors import ConfigError
from skitter.settings import (
    CrawlSettings,
    FetchSettings,
    ScopeSettings,
)

__all__ = [
    "EXIT_CODES",
    "NotAFolderFlag",
    "Parser",
    "add_common_flags",
    "add_out_folder_flag",
    "duration",
    "os_error_line",
    "output_failure_line",
    "read_seeds",
    "settings_from_args",
]

log = logging.getLogger("skitter")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def frontier(text: str) -> str:
    """``sqlite``, ``memory`` or a Redis URL (checked when connecting)."""
    if text in ("sqlite", "memory") or text.split("://", 1)[0] in (
        "redis",
        "rediss",
        "redis+cluster",
    ):
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r}: use sqlite, memory or redis://HOST:PORT/DB (rediss://, redis+cluster://)"
    )


def seen_mode(text: str) -> str:
    """``--seen`` type: ``exact`` or ``bloom:RATE`` with 0 < RATE < 1 (one-line error)."""
    from skitter.settings import parse_seen

    try:
        parse_seen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None
    return text


def add_redis_flags(c: argparse.ArgumentParser) -> None:
    """``--crawl-id``, ``--lease-ttl``, ``--redis-wait``, ``--seen``, ``--seen-capacity``
    (crawls on a Redis frontier)."""
    g = c.add_argument_group("Redis frontier")
    g.add_argument("--crawl-id", metavar="NAME", help="the crawl's key prefix (default: skitter)")
    g.add_argument(
        "--lease-ttl",
        type=positive_float,
        metavar="S",
        help="lease length in seconds (default: 60)",
    )
    g.add_argument(
        "--redis-wait",
        type=positive_float,
        metavar="S",
        help="seconds to retry while Redis is unreachable, then exit 1 (default: 300)",
    )
    g.add_argument(
        "--seen",
        type=seen_mode,
        metavar="MODE",
        help="URL-seen test: exact (default) or bloom:RATE, a Bloom filter in Redis that "
        "drops about RATE of new URLs (e.g. bloom:0.001); fixed when the crawl is created",
    )
    g.add_argument(
        "--seen-capacity",
        type=at_least_one,
        metavar="N",
        help="URLs the Bloom filter is sized for (default: 10000000; past it, more are dropped)",
    )


def add_common_flags(c: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add the flags ``crawl`` and ``check-links`` share (scope, politeness, fetching,
    logging, output); returns the "output" group so that a command can add its own there."""
    c.add_argument(
        "--config",
        metavar="FILE",
        help="TOML file of settings: every long flag is a key (max-depth = 3, "
        'header = ["A: b"]); flags on the command line win',
    )
    g = c.add_argument_group("scope")
    g.add_argument(
        "--scope",
        choices=["host", "domain", "any"],
        help="which links are followed: host = the seeds' hosts (default), domain = the "
        "seeds' registered domains (www.a.org and blog.a.org), any = every http(s) link",
    )
    g.add_argument(
        "--include",
        action="append",
        type=regex,
        metavar="REGEX",
        help="follow only URLs matching one of these (Python regex, searched anywhere in "
        "the canonical URL; repeatable)",
    )
    g.add_argument(
        "--exclude",
        action="append",
        type=regex,
        metavar="REGEX",
        help="never follow URLs matching this (repeatable; wins over --include)",
    )
    g.add_argument("--max-depth", type=positive_int, metavar="N", help="hops from a seed")
    g.add_argument(
        "--max-pages",
        type=limit_or_off,
        metavar="N",
        help="stop after N records with a 2xx status, counted over the whole crawl "
        "(0 = no limit; may change on --resume)",
    )
    g.add_argument(
        "--max-time",
        type=duration_or_off,
        metavar="DURATION",
        help="stop cleanly after this long (90, 30s, 20m, 2h) in this session; resumable "
        "(0 = no limit; may change on --resume)",
    )
    g.add_argument(
        "--max-links-per-page",
        type=positive_int,
        metavar="N",
        help="consider only the first N links of each page (the rest: links.tsv 'limit')",
    )
    g.add_argument(
        "--max-seed-links",
        type=positive_int,
        metavar="N",
        help="the same cap for seed pages (default: --max-links-per-page)",
    )
    g.add_argument("--max-url-length", type=at_least_one, metavar="N", help="default: 2048")
    g.add_argument(
        "--follow-nofollow",
        action="store_true",
        help="also follow rel=nofollow links and pages with meta robots nofollow",
    )
    g.add_argument(
        "--max-pages-per-host",
        type=at_least_one,
        metavar="N",
        help="queue at most N distinct URLs per host (links.tsv decision 'limit')",
    )
    g.add_argument(
        "--max-path-depth",
        type=limit_or_off,
        metavar="N",
        help="drop URLs with more path segments as traps, default 32 (0 = off)",
    )
    g.add_argument(
        "--max-query-variants-per-path",
        type=limit_or_off,
        metavar="N",
        help="queue at most N distinct queries per scheme+host+path, default 100 (0 = off)",
    )
    g.add_argument(
        "--max-segment-repeats",
        type=limit_or_off,
        metavar="N",
        help="drop URLs with a path segment repeated more than N times, default 2 (0 = off)",
    )
    g = c.add_argument_group("politeness")
    g.add_argument("--delay", type=positive_float, metavar="SECONDS", help="per host, default 1.0")
    g.add_argument(
        "--random-wait",
        action="store_true",
        help="wait 0.5 to 1.5 x --delay (random, like wget) instead of exactly --delay",
    )
    g.add_argument("--host-concurrency", type=at_least_one, metavar="N", help="default: 1")
    g.add_argument("--ip-concurrency", type=at_least_one, metavar="N", help="default: 4")
    g.add_argument(
        "--concurrency", action=AutoOr, number=at_least_one, metavar="N|auto", help="default: 64"
    )
    g.add_argument(
        "--retries",
        type=positive_int,
        metavar="N",
        help="retries of timeouts, connection failures, 429 and 5xx, default 2 "
        "(backoff 2 s, 4 s, ... 60 s)",
    )
    g.add_argument("--ignore-robots", action="store_true", help="only for your own site")
    g.add_argument(
        "--robots-retry",
        type=positive_float,
        metavar="SECONDS",
        help="after a 5xx robots.txt, ask again this much later, default 60",
    )
    g.add_argument(
        "--max-crawl-delay",
        type=positive_float,
        metavar="SECONDS",
        help="cap on robots.txt Crawl-delay, default 30",
    )
    g = c.add_argument_group("fetching")
    g.add_argument(
        "--timeout",
        action=AutoOr,
        number=deadline,
        metavar="SECONDS|auto",
        help="whole-fetch deadline, default 30 (auto: per-host read deadline, this the cap)",
    )
    g.add_argument(
        "--max-redirects",
        type=positive_int,
        metavar="N",
        help="redirect hops followed per URL, default 10 (then too_many_redirects)",
    )
    g.add_argument("--max-body", type=size, metavar="BYTES", help="decoded size cap, default 10MiB")
    g.add_argument("--user-agent", metavar="UA")
    g.add_argument(
        "--header",
        action="append",
        type=header,
        metavar="'Name: value'",
        help="extra request header sent on every request (repeatable)",
    )
    g.add_argument(
        "--proxy",
        type=proxy,
        metavar="URL",
        help="send every request through this HTTP proxy (http://host:port)",
    )
    g.add_argument(
        "--resolve",
        action="append",
        type=resolve,
        metavar="HOST:PORT:ADDR",
        help="connect to ADDR for HOST:PORT, like curl (repeatable)",
    )
    g.add_argument(
        "--resolve-only",
        action="store_true",
        help="names not given with --resolve fail without any DNS query",
    )
    g.add_argument(
        "--allow-private", action="store_true", help="allow links to loopback/private addresses"
    )
    g = c.add_argument_group("logging")
    g.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="log every request (time level pK METHOD url status bytes ms attempt=N) and "
        "every politeness decision (delays, backoff, robots.txt) on stderr",
    )
    g.add_argument(
        "--log-file",
        metavar="FILE",
        help="also write the log to FILE (appended; with every request, as -v)",
    )
    g.add_argument(
        "--stats-interval",
        type=positive_float,
        metavar="SECONDS",
        help="when stderr is not a terminal, print a stats line every SECONDS, "
        "default 60 (0 = off)",
    )
    g = c.add_argument_group("output")
    g.add_argument(
        "--frontier",
        type=frontier,
        metavar="KIND",
        help="sqlite (default), memory, or redis://HOST:PORT/DB (rediss://, "
        "redis+cluster://HOST:PORT,...): a frontier shared with `skitter worker`s",
    )
    add_redis_flags(c)
    g.add_argument(
        "--quiet", "-q", action="store_true", help="no progress display and no end summary"
    )
    return g


class NotAFolderFlag(argparse.Action):
    """``-o``/``--output`` on a command whose output is a folder: a one-line hint."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        parser.error("-o/--output names a file; this command writes a folder: use --out DIR")


def add_out_folder_flag(c: argparse.ArgumentParser, help_text: str, required: bool) -> None:
    """The output-flag rule of every command: ``--out DIR`` (long only) is a folder,
    ``-o/--output FILE`` is a file. A command without a file output gets a hidden ``-o``
    that says so in one line."""
    c.add_argument("--out", metavar="DIR", type=folder, required=required, help=help_text)
    c.add_argument("-o", "--output", nargs="?", action=NotAFolderFlag, help=argparse.SUPPRESS)


def read_seeds(args: argparse.Namespace) -> list[str]:
    """The seeds of ``SEED`` arguments then ``--seeds-file`` (``-`` = stdin), as URLs
    (:func:`skitter.seeds.seed_url`).

    Raises:
        ConfigError: an unreadable seeds file, a bad seed (with its file line number), or a
            seeds file without seeds.
    """

    from skitter.seeds import read_seed_lines, seed_url

    seeds = [seed_url(s) for s in getattr(args, "seeds", []) or []]
    path = getattr(args, "seeds_file", None)
    if path is not None:
        try:
            if path == "-":
                text = sys.stdin.read()
                lines = text.removeprefix("\ufeff").splitlines()
            else:
                with open(path, encoding="utf-8-sig") as fh:
                    lines = fh.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read seeds file {path}: {exc}") from None
        seeds.extend(read_seed_lines(lines, "(stdin)" if path == "-" else path))
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
        read_seeds(args)
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
        max_redirects=pick("max_redirects", fetch.max_redirects),
        proxy=pick("proxy", fetch.proxy),
        resolve=resolve,
        resolve_only=pick("resolve_only", fetch.resolve_only),
        dns_cache_ttl_s=fetch.dns_cache_ttl_s,
        allow_private=pick("allow_private", fetch.allow_private),
    )
    if not fetch.user_agent.strip():
        raise ConfigError("--user-agent must not be empty")
    if "warc_level" in given and (("no_warc" in given and a["no_warc"]) or not b.warc):
        raise ConfigError("--warc-level has no effect with --no-warc (no WARC file is written)")
    p = b.politeness
    politeness = replace(
        p,
        delay_s=pick("delay", p.delay_s),
        random_wait=pick("random_wait", p.random_wait),
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
    settings = CrawlSettings(
        out_dir=a["out"],
        seeds=tuple(seeds),
        fetch=fetch,
        politeness=politeness,
        scope=scope,
        frontier=pick("frontier", b.frontier),
        max_pages=pick("max_pages", b.max_pages),
        warc=not a["no_warc"] if "no_warc" in given else b.warc,
        warc_max_bytes=b.warc_max_bytes,
        links_compress=pick("links_compress", b.links_compress),
        warc_level=pick("warc_level", b.warc_level),
        quiet=pick("quiet", False),
        resume=bool(a.get("resume", False)),
        check_links=b.check_links,
        check_resources=b.check_resources,
        check_fragments=b.check_fragments,
        processes=pick("processes", b.processes),
        max_time_s=pick("max_time", b.max_time_s),
        crawl_id=pick("crawl_id", b.crawl_id),
        lease_ttl_s=pick("lease_ttl", b.lease_ttl_s),
        redis_wait_s=pick("redis_wait", b.redis_wait_s),
        seen=pick("seen", b.seen),
        seen_capacity=pick("seen_capacity", b.seen_capacity),
        extract_links=b.extract_links,
        focus=b.focus,
    )
    return focus_from_args(args, settings)


def check_output_file(target: str) -> None:
    """Refuse, before any work (crawling, reading a graph), an ``-o/--output`` path that
    cannot be written: its folder is missing or not writable, or it is a folder.

    Raises:
        ConfigError: one line naming the path and the cause.
    """
    import os

    path = Path(target)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ConfigError(f"--output {target} is a folder; give a file name")
    if path.exists() and not path.is_file():  # /dev/stdout, a FIFO: written in place
        if not os.access(path, os.W_OK):
            raise ConfigError(f"--output {target}: permission denied")
        return
    if not parent.is_dir():
        raise ConfigError(f"--output {target}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(f"--output {target}: permission denied")


def add_status_flags(c: argparse.ArgumentParser) -> None:
    """``--status-port`` and ``--status-host`` (the live status page, :mod:`skitter.status`)."""
    g = c.add_argument_group("status")
    g.add_argument(
        "--status-port",
        type=tcp_port,
        metavar="PORT",
        help="serve a live status page, /metrics and /api/ on PORT while crawling "
        "(0: a free port; the URL is printed and written to OUT/status.url)",
    )
    g.add_argument(
        "--status-host",
        metavar="ADDR",
        help="address of the status server (default 127.0.0.1: this machine only)",
    )
