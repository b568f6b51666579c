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
from skitter.errors import ConfigError, SkitterError
from skitter.settings import (
    CrawlSettings,
    FetchSettings,
    ScopeSettings,
)
from skitter.state import check_resume_compatible, load_state

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
    if v < 0 or v != v:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return v


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return v


def _at_least_one(text: str) -> int:
    v = _positive_int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return v


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
        argument_default=S,
    )
    c.add_argument("seeds", nargs="*", metavar="SEED", help="seed URL or bare domain name")
    c.add_argument("--seeds-file", metavar="FILE", help="file of seed URLs or domains, one a line")
    c.add_argument("--out", "-o", metavar="DIR", required=True, help="output folder")
    c.add_argument("--resume", action="store_true", help="continue the crawl stored in --out")
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
        type=_positive_float,
        metavar="SECONDS",
        help="whole-fetch deadline, default 30",
    )
    g.add_argument(
        "--max-body", type=_size, metavar="BYTES", help="decoded size cap, default 10MiB"
    )
    g.add_argument("--user-agent", metavar="UA")
    g.add_argument("--header", action="append", type=_header, metavar="'Name: value'")
    g.add_argument("--proxy", metavar="URL")
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
    g.add_argument("--no-warc", action="store_true", help="do not write WARC files")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    g.add_argument("--verbose", "-v", action="store_true", help="log more to stderr")
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
        raw.extend(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    from skitter.urls import canonicalize

    seeds = []
    for s in raw:
        url = s if "://" in s else f"https://{s.strip('/')}/"
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
    )


class _Progress:
    """A one-line live display on a terminal (rich), or nothing."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.live: Any = None
        self._last = 0.0

    def start(self) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.live import Live

        self.live = Live("", console=Console(stderr=True), refresh_per_second=4, transient=True)
        self.live.start()

    def update(self, crawler: Crawler) -> None:
        if self.live is None:
            return
        now = time.monotonic()
        if now - self._last < 0.25:
            return
        self._last = now
        s = crawler.snapshot()
        self.live.update(
            f"pages {s.records:,}  ok {s.ok:,}  {s.pages_per_s:,.1f} pages/s  "
            f"errors {s.errors:,}  hosts {len(s.by_host):,}  robots-blocked {s.robots_disallowed:,}"
        )

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


async def _crawl(settings: CrawlSettings) -> int:
    progress = _Progress(not settings.quiet and sys.stderr.isatty())
    interrupted = 0
    async with Crawler.from_settings(settings) as crawler:
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            nonlocal interrupted
            interrupted += 1
            if interrupted == 1:
                progress.stop()
                print(
                    "stopping: finishing requests in flight (Ctrl-C again to abort)",
                    file=sys.stderr,
                )
                crawler.request_stop()
            else:
                crawler.abort()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        crawler.progress = progress.update
        progress.start()
        try:
            snap = await crawler.run()
        finally:
            progress.stop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        finished = crawler.finished
    out = Path(settings.out_dir)
    if not settings.quiet:
        print(
            f"{snap.records:,} pages ({snap.ok:,} ok, {snap.errors:,} errors, "
            f"{snap.robots_disallowed:,} blocked by robots.txt) in {snap.elapsed_s:,.1f} s "
            f"= {snap.pages_per_s:,.1f} pages/s",
        )
        print(f"output: {out}/ (pages.jsonl, links.tsv, report.json, *.warc.gz)")
    if interrupted or (
        not finished and crawler.report()["stop_reason"] in ("interrupted", "aborted")
    ):
        print(f"interrupted; resume with: skitter crawl --resume --out {out}", file=sys.stderr)
        return 130
    return 0


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
    try:
        if getattr(args, "resume", False):
            stored = load_state(Path(args.out))
            settings = settings_from_args(args, base=stored)
            check_resume_compatible(stored, settings)
        else:
            settings = settings_from_args(args)
            if not settings.seeds:
                raise ConfigError("no seeds: give SEED URLs or --seeds-file")
        from skitter.rules import ScopeRule
        from skitter.urls import canonicalize

        ScopeRule(settings.scope, [u for u in map(canonicalize, settings.seeds) if u])
        return asyncio.run(_crawl(settings))
    except SkitterError as exc:
        print(f"skitter: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted; resume with: skitter crawl --resume --out {args.out}", file=sys.stderr)
        return 130
    except OSError as exc:
        print(
            f"skitter: error: {exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
