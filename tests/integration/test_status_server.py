"""The status web server on loopback, driven by LiveState (no crawl): routes, JSON shapes,
sorting/filtering/paging of the host table, the Host-header check, status.url."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from skitter.status.server import StatusServer, host_page
from skitter.status.source import HostRow, LiveState


async def _counts() -> tuple[int, int, int]:
    return (7, 2, 3)


def fed_state() -> LiveState:
    st = LiveState(_counts, delay_s=1.0, target=10, clock=lambda: 1000.0)
    st.queued({"a.test": 3, "b.test": 2, "c.test": 1})
    st.record("a.test", 200, None, "text/html", 100, 0.1, 1)
    st.record("a.test", 200, None, "text/html", 50, 0.3, 1)
    st.record("b.test", 503, None, "text/html", 10, 0.2, 3)
    st.record("c.test", None, "timeout", None, 0, 30.0, 2)
    st.robots("a.test", "allowed", "allowed")
    st.robots("b.test", "disallowed", "allowed")
    st.wait("b.test", 5.0, "retry-after", until=1005.0)
    st.links({"queued": 4, "seen": 1})
    return st


@pytest.fixture
async def served() -> AsyncIterator[StatusServer]:
    async with StatusServer(fed_state(), title="t") as srv:
        yield srv


async def test_routes_and_json(served: StatusServer) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(served.url + "healthz") as r:
            assert r.status == 200 and await r.text() == "ok\n"
        async with s.get(served.url + "api/status") as r:
            body = await r.json()
            assert r.headers["Cache-Control"] == "no-store"
        t = body["totals"]
        assert (t["fetched"], t["ok"], t["errors"], t["bytes"]) == (4, 2, 1, 160)
        assert (t["queued"], t["in_flight"], t["hosts"], t["hosts_in_backoff"]) == (7, 2, 3, 1)
        assert t["by_status_class"] == {"2xx": 2, "5xx": 1}
        assert t["by_content_type"] == {"text/html": 3}
        assert t["by_error"] == {"timeout": 1}
        assert t["robots_disallowed"] == 1 and t["target"] == 10
        async with s.get(served.url) as r:
            html = await r.text()
            assert "/static/status.js" in html and '<script src="http' not in html
            assert "default-src 'self'" in r.headers["Content-Security-Policy"]
        async with s.get(served.url + "static/status.js") as r:
            assert r.status == 200 and "api/hosts" in await r.text()
        async with s.get(served.url + "static/../server.py") as r:
            assert r.status == 404
        async with s.get(served.url + "metrics") as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            fams = {f.name: f for f in text_string_to_metric_families(await r.text())}
    assert fams["skitter_queued_urls"].samples[0].value == 7
    assert fams["skitter_hosts_in_backoff"].samples[0].value == 1
    by_class = {s.labels["status_class"]: s.value for s in fams["skitter_fetches"].samples
                if s.name.endswith("_total")}  # fmt: skip
    assert by_class == {"2xx": 2, "5xx": 1}


async def test_hosts_sort_filter_page(served: StatusServer) -> None:
    async with aiohttp.ClientSession() as s:

        async def hosts(**q: str) -> dict:  # type: ignore[type-arg]
            async with s.get(served.url + "api/hosts", params=q) as r:
                assert r.status == 200, await r.text()
                return await r.json()  # type: ignore[no-any-return]

        d = await hosts()
        assert [r["host"] for r in d["rows"]] == ["a.test", "b.test", "c.test"]
        assert d["rows"][0]["fetched"] == 2 and d["rows"][0]["queued"] == 1
        b = d["rows"][1]
        assert (b["delay_s"], b["delay_cause"], b["backoff_until"]) == (5.0, "retry-after", 1005.0)
        assert (b["last_error"], b["robots_disallowed"], b["queued"]) == ("503", 1, 0)
        assert d["rows"][2]["last_error"] == "timeout"
        d = await hosts(sort="avg_s", order="desc")
        assert [r["host"] for r in d["rows"]] == ["c.test", "a.test", "b.test"]
        d = await hosts(sort="host", order="asc", per_page="2", page="2")
        assert ([r["host"] for r in d["rows"]], d["pages"], d["total"]) == (["c.test"], 2, 3)
        d = await hosts(q="B.T")
        assert [r["host"] for r in d["rows"]] == ["b.test"] and d["hosts_total"] == 3
        d = await hosts(sort="backoff_until", order="asc")  # None last in either order
        assert [r["host"] for r in d["rows"]] == ["b.test", "a.test", "c.test"]
        for bad in ({"sort": "nope"}, {"order": "up"}, {"page": "0"}, {"per_page": "1001"},
                    {"page": "x"}):  # fmt: skip
            async with s.get(served.url + "api/hosts", params=bad) as r:
                assert r.status == 400 and "error" in await r.json()


async def test_host_header_check(served: StatusServer) -> None:
    port = served.port
    ok = [f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"]
    bad = [f"evil.example:{port}", "127.0.0.1:1", "localhost", "", f"127.0.0.1.nip.io:{port}"]
    for host, want in [(h, 200) for h in ok] + [(h, 421) for h in bad]:
        # raw request: the Host header exactly as given
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = await reader.read()  # bounded: the server closes (Connection: close)
        writer.close()
        assert data.split(b" ", 2)[1] == str(want).encode(), (host, data[:80])


async def test_port_zero_and_status_url(tmp_path: Path) -> None:
    a = StatusServer(LiveState(), port=0)
    b = StatusServer(LiveState(), port=0)
    async with a, b:
        assert a.port != b.port and a.port > 0
        a.write_url(tmp_path)
        assert (tmp_path / "status.url").read_text() == f"http://127.0.0.1:{a.port}/\n"
    with pytest.raises(OSError), socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        await StatusServer(LiveState(), port=taken.getsockname()[1]).start()


def test_host_page_100k_rows() -> None:
    rows = [HostRow(f"h{i:06d}.test", fetched=i % 97) for i in range(100_000)]
    d = host_page(rows, sort="fetched", order="desc", page=3, per_page=1000)
    assert d["total"] == 100_000 and d["pages"] == 100 and len(d["rows"]) == 1000
    assert [r["fetched"] for r in d["rows"]] == sorted(
        (r["fetched"] for r in d["rows"]), reverse=True
    )


async def test_journal_source_follows_growing_files(tmp_path: Path) -> None:
    from skitter.status.journal import JournalSource

    src = JournalSource(tmp_path)
    assert (await src.totals()).fetched == 0  # no files yet
    pages = tmp_path / "pages.jsonl"
    links = tmp_path / "links.tsv"
    row = (
        '{"url":"http://a.test:81/x","final_url":"http://a.test:81/x","status":200,'
        '"content_type":"text/html","bytes":5,"elapsed_s":0.5,"attempts":2,"error":null}\n'
    )
    pages.write_text(row + '{"url":"http://b.test/","status":null,"error":"dns"')  # partial
    links.write_text("source\ttarget\tfragment\tanchor\tkind\tnofollow\tdecision\n"
                     "http://a.test:81/x\thttp://a.test:81/y\t\ty\ta\t0\tqueued\n")  # fmt: skip
    src.update({"inflight": 2, "hosts": 1})
    t = await src.totals()
    assert (t.fetched, t.ok, t.errors, t.in_flight, t.hosts) == (1, 1, 0, 2, 1)
    with pages.open("a") as f:
        f.write(',"bytes":0,"elapsed_s":1.0,"attempts":1}\n')  # the line completes
    t = await src.totals()
    assert (t.fetched, t.errors, t.by_error) == (2, 1, {"dns": 1})
    assert sorted(h.host for h in src.hosts()) == ["a.test:81", "b.test"]
    fams = {f.name: f for f in text_string_to_metric_families(await src.metrics_text())}
    assert fams["skitter_retries"].samples[0].value == 1
    queued = [s.value for s in fams["skitter_link_decisions"].samples
              if s.name.endswith("_total") and s.labels["decision"] == "queued"]  # fmt: skip
    assert queued == [1]


def test_server_thread_serves_a_blocking_caller() -> None:
    import urllib.request

    from skitter.status.server import ServerThread

    th = ServerThread(StatusServer(fed_state()))
    url = th.start()
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        with opener.open(url + "healthz", timeout=30) as r:
            assert r.read() == b"ok\n"
    finally:
        th.stop()
    th.stop()  # idempotent
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            ServerThread(StatusServer(LiveState(), port=taken.getsockname()[1])).start()


def test_series_rates_downsampled_to_360_points() -> None:
    from skitter.status.server import _rates

    hour = [(float(i), 2 * i, i // 10) for i in range(3600)]  # 2 pages/s, 0.1 errors/s
    r = _rates(hour)
    assert len(r) == 359 and r[-1] == [3599.0, 2.0, 0.1] and r[0] == [19.0, 2.0, 0.1]
    assert _rates(hour[:10]) == [[float(i), 2.0, 0.0] for i in range(1, 10)]
    assert _rates([]) == [] and _rates(hour[:1]) == []


async def test_crawler_source_reads_the_crawlers_counters(tmp_path: Path) -> None:
    from skitter.crawler import Crawler
    from skitter.status.session import CrawlerSource
    from tests.integration.site import Site, links_page, settings_for

    site = Site()
    await site.start()
    try:
        site.route("a.test", "/", links_page(site.url("a.test", "/x")))  # /x: 404
        settings = settings_for(site, tmp_path / "out", [site.url("a.test", "/")])
        async with Crawler.from_settings(settings) as crawler:
            await asyncio.wait_for(crawler.run(), 60)
            src = CrawlerSource(crawler)
            t = await src.totals()
            rows = src.hosts()
    finally:
        await site.close()
    assert (t.fetched, t.ok, t.queued, t.in_flight, t.by_status) == (
        2, 1, 0, 0, {"200": 1, "404": 1})  # fmt: skip
    assert [(r.host, r.fetched) for r in rows] == [(f"a.test:{site.port}", 2)]
    assert await src.metrics_text() == ""
