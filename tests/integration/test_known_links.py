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
from tests.integration.site import Site, crawl, links_page

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
