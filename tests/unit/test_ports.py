"""The crawl loop's ports: the lease policy (a crawl mode) and the peers (other processes)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from skitter.build import lease_policy
from skitter.checklinks import CheckPolicy
from skitter.crawler import Crawler
from skitter.frontier.memory import MemoryFrontier
from skitter.frontier.routing import add_routed
from skitter.lease_policy import LeasePolicy
from skitter.models import Hop, Request
from skitter.peers import Alone, Peers
from skitter.settings import CrawlSettings

S = "http://www.test/"


def test_the_mode_chooses_the_lease_policy(tmp_path: Path) -> None:
    plain = lease_policy(CrawlSettings(out_dir=str(tmp_path), seeds=(S,)), time.time)
    assert type(plain) is LeasePolicy and not plain.rejudges_links
    assert plain.check_only_for("scope", "http://other.test/", "a") is None
    check = lease_policy(
        CrawlSettings(out_dir=str(tmp_path), seeds=(S,), check_links=True), time.time
    )
    assert isinstance(check, CheckPolicy) and check.rejudges_links
    assert check.check_only_for("scope", "http://other.test/", "a") is True
    assert check.check_only_for("queued", "http://www.test/x", "a") is False


def test_robots_failures_that_end_the_page() -> None:
    plain = LeasePolicy()
    assert [plain.robots_failure_is_final(k) for k in ("dns", "blocked_address")] == [True] * 2
    assert [plain.robots_failure_is_final(k) for k in ("connect", "tls", "timeout")] == [False] * 3
    check = CheckPolicy(CrawlSettings(out_dir="x", check_links=True), [S])
    assert [check.robots_failure_is_final(k) for k in ("dns", "connect", "tls")] == [True] * 3
    assert check.robots_failure_is_final("timeout") is False


def test_a_reused_verdict_is_a_record_without_a_request() -> None:
    check = CheckPolicy(CrawlSettings(out_dir="x", check_links=True), [S])
    cached = {
        "url": "http://ext.test/a",
        "final_url": "http://ext.test/b",
        "status": 200,
        "bytes": 12,
        "sha1": "ab" * 20,
        "content_type": "text/html",
        "fetched_at": "2026-11-30T12:00:00.000000Z",
        "redirects": [{"url": "http://ext.test/a", "status": 301}],
    }
    check.set_cache([cached])
    req = Request(
        url="http://ext.test/a",
        depth=2,
        origin_url="http://www.test/r",
        redirects=(Hop("http://www.test/r", 302),),
        check_only=True,
    )
    rec = check.reused_record(req)
    assert rec is not None
    assert (rec.url, rec.final_url, rec.status, rec.depth, rec.attempts) == (
        "http://www.test/r",
        "http://ext.test/b",
        200,
        2,
        0,
    )
    assert rec.redirects == [Hop("http://www.test/r", 302), Hop("http://ext.test/a", 301)]
    assert rec.error_detail == "verdict reused from a previous check (--cache-age)"
    # a page the check crawls is fetched again; the plain policy reuses nothing
    assert check.reused_record(Request(url="http://ext.test/a", depth=2)) is None
    assert LeasePolicy().reused_record(req) is None


async def test_alone_every_url_is_this_processs() -> None:
    peers = Alone()
    frontier = MemoryFrontier()
    reqs = [Request(url=S, depth=0), Request(url=S, depth=0)]
    added = (await add_routed(frontier, reqs)).added_urls
    assert added == frozenset({S})
    assert peers.owner_of_url is None and not peers.is_foreign("http://any.test/")
    assert peers.reserve(2, 2, 5) and not peers.reserve(3, 2, 5)
    assert peers.total_ok(7) == 7
    assert peers.dry(peers.mark(), set()) and peers.checkpoint_state() == {}


class _DeadHosts(LeasePolicy):
    """A mode that knows every host is dead: nothing is fetched, every lease is recorded."""

    def failed_host(self, host: str) -> tuple[str, str] | None:
        return "dns", f"{host}: known dead"


class _CountingPeers(Peers):
    def __init__(self) -> None:
        self.leases = 0

    def leased(self) -> None:
        self.leases += 1

    def checkpoint_state(self) -> dict[str, Any]:
        return {"probe": {"leases": self.leases}}


async def test_a_mode_and_peers_plug_into_the_loop(tmp_path: Path) -> None:
    """The loop has no branch per mode: a policy and peers given to the crawler are used."""
    out = tmp_path / "out"
    settings = CrawlSettings(out_dir=str(out), seeds=(S, "http://b.test/"), frontier="memory")
    peers = _CountingPeers()
    async with Crawler(settings, policy=_DeadHosts(), peers=peers) as crawler:
        snap = await crawler.run()
        assert crawler.stop_reason == "finished"
    records = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    assert sorted((r["url"], r["error"], r["error_detail"]) for r in records) == [
        ("http://b.test/", "dns", "b.test: known dead"),
        (S, "dns", "www.test: known dead"),
    ]
    assert snap.records == 2 and peers.leases == 2
    checkpoint = json.loads((out / "checkpoint.json").read_text())
    assert checkpoint["probe"] == {"leases": 2}
