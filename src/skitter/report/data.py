"""The figures of report.html, read from a crawl's output folder in one streaming pass.

Reads ``pages.jsonl`` (one row per record; a crash-cut last line is skipped), ``links.tsv``
(its decision counts: those of ``checkpoint.json`` plus the rows past its offset, else the
whole file's ``decision`` column; and the ``trap`` rows) and ``report.json`` (robots.txt drops,
trap defences, seeds, stop reason). Works on a finished, interrupted or ``--processes`` crawl
(their merged files) and on a crawl whose report.json is missing (robots and trap tables empty).
Memory is bounded by the number of hosts, distinct seconds of crawling and the table caps, not
by the number of records.
"""

from __future__ import annotations

import contextlib
import json
import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from skitter.export.linkfile import is_zstd, links_file, open_links
from skitter.report.rows import PageRow, iter_page_rows
from skitter.state import CHECKPOINT_FILE, MERGE_FILE

__all__ = ["ELAPSED_BUCKETS_S", "ReportData", "merged_decisions", "read_output"]

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

    def add_row(self, row: PageRow) -> None:
        """Count one pages.jsonl row."""
        self.records += 1
        status = row.status
        error = row.error
        url = str(row.url if row.url is not None else "")
        host = _host(str(row.final_url or url))
        self.host_pages[host] += 1
        self.bytes += int(row.bytes or 0)
        self.by_status[str(status) if status is not None else "none"] += 1
        is_int = isinstance(status, int)
        if is_int and 200 <= status < 300:
            self.ok += 1
        self.by_depth[int(row.depth or 0)] += 1
        ctype = row.content_type
        if ctype:
            self.by_type[str(ctype)] += 1
        self.elapsed_hist[bisect_left(ELAPSED_BUCKETS_S, float(row.elapsed_s or 0.0))] += 1
        second = _second(row.fetched_at)
        if second is not None:
            self.per_second[second] += 1
        if error:
            self.errors += 1
            self.by_error[str(error)] += 1
        if error or (is_int and status >= 400):
            self.host_errors[host] += 1
            self.error_total += 1
            if len(self.error_rows) < self.cap:
                self.error_rows.append(
                    (url, "" if status is None else str(status), str(error or ""),
                     str(row.error_detail or ""))
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


def read_output(
    out_dir: str | Path, cap: int = 1000, on_row: Callable[[PageRow], None] | None = None
) -> ReportData:
    """Read a crawl's output folder (see the module doc); tables keep ``cap`` rows each;
    ``on_row`` is also given every pages.jsonl row (one pass for other readers).

    Raises:
        FileNotFoundError: the folder has no pages.jsonl.
        OSError: a file cannot be read.
    """
    out = Path(out_dir)
    pages = out / "pages.jsonl"
    if not pages.is_file():
        raise FileNotFoundError(f"{out}: no pages.jsonl (not a crawl output folder)")
    d = ReportData(cap=cap)
    add = d.add_row
    for row in iter_page_rows(pages):  # (a crash-cut last line is skipped)
        add(row)
        if on_row is not None:
            on_row(row)
    _read_links(out, d)
    with contextlib.suppress(OSError, ValueError):
        rep = json.loads((out / "report.json").read_text(encoding="utf-8"))
        if isinstance(rep, dict):
            d.report = rep
    _read_robots(d)
    traps = d.report.get("traps")
    d.traps = traps if isinstance(traps, dict) else {}
    return d


def _read_links(out: Path, d: ReportData) -> None:
    """Decision counts and trap rows of the folder's links file.

    The counts of a plain links.tsv come from its crawl's ``checkpoint.json`` (the decision
    counters and the file offset they cover, written together: a resume never changes the
    file before that offset) plus the rows past that offset; those of a ``--processes``
    crawl's merged file (plain or zstd) from its merge.json. The trap rows are then looked
    for only when there are some. Without either (a folder of ``skitter merge``, a
    checkpoint past the file's end) the whole file is scanned with :func:`_scan_links`. Both
    give the counts of every complete line's last column."""
    path = links_file(out)
    if not path.is_file():
        return
    with open_links(path) as f:
        header = f.readline().rstrip(b"\r\n").split(b"\t")
    if b"decision" not in header or header[-1] != b"decision":
        return
    cols = (header.index(b"source"), header.index(b"target"))
    known = _known_decisions(out, path)
    if known is None:
        with open_links(path) as f:
            f.readline()
            counts = _scan_links(f, d, cols)
    else:
        counts, offset = known
        with open(path, "rb") as f:
            f.seek(offset)
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a crash-cut last line
                counts[line[line.rfind(b"\t") + 1 : -1]] += 1
        d.trap_total = counts.get(b"trap", 0)
        if d.trap_total:
            with open_links(path) as f:
                f.readline()
                _scan_links(f, d, cols, traps_only=True)
    for dec, n in counts.items():
        if n:
            d.by_decision[_text(dec)] += n


def _known_decisions(out: Path, path: Path) -> tuple[Counter[bytes], int] | None:
    """``(decision counts, offset of the first row they do not cover)`` without reading the
    rows they cover: a ``--processes`` crawl's merged file from merge.json (every row), else a
    plain links.tsv from its checkpoint.json; None when neither is usable."""
    merged = merged_decisions(out, path)
    if merged is not None:
        return merged, path.stat().st_size
    return None if is_zstd(path) else _checkpoint_decisions(out, path)


def merged_decisions(out_dir: Path, links_path: Path) -> Counter[bytes] | None:
    """The decision counts (last column) of every row of a ``--processes`` crawl's merged
    links file, as :class:`skitter.shard_merge.Merger` recorded them in ``OUT/merge.json``; None
    when there is no merge.json, it has no counts, or it does not describe ``links_path`` as
    it is now (its recorded length differs from the file's size). Never raises."""
    try:
        state = json.loads((out_dir / MERGE_FILE).read_text(encoding="utf-8"))
        if int(state["links"]) != links_path.stat().st_size:
            return None
        return _decision_counts(state["by_decision"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _decision_counts(decisions: Any) -> Counter[bytes] | None:
    """A saved ``{decision: count}`` object as counts by the decision's bytes (as the links
    file's last column holds it), or None unless it is a dict of ints."""
    if not isinstance(decisions, dict):
        return None
    counts: Counter[bytes] = Counter()
    for dec, n in decisions.items():
        if not isinstance(n, int):
            return None
        counts[str(dec).encode("utf-8")] += n
    return counts


def _checkpoint_decisions(out: Path, path: Path) -> tuple[Counter[bytes], int] | None:
    """``(decision counts, links.tsv offset they cover)`` of the folder's checkpoint.json,
    or None when it is missing, unreadable, without them, or past the end of ``path``."""
    try:
        cp = json.loads((out / CHECKPOINT_FILE).read_text(encoding="utf-8"))
        offset = cp["links_offset"]
        decisions = cp["stats"]["by_decision"]
        size = path.stat().st_size
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(offset, int) or not 0 < offset <= size:
        return None
    counts = _decision_counts(decisions)
    return None if counts is None else (counts, offset)


#: Bytes read per block by :func:`_scan_links`, and in its first block (smaller: see there).
_SCAN_BLOCK = 4 << 20
_FIRST_BLOCK = 64 << 10


def _scan_links(
    f: IO[bytes], d: ReportData, cols: tuple[int, int], *, traps_only: bool = False
) -> Counter[bytes]:
    """Count the last column of every complete line of ``f`` (a links file after its header)
    and keep the trap rows in ``d`` (also ``trap_total`` unless ``traps_only``).

    Works on blocks of whole lines: a block is counted with one ``bytes.count`` per decision
    seen so far (``TAB decision LF`` can only match a row's last column), most frequent
    first, stopping once every line is accounted for; a block with a line left over (a new
    decision, a row without a TAB) is counted line by line instead. The first block is
    small, so the line-by-line pass that learns the decisions is short."""
    counts: Counter[bytes] = Counter()
    order: list[bytes] = []
    size = _FIRST_BLOCK
    while block := f.read(size):
        size = _SCAN_BLOCK
        if not block.endswith(b"\n"):
            block += f.readline()
            if not block.endswith(b"\n"):
                block = block[: block.rfind(b"\n") + 1]  # a crash-cut last line
        if traps_only:
            _trap_rows(block, d, cols)
            if len(d.trap_rows) >= d.cap:
                break
            continue
        local: Counter[bytes] = Counter()
        left = block.count(b"\n")
        for dec in order:
            if not left:
                break
            n = block.count(b"\t" + dec + b"\n")
            if n:
                local[dec] = n
                left -= n
        if left:
            local = Counter(ln[ln.rfind(b"\t") + 1 :] for ln in block[:-1].split(b"\n"))
        counts.update(local)
        order = [dec for dec, _ in counts.most_common()]
        if local.get(b"trap"):
            d.trap_total += local[b"trap"]
            _trap_rows(block, d, cols)
    return counts


def _trap_rows(block: bytes, d: ReportData, cols: tuple[int, int]) -> None:
    """Add the ``(source, target)`` of ``block``'s trap rows to ``d.trap_rows`` (up to its cap)."""
    at = block.find(b"\ttrap\n")
    while at >= 0 and len(d.trap_rows) < d.cap:
        start = block.rfind(b"\n", 0, at) + 1
        r = block[start : at + 6].split(b"\t")
        d.trap_rows.append((_text(r[cols[0]]), _text(r[cols[1]])))
        at = block.find(b"\ttrap\n", at + 6)


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
    return _whole_second(ts[:19])


@lru_cache(maxsize=256)  # rows come in time order: most share their second with the last ones
def _whole_second(ts: str) -> int | None:
    try:
        return int(datetime.fromisoformat(ts + "+00:00").timestamp())
    except ValueError:
        return None
