"""Links already put to the frontier are SEEN without another frontier call
(:attr:`skitter.context.CrawlContext.known_links`): the same links.tsv, the same pages, far
fewer URLs offered to the frontier; not in link checking or ``--order inlinks``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import skitter.context as context_mod
import skitter.link_decisions as decisions_mod
from skitter.frontier.routing import add_routed
from tests.integration.site import Site, crawl, html, links_page

H = "www.known.test"
PAGES = [f"/p{i}" for i in range(8)]


def build(site: Site) -> list[str]:
    """Every page links to every page (and twice to /p0), and off-scope: 8 x 10 links."""
    hrefs = [*PAGES, "/p0", "http://else.test/x"]
    for p in ["/", *PAGES]:
        site.route(H, p, links_page(*hrefs))
    return [site.url(H, "/")]


async def run(
    site: Site, out: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> tuple[list[tuple[str, ...]], Counter[str]]:
    """The crawl's links.tsv rows (sorted) and how often each URL was offered to the frontier."""
    offered: Counter[str] = Counter()

    async def spy(frontier: Any, requests: Any, **kwargs: Any) -> Any:
        offered.update(r.url for r in requests)
        return await add_routed(frontier, requests, **kwargs)

    monkeypatch.setattr(context_mod, "add_routed", spy)
    res = await crawl(site, out, build(site), pol_host_concurrency=1, **kw)
    assert sorted(r["url"] for r in res.records) == sorted(site.url(H, p) for p in ["/", *PAGES])
    rows = sorted(tuple(r.values()) for r in res.links)
    return rows, offered


async def test_repeated_links_skip_the_frontier_with_the_same_output(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows, offered = await run(site, tmp_path / "memo", monkeypatch)
    assert len(rows) == 9 * 10
    decisions = Counter(r[-1] for r in rows)
    assert decisions == {"queued": 8, "seen": 9 * 9 - 8, "scope": 9}
    # each linked page offered once (the seed is queued at the start, not as a link)
    assert offered == Counter({site.url(H, p): 1 for p in PAGES})
    # without the memo (emptied before every page): the frontier is asked every time, and
    # says the same
    monkeypatch.setattr(decisions_mod, "KNOWN_LINKS_MAX", 0)
    rows0, offered0 = await run(site, tmp_path / "plain", monkeypatch)
    assert rows0 == rows
    assert offered0[site.url(H, "/p1")] == 8  # linked from every other page


async def test_in_links_order_offers_every_link(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows, offered = await run(site, tmp_path / "inlinks", monkeypatch, quality_order="inlinks")
    assert Counter(r[-1] for r in rows)["queued"] == 8
    assert offered[site.url(H, "/p1")] == 8  # every link counts for the ranking


def build_mixed(site: Site) -> list[str]:
    """A chain / -> /d1 -> /d2 -> /d3 whose pages all link back to the pages before them
    (so most links are known), with fragments, a rel=nofollow link to a known page and a
    link to a page under a trap-free second path; the first seed also links to every page,
    the second seed (/d3, crawled after the first) only to known pages."""
    chain = ["/", "/d1", "/d2", "/d3"]
    for i, p in enumerate(chain):
        back = "".join(
            f'<a href="{q}#s{i}">b</a><a rel="nofollow" href="{q}">n</a><a href="{q}">p</a>'
            for q in chain[: i + 1]
        )
        fwd = f'<a href="{chain[i + 1]}#top">f</a>' if i + 1 < len(chain) else ""
        extra = "".join(f'<a href="{q}">s</a>' for q in chain) if p == "/" else ""
        site.route(H, p, html(f"<html><body>{extra}{back}{fwd}</body></html>"))
    return [site.url(H, "/"), site.url(H, "/d3")]


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"scope_max_depth": 1},
        {"scope_max_links_per_page": 4},
        {"scope_max_seed_links": 3},
        {"scope_follow_nofollow": True},
    ],
    ids=["plain", "max_depth", "link_cap", "seed_cap", "follow_nofollow"],
)
async def test_known_links_are_judged_as_without_the_memo(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any]
) -> None:
    """A link to a URL already queued is SEEN without its canonical form worked out again
    only when no rule of the page could judge it otherwise (depth, link caps, nofollow):
    links.tsv is the same as with every link judged in full (the memo emptied each page)."""

    async def rows_of(out: Path) -> list[tuple[Any, ...]]:
        res = await crawl(site, out, build_mixed(site), pol_host_concurrency=1, **settings)
        return sorted(tuple(r.values()) for r in res.links)

    rows = await rows_of(tmp_path / "memo")
    monkeypatch.setattr(decisions_mod, "KNOWN_LINKS_MAX", 0)
    assert await rows_of(tmp_path / "plain") == rows
    decisions = Counter(r[-1] for r in rows)
    assert decisions["seen"] > 0
    # fragments are kept apart from the target in both ways of judging
    assert any(r[2] == "s1" and r[1] == site.url(H, "/") for r in rows)
    if "scope_follow_nofollow" not in settings:
        assert decisions["nofollow"] > 0  # a nofollow link to a known page stays NOFOLLOW
    if "scope_max_depth" in settings:
        assert decisions["depth"] > 0  # the links of the pages at depth 1: all known
    if "scope_max_links_per_page" in settings or "scope_max_seed_links" in settings:
        assert decisions["limit"] > 0
