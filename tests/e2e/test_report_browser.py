"""report.html rendered in headless Chromium (offline): every chart drawn with marks, no
uncaught script error, no request at all beyond the file, the table search works."""

from __future__ import annotations

from pathlib import Path

import pytest

from skitter.report import CHARTS, write_report
from tests.browser import Browser
from tests.unit.test_report_html import make_output

pytestmark = pytest.mark.slow


async def test_report_renders_in_chromium(tmp_path: Path) -> None:
    make_output(tmp_path)
    path = write_report(tmp_path)
    async with Browser() as b:
        await b.goto(path.resolve().as_uri())
        charts = await b.eval(
            "[...document.querySelectorAll('svg.chart')].map(s => [s.dataset.chart,"
            " s.querySelectorAll('rect, polyline').length, s.getBoundingClientRect().width])"
        )
        assert [c[0] for c in charts] == list(CHARTS)
        for name, marks, width in charts:
            assert marks > 0 and width > 100, (name, marks, width)
        rows = "document.querySelectorAll('#errors tbody tr:not([hidden])').length"
        assert await b.eval(rows) == 4
        await b.eval(
            "(() => { const i = document.querySelector('input[data-table=errors]');"
            " i.value = 'SCRIPT'; i.dispatchEvent(new Event('input')); })()"
        )
        assert await b.eval(rows) == 1
        assert await b.eval("document.getElementById('errors-shown').textContent") == "1 shown"
        assert b.exceptions == [] and b.console_errors == []
        assert b.requests == [path.resolve().as_uri()]


async def test_check_links_html_renders_in_chromium(tmp_path: Path) -> None:
    from skitter.checklinks.formats import format_report
    from tests.unit.test_checklinks import _sample

    path = tmp_path / "links.html"
    path.write_text(format_report(_sample(), "html"))
    async with Browser() as b:
        await b.goto(path.resolve().as_uri())
        bars = "document.querySelectorAll('svg[data-chart=verdicts] rect').length"
        assert await b.eval(bars) == 5
        rows = "document.querySelectorAll('#broken tbody tr:not([hidden])').length"
        assert await b.eval(rows) == 1
        await b.eval(
            "(() => { const i = document.querySelector('input[data-table=broken]');"
            " i.value = 'nothing like this'; i.dispatchEvent(new Event('input')); })()"
        )
        assert await b.eval(rows) == 0
        assert b.exceptions == [] and b.console_errors == []
        assert b.requests == [path.resolve().as_uri()]
