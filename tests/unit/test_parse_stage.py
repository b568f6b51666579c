"""skitter.parse_stage: which pages go to a parse helper process and which stay here."""

from __future__ import annotations

import asyncio
import functools
import os

from skitter.html_chunks import SEGMENT_MIN_BYTES
from skitter.links import extract
from skitter.parse_stage import ParseStage


def test_large_pages_are_parsed_here_small_ones_by_a_helper_when_host_bound() -> None:
    """Regression (issue 16, rust-doc --processes 2): a 10 MB page sent to the helper was
    held three times (body, pickle, the helper's copy): large pages are parsed here."""
    fn = functools.partial(extract, bot_token=None, resources=False, ids=False)
    stage = ParseStage(fn, workers=1, remote=fn)
    small = b'<a href="/s">s</a>'
    large = b"<p>" + b'<a href="/x">x</a>\n' * (SEGMENT_MIN_BYTES // 19 + 10)
    assert len(large) > SEGMENT_MIN_BYTES

    async def run() -> None:
        try:
            stage.host_bound = False  # many ready hosts: always here
            page = await stage.parse(small, "http://a.test/", "text/html", ())
            assert [link.url for link in page.links] == ["http://a.test/s"]
            stage.host_bound = True
            page = await stage.parse(small, "http://a.test/", "text/html", ())
            assert [link.url for link in page.links] == ["http://a.test/s"]
            page = await stage.parse(large, "http://a.test/", "text/html", ())
            assert {link.url for link in page.links} == {"http://a.test/x"}
            assert len(page.links) == SEGMENT_MIN_BYTES // 19 + 10
        finally:
            stage.close()

    asyncio.run(run())
    sections = stage.report_sections()["parse"]
    assert sections["pid"] == os.getpid()
    assert sections["here"] == 2  # the first small page and the large one
    assert list(sections["helpers"].values()) == [1]  # the host-bound small page
    assert int(next(iter(sections["helpers"]))) != os.getpid()
