"""``skitter crawl --frontier redis://`` plus ``skitter worker`` processes on a loopback
multi-host site, with a real ``redis-server``: every URL fetched once across the workers, one
request per host at a time, robots.txt fetched once per host; faults: a worker killed with
``kill -9``, Redis killed and restarted from its AOF, Redis gone past ``--redis-wait``.

The CLIs run as subprocesses in their own sessions; the test watches the site's own log.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.site import Site
from tests.integration.test_processes import (
    crawl_args,
    finish,
    page_body,
    slow_page,
    start_cli,
    wait_for,
    with_group_killed,
)
from tests.redis_server import RedisCluster3, RedisServer

pytestmark = pytest.mark.slow

HOSTS = [f"w{i}.test" for i in range(6)]
PAGES = 12  # per host: 6 x (root + 12) = 78 pages


def barrier_of_all(n: int) -> Any:
    """``wrap(handler)``: handlers that answer only once ``n`` of them were called."""
    arrived = [0]
    ready = asyncio.Event()

    def wrap(handler: Any) -> Any:
        async def h(request: Any) -> Any:
            arrived[0] += 1
            if arrived[0] >= n:
                ready.set()
            await asyncio.wait_for(ready.wait(), 30)
            return await handler(request)

        return h

    return wrap


def build_site(site: Site, delay_s: float) -> list[str]:
    """Six hosts; each root links to its pages, page j to j+1 and to a page of the next
    host. The roots answer only once all six were requested: with ``--concurrency 2`` per
    worker, three workers must be leasing at once for the crawl to begin."""
    barrier_of = barrier_of_all(len(HOSTS))
    for i, h in enumerate(HOSTS):  # distinct bodies (identical pages count as duplicates)
        nxt = HOSTS[(i + 1) % len(HOSTS)]
        root = slow_page(page_body("/p/0", "/p/1", site.url(nxt, "/")), delay_s)
        site.route(h, "/", barrier_of(root))
        for j in range(PAGES):
            hrefs = [f"/p/{t}" for t in (j + 1, j + 2) if t < PAGES]
            hrefs.append(site.url(nxt, f"/p/{(j * 5) % PAGES}"))
            site.route(h, f"/p/{j}", slow_page(page_body(*hrefs), delay_s))
    return [site.url(h, "/") for h in HOSTS]


def expected(site: Site) -> set[str]:
    return {site.url(h, p) for h in HOSTS for p in ["/", *(f"/p/{j}" for j in range(PAGES))]}


def records(out: Path) -> list[dict[str, Any]]:
    path = out / "pages.jsonl"
    if not path.exists():
        return []
    data = path.read_bytes()
    return [json.loads(x) for x in data[: data.rfind(b"\n") + 1].split(b"\n") if x]


async def finish_all(procs: list[Any], timeout_s: float = 90.0) -> list[tuple[int, str, str]]:
    """Wait for every process together (bounded; pipes drained); on a timeout stop them
    (SIGTERM: they log how they stop) and fail with the tail of each one's stderr."""
    tasks = [asyncio.create_task(p.communicate()) for p in procs]
    _, pending = await asyncio.wait(tasks, timeout=timeout_s)
    if pending:
        for p in procs:
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
        await asyncio.wait(tasks, timeout=10)
        for p in procs:
            if p.returncode is None:
                with_group_killed(p)
        await asyncio.wait(tasks)
    outs = [
        (p.returncode, t.result()[0].decode(), t.result()[1].decode())
        for p, t in zip(procs, tasks, strict=True)
    ]
    if pending:
        raise AssertionError("\n----\n".join(f"rc={rc} {err[-6000:]}" for rc, _, err in outs))
    return outs


def page_hits(site: Site) -> Counter[str]:
    return Counter(site.url(h.host, h.path_qs) for h in site.hits if h.path_qs != "/robots.txt")


