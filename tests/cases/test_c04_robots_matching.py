"""C04 — robots.txt rule matching: ``*``, ``$``, longest match, tie → Allow, encoded query.

End to end: every URL of the table is a seed; the server's access log shows exactly the
allowed ones, for both line orders of the file. The table-level conformance (RFC 9309
examples, Google's robots.txt test suite) is in tests/unit/test_robots.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skitter.robots import RobotsRules, product_token
from tests.cases._util import CASE_UA, page, requested, run
from tests.integration.site import Site, text
from tests.unit.test_robots import C04_RULES, C04_TABLE

SHOP = "shop.example.test"

#: the cases.md rules and (path, allowed) table, shared with the unit-level test
RULES = C04_RULES
TABLE = C04_TABLE


@pytest.mark.parametrize("order", ["as_written", "reversed"])
async def test_c04_robots_matching_end_to_end(site: Site, tmp_path: Path, order: str) -> None:
    rules = RULES if order == "as_written" else list(reversed(RULES))
    site.route(SHOP, "/robots.txt", text("User-agent: *\n" + "\n".join(rules) + "\n"))
    site.fallback(SHOP, page())
    seeds = [site.url(SHOP, p) for p, _ in TABLE]
    res = await run(site, tmp_path / "out", seeds)
    allowed = [p for p, ok in TABLE if ok]
    assert sorted(requested(site, SHOP)) == sorted(allowed)
    assert site.paths(SHOP).count("/robots.txt") == 1
    # the request line carries the query exactly as the link had it
    assert "/shop/c/4?q=price" in site.paths(SHOP)
    blocked = res.report["robots"][site.url(SHOP, "")]["disallowed_urls"]
    assert sorted(blocked) == sorted(site.url(SHOP, p) for p, ok in TABLE if not ok)
    for p, ok in TABLE:
        urls = {r["url"] for r in res.records}
        assert (site.url(SHOP, p) in urls) is ok, p


@pytest.mark.parametrize("order", ["as_written", "reversed"])
def test_c04_robots_matching_table(order: str) -> None:
    """The same table on the parser, with the product token of the cases.md UA."""
    rules = RULES if order == "as_written" else list(reversed(RULES))
    parsed = RobotsRules.parse(("User-agent: *\n" + "\n".join(rules) + "\n").encode())
    token = product_token(CASE_UA)
    for p, ok in TABLE:
        assert parsed.allowed(f"http://{SHOP}{p}", token) is ok, p


async def test_c04_group_for_the_crawler_token_applies(site: Site, tmp_path: Path) -> None:
    """The UA "Mozilla/5.0 (compatible; TestCrawler/1.0; ...)" obeys ``User-agent:
    testcrawler`` (its product token), not the ``*`` group."""
    site.route(
        SHOP,
        "/robots.txt",
        text(
            "User-agent: *\nDisallow: /everyone/\n\nUser-agent: TestCrawler\nDisallow: /only-us/\n"
        ),
    )
    site.fallback(SHOP, page())
    seeds = [site.url(SHOP, p) for p in ("/only-us/a", "/everyone/a", "/other")]
    await run(site, tmp_path / "out", seeds)
    assert sorted(requested(site, SHOP)) == ["/everyone/a", "/other"]
