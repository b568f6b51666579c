"""``skitter crawl --levels``: a crawl run level by level, fetch then extract.

The way the seed spiders of web archives work (and what ``skitter fetch`` + ``skitter extract``
do by hand): level 0 is the seeds; for each level *d*, every URL of the level is fetched
(:mod:`skitter.cli.fetch`'s mode: the crawler with ``extract_links`` off, so robots.txt,
politeness, retries, redirects and WARC as in any crawl), then the level's WARC files are read
by :func:`skitter.offline.extract.extract_warcs` with the crawl's scope and seeds, and the
``queued`` link targets not seen at any earlier level (requested or redirected to) become level
*d+1*. It stops when a level is empty or past ``max_depth``.

Layout of the output folder::

    state.json              the crawl's settings (``--resume`` reads them)
    levels/0000.urls        the seeds; levels/000N.urls: the URLs of level N, one a line
    levels/000N/            that level's fetch: *.warc.gz, *.cdxj, pages.jsonl, its state
    levels/000N/fetched     marker: the fetch of level N is complete
    levels/000N/extract/    links.tsv, pages.jsonl, report.json of its WARC files
    pages.jsonl, links.tsv, report.json   every level's, joined at the end (``depth`` = level)

Every step is either complete (its marker or output file is written last and atomically) or
redone/resumed: a kill at any instant and ``--resume`` continue where it stopped (a level's
fetch resumes as a crawl does; an interrupted extract or level list is done again).

``max_pages`` is one budget over all levels (each level's fetch gets what is left; none is
fetched once it is spent). The page set equals a plain crawl's (breadth-first either way)
except where a plain crawl's budgets depend on order: which pages ``max_pages`` keeps, and
query-variant / per-host trap budgets (extract's
rules are stateless, so levels may fetch more query variants). A redirect is followed within
its level and its target counts as seen; a level's fetch judges redirect targets by the scope of
that level's URLs (with ``--scope host``, a redirect to another seed host that has no URL in the
level is not followed there; its target is fetched only if some page links to it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skitter.crawler import Crawler
from skitter.errors import ConfigError
from skitter.export.linkfile import compress_links
from skitter.export.links import HEADER, read_rows
from skitter.offline.extract import ExtractOptions, extract_warcs
from skitter.offline.urllist import write_url_list
from skitter.robots import product_token
from skitter.settings import CrawlSettings
from skitter.state import atomic_write_json, prepare_new_out_dir, save_state
from skitter.stats import StatsSnapshot
from skitter.urls import canonicalize

__all__ = ["LEVELS_DIR", "LevelsResult", "is_levels_crawl", "run_levels"]

#: The sub-folder holding one folder per level.
LEVELS_DIR = "levels"

RunCrawler = Callable[[Crawler], Awaitable[tuple[StatsSnapshot, bool]]]


@dataclass(slots=True)
class LevelsResult:
    """What :func:`run_levels` did: per level ``{"level", "urls", "pages", "links"}``."""

    levels: list[dict[str, int]] = field(default_factory=list)
    interrupted: bool = False

    @property
    def pages(self) -> int:
        """Pages fetched over all levels."""
        return sum(lv["pages"] for lv in self.levels)


def is_levels_crawl(out_dir: str | os.PathLike[str]) -> bool:
    """True when ``out_dir`` holds a ``--levels`` crawl (its ``levels/`` folder)."""
    return (Path(out_dir) / LEVELS_DIR).is_dir()


def _level_dir(out: Path, d: int) -> Path:
    return out / LEVELS_DIR / f"{d:04d}"


def _urls_file(out: Path, d: int) -> Path:
    return out / LEVELS_DIR / f"{d:04d}.urls"


def _read_list(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def _pages(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    with open(path, "rb") as f:
        for raw in f:
            if raw.endswith(b"\n"):
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    continue
    return out


async def _default_run(crawler: Crawler) -> tuple[StatsSnapshot, bool]:
    snap = await crawler.run()
    return snap, not crawler.finished


async def run_levels(
    settings: CrawlSettings,
    *,
    run_crawler: RunCrawler | None = None,
    jobs: int | None = None,
) -> LevelsResult:
    """Run (or, with ``settings.resume``, continue) a level-by-level crawl into
    ``settings.out_dir`` (see the module doc).

    Args:
        settings: the crawl's settings (seeds, scope, politeness, ``max_depth``...).
        run_crawler: runs one level's entered crawler, returns ``(snapshot, interrupted)``
            (the command line passes its progress display and signal handling).
        jobs: processes for extraction (default: the cores).

    Returns:
        Per-level counts; ``interrupted`` when a level's fetch was stopped (resumable).

    Raises:
        StateError: a new crawl into a non-empty folder.
        ConfigError: bad seeds or scope settings; a resume of a folder that is not a
            ``--levels`` crawl.
        OSError: the folder cannot be written.
    """
    out = Path(settings.out_dir)
    run = run_crawler or _default_run
    seeds = [c for c in (canonicalize(s) for s in settings.seeds) if c is not None]
    if not settings.resume:
        prepare_new_out_dir(out)
        (out / LEVELS_DIR).mkdir(parents=True, exist_ok=True)  # before state.json: a resume
        save_state(out, replace(settings, resume=False))  # after a kill then sees a levels crawl
    elif not is_levels_crawl(out):  # its pages.jsonl, links.tsv, report.json would be replaced
        raise ConfigError(
            f"{out} is not a --levels crawl; continue it with 'skitter crawl --resume --out {out}'"
        )
    if not _urls_file(out, 0).exists():
        write_url_list(str(_urls_file(out, 0)), settings.seeds)
    options = ExtractOptions(
        scope=settings.scope,
        seeds=tuple(seeds),
        bot_token=product_token(settings.fetch.user_agent),
        max_body_bytes=settings.fetch.max_body_bytes,
        jobs=jobs or os.cpu_count() or 1,
    )
    result = LevelsResult()
    seen: set[str] = set()
    d = 0
    while True:
        ld = _level_dir(out, d)
        urls_file = _urls_file(out, d)
        if not urls_file.exists():
            break
        urls = _read_list(urls_file)
        if not urls:
            break
        left = None if settings.max_pages is None else settings.max_pages - result.pages
        if left is not None and left <= 0:
            break  # --max-pages: one budget for all levels
        seen.update(c for c in (canonicalize(u) for u in urls) if c is not None)
        if not (ld / "fetched").exists():
            fs = replace(
                settings,
                out_dir=str(ld),
                seeds=tuple(urls),
                extract_links=False,
                resume=(ld / "state.json").exists(),
                processes=1,
                max_pages=left,
                scope=replace(settings.scope, max_depth=None),
            )
            async with Crawler.from_settings(fs) as crawler:
                _, interrupted = await run(crawler)
            if interrupted:
                result.interrupted = True
                return result
            (ld / "fetched").write_bytes(b"")
        pages = _pages(ld / "pages.jsonl")
        seen.update(p["final_url"] for p in pages if p.get("final_url"))
        ex = ld / "extract"
        if not (ex / "report.json").exists():
            extract_warcs([str(w) for w in sorted(ld.glob("*.warc.gz"))], ex, options)
        links = sum(1 for _ in read_rows(ex / "links.tsv"))
        result.levels.append({"level": d, "urls": len(urls), "pages": len(pages), "links": links})
        if settings.scope.max_depth is not None and d + 1 > settings.scope.max_depth:
            break
        nxt = _urls_file(out, d + 1)
        if not nxt.exists():
            new: dict[str, None] = {}
            for row in read_rows(ex / "links.tsv"):
                if row.decision == "queued" and row.kind != "redirect" and row.target not in seen:
                    new[row.target] = None
            write_url_list(str(nxt), new)
        d += 1
    _join(out, len(result.levels))
    if settings.links_compress == "zstd":  # the joined rows as links.tsv.zst
        compress_links(out / "links.tsv")
    atomic_write_json(
        out / "report.json",
        {"mode": "levels", "levels": result.levels, "pages": result.pages},
    )
    return result


def _join(out: Path, n: int) -> None:
    """pages.jsonl and links.tsv of every level, joined (``depth`` = the level)."""
    tmp_pages, tmp_links = out / "pages.jsonl.tmp", out / "links.tsv.tmp"
    with (
        open(tmp_pages, "w", encoding="utf-8") as pf,
        open(tmp_links, "w", encoding="utf-8", errors="replace") as lf,
    ):
        lf.write(HEADER + "\n")
        for d in range(n):
            ld = _level_dir(out, d)
            for p in _pages(ld / "pages.jsonl"):
                p["depth"] = d
                pf.write(json.dumps(p, ensure_ascii=False, separators=(",", ":")) + "\n")
            with open(ld / "extract" / "links.tsv", encoding="utf-8", errors="replace") as f:
                next(f, None)
                for line in f:
                    lf.write(line)
    os.replace(tmp_pages, out / "pages.jsonl")
    os.replace(tmp_links, out / "links.tsv")
