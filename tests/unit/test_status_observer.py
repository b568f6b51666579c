"""LiveState as the crawl's observer; ObservedFrontier forwards and reports."""

from __future__ import annotations

from collections import Counter

from prometheus_client.parser import text_string_to_metric_families

from skitter.export.pages import PageRecord
from skitter.frontier.memory import MemoryFrontier
from skitter.models import Request
from skitter.observer import NULL_OBSERVER, ObservedFrontier, observe_frontier
from skitter.status.source import LiveState


def rec(url: str, status: int | None, error: str | None = None) -> PageRecord:
    return PageRecord(url=url, final_url=url, status=status, depth=0, content_type="text/html",
                      bytes=10, sha1=None, fetched_at="2024-05-01T12:00:00.000Z", elapsed_s=0.5,
                      attempts=2, error=error)  # fmt: skip


async def test_observer_events_feed_hosts_totals_and_metrics() -> None:
    now = [1000.0]
    decisions: Counter[str] = Counter({"queued": 3})
    st = LiveState(delay_s=1.0, clock=lambda: now[0], link_decisions=lambda: decisions)
    st.on_queued(frozenset({"http://a.test/1", "http://a.test/2", "http://b.test:8080/"}))
    st.on_robots("a.test", "allowed", 5.0)
    st.on_robots("a.test", "disallowed", 5.0)
    st.on_robots("b.test:8080", "unreachable", None)
    st.on_record(rec("http://a.test/1", 200), "a.test")
    st.on_schedule("a.test", 1001.0, retry=False)
    hosts = {h.host: h for h in st.hosts()}
    a = hosts["a.test"]
    assert (a.queued, a.fetched, a.robots, a.robots_disallowed) == (0, 1, "ok", 1)
    assert (a.delay_s, a.delay_cause, a.backoff_until) == (1.0, "delay", None)
    st.on_schedule("a.test", 1005.0, retry=False)
    assert (a.delay_s, a.delay_cause) == (5.0, "crawl-delay")
    st.on_schedule("a.test", 1030.0, retry=False)
    assert a.delay_cause == "retry-after"
    st.on_schedule("b.test:8080", 1004.0, retry=True)
    b = hosts["b.test:8080"]
    assert (b.robots, b.delay_cause, b.backoff_until, b.queued) == ("unreachable", "backoff",
                                                                    1004.0, 1)  # fmt: skip
    t = await st.totals()
    assert (t.fetched, t.hosts_in_backoff, t.robots_disallowed) == (1, 1, 1)
    now[0] = 1004.5
    assert (await st.totals()).hosts_in_backoff == 0
    decisions["seen"] += 2
    fams = {f.name: f for f in text_string_to_metric_families(await st.metrics_text())}
    links = {s.labels["decision"]: s.value for s in fams["skitter_link_decisions"].samples}
    assert links == {"queued": 3, "seen": 2}
    robots = {s.labels["decision"]: s.value for s in fams["skitter_robots_decisions"].samples}
    assert robots == {"allowed": 1, "disallowed": 1, "unreachable": 1}
    assert fams["skitter_retries"].samples[0].value == 1


async def test_ignore_robots_column() -> None:
    st = LiveState(ignore_robots=True)
    st.on_record(rec("http://a.test/", 200), "a.test")
    assert st.hosts()[0].robots == "ignored"


async def test_observed_frontier_forwards_and_reports() -> None:
    events: list[tuple[str, object]] = []

    class Spy:
        def on_record(self, rec: PageRecord, host: str) -> None: ...
        def on_robots(self, host: str, decision: str, crawl_delay_s: float | None) -> None: ...
        def on_schedule(self, host: str, not_before: float, retry: bool) -> None:
            events.append(("schedule", (host, not_before, retry)))

        def on_queued(self, urls: frozenset[str]) -> None:
            events.append(("queued", urls))

    inner = MemoryFrontier()
    assert observe_frontier(inner, NULL_OBSERVER) is inner
    f = ObservedFrontier(inner, Spy())
    r = await f.add([Request(url="http://a.test/x", depth=0)])
    assert r.added_urls == frozenset({"http://a.test/x"})
    assert (await f.add([Request(url="http://a.test/x", depth=0)])).added == 0  # no event
    lease = await f.lease(0.0)
    assert lease is not None
    await f.retry(lease, not_before=5.0)
    lease = await f.lease(10.0)
    assert lease is not None
    await f.ack(lease, not_before=11.0)
    assert await f.is_finished()
    assert events == [
        ("queued", frozenset({"http://a.test/x"})),
        ("schedule", ("a.test", 5.0, True)),
        ("schedule", ("a.test", 11.0, False)),
    ]
    assert (await f.counts()).done == 1
    await f.add([Request(url="http://a.test/y", depth=1)])
    assert await f.note_inlinks([("http://a.test/y", "b.test")]) == 1  # forwarded (--order)
    await f.aclose()
