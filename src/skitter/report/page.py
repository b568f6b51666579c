"""The look shared by Skitter's HTML documents (report.html, ``check-links --format html``):
one self-contained page (inline style, one small inline script, no external resource), cards
for headline figures, panels for charts, and searchable tables.

A table is searchable by the input above it (a case-insensitive substring filter over its rows,
done by the inline script); without JavaScript every row still shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

__all__ = ["STYLE", "cards", "document", "panel", "table"]

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;padding:0 1.4em 2em;background:#f7f8fa;
color:#1d2330}
h1{font-size:1.35em;margin:.7em 0 .2em}h2{font-size:1.05em;margin:0 0 .5em}
.dim{color:#6b7280}.err{color:#dc2626}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(9.5em,1fr));gap:.6em;
margin:.8em 0}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:.5em;padding:.5em .7em}
.card strong{display:block;font-size:1.35em;font-variant-numeric:tabular-nums}
.card span{color:#6b7280;font-size:.85em}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(30em,1fr));gap:.7em}
.panel{background:#fff;border:1px solid #e5e7eb;border-radius:.5em;padding:.8em;margin:.7em 0;
overflow:auto}
svg.chart{width:100%;height:auto;font-size:11px}svg.chart text{fill:#374151}
table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{padding:.25em .5em;border-bottom:1px solid #eef0f3;text-align:left;vertical-align:top}
td{overflow-wrap:anywhere}th{background:#f3f4f6;position:sticky;top:0}
input.filter{margin:.2em 0 .5em;padding:.3em .5em;width:22em;max-width:100%}
.note{font-size:.85em;color:#6b7280;margin:.4em 0}
"""

_SCRIPT = """
document.querySelectorAll("input.filter").forEach(function (input) {
  var table = document.getElementById(input.dataset.table);
  if (!table) return;
  input.addEventListener("input", function () {
    var q = input.value.toLowerCase(), shown = 0;
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      var hit = tr.textContent.toLowerCase().indexOf(q) >= 0;
      tr.hidden = !hit; if (hit) shown++;
    });
    var out = document.getElementById(input.dataset.table + "-shown");
    if (out) out.textContent = shown + " shown";
  });
});
"""


def document(title: str, body: str, *, subtitle: str = "") -> str:
    """A whole HTML5 page: ``title`` (escaped) as its title and heading, ``body`` (trusted HTML)
    below, the shared style and table-filter script inline."""
    t = escape(title)
    sub = f'<p class="dim">{escape(subtitle)}</p>' if subtitle else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>{sub}{body}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


def cards(items: Iterable[tuple[str, str]]) -> str:
    """Headline figures: ``[(value, caption), ...]`` (both escaped)."""
    inner = "".join(
        f'<div class="card"><strong>{escape(v)}</strong><span>{escape(k)}</span></div>'
        for v, k in items
    )
    return f'<section class="cards">{inner}</section>'


def panel(title: str, content: str, *, note: str = "") -> str:
    """A titled box around trusted HTML ``content`` (a chart, a table); ``note`` is escaped."""
    n = f'<p class="note">{escape(note)}</p>' if note else ""
    return f'<div class="panel"><h2>{escape(title)}</h2>{content}{n}</div>'


def table(
    table_id: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    total: int | None = None,
    where: str = "",
    html_cells: bool = False,
) -> str:
    """A searchable table (every cell escaped, unless ``html_cells``: cells are trusted HTML,
    e.g. links built with escaped parts). ``total`` is the full row count when ``rows`` was
    capped: the note then says how many are shown and ``where`` the full list is."""

    def cell(c: object) -> str:
        return str(c) if html_cells else escape(str(c))

    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in r) + "</tr>" for r in rows)
    shown = body.count("<tr>")
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    note = ""
    if total is not None and total > shown:
        note = f"First {shown:,} of {total:,} shown"
        if where:
            note += f"; the full list: {where}"
    elif total is not None:
        note = f"{total:,} in all"
    tid = escape(table_id)
    return (
        f'<input class="filter" type="search" data-table="{tid}" placeholder="search…" '
        f'aria-label="search {tid}"> <span class="dim" id="{tid}-shown"></span>'
        f'<table id="{tid}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        + (f'<p class="note">{escape(note)}</p>' if note else "")
    )
