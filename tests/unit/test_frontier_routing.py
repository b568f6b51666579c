"""The routing frontier of ``--processes``: adds for another process's hosts land in the
hand-off file (not the local queue), and reading them back at the owner admits them."""

from __future__ import annotations

from pathlib import Path

import pytest

from skitter.frontier import AddResult, FrontierCounts, MemoryFrontier
from skitter.frontier.routing import Outgoing, RoutingFrontier, add_routed
from skitter.models import Hop, Request
from skitter.sharding import Handoff, decode_line, shard_dir, shard_of_url


def owned_by(k: int, count: int = 2) -> list[str]:
    """Two URLs (on two hosts) owned by process ``k`` of ``count``."""
    urls = [f"https://h{i}.test/p" for i in range(50)]
    return [u for u in urls if shard_of_url(u, count) == k][:2]


async def test_foreign_adds_go_to_the_handoff_file_and_are_admitted_by_the_owner(
    tmp_path: Path,
) -> None:
    h0, h1 = Handoff(tmp_path, 0, 2), Handoff(tmp_path, 1, 2)
    f0, f1 = RoutingFrontier(MemoryFrontier(), h0), RoutingFrontier(MemoryFrontier(), h1)
    mine, theirs = owned_by(0)[0], owned_by(1)
    try:
        res = await f0.add(
            [Request(mine), Request(theirs[0], depth=2, referer=mine), Request(mine)]
        )
        assert res == AddResult(2, 1, frozenset({mine, theirs[0]}))
        # only process 0's host is in its queue
        assert await f0.counts() == FrontierCounts(pending=1, leased=0, done=0, hosts=1)
        lease = await f0.lease(0.0)
        assert lease is not None and lease.request.url == mine
        # a redirect continuation carries its 3xx fields to the owner
        cont = Request(theirs[1], depth=1, origin_url=mine, redirects=(Hop(mine, 301),))
        meta = {"content_type": "text/html", "bytes": 12, "attempts": 1}
        added = await add_routed(f0, [cont], force=True, meta=meta)
        assert added.added_urls == frozenset({theirs[1]})
        assert await f0.counts() == FrontierCounts(pending=0, leased=1, done=0, hosts=1)

        lines = (shard_dir(tmp_path, 0) / "handoff" / "to-1.jsonl").read_bytes().splitlines()
        assert [decode_line(ln) for ln in lines] == [
            (Request(theirs[0], depth=2, referer=mine), None),
            (cont, meta),
        ]
        # the owner reads them back and admits them: its URL-seen test decides
        got = h1.receive_with_meta()
        assert got == [(Request(theirs[0], depth=2, referer=mine), None), (cont, meta)]
        assert h1.receive_with_meta() == []  # read once
        res1 = await f1.add([r for r, _ in got])
        assert res1.added_urls == frozenset(theirs)
        assert (await f1.add([Request(theirs[0])])).duplicates == 1
        leased = [await f1.lease(0.0), await f1.lease(0.0)]
        assert {le.request for le in leased if le is not None} == {
            Request(theirs[0], depth=2, referer=mine),
            cont,
        }
        # nothing came back to process 0
        assert h0.receive_with_meta() == []
    finally:
        h0.close()
        h1.close()


async def test_owners_given_by_the_caller_are_used(tmp_path: Path) -> None:
    h0 = Handoff(tmp_path, 0, 2)
    f0 = RoutingFrontier(MemoryFrontier(), h0)
    mine = owned_by(0)[0]
    try:
        # the caller says process 1 owns it (the worker computes owners once per link)
        res = await f0.add([Request(mine)], owners=[1])
        assert res.added_urls == frozenset({mine})
        assert (await f0.counts()).pending == 0
        assert h0.sent()[1] > 0
    finally:
        h0.close()


class _FailingRouter:
    index = 0

    def owner_of_url(self, url: str) -> int:
        return shard_of_url(url, 2)

    def send(self, batches: dict[int, list[Outgoing]]) -> None:
        raise OSError(28, "No space left on device")


async def test_handoff_is_written_before_the_local_add() -> None:
    f = RoutingFrontier(MemoryFrontier(), _FailingRouter())
    with pytest.raises(OSError):
        await f.add([Request(owned_by(0)[0]), Request(owned_by(1)[0])])
    # the failed hand-off left the local queue untouched (the page is fetched again)
    assert (await f.counts()).pending == 0


async def test_add_routed_on_a_plain_frontier_ignores_meta() -> None:
    f = MemoryFrontier()
    res = await add_routed(f, [Request("https://a.test/")], meta={"bytes": 1}, owners=[3])
    assert res == AddResult(1, 0, frozenset({"https://a.test/"}))