async def start_crawl(site: Site, server: RedisServer, out: Path, *extra: str) -> Any:
    args = crawl_args(site, HOSTS, out, "--frontier", server.url, "--crawl-id", "e2e")
    args += ["--concurrency", "2", "--ip-concurrency", "6", "--lease-ttl", "3", *extra]
    return await start_cli(*args, *(site.url(h, "/") for h in HOSTS))


async def start_worker(server: RedisServer, out: Path, *extra: str) -> Any:
    args = ["worker", server.url, "--out", str(out), "--crawl-id", "e2e", *extra]
    return await start_cli(*args)


async def test_crawl_and_two_workers_fetch_every_url_once(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    build_site(site, delay_s=0.01)
    outs = [tmp_path / f"w{k}" for k in range(3)]
    # a lease long enough that no lease is lost on a loaded machine: every URL exactly once
    first = await start_crawl(site, redis_server_own, outs[0], "--lease-ttl", "30")
    await wait_for(lambda: (outs[0] / "worker.json").exists(), first)
    workers = [await start_worker(redis_server_own, o) for o in outs[1:]]
    results = await finish_all([first, *workers])
    for rc, _, err in results:
        assert rc == 0, err
    recs = [r for o in outs for r in records(o)]
    urls = [r["url"] for r in recs]
    assert len(urls) == len(set(urls)), [u for u, n in Counter(urls).items() if n > 1]
    assert set(urls) == expected(site)
    assert all(records(o) for o in outs)  # the barrier needed all three
    assert set(page_hits(site).values()) == {1}
    assert max(site.max_inflight.values()) == 1  # one request per host at a time
    robots = Counter(h.host for h in site.hits if h.path_qs == "/robots.txt")
    assert robots == dict.fromkeys(HOSTS, 1)  # once for the whole cluster
    assert all(list(o.glob("skitter-w*-*.warc.gz")) for o in outs)
    # run again on their folders (resume): same worker ids, nothing left, nothing fetched
    wid = json.loads((outs[1] / "worker.json").read_text())["worker_id"]
    hits = len(site.hits)
    again = [
        await start_cli("worker", redis_server_own.url, "--out", str(outs[1]), "--crawl-id", "e2e"),
        await start_cli("crawl", "--resume", "--out", str(outs[0])),
    ]
    for rc, _, err in await finish_all(again):
        assert rc == 0, err
    assert json.loads((outs[1] / "worker.json").read_text())["worker_id"] == wid
    assert len(site.hits) == hits


async def test_killed_worker_leases_go_to_others(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    build_site(site, delay_s=0.05)
    outs = [tmp_path / f"w{k}" for k in range(3)]
    first = await start_crawl(site, redis_server_own, outs[0])
    await wait_for(lambda: (outs[0] / "worker.json").exists(), first)
    a = await start_worker(redis_server_own, outs[1])
    b = await start_worker(redis_server_own, outs[2])
    await wait_for(lambda: len(records(outs[2])) >= 3, b)
    assert b.returncode is None, "worker ended before the kill"
    with_group_killed(b)  # kill -9: its leases expire (3 s) and go to the others
    await b.wait()
    for rc, _, err in await finish_all([first, a]):
        assert rc == 0, err
    urls = [r["url"] for o in outs for r in records(o)]
    assert set(urls) == expected(site)
    hits = page_hits(site)
    again = {u for u, n in hits.items() if n > 1}
    assert all(n <= 2 for n in hits.values())
    assert len(again) <= 2  # at most b's leases in flight (--concurrency 2)
    assert max(site.max_inflight.values()) == 1


async def test_redis_killed_and_restarted_from_aof_loses_nothing(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    build_site(site, delay_s=0.03)
    outs = [tmp_path / f"w{k}" for k in range(3)]
    # a lease long enough that no lease is lost on a loaded machine: every URL exactly once
    first = await start_crawl(site, redis_server_own, outs[0], "--lease-ttl", "30")
    await wait_for(lambda: (outs[0] / "worker.json").exists(), first)
    workers = [await start_worker(redis_server_own, o) for o in outs[1:]]
    await wait_for(lambda: sum(len(records(o)) for o in outs) >= 20, first)
    redis_server_own.restart()  # kill -9, then load the AOF (appendfsync always)
    results = await finish_all([first, *workers])
    for rc, _, err in results:
        assert rc == 0, err
    urls = [r["url"] for o in outs for r in records(o)]
    assert set(urls) == expected(site)
    assert max(site.max_inflight.values()) == 1


async def test_redis_gone_past_redis_wait_exits_1_with_hint(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    build_site(site, delay_s=0.05)
    out = tmp_path / "w0"
    first = await start_crawl(site, redis_server_own, out, "--redis-wait", "1")
    await wait_for(lambda: (out / "worker.json").exists(), first)
    redis_server_own.kill9()
    rc, _, err = await finish(first, 60)
    assert rc == 1, err
    assert "Redis unreachable" in err
    assert "resume with: skitter crawl --resume" in err
    assert "Traceback" not in err


async def test_bad_redis_url_and_password_exit_2(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "r", password="pw")
    server.start()
    try:
        wrong = server.url.replace(":pw@", ":nope@")
        for args in (
            ["worker", wrong, "--out", str(tmp_path / "a")],
            ["worker", "redis://127.0.0.1:1/0", "--out", str(tmp_path / "b")],
            ["crawl", "--frontier", "mysql://x", "--out", str(tmp_path / "c"), "http://a.test/"],
        ):
            rc, _, err = await finish(await start_cli(*args), 60)
            assert rc == 2, err
            assert err.count("\n") == 1 and "Traceback" not in err, err
        rc, _, err = await finish(
            await start_cli("worker", server.url, "--out", str(tmp_path / "d"))
        )
        assert rc == 2 and "no crawl 'skitter'" in err
    finally:
        server.stop()


async def test_three_master_cluster_runs_the_same_crawl(site: Site, tmp_path: Path) -> None:
    cluster = RedisCluster3(tmp_path / "cluster")
    cluster.start()
    try:
        build_site(site, delay_s=0.01)
        outs = [tmp_path / f"w{k}" for k in range(3)]
        args = crawl_args(site, HOSTS, outs[0], "--frontier", cluster.url, "--crawl-id", "e2e")
        args += ["--concurrency", "2", "--ip-concurrency", "6", "--lease-ttl", "3"]
        first = await start_cli(*args, *(site.url(h, "/") for h in HOSTS))
        await wait_for(lambda: (outs[0] / "worker.json").exists(), first)
        workers = [
            await start_cli("worker", cluster.url, "--out", str(o), "--crawl-id", "e2e")
            for o in outs[1:]
        ]
        for rc, _, err in await finish_all([first, *workers]):
            assert rc == 0, err
        urls = [r["url"] for o in outs for r in records(o)]
        assert sorted(urls) == sorted(expected(site))  # each once
        assert max(site.max_inflight.values()) == 1
        assert all(records(o) for o in outs)
    finally:
        cluster.stop()


async def test_frozen_worker_late_acks_refused(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    """Worker A is frozen (SIGSTOP) holding two leases; they expire and worker B fetches
    those URLs and the rest; A, resumed, gets its answers late: both acks are refused by
    the fencing token, and A exits 0 like B."""
    gate = asyncio.Event()
    held: list[str] = []

    def gated(handler: Any) -> Any:
        async def h(request: Any) -> Any:
            if len(held) < 2:  # A's two first requests wait for the gate
                held.append(request.host.rsplit(":", 1)[0])
                await asyncio.wait_for(gate.wait(), 60)
            return await handler(request)

        return h

    for i, h in enumerate(HOSTS):
        root = page_body("/p/0", "/p/1", site.url(HOSTS[(i + 1) % len(HOSTS)], "/"))
        site.route(h, "/", gated(slow_page(root, 0.0)))
        for j in range(3):
            nxt = site.url(HOSTS[(i + 1) % len(HOSTS)], f"/p/{j}")
            site.route(h, f"/p/{j}", slow_page(page_body(f"/p/{(j + 1) % 3}", nxt), 0.0))
    a_out, b_out = tmp_path / "a", tmp_path / "b"
    a = await start_crawl(site, redis_server_own, a_out)
    await wait_for(lambda: len(held) == 2, a)
    a.send_signal(signal.SIGSTOP)  # frozen with two leases (--concurrency 2, --lease-ttl 3)
    try:
        b = await start_worker(redis_server_own, b_out)
        [(rc_b, _, err_b)] = await finish_all([b])
        assert rc_b == 0, err_b
    finally:
        a.send_signal(signal.SIGCONT)
    gate.set()
    [(rc_a, _, err_a)] = await finish_all([a])
    assert rc_a == 0, err_a
    assert err_a.count("stale or unknown lease token") == 2, err_a
    want = {site.url(h, p) for h in HOSTS for p in ("/", "/p/0", "/p/1", "/p/2")}
    b_urls = [r["url"] for r in records(b_out)]
    assert sorted(b_urls) == sorted(want)  # B did everything, A's two included, once
    a_urls = {r["url"] for r in records(a_out)}
    assert a_urls == {site.url(h, "/") for h in held}  # A's late pages (its acks refused)
    hits = page_hits(site)
    assert {u for u, n in hits.items() if n == 2} == a_urls
    assert max(hits.values()) == 2
    # every record of a Redis worker carries its lease's fencing token; B's leases of A's
    # two URLs came after A's expired, so their tokens are newer
    b_fence = {r["url"]: r["fence"] for r in records(b_out)}
    a_fence = {r["url"]: r["fence"] for r in records(a_out)}
    assert all(a_fence[u] < b_fence[u] for u in a_urls)
    assert len(set(b_fence.values()) | set(a_fence.values())) == len(want) + 2  # all distinct
    # merge keeps B's record (the lease Redis accepted) of each URL, once
    merged = tmp_path / "merged"
    rc, out, err = await finish(
        await start_cli("merge", str(a_out), str(b_out), "--out", str(merged)), 60
    )
    assert rc == 0, err
    assert "2 earlier attempts superseded, 2 of them of lost leases" in out, out
    m = records(merged)
    assert sorted(r["url"] for r in m) == sorted(want)
    assert {r["url"]: r["fence"] for r in m} == b_fence
    stamp = json.loads((merged / "merged.json").read_text())
    assert (stamp["superseded"], stamp["stale_leases"]) == (2, 2)
    # the links rows of A's two pages come from B's folder (the accepted record's)
    a_rows = {ln for ln in (a_out / "links.tsv").read_text().splitlines()[1:]}
    m_rows = (merged / "links.tsv").read_text().splitlines()[1:]
    b_rows = (b_out / "links.tsv").read_text().splitlines()[1:]
    assert sorted(m_rows) == sorted(b_rows)
    assert a_rows and all(r.split("\t", 1)[0] in a_urls for r in a_rows)


async def test_max_pages_is_one_budget_for_every_worker(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    build_site(site, delay_s=0.01)
    outs = [tmp_path / f"w{k}" for k in range(3)]
    first = await start_crawl(
        site, redis_server_own, outs[0], "--max-pages", "20", "--lease-ttl", "30"
    )
    await wait_for(lambda: (outs[0] / "worker.json").exists(), first)
    workers = [await start_worker(redis_server_own, o) for o in outs[1:]]
    for rc, _, err in await finish_all([first, *workers]):
        assert rc == 0, err
    recs = [r for o in outs for r in records(o)]
    assert [r["status"] for r in recs] == [200] * 20
    assert len({r["url"] for r in recs}) == 20


async def test_killed_worker_reserved_pages_come_back(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    """Worker b is killed (kill -9) holding --max-pages reservations (its leases in flight):
    once its heartbeat is older than twice its leases' life + 10 s they return to the budget,
    and the crawl still records --max-pages pages (after merge: one record per URL)."""
    import redis

    build_site(site, delay_s=0.3)
    outs = [tmp_path / f"w{k}" for k in range(3)]
    first = await start_crawl(site, redis_server_own, outs[0], "--max-pages", "30")
    await wait_for(lambda: (outs[0] / "worker.json").exists(), first)
    a = await start_worker(redis_server_own, outs[1])
    b = await start_worker(redis_server_own, outs[2])
    await wait_for(lambda: (outs[2] / "worker.json").exists(), b)
    wid = str(json.loads((outs[2] / "worker.json").read_text())["worker_id"])
    sync = redis.Redis.from_url(redis_server_own.url, decode_responses=True)
    resv = "{e2e}:resv"
    try:
        await wait_for(
            lambda: len(records(outs[2])) >= 2 and int(sync.hget(resv, wid) or 0) >= 1, b
        )
        with_group_killed(b)
        await b.wait()
        held = int(sync.hget(resv, wid) or 0)
        assert held >= 1  # b died holding reservations
        for rc, _, err in await finish_all([first, a]):
            assert rc == 0, err
        assert sync.hget(resv, wid) is None  # returned
        # exact budget: a page b acked but had not yet spent when killed stays spent (the
        # ack's script counted it in its shard), so exactly --max-pages pages were acked
        assert int(sync.get("{e2e}:pages") or 0) == 30
        done = [int(sync.hget(k, "done") or 0) for k in sync.scan_iter(match="{e2e:*}:n")]
        assert sum(done) == 30
    finally:
        sync.close()
    rc, out, err = await finish(
        await start_cli("merge", *map(str, outs), "--out", str(tmp_path / "m")), 60
    )
    assert rc == 0, err
    merged = records(tmp_path / "m")
    assert {r["status"] for r in merged} == {200}
    assert len({r["url"] for r in merged}) == len(merged)
    # b's reservations came back: the crawl reached --max-pages (without that, it ends at
    # 30 minus b's unrecorded reservations). Beyond the 30 acked pages, merge may keep a
    # record b wrote but never acked (killed between its write and the ack) for a URL the
    # budget left unfetched again: at most one per reservation b held
    assert 30 <= len(merged) <= 30 + held, out


def max_overlap(site: Site) -> int:
    """Most requests the server had in progress at once (every host is on 127.0.0.1)."""
    events = sorted([(h.start, 1) for h in site.hits] + [(h.end, -1) for h in site.hits])
    now = top = 0
    for _, step in events:
        now += step
        top = max(top, now)
    return top


async def test_ip_concurrency_holds_across_workers(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    """Three workers of two requests each, every host on one address, --ip-concurrency 3:
    never more than three requests at the server at once."""
    for i, h in enumerate(HOSTS):
        nxt = site.url(HOSTS[(i + 1) % len(HOSTS)], "/p/0")
        site.route(h, "/", slow_page(page_body("/p/0", nxt), 0.05))
        for j in range(4):  # distinct bodies (identical pages count as duplicates)
            body = page_body(f"/p/{(j + 1) % 4}", site.url(h, f"/p/{(j + 2) % 4}"))
            site.route(h, f"/p/{j}", slow_page(body, 0.05))
    outs = [tmp_path / f"w{k}" for k in range(3)]
    # --status-port: the frontier is wrapped by the status observer (the slots still shared)
    first = await start_crawl(
        site, redis_server_own, outs[0], "--ip-concurrency", "3", "--status-port", "0",
        "--lease-ttl", "30",
    )  # fmt: skip
    await wait_for(lambda: (outs[0] / "worker.json").exists(), first)
    workers = [await start_worker(redis_server_own, o) for o in outs[1:]]
    for rc, _, err in await finish_all([first, *workers]):
        assert rc == 0, err
    urls = [r["url"] for o in outs for r in records(o)]
    want = {site.url(h, p) for h in HOSTS for p in ("/", "/p/0", "/p/1", "/p/2", "/p/3")}
    assert sorted(urls) == sorted(want)
    assert max_overlap(site) <= 3


def files_holding(root: Path, secret: bytes) -> list[str]:
    """Every file under ``root`` whose bytes (gunzipped too, for .gz) contain ``secret``."""
    import gzip

    found = []
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        data = p.read_bytes()
        if p.suffix == ".gz":
            data += gzip.decompress(data)
        if secret in data:
            found.append(str(p))
    return found


async def test_redis_password_never_written_or_printed(site: Site, tmp_path: Path) -> None:
    """The password of the frontier URL is in no file the crawl and a worker write
    (state.json, report.json, the log, pages, WARCs, status.url) nor on their stderr/stdout:
    it is ``***``; a resume must be given the URL again (one line, exit 2 without it)."""
    secret = "Pw-s3cret-42"
    server = RedisServer(tmp_path / "redis", password=secret)
    server.start()
    try:
        for i, h in enumerate(HOSTS[:2]):
            site.route(h, "/", slow_page(page_body("/p/0", site.url(HOSTS[1 - i], "/")), 0.0))
            site.route(h, "/p/0", slow_page(page_body("/"), 0.0))
        outs = [tmp_path / "out" / f"w{k}" for k in range(2)]
        args = crawl_args(site, HOSTS[:2], outs[0], "--frontier", server.url, "--crawl-id", "pw")
        (tmp_path / "out").mkdir()
        log = tmp_path / "out" / "crawl.log"
        args += ["--log-file", str(log), "--verbose", "--status-port", "0"]
        first = await start_cli(*args, *(site.url(h, "/") for h in HOSTS[:2]))
        await wait_for(lambda: (outs[0] / "worker.json").exists(), first)
        worker = await start_cli(
            "worker", server.url, "--out", str(outs[1]), "--crawl-id", "pw", "--verbose"
        )
        results = await finish_all([first, worker])
        for rc, _, err in results:
            assert rc == 0, err
        urls = {r["url"] for o in outs for r in records(o)}
        assert urls == {site.url(h, p) for h in HOSTS[:2] for p in ("/", "/p/0")}
        state = json.loads((outs[0] / "state.json").read_text())
        assert state["settings"]["frontier"] == f"redis://:***@127.0.0.1:{server.port}/0"
        assert log.stat().st_size > 0
        # the redacted URL (as state.json has it) cannot connect: one line saying why
        redacted = state["settings"]["frontier"]
        rc, out, err = await finish(await start_cli("worker", redacted, "--out", str(outs[1])))
        assert rc == 2 and err.count("\n") == 1 and "password is not kept" in err, err
        results.append((rc, out, err))
        # a worker whose Redis went away: the hint on stderr is redacted too
        server.kill9()
        gone = await start_cli("worker", server.url, "--out", str(outs[1]), "--crawl-id", "pw")
        results.append(await finish(gone, 60))
        assert results[-1][0] == 2 and "redis://127.0.0.1" in results[-1][2], results[-1][2]
        for _, out, err in results:
            assert secret not in out and secret not in err, (out, err)
        assert files_holding(tmp_path / "out", secret.encode()) == []
    finally:
        server.stop()


async def test_c39_worker_killed_and_worker_frozen_nothing_lost_nothing_twice(
    site: Site, tmp_path: Path, redis_server_own: RedisServer
) -> None:
    """Case C39 (../shared/cases.md): 10 hosts x 20 pages, every answer 300 ms late;
    ``/start`` on h0 links all 200; h3's ``/r/1..5`` answer 301 to ``/r/K/final``. Workers
    A (the crawl), B, C; lease 5 s. At 60 answers B is killed (kill -9); at 80, C is frozen
    (SIGSTOP) for 8 s. Every worker exits 0; the merged pages.jsonl has each of the 201 URLs
    once (the redirects with their final URL, every final URL fetched); only URLs B or C
    had in flight were requested twice; C's late pages lose to the accepted leases' (fence)."""
    from tests.integration.site import redirect

    hosts = [f"h{i}.example.test" for i in range(10)]
    pages = [
        (h, f"/r/{j - 14}" if i == 3 and j >= 15 else f"/p/{j}")
        for i, h in enumerate(hosts)
        for j in range(20)
    ]
    assert sum(1 for h, p in pages if p.startswith("/r/")) == 5
    for h, p in pages:  # distinct bodies: each links to itself
        if p.startswith("/r/"):
            site.route(h, p, slow_redirect(redirect(f"{p}/final", 301), 0.3))
            site.route(h, f"{p}/final", slow_page(page_body(f"{p}/final"), 0.3))
        else:
            site.route(h, p, slow_page(page_body(p), 0.3))
    start = site.url(hosts[0], "/start")
    site.route(hosts[0], "/start", slow_page(page_body(*(site.url(h, p) for h, p in pages)), 0.3))
    outs = [tmp_path / n for n in ("a", "b", "c")]
    args = crawl_args(site, hosts, outs[0], "--frontier", redis_server_own.url)
    args += ["--crawl-id", "e2e", "--scope", "any", "--concurrency", "2", "--lease-ttl", "5"]
    a = await start_cli(*args, start)
    await wait_for(lambda: (outs[0] / "worker.json").exists(), a)
    b = await start_worker(redis_server_own, outs[1])
    c = await start_worker(redis_server_own, outs[2])

    def answered() -> int:
        return sum(1 for h in site.hits if h.end)

    await wait_for(lambda: answered() >= 60 and bool(records(outs[1])), b, steps=6000)
    assert b.returncode is None
    with_group_killed(b)
    await b.wait()
    await wait_for(lambda: answered() >= 80 and bool(records(outs[2])), c, steps=6000)
    assert c.returncode is None
    c.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(8)  # the scenario's freeze: past the 5 s lease
    finally:
        c.send_signal(signal.SIGCONT)
    for rc, _, err in await finish_all([a, c], timeout_s=180):
        assert rc == 0, err
    merged = tmp_path / "merged"
    rc, _, err = await finish(await start_cli("merge", *map(str, outs), "--out", str(merged)), 60)
    assert rc == 0, err
    recs = records(merged)
    want = {start} | {site.url(h, p) for h, p in pages}
    assert sorted(r["url"] for r in recs) == sorted(want)  # 201, each once
    finals = {r["url"]: r["final_url"] for r in recs if "/r/" in r["url"]}
    assert finals == {u: f"{u}/final" for u in want if "/r/" in u}
    assert all(r["status"] == 200 and isinstance(r["fence"], int) for r in recs)
    hits = page_hits(site)
    assert all(hits[f] >= 1 for f in finals.values())
    assert max(hits.values()) <= 2
    twice = {u for u, n in hits.items() if n == 2 and not u.endswith("/final")}
    assert len(twice) <= 4, twice  # B's and C's --concurrency 2 each
    assert max(site.max_inflight.values()) == 1
    # C's pages of leases it lost are in its folder but not in the merge
    stamp = json.loads((merged / "merged.json").read_text())
    assert stamp["records"] == 201
    assert stamp["stale_leases"] <= stamp["superseded"] <= 4


def slow_redirect(handler: Any, delay_s: float) -> Any:
    """``handler`` answered ``delay_s`` seconds late."""

    async def h(request: Any) -> Any:
        await asyncio.sleep(delay_s)
        return await handler(request)

    return h
