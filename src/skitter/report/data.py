"""The figures of report.html, read from a crawl's output folder in one streaming pass.

Reads ``pages.jsonl`` (one row per record; a crash-cut last line is skipped), ``links.tsv``
(only its ``decision`` column, and the ``trap`` rows) and ``report.json`` (robots.txt drops,
trap defences, seeds, stop reason). Works on a finished, interrupted or ``--processes`` crawl
(their merged files) and on a crawl whose report.json is missing (robots and trap tables empty).
Memory is bounded by the number of hosts, distinct seconds of crawling and the table caps, not
by the number of records.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from skitter.export.linkfile import links_file, open_links

__all__ = ["ELAPSED_BUCKETS_S", "ReportData", "read_output"]

#: Upper bounds (seconds) of the response-time distribution's buckets (the last is open).
ELAPSED_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(slots=True)
class ReportData:
    """Aggregates of one crawl's output (see the module doc for the sources).

    Attributes:
        records, ok, errors, bytes: pages.jsonl row counts (errors: rows with an error kind)
            and decoded body bytes.
        by_status, by_error, by_depth, by_type, by_decision: counts (status "none" = no response).
        host_pages, host_errors: per host, rows and rows with an error kind or status >= 400.
        elapsed_hist: rows per :data:`ELAPSED_BUCKETS_S` bucket (plus one open bucket).
        per_second: rows per whole second of ``fetched_at`` (Unix seconds -> n).
        error_rows: up to ``cap`` rows ``(url, status, error, detail)`` with an error or
            status >= 400; ``error_total`` counts them all.
        robots_rows: up to ``cap`` ``(origin, url, why)`` dropped by robots.txt;
            ``robots_total`` counts them all (report.json keeps the first 100 per origin).
        trap_rows: up to ``cap`` ``(source, target)`` links.tsv rows with decision ``trap``;
            ``trap_total`` counts them; ``traps`` is report.json's per-defence summary.
        report: the report.json document ({} when missing or unreadable).
    """

    cap: int
    records: int = 0
    ok: int = 0
    errors: int = 0
    bytes: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    by_error: Counter[str] = field(default_factory=Counter)
    by_depth: Counter[int] = field(default_factory=Counter)
    by_type: Counter[str] = field(default_factory=Counter)
    by_decision: Counter[str] = field(default_factory=Counter)
    host_pages: Counter[str] = field(default_factory=Counter)
    host_errors: Counter[str] = field(default_factory=Counter)
    elapsed_hist: list[int] = field(default_factory=lambda: [0] * (len(ELAPSED_BUCKETS_S) + 1))
    per_second: Counter[int] = field(default_factory=Counter)
    error_rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    error_total: int = 0
    robots_rows: list[tuple[str, str, str]] = field(default_factory=list)
    robots_total: int = 0
    trap_rows: list[tuple[str, str]] = field(default_factory=list)
    trap_total: int = 0
    traps: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def add_row(self, row: dict[str, Any]) -> None:
        """Count one pages.jsonl row."""
        self.records += 1
        status = row.get("status")
        error = row.get("error")
        url = str(row.get("url", ""))
        host = _host(str(row.get("final_url") or url))
        self.host_pages[host] += 1
        self.bytes += int(row.get("bytes") or 0)
        self.by_status[str(status) if status is not None else "none"] += 1
        if isinstance(status, int) and 200 <= status < 300:
            self.ok += 1
        self.by_depth[int(row.get("depth") or 0)] += 1
        ctype = row.get("content_type")
        if ctype:
            self.by_type[str(ctype)] += 1
        elapsed = float(row.get("elapsed_s") or 0.0)
        i = 0
        while i < len(ELAPSED_BUCKETS_S) and elapsed > ELAPSED_BUCKETS_S[i]:
            i += 1
        self.elapsed_hist[i] += 1
        second = _second(row.get("fetched_at"))
        if second is not None:
            self.per_second[second] += 1
        if error:
            self.errors += 1
            self.by_error[str(error)] += 1
        if error or (isinstance(status, int) and status >= 400):
            self.host_errors[host] += 1
            self.error_total += 1
            if len(self.error_rows) < self.cap:
                self.error_rows.append(
                    (url, "" if status is None else str(status), str(error or ""),
                     str(row.get("error_detail") or ""))
                )  # fmt: skip

    def pages_per_s(self, max_points: int = 300) -> list[tuple[float, float]]:
        """``[(seconds from the first record, pages/s), ...]`` averaged over buckets of
        whole seconds, at most ``max_points`` of them; seconds with no record count as 0."""
        if not self.per_second:
            return []
        first, last = min(self.per_second), max(self.per_second)
        span = last - first + 1
        step = max(1, math.ceil(span / max_points))
        out = []
        for start in range(first, last + 1, step):
            n = sum(self.per_second.get(s, 0) for s in range(start, min(start + step, last + 1)))
            out.append((float(start - first), n / step))
        return out


def read_output(out_dir: str | Path, cap: int = 1000) -> ReportData:
    """Read a crawl's output folder (see the module doc); tables keep ``cap`` rows each.

    Raises:
        FileNotFoundError: the folder has no pages.jsonl.
        OSError: a file cannot be read.
    """
    out = Path(out_dir)
    pages = out / "pages.jsonl"
    if not pages.is_file():
        raise FileNotFoundError(f"{out}: no pages.jsonl (not a crawl output folder)")
    d = ReportData(cap=cap)
    with open(pages, "rb") as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a crash-cut last line
            if isinstance(row, dict):
                d.add_row(row)
    _read_links(links_file(out), d)
    with contextlib.suppress(OSError, ValueError):
        rep = json.loads((out / "report.json").read_text(encoding="utf-8"))
        if isinstance(rep, dict):
            d.report = rep
    _read_robots(d)
    traps = d.report.get("traps")
    d.traps = traps if isinstance(traps, dict) else {}
    return d


def _read_links(path: Path, d: ReportData) -> None:
    """Decision counts and trap rows of links.tsv in one pass over its bytes (the decision is
    the last column; a row is split only when it is a trap drop)."""
    if not path.is_file():
        return
    with open_links(path) as f:
        header = f.readline().rstrip(b"\r\n").split(b"\t")
        if b"decision" not in header or header[-1] != b"decision":
            return
        i_src, i_tgt = header.index(b"source"), header.index(b"target")
        counts: Counter[bytes] = Counter()
        for line in f:
            if not line.endswith(b"\n"):
                break  # a crash-cut last line
            dec = line[line.rfind(b"\t") + 1 : -1]
            counts[dec] += 1
            if dec == b"trap":
                d.trap_total += 1
                if len(d.trap_rows) < d.cap:
                    r = line.split(b"\t")
                    d.trap_rows.append((_text(r[i_src]), _text(r[i_tgt])))
    for dec, n in counts.items():
        d.by_decision[_text(dec)] += n


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _read_robots(d: ReportData) -> None:
    robots = d.report.get("robots")
    if not isinstance(robots, dict):
        return
    totals = d.report.get("totals")
    if isinstance(totals, dict):
        d.robots_total = int(totals.get("robots_disallowed", 0) or 0)
    for origin, info in sorted(robots.items()):
        if not isinstance(info, dict):
            continue
        for key, why in (("disallowed_urls", "disallowed"), ("unreachable_urls", "unreachable")):
            urls = info.get(key, []) or []
            if key == "unreachable_urls":
                d.robots_total += len(urls)
            for url in urls:
                if len(d.robots_rows) < d.cap:
                    d.robots_rows.append((origin, str(url), why))


def _host(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1].lower()


def _second(ts: object) -> int | None:
    """Unix second of an ISO 8601 ``fetched_at`` (``2024-05-01T12:00:00.123Z``)."""
    if not isinstance(ts, str) or len(ts) < 19:
        return None
    try:
        return int(datetime.fromisoformat(ts[:19] + "+00:00").timestamp())
    except ValueError:
        return None
