"""report.html: a crawl's report as one self-contained HTML file (``skitter report OUT_DIR``,
and at the end of every crawl).

The page holds headline figures; charts (pages/s over time, status codes, depth histogram,
content types, top hosts by pages and by errors, response-time distribution) drawn as inline SVG
in Python (:mod:`skitter.report.svg`); and searchable tables of errors, robots.txt drops and
trap drops, capped (:data:`TABLE_CAP` rows) with a note saying where the full lists are. It
needs no network and no script to show everything (a small inline script only filters tables).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from skitter.report.data import ELAPSED_BUCKETS_S, ReportData, read_output
from skitter.report.page import cards, document, panel, table
from skitter.report.svg import GREY, RED, bar_chart, column_chart, line_chart

__all__ = ["REPORT_HTML", "TABLE_CAP", "render", "write_report"]

#: The report's file name in the output folder.
REPORT_HTML = "report.html"
#: Rows kept per table (errors, robots drops, trap drops).
TABLE_CAP = 1000
#: Bars in the top-N charts.
TOP = 15

_CLASS_COLORS = {"2": "#059669", "3": "#2563eb", "4": "#d97706", "5": RED}
#: Charts every report has (their ``data-chart`` names), in page order.
CHARTS = (
    "pages-per-second",
    "status-codes",
    "depth",
    "content-types",
    "response-time",
    "top-hosts-pages",
    "top-hosts-errors",
)


def _human_bytes(n: int) -> str:
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or unit == "GiB":
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return f"{v:,.1f} TiB"  # pragma: no cover


def _bucket_labels() -> list[str]:
    def ms(s: float) -> str:
        return f"{s * 1000:g}ms" if s < 1 else f"{s:g}s"

    return [f"≤{ms(b)}" for b in ELAPSED_BUCKETS_S] + [f">{ms(ELAPSED_BUCKETS_S[-1])}"]


def render(d: ReportData, title: str = "") -> str:
    """The report.html document for ``d`` (a complete HTML page as a string)."""
    rep = d.report
    totals = rep.get("totals", {}) if isinstance(rep.get("totals"), dict) else {}
    elapsed = float(totals.get("elapsed_s", 0) or 0)
    rate = d.records / elapsed if elapsed > 0 else 0.0
    state = str(rep.get("stop_reason") or ("finished" if rep.get("finished") else "interrupted"))
    head = cards(
        [
            (f"{d.records:,}", "records (pages.jsonl)"),
            (f"{d.ok:,}", "2xx"),
            (f"{d.error_total:,}", "errors and 4xx/5xx"),
            (_human_bytes(d.bytes), "received (decoded)"),
            (f"{len(d.host_pages):,}", "hosts"),
            (f"{rate:,.1f}", "pages/s"),
            (f"{elapsed:,.0f} s", "crawling time"),
            (f"{d.robots_total:,}", "robots.txt drops"),
            (f"{d.trap_total:,}", "trap drops"),
            (state, "stop reason"),
        ]
    )
    statuses = sorted(d.by_status.items(), key=lambda kv: (kv[0] == "none", kv[0]))
    status_chart = column_chart(
        "status-codes",
        "records by HTTP status (none = transport error)",
        statuses,
        colors=[_CLASS_COLORS.get(k[0], GREY) for k, _ in statuses],
    )
    depth = sorted(d.by_depth.items())
    charts = [
        panel(
            "Pages per second",
            line_chart(
                "pages-per-second",
                "records per second over the crawl (from fetched_at)",
                [("pages/s", "#2563eb", d.pages_per_s())],
                x_label="since the first record",
            ),
        ),
        '<div class="grid">',
        panel("Status codes", status_chart),
        panel(
            "Depth (hops from a seed)",
            column_chart("depth", "records by depth", [(str(k), v) for k, v in depth]),
        ),
        panel(
            "Content types",
            bar_chart("content-types", "records by content type", d.by_type.most_common(TOP)),
        ),
        panel(
            "Response time",
            column_chart(
                "response-time",
                "records by whole fetch time",
                list(zip(_bucket_labels(), d.elapsed_hist, strict=True)),
            ),
        ),
        panel(
            "Top hosts by pages",
            bar_chart("top-hosts-pages", "records per host", d.host_pages.most_common(TOP)),
        ),
        panel(
            "Top hosts by errors",
            bar_chart(
                "top-hosts-errors",
                "records with an error or 4xx/5xx per host",
                d.host_errors.most_common(TOP),
                color=RED,
            ),
        ),
        "</div>",
    ]
    kinds = ", ".join(f"{k} {v:,}" for k, v in d.by_error.most_common()) or "none"
    decisions = ", ".join(f"{k} {v:,}" for k, v in sorted(d.by_decision.items())) or "none"
    traps = ", ".join(
        f"{name} (limit {info.get('limit') or 'off'}): {int(info.get('count', 0) or 0):,}"
        for name, info in sorted(d.traps.items())
        if isinstance(info, dict)
    )
    tables = [
        panel(
            "Errors and 4xx/5xx",
            table(
                "errors",
                ["url", "status", "error", "detail"],
                d.error_rows,
                total=d.error_total,
                where='pages.jsonl (rows whose "error" is set or "status" >= 400)',
            ),
            note=f"error kinds: {kinds}",
        ),
        panel(
            "Dropped by robots.txt",
            table(
                "robots",
                ["origin", "url", "why"],
                d.robots_rows,
                total=d.robots_total,
                where='report.json "robots" (the first 100 URLs per origin); the rest '
                "are counted only",
            ),
        ),
        panel(
            "Dropped as spider traps",
            table(
                "traps",
                ["source", "target"],
                d.trap_rows,
                total=d.trap_total,
                where='links.tsv (rows whose decision is "trap")',
            ),
            note=f"trap defences: {traps or 'none'} · link decisions: {decisions}",
        ),
    ]
    seeds = rep.get("seeds") or []
    sub = f"{rep.get('skitter', '')} · seeds: {', '.join(map(str, seeds[:5]))}"
    if len(seeds) > 5:
        sub += f" and {len(seeds) - 5:,} more"
    return document(
        f"Skitter crawl report: {title}" if title else "Skitter crawl report",
        head + "".join(charts) + "".join(tables),
        subtitle=sub,
    )


def write_report(
    out_dir: str | os.PathLike[str], cap: int = TABLE_CAP, data: ReportData | None = None
) -> Path:
    """Read ``out_dir`` (unless its ``data`` is given, read with ``cap``) and write
    ``out_dir/report.html`` atomically (a temporary file in the same folder, fsynced, renamed
    over); returns its path.

    Raises:
        FileNotFoundError: no pages.jsonl in ``out_dir``.
        OSError: reading or writing failed.
    """
    out = Path(out_dir)
    html = render(data if data is not None else read_output(out, cap), title=out.resolve().name)
    target = out / REPORT_HTML
    tmp = out / f".{REPORT_HTML}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(html)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        # disk full: no stray temporary file, the previous report.html stays whole, and the
        # error names the file (a failed write() names none)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(target)) from None
        raise
    return target
