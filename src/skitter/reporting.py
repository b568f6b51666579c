"""report.json of one crawl: totals, robots decisions per origin, trap drops, seeds.

Written atomically (:func:`skitter.state.atomic_write_json`) every ``REPORT_EVERY_S`` seconds
and at the end of the run; a sharded crawl's coordinator merges its processes' reports
(:func:`skitter.merge.merged_report`).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from skitter import __version__
from skitter.context import CrawlContext
from skitter.state import REPORT_FILE, atomic_write_json
from skitter.stats import StatsSnapshot

__all__ = ["build_report", "parse_counts", "whole_parse_section", "write_report"]


def build_report(
    ctx: CrawlContext, snapshot: StatsSnapshot, *, finished: bool, stop_reason: str
) -> dict[str, Any]:
    """The report.json document: ``{"skitter", "out_dir", "finished", "stop_reason",
    "totals", "robots", "traps", "duplicates", "sitemaps", ["recrawl"], "seeds"}``.

    "robots": per origin its robots.txt state and the first 100 URLs it disallowed
    (``disallowed_urls``) or left unchecked because it was unreachable
    (``unreachable_urls``); "traps": per trap defence its limit, drop count and first 100
    dropped URLs (:meth:`skitter.traps.TrapGuard.report`, and ``duplicate_ratio``);
    "duplicates": :meth:`skitter.duplicates.DuplicateStage.report`; "sitemaps": the
    :class:`skitter.sitemaps.SitemapStats` of the sitemap phase with its mode; "recrawl"
    (``--since``): :meth:`skitter.recrawl.Recrawl.report`."""
    robots = ctx.components.robots.snapshot()
    notes = ctx.robots_notes
    for org, urls in notes.blocked.items():
        robots.setdefault(org, {})["disallowed_urls"] = urls
    for org, urls in notes.unreachable.items():
        robots.setdefault(org, {})["unreachable_urls"] = urls
    traps = ctx.traps.report()
    if ctx.dups is not None:
        traps["duplicate_ratio"] = ctx.dups.trap_report()
    return {
        "skitter": __version__,
        "out_dir": str(ctx.out_dir),
        "finished": finished,
        "stop_reason": stop_reason,
        "totals": snapshot.to_dict(),
        "robots": robots,
        "traps": traps,
        "duplicates": ctx.dups.report() if ctx.dups is not None else {"mode": "off"},
        "sitemaps": ctx.sitemap_stats or {"mode": ctx.quality.sitemaps},
        **({"recrawl": ctx.recrawl.report()} if ctx.recrawl is not None else {}),
        "seeds": list(ctx.settings.seeds),
        **ctx.components.focus.report_sections(ctx.stats.by_focus),
        **(d.report_sections() if (d := ctx.components.deadlines) is not None else {}),
    }


def write_report(ctx: CrawlContext, report: dict[str, Any]) -> None:
    """Replace ``report.json`` in the output folder with ``report`` (atomic).

    Raises:
        OSError: the file cannot be written.
    """
    atomic_write_json(ctx.out_dir / REPORT_FILE, report)


def whole_parse_section(section: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """report.json's ``parse`` section of one process for the whole crawl: this session's
    (:meth:`skitter.parse_stage.ParseStage.report_sections`: ``{"parse": {"pid", "here",
    "helpers"}}`` or ``{}``) plus the counts of the sessions before a resume (``earlier``:
    :func:`parse_counts` as checkpointed), as ``totals`` are: ``here`` summed, ``helpers``
    summed by the process id that parsed them (earlier sessions' siblings had other ids)."""
    now = section.get("parse")
    here = int(earlier.get("here") or 0)
    helpers: Counter[str] = Counter()
    for pid, n in (earlier.get("helpers") or {}).items():
        helpers[str(pid)] += int(n)
    if now is None and not here and not helpers:
        return section
    if now is not None:
        here += int(now.get("here") or 0)
        helpers.update({str(k): int(v) for k, v in (now.get("helpers") or {}).items()})
    pid = now.get("pid") if now is not None else os.getpid()
    return {"parse": {"pid": pid, "here": here, "helpers": dict(sorted(helpers.items()))}}


def parse_counts(whole: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's ``parse`` entry (``{"here", "helpers"}``, whole crawl) from
    :func:`whole_parse_section`'s result; ``{}`` when there is none."""
    p = whole.get("parse")
    return {"here": p["here"], "helpers": p["helpers"]} if p else {}
