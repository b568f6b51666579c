"""A sharded crawler taking in handed-off requests (ShardPeers.admit_received)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from skitter.crawler import Crawler
from skitter.models import Hop, Request
from skitter.settings import CrawlSettings
from skitter.shard_peers import ShardPeers
from skitter.sharding import ShardLink, shard_dir, shard_of


def _host_of_shard(index: int, count: int) -> str:
    for i in range(1000):
        h = f"h{i}.test"
        if shard_of(h, count) == index:
            return h
    raise AssertionError("no host")


async def test_two_redirect_chains_to_one_target_read_together_are_both_recorded(
    tmp_path: Path,
) -> None:
    """Regression: two continuations to the same URL in one batch; the second chain ended
    without any pages.jsonl record (its URL was in the batch's added set)."""
    target_host = _host_of_shard(0, 2)
    other = _host_of_shard(1, 2)
    out = tmp_path / "out"
    (out / "shards").mkdir(parents=True)
    settings = CrawlSettings(
        out_dir=str(shard_dir(out, 0)), seeds=(f"http://{target_host}/",), frontier="memory"
    )
    parent, child = multiprocessing.Pipe()
    link = ShardLink(out, 0, 2, child)
    target = f"http://{target_host}/x"
    chains = [
        Request(
            url=target,
            depth=1,
            origin_url=f"http://{other}/r{i}",
            redirects=(Hop(f"http://{other}/r{i}", 302),),
        )
        for i in (1, 2)
    ]
    meta = {
        "content_type": "text/html",
        "bytes": 10,
        "sha1": "d7dd" + "0" * 36,
        "elapsed_s": 0.25,
        "attempts": 2,
        "fetched_at": "2026-11-30T12:00:00.000000Z",
    }
    peers = ShardPeers(link)
    async with Crawler(settings, peers=peers) as crawler:
        await peers.admit_received(
            [(chains[0], None), (chains[1], meta), (Request(url=target, depth=1), None)]
        )
        counts = await crawler.components.frontier.counts()
    records = [
        json.loads(line) for line in (shard_dir(out, 0) / "pages.jsonl").read_text().splitlines()
    ]
    # the first chain is followed (queued), the second ends with its 302 and says why;
    # the plain link to the same URL is a duplicate with nothing to record
    assert counts.pending == 1
    assert [(r["url"], r["final_url"], r["status"], r["error_detail"]) for r in records] == [
        (
            f"http://{other}/r2",
            f"http://{other}/r2",
            302,
            f"redirect to {target} not followed: already crawled or queued",
        )
    ]
    # the sender's 3xx response fields, as one process would have recorded them
    rec = records[0]
    assert (rec["content_type"], rec["bytes"], rec["sha1"], rec["elapsed_s"]) == (
        "text/html",
        10,
        "d7dd" + "0" * 36,
        0.25,
    )
    assert (rec["attempts"], rec["fetched_at"]) == (2, "2026-11-30T12:00:00.000000Z")
    parent.close()
    child.close()


async def test_handed_over_links_rank_their_targets_with_order_inlinks(tmp_path: Path) -> None:
    """--order inlinks with --processes: links handed over by other processes count for the
    owner's ranking (one per distinct linking host)."""
    from dataclasses import replace

    from skitter.settings import QualitySettings

    target_host = _host_of_shard(0, 2)
    out = tmp_path / "out"
    (out / "shards").mkdir(parents=True)
    settings = CrawlSettings(
        out_dir=str(shard_dir(out, 0)),
        seeds=(f"http://{target_host}/",),
        frontier="memory",
        quality=replace(QualitySettings(), order="inlinks"),
    )
    _parent, child = multiprocessing.Pipe()
    peers = ShardPeers(ShardLink(out, 0, 2, child))
    t = [f"http://{target_host}/{p}" for p in ("a", "b", "c")]
    links = [("x1.test", t), ("x2.test", t[1:]), ("x3.test", t[2:]), ("x3.test", t[2:])]
    items = [
        (Request(url=u, depth=1, referer=f"http://{src}/page"), None)
        for src, targets in links
        for u in targets
    ]
    async with Crawler(settings, peers=peers) as crawler:
        await peers.admit_received(items)
        frontier = crawler.components.frontier
        order = []
        while (lease := await frontier.lease(0.0)) is not None:
            order.append(lease.request.url.rsplit("/", 1)[1])
            await frontier.ack(lease, not_before=0.0)
    assert order == ["c", "b", "a"]  # c: 3 linking hosts (x3 twice counts once), b: 2, a: 1
