"""The rich terminal display: bar with a known end, else headline panel with top hosts."""

from __future__ import annotations

from rich.console import Console

from skitter.status.source import HostRow, Totals
from skitter.status.terminal import RateMeter, render


def text(renderable: object) -> str:
    c = Console(width=120, record=True, color_system=None, force_terminal=False)
    c.print(renderable)
    return c.export_text()


def hosts() -> list[HostRow]:
    rows = [HostRow(f"h{i}.test", fetched=10, avg_s=i / 10, errors=i % 3) for i in range(8)]
    rows.append(HostRow("never.test"))  # nothing fetched yet: not in the tables
    rows[7].last_error = "timeout"
    return rows


def test_panel_lists_five_slowest_and_most_failing() -> None:
    t = Totals(fetched=80, ok=70, errors=3, queued=12, in_flight=2, hosts=8)
    out = text(render(t, 12.5, hosts()))
    assert "80 fetched" in out and "12.5 pages/s" in out and "12 queued" in out
    slow = out[out.index("slowest hosts") : out.index("most failing hosts")]
    assert [f"h{i}.test" for i in (7, 6, 5, 4, 3)] == [
        w for w in slow.split() if w.endswith(".test")]  # fmt: skip
    failing = out[out.index("most failing hosts") :]
    assert [w for w in failing.split() if w.endswith(".test")] == [
        "h2.test", "h5.test", "h1.test", "h4.test", "h7.test"]  # fmt: skip
    assert "timeout" in failing and "never.test" not in out


def test_bar_when_the_end_is_known() -> None:
    out = text(render(Totals(fetched=25, target=100), 5.0, hosts()))
    assert "25/100" in out and "about 15 s left" in out and "slowest" not in out


def test_rate_meter_window() -> None:
    m = RateMeter(window_s=10)
    assert m.add(0, now=0.0) == 0.0
    assert m.add(50, now=5.0) == 10.0
    assert m.add(100, now=10.0) == 10.0
    assert m.add(300, now=20.0) == 20.0  # the sample at 0 s left the window
