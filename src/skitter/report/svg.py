"""Charts as inline SVG strings, drawn in Python (no JavaScript, no chart library).

Every chart is an ``<svg class="chart" data-chart=NAME role="img">`` element with an
``aria-label``, a ``<title>`` and one ``<title>`` tooltip per bar or point, sized by its
``viewBox`` (it scales with the page). All text is XML-escaped. An empty series draws a chart
that says "no data".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

__all__ = ["bar_chart", "column_chart", "line_chart"]

BLUE = "#2563eb"
RED = "#dc2626"
GREY = "#6b7280"


def _fmt(v: float) -> str:
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"


def _open(name: str, label: str, w: int, h: int) -> list[str]:
    e = escape(label)
    return [
        f'<svg class="chart" data-chart="{escape(name)}" role="img" aria-label="{e}" '
        f'viewBox="0 0 {w} {h}" style="max-width:{round(w * 1.5)}px" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{e}</title>'
    ]


def _empty(out: list[str], w: int, h: int) -> str:
    out.append(
        f'<text x="{w / 2}" y="{h / 2}" text-anchor="middle" fill="{GREY}">no data</text></svg>'
    )
    return "".join(out)


def bar_chart(
    name: str,
    label: str,
    items: Sequence[tuple[str, float]],
    *,
    color: str = BLUE,
    colors: Sequence[str] | None = None,
    width: int = 520,
    label_width: int = 200,
) -> str:
    """Horizontal bars, one per ``(label, value)`` in the given order (a top-N list), in
    ``color`` or one colour per bar from ``colors``.

    Labels longer than fits are cut with an ellipsis (the full label is in the tooltip).
    """
    row = 20
    h = max(40, row * len(items) + 10)
    out = _open(name, label, width, h)
    if not items:
        return _empty(out, width, h)
    top = max(v for _, v in items) or 1
    span = width - label_width - 70
    chars = label_width // 7
    for i, (k, v) in enumerate(items):
        y = 5 + i * row
        text = k if len(k) <= chars else k[: chars - 1] + "…"
        bw = max(1.0, span * v / top) if v > 0 else 0.0
        out.append(
            f'<g class="bar"><title>{escape(k)}: {_fmt(v)}</title>'
            f'<text x="{label_width - 6}" y="{y + 13}" text-anchor="end">{escape(text)}</text>'
            f'<rect x="{label_width}" y="{y + 2}" width="{bw:.1f}" height="{row - 6}" '
            f'fill="{colors[i] if colors is not None and i < len(colors) else color}" rx="2"/>'
            f'<text x="{label_width + bw + 5:.1f}" y="{y + 13}">{_fmt(v)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def column_chart(
    name: str,
    label: str,
    items: Sequence[tuple[str, float]],
    *,
    colors: Sequence[str] | None = None,
    width: int = 520,
    height: int = 200,
) -> str:
    """Vertical columns, one per ``(category, value)`` in order (a histogram); ``colors``
    gives one colour per column (default all blue)."""
    out = _open(name, label, width, height)
    if not items:
        return _empty(out, width, height)
    left, bottom, top_pad = 44, 34, 14
    top = max(v for _, v in items) or 1
    plot_w, plot_h = width - left - 6, height - bottom - top_pad
    slot = plot_w / len(items)
    bw = max(1.0, slot * 0.75)
    out.append(
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 6}" y2="{height - bottom}" '
        f'stroke="#cbd5e1"/><text x="{left - 4}" y="{top_pad + 4}" text-anchor="end">'
        f'{_fmt(top)}</text><text x="{left - 4}" y="{height - bottom}" text-anchor="end">0</text>'
    )
    every = max(1, math.ceil(len(items) / (plot_w / 34)))  # labels that fit
    for i, (k, v) in enumerate(items):
        x = left + i * slot + (slot - bw) / 2
        bh = plot_h * v / top
        fill = colors[i] if colors is not None and i < len(colors) else BLUE
        out.append(
            f'<g class="bar"><title>{escape(k)}: {_fmt(v)}</title>'
            f'<rect x="{x:.1f}" y="{height - bottom - bh:.1f}" width="{bw:.1f}" '
            f'height="{bh:.1f}" fill="{fill}" rx="1"/>'
        )
        if i % every == 0:
            out.append(
                f'<text x="{x + bw / 2:.1f}" y="{height - bottom + 14}" '
                f'text-anchor="middle">{escape(k[:10])}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def line_chart(
    name: str,
    label: str,
    series: Sequence[tuple[str, str, Sequence[tuple[float, float]]]],
    *,
    x_label: str = "",
    width: int = 1040,
    height: int = 220,
) -> str:
    """Lines over a shared x axis: ``series`` is ``[(name, colour, [(x, y), ...]), ...]``;
    x is seconds from the start (labelled as elapsed time), y from 0 up."""
    out = _open(name, label, width, height)
    points = [p for _, _, pts in series for p in pts]
    if not points:
        return _empty(out, width, height)
    left, bottom, top_pad = 50, 30, 18
    x0 = min(p[0] for p in points)
    x1 = max(p[0] for p in points)
    ymax = max(p[1] for p in points) or 1
    plot_w, plot_h = width - left - 10, height - bottom - top_pad

    def sx(x: float) -> float:
        return left + (plot_w * (x - x0) / (x1 - x0) if x1 > x0 else plot_w)

    def sy(y: float) -> float:
        return height - bottom - plot_h * y / ymax

    out.append(
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" '
        f'stroke="#cbd5e1"/><text x="{left - 4}" y="{top_pad + 4}" text-anchor="end">'
        f'{_fmt(ymax)}</text><text x="{left - 4}" y="{height - bottom}" text-anchor="end">0</text>'
        f'<text x="{left}" y="{height - 8}">{_elapsed(x0)}</text>'
        f'<text x="{width - 10}" y="{height - 8}" text-anchor="end">{_elapsed(x1)} '
        f"{escape(x_label)}</text>"
    )
    lx = left + 10
    for sname, color, pts in series:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(
            f'<polyline class="line" data-series="{escape(sname)}" points="{path}" '
            f'fill="none" stroke="{color}" stroke-width="1.5"/>'
            f'<text x="{lx}" y="12" fill="{color}">{escape(sname)}</text>'
        )
        lx += 8 * len(sname) + 20
    out.append("</svg>")
    return "".join(out)


def _elapsed(s: float) -> str:
    s = round(s)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s"
