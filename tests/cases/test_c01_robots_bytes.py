"""C01 — robots.txt bytes: UTF-8 BOM, non-UTF-8 bytes, a file larger than the parse limit.

End to end: the crawler fetches each host's robots.txt and the server's access log shows
which pages it then requested.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from skitter.robots import MAX_ROBOTS_BYTES, RobotsRules
from tests.cases._util import CASE_UA, page, requested, run
from tests.integration.site import Site, text

BOM = "bom.example.test"
LATIN = "latin.example.test"
BIG = "big.example.test"

BOM_BODY = b"\xef\xbb\xbfUser-agent: *\r\nDisallow: /private/\r\n"
LATIN_BODY = (
    b"# rules for the b\xfccher section\nUser-agent: *\nDisallow: /b\xfccher/\nDisallow: /admin/\n"
)


def big_body() -> bytes:
    pad = b"# pad pad pad\n"
    head = b"User-agent: *\n" + pad * (100 * 1024 // len(pad))
    secret_at = len(head)
    body = head + b"Disallow: /secret/\n" + pad * (500 * 1024 // len(pad)) + b"Disallow: /late/\n"
    assert 95 * 1024 < secret_at < 105 * 1024 and len(body) > 600 * 1024
    return body


@pytest.fixture
def c01_site(site: Site) -> Site:
    site.route(BOM, "/robots.txt", text(BOM_BODY))
    site.route(LATIN, "/robots.txt", text(LATIN_BODY))
    site.route(BIG, "/robots.txt", text(big_body()))
    for h in (BOM, LATIN, BIG):
        site.fallback(h, page())
    return site


async def test_c01_bom_latin1_and_big_robots_txt_end_to_end(
    c01_site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site = c01_site
    seeds = [
        site.url(BOM, "/private/x"),
        site.url(BOM, "/x"),
        site.url(LATIN, "/admin/x"),
        site.url(LATIN, "/public/x"),
        site.url(BIG, "/secret/x"),
        site.url(BIG, "/x"),
    ]
    with caplog.at_level(logging.WARNING, logger="skitter"):
        res = await run(site, tmp_path / "out", seeds)
    # BOM stripped: the group opens, /private/ is disallowed
    assert requested(site, BOM) == ["/x"]
    # Latin-1 byte: no decode error, not "empty = allow all"
    assert requested(site, LATIN) == ["/public/x"]
    # big: /secret/ (at ~100 KiB) is inside the parse limit; the file is not refused
    assert requested(site, BIG) == ["/x"]
    for h in (BOM, LATIN, BIG):
        assert site.paths(h).count("/robots.txt") == 1
    robots = res.report["robots"]
    assert robots[site.url(BOM, "")]["status"] == "ok"
    assert robots[site.url(LATIN, "")]["status"] == "ok"
    assert robots[site.url(BIG, "")]["status"] == "ok"
    assert robots[site.url(BIG, "")]["truncated"] is True
    assert robots[site.url(BOM, "")]["truncated"] is False
    assert robots[site.url(BIG, "")]["disallowed_urls"] == [site.url(BIG, "/secret/x")]
    # the crawler says it truncated the file
    assert any(
        "robots.txt of " + site.url(BIG, "") in r.getMessage() and "parse limit" in r.getMessage()
        for r in caplog.records
    )
    # disallowed pages are not records of fetched pages (and not errors)
    urls = {r["url"] for r in res.records}
    assert site.url(BOM, "/private/x") not in urls and site.url(LATIN, "/admin/x") not in urls
    assert res.report["totals"]["robots_disallowed"] == 3


def test_c01_big_file_parses_fast_and_keeps_the_first_500_kib() -> None:
    body = big_body()
    start = time.perf_counter()
    rules = RobotsRules.parse(body)
    token = "testcrawler"
    assert not rules.allowed("http://big.example.test/secret/x", token)
    assert rules.allowed("http://big.example.test/x", token)
    elapsed = time.perf_counter() - start
    assert rules.truncated and rules.size_bytes == len(body) > MAX_ROBOTS_BYTES
    assert elapsed < 10.0, elapsed  # linear: ~0.1 s; a quadratic parse takes minutes
    # the same with a product token taken from the cases.md UA
    from skitter.robots import product_token

    assert product_token(CASE_UA) == token
