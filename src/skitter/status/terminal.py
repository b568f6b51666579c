"""The live terminal display of a crawl (rich): a progress bar when the crawl's end is known
(``--max-pages``, a link check), otherwise a panel with the headline figures and the five
slowest and five most failing hosts. Pure rendering from a :class:`~skitter.status.source.Totals`
and host rows, so it is tested without a terminal; :mod:`skitter.cli.progress` refreshes it.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from skitter.status.source import HostRow, Totals

__all__ = ["RateMeter", "render"]

#: Hosts listed in each of the panel's two tables.
TOP_HOSTS = 5


class RateMeter:
    """Records per second over a sliding window (seconds), from cumulative counts."""

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, count: int, now: float | None = None) -> float:
        """Add a cumulative count taken at ``now`` (monotonic seconds); returns the rate."""
        t = time.monotonic() if now is None else now
        self._samples.append((t, count))
        while len(self._samples) > 2 and self._samples[0][0] < t - self.window_s:
            self._samples.popleft()
        (t0, c0), (t1, c1) = self._samples[0], self._samples[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0


def _headline(t: Totals, rate: float) -> Text:
    parts = [
        ("fetched", f"{t.fetched:,}"),
        ("2xx", f"{t.ok:,}"),
        ("pages/s", f"{rate:,.1f}"),
        ("queued", f"{t.queued:,}"),
        ("in flight", f"{t.in_flight:,}"),
        ("hosts", f"{t.hosts:,}"),
        ("backoff", f"{t.hosts_in_backoff:,}"),
        ("errors", f"{t.errors:,}"),
        ("robots-blocked", f"{t.robots_disallowed:,}"),
    ]
    out = Text()
    for i, (k, v) in enumerate(parts):
        if i:
            out.append("  ")
        out.append(v, style="bold red" if k == "errors" and t.errors else "bold")
        out.append(f" {k}", style="dim")
    return out


def _hosts_table(title: str, rows: Sequence[HostRow]) -> Table:
    tab = Table(title=title, title_justify="left", box=None, pad_edge=False, expand=False)
    tab.add_column("host", no_wrap=True)
    for name in ("fetched", "errors", "avg", "delay"):
        tab.add_column(name, justify="right", no_wrap=True)
    tab.add_column("last error", no_wrap=True)
    for r in rows:
        tab.add_row(
            r.host[:40],
            f"{r.fetched:,}",
            f"{r.errors:,}",
            f"{r.avg_s:.2f}s",
            f"{r.delay_s:.1f}s {r.delay_cause}",
            r.last_error or "",
        )
    return tab


def render(t: Totals, rate: float, hosts: Sequence[HostRow]) -> RenderableType:
    """The display for ``t`` at ``rate`` pages/s: with ``t.target`` a progress bar over the
    records, else a panel with the headline figures and the five slowest (mean fetch time)
    and five most failing hosts among ``hosts``."""
    head = _headline(t, rate)
    if t.target:
        done = min(t.fetched, t.target)
        eta = (t.target - done) / rate if rate > 0 else None
        line = Text(f"{done:,}/{t.target:,}  ", style="bold")
        if eta is not None:
            line.append(f"about {eta:,.0f} s left", style="dim")
        return Group(ProgressBar(total=t.target, completed=done, width=60), line, head)
    fetched = [h for h in hosts if h.fetched]  # one pass, then O(n) picks: 100,000 hosts
    slow = heapq.nsmallest(TOP_HOSTS, fetched, key=lambda h: (-h.avg_s, h.host))
    failing = heapq.nsmallest(
        TOP_HOSTS, (h for h in fetched if h.errors), key=lambda h: (-h.errors, h.host)
    )
    body: list[RenderableType] = [head, _hosts_table("slowest hosts", slow)]
    if failing:
        body.append(_hosts_table("most failing hosts", failing))
    return Panel(Group(*body), title=f"skitter · {t.state}", title_align="left")
