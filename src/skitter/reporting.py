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

__all__ = [
    "build_report",
    "parse_counts",
    "whole_parse_section",
    "whole_tuning_sections",
    "write_report",
]

#: Entries kept in the whole crawl's ``concurrency.history`` (the latest ones; as
#: :data:`skitter.autotune.MAX_HISTORY` for one session).
MAX_HISTORY = 500
#: Hosts listed in the whole crawl's ``timeouts.hosts``.
MAX_TIMEOUT_HOSTS = 100


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
    (``--since``): :meth:`skitter.recrawl.Recrawl.report`. (The crawler adds ``concurrency``
    and ``timeouts``, :func:`whole_tuning_sections`, and ``parse``.)"""
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


_CONCURRENCY_SETTINGS = ("ceiling", "floor", "cpu_target", "max_memory_bytes")
_TIMEOUT_SETTINGS = ("floor_s", "ceiling_s", "percentile", "factor")


def whole_tuning_sections(now: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """report.json's ``concurrency`` and ``timeouts`` sections of one process for the whole
    crawl, as ``totals`` are: this session's (``now``: ``{"concurrency": ...}`` of
    :meth:`skitter.autotune.AutoLimit.report_sections` and ``{"timeouts": ...}`` of
    :meth:`skitter.deadlines.DeadlineEstimator.report_sections`, either absent when the
    session does not tune it) with the sessions before a resume (``earlier``: this
    function's result as checkpointed). A section is present when some session tuned it.

    ``concurrency``: ``mode``, the settings (``ceiling``, ``floor``, ``cpu_target``,
    ``max_memory_bytes``) and ``current`` of the last session that tuned it; ``readings``
    summed over the sessions; ``peak`` the highest limit any session set; ``history`` the
    changes of every session in order (each session's first entry is its ``start``; seconds
    count from that session's first reading; the latest :data:`MAX_HISTORY`); ``sessions``
    one entry per session, oldest first: its settings, ``readings``, ``peak`` and ``end``
    (its limit when it ended).

    ``timeouts``: ``mode`` and the settings (``floor_s``, ``ceiling_s``, ``percentile``,
    ``factor``) of the last session that tuned them; ``cut`` (fetches cut at an adaptive
    deadline) summed; ``hosts`` each host's latest deadline (this session's, else the last
    one known; at most :data:`MAX_TIMEOUT_HOSTS`); ``sessions`` per session its settings and
    ``cut``.
    """
    out: dict[str, Any] = {}
    conc = _whole_concurrency(now.get("concurrency"), earlier.get("concurrency") or {})
    if conc:
        out["concurrency"] = conc
    timeouts = _whole_timeouts(now.get("timeouts"), earlier.get("timeouts") or {})
    if timeouts:
        out["timeouts"] = timeouts
    return out


def _whole_concurrency(now: dict[str, Any] | None, earlier: dict[str, Any]) -> dict[str, Any]:
    sessions = [s for s in earlier.get("sessions") or [] if isinstance(s, dict)]
    if now is None:
        return earlier if sessions else {}
    this = {k: now.get(k) for k in _CONCURRENCY_SETTINGS}
    this.update(
        readings=int(now.get("readings") or 0),
        peak=int(now.get("peak") or now.get("current") or 0),
        end=now.get("current"),
    )
    sessions.append(this)
    history = [*(earlier.get("history") or []), *(now.get("history") or [])][-MAX_HISTORY:]
    return {
        **now,
        "readings": sum(int(s.get("readings") or 0) for s in sessions),
        "peak": max(int(s.get("peak") or 0) for s in sessions),
        "history": history,
        "sessions": sessions,
    }


def _whole_timeouts(now: dict[str, Any] | None, earlier: dict[str, Any]) -> dict[str, Any]:
    sessions = [s for s in earlier.get("sessions") or [] if isinstance(s, dict)]
    if now is None:
        return earlier if sessions else {}
    this = {k: now.get(k) for k in _TIMEOUT_SETTINGS}
    this["cut"] = int(now.get("cut") or 0)
    sessions.append(this)
    hosts = dict(now.get("hosts") or {})
    for host, deadline in (earlier.get("hosts") or {}).items():
        if len(hosts) >= MAX_TIMEOUT_HOSTS:
            break
        hosts.setdefault(host, deadline)
    return {
        **now,
        "cut": sum(int(s.get("cut") or 0) for s in sessions),
        "hosts": hosts,
        "sessions": sessions,
    }
