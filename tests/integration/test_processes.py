"""``skitter crawl --processes N`` end to end: the real CLI (a subprocess) on loopback sites.

Host names are chosen at run time (the port is part of the host key, so ownership depends on
it) so that the hosts spread over every process: :func:`hosts_on_shards`. Every name is mapped
to 127.0.0.1 with ``--resolve`` and ``--resolve-only``: nothing leaves the machine.

The helpers here (``start_cli``, ``run_cli``, ``records``, ``graph``...) are also used by
``tests/e2e/test_processes_kill.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from skitter.report import read_output
from skitter.report.data import merged_decisions
from skitter.sharding import shard_of
from skitter.urls import host_key
from tests.integration.site import Handler, Site, links_page, redirect, text

REPO = Path(__file__).resolve().parents[2]
WARCIO = Path(sys.executable).parent / "warcio"
ROBOTS = "User-agent: *\nDisallow: /private/\n"


# ---------------------------------------------------------------------- helpers


def hosts_on_shards(port: int, count: int, shards: Sequence[int], prefix: str) -> list[str]:
    """Host names ``{prefix}N.example.test``, the i-th owned by process ``shards[i]`` of
    ``count`` (for host keys ``name:port``)."""
    want = list(shards)
    out: list[str | None] = [None] * len(want)
    for i in range(10_000):
        name = f"{prefix}{i}.example.test"
        k = shard_of(host_key(f"http://{name}:{port}/"), count)
        for slot, s in enumerate(want):
            if out[slot] is None and s == k:
                out[slot] = name
                break
        if all(o is not None for o in out):
            return [o for o in out if o is not None]
    raise AssertionError("no host names found for every shard")


def owner(site: Site, host: str, count: int) -> int:
    """The process (of ``count``) that owns ``host`` on ``site``."""
    return shard_of(host_key(site.url(host)), count)


def crawl_args(site: Site, hosts: Iterable[str], out: Path, *extra: str) -> list[str]:
    """``crawl`` arguments: every host mapped to loopback, no delay (stderr is not a TTY:
    no progress display; the summary goes to stdout)."""
    args = ["crawl", "--out", str(out), "--resolve-only", "--delay", "0"]
    for h in sorted(set(hosts)):
        args += ["--resolve", f"{h}:{site.port}:127.0.0.1"]
    return [*args, *extra]


async def start_cli(*args: str) -> asyncio.subprocess.Process:
    """``python -m skitter ARGS`` in a new session (its own process group), stdout and
    stderr piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "skitter",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        start_new_session=True,
    )


async def finish(proc: asyncio.subprocess.Process, timeout_s: float = 60.0) -> tuple[int, str, str]:
    """Wait for ``proc`` (bounded); returns (exit code, stdout, stderr)."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        with_group_killed(proc)
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def with_group_killed(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL ``proc``'s whole process group (it was started in a new session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run_cli(*args: str, timeout_s: float = 60.0) -> tuple[int, str, str]:
    """Run the CLI to its end; returns (exit code, stdout, stderr)."""
    return await finish(await start_cli(*args), timeout_s)


def records(out: Path, name: str = "pages.jsonl") -> list[dict[str, Any]]:
    """Every record of ``out/name``; fails on a torn or unparsable line."""
    data = (out / name).read_bytes()
    assert data == b"" or data.endswith(b"\n"), "torn last line"
    return [json.loads(line) for line in data.split(b"\n") if line]


def shard_records(out: Path) -> list[dict[str, Any]]:
    """The complete records in every ``out/shards/K/pages.jsonl`` (what the crawler
    processes have written, ahead of the merged file)."""
    recs: list[dict[str, Any]] = []
    for p in sorted((out / "shards").glob("*/pages.jsonl")):
        data = p.read_bytes()
        end = data.rfind(b"\n")
        for line in data[: end + 1].split(b"\n"):
            if line:
                recs.append(json.loads(line))
    return recs


def shard_record_count(out: Path) -> int:
    """Complete lines in the shards' pages.jsonl files."""
    n = 0
    for p in (out / "shards").glob("*/pages.jsonl"):
        n += p.read_bytes().count(b"\n")
    return n


def outcome(r: dict[str, Any]) -> tuple[str, str, int | None, str | None, tuple[Any, ...]]:
    """What a record says about its URL (not when or by whom it was fetched)."""
    hops = tuple((h["url"], h["status"]) for h in r["redirects"])
    return r["url"], r["final_url"], r["status"], r["error"], hops


def graph(out: Path) -> Counter[tuple[str, ...]]:
    """links.tsv rows without the decision column, as a multiset (which process first
    queues a URL, hence "queued" or "seen", depends on timing)."""
    lines = (out / "links.tsv").read_text(encoding="utf-8").split("\n")
    assert lines[0].startswith("source\t") and lines[-1] == ""
    rows = [tuple(line.split("\t")) for line in lines[1:-1]]
    assert all(len(r) == 7 for r in rows)
    return Counter(r[:6] for r in rows)


def report(out: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((out / "report.json").read_text())
    return result


def robots_hits(site: Site) -> Counter[str]:
    """robots.txt requests per host."""
    return Counter(h.host for h in site.hits if h.path_qs == "/robots.txt")


def reset_log(site: Site) -> None:
    site.hits.clear()
    site.inflight.clear()
    site.max_inflight.clear()


def warc_check(out: Path) -> list[str]:
    """Names of the WARC files in ``out``, each checked with ``warcio check``."""
    names = sorted(p.name for p in out.glob("*.warc.gz"))
    for name in names:
        r = subprocess.run(
            [str(WARCIO), "check", str(out / name)], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, (name, r.stdout, r.stderr)
    return names


async def wait_for(cond: Any, proc: asyncio.subprocess.Process, steps: int = 3000) -> None:
    """Poll ``cond()`` every 10 ms (at most ``steps`` times) until true or ``proc`` ended."""
    for _ in range(steps):
        if cond() or proc.returncode is not None:
            return
        await asyncio.sleep(0.01)


def slow_page(body: str, delay_s: float) -> Handler:
    """An HTML page answered after ``delay_s`` seconds."""

    async def h(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(delay_s)
        return web.Response(text=body, content_type="text/html")

    return h


def page_body(*hrefs: str) -> str:
    items = "".join(f'<a href="{h}">link {i}</a>\n' for i, h in enumerate(hrefs))
    return f"<!doctype html><html><head><title>t</title></head><body>{items}</body></html>"


# ---------------------------------------------------------------------- the mixed site


def build_mixed_site(site: Site, hosts: list[str]) -> list[str]:
    """Six hosts (``hosts[2k]`` and ``hosts[2k+1]`` owned by process k of 3) with cross-host
    links, a cross-host redirect chain over three processes, a redirect to a page already
    crawled on another host, a redirect into a robots.txt-disallowed path, robots.txt
    disallowing /private/ on three hosts, a 404. Returns the seeds."""
    u = site.url
    h = hosts
    a, b, c = h[0], h[2], h[4]  # the chain: one host per process
    for i, x in enumerate(h):
        nxt, far = h[(i + 1) % 6], h[(i + 3) % 6]
        root = ["/p1", "/p2", "/private/x", u(nxt, "/p1"), u(far, "/p2")]
        if x == a:
            root.append("/r1")
        if x == h[1]:
            root.append("/missing")
        if x == h[3]:
            root.append("/dup")
        if x == h[5]:
            root.append("/known")
        if x == c:
            root.append("/rx")
        site.route(x, "/", links_page(*root))
        site.route(x, "/p1", links_page("/p2", "/p3", u(h[(i + 2) % 6], "/p2"), "/p1#top"))
        site.route(x, "/p2", links_page("/p1", "/", u(far, "/"), u(nxt, "/private/z")))
        site.route(x, "/p3", links_page(u(h[(i + 4) % 6], "/p3"), "/p3"))
        site.route(x, "/private/x", links_page("/p1"))
        site.route(x, "/private/z", links_page("/p1"))
    for x in (h[0], h[2], h[5]):
        site.route(x, "/robots.txt", text(ROBOTS))
    # the chain a/r1 -> b/r2 -> c/end, reached from a/ only
    site.route(a, "/r1", redirect(u(b, "/r2")))
    site.route(b, "/r2", redirect(u(c, "/end"), status=301))
    site.route(c, "/end", links_page("/", "/p3"))
    # h3/dup redirects to h5/known once h5/known has been served (so: already crawled)
    served = asyncio.Event()
    site.route(h[5], "/known", _then_set(links_page("/p1"), served))

    async def dup(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(served.wait(), 20)
        return web.Response(status=302, headers={"Location": u(h[5], "/known")})

    site.route(h[3], "/dup", dup)
    # c/rx redirects into a path robots.txt disallows on h0
    site.route(c, "/rx", redirect(u(h[0], "/private/y")))
    return [u(x, "/") for x in h]


def _then_set(handler: Handler, event: asyncio.Event) -> Handler:
    async def h(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        finally:
            event.set()

    return h


TOTAL_KEYS = ("records", "ok", "by_status", "by_verdict", "robots_disallowed")


async def test_three_processes_crawl_the_same_as_one(site: Site, tmp_path: Path) -> None:
    hosts = hosts_on_shards(site.port, 3, [0, 0, 1, 1, 2, 2], "mix")
    assert sorted(owner(site, x, 3) for x in hosts) == [0, 0, 1, 1, 2, 2]
    assert [owner(site, x, 3) for x in (hosts[0], hosts[2], hosts[4])] == [0, 1, 2]
    results: dict[int, dict[str, Any]] = {}
    for n in (1, 3):
        seeds = build_mixed_site(site, hosts)  # afresh: its "served" event is per crawl
        reset_log(site)
        out = tmp_path / f"p{n}"
        args = crawl_args(site, hosts, out, "--host-concurrency", "1", "--processes", str(n))
        rc, _, err = await run_cli(*args, *seeds)
        assert rc == 0, err
        assert "Traceback" not in err
        recs = records(out)
        urls = [r["url"] for r in recs]
        assert len(urls) == len(set(urls)), "a URL recorded twice"
        # politeness: robots.txt once per host, one request at a time per host
        assert robots_hits(site) == Counter(dict.fromkeys(hosts, 1))
        assert site.max_inflight == dict.fromkeys(hosts, 1)
        results[n] = {
            "out": out,
            "outcomes": sorted(map(outcome, recs)),
            "graph": graph(out),
            "report": report(out),
            "hits": Counter((x.host, x.path_qs) for x in site.hits),
        }
    one, three = results[1], results[3]
    assert three["outcomes"] == one["outcomes"]
    assert three["graph"] == one["graph"]
    assert three["hits"] == one["hits"]  # the same requests, each made once
    assert max(three["hits"].values()) == 1
    r1, r3 = one["report"], three["report"]
    for key in TOTAL_KEYS:
        assert r3["totals"][key] == r1["totals"][key], key
    assert r3["finished"] is True and r3["stop_reason"] == "done"
    assert r3["processes"] == 3
    # the merged links' decision counts, kept in merge.json (the report reads no rows)
    out3 = three["out"]
    lines = (out3 / "links.tsv").read_bytes().splitlines()[1:]
    want = Counter(ln.rsplit(b"\t", 1)[1] for ln in lines)
    assert merged_decisions(out3, out3 / "links.tsv") == want and sum(want.values()) > 20
    assert read_output(out3).by_decision == {k.decode(): n for k, n in want.items()}
    # what the site makes of it, exactly
    u = site.url
    a, b, c = hosts[0], hosts[2], hosts[4]
    by_url = {r["url"]: r for r in records(out3)}
    chain = by_url[u(a, "/r1")]
    assert (chain["final_url"], chain["status"]) == (u(c, "/end"), 200)
    assert chain["redirects"] == [
        {"url": u(a, "/r1"), "status": 302},
        {"url": u(b, "/r2"), "status": 301},
    ]
    assert u(b, "/r2") not in by_url and u(c, "/end") not in by_url
    dup = by_url[u(hosts[3], "/dup")]
    assert (dup["final_url"], dup["status"], dup["redirects"]) == (u(hosts[3], "/dup"), 302, [])
    assert "not followed: already crawled or queued" in dup["error_detail"]
    assert by_url[u(hosts[5], "/known")]["status"] == 200
    rx = by_url[u(c, "/rx")]
    assert (rx["final_url"], rx["status"], rx["redirects"]) == (u(c, "/rx"), 302, [])
    assert "disallowed by robots.txt" in rx["error_detail"]
    assert by_url[u(hosts[1], "/missing")]["status"] == 404
    for x in hosts:
        for p in ("/", "/p1", "/p2", "/p3"):
            assert by_url[u(x, p)]["status"] == 200
    for x in (hosts[0], hosts[2], hosts[5]):
        assert u(x, "/private/x") not in by_url
    for x in (hosts[1], hosts[3], hosts[4]):
        assert by_url[u(x, "/private/x")]["status"] == 200
    # 6 hosts x 4 pages + /private/x on 3 hosts + missing, dup, known, r1, rx (+ /private/z
    # on the hosts without robots.txt, linked from the previous host's /p2)
    assert len(by_url) == 24 + 3 + 5 + 3
    totals = r3["totals"]
    assert totals["records"] == 35
    assert totals["ok"] == 24 + 3 + 1 + 1 + 3  # pages, private/x, known, r1 (chain), private/z
    assert totals["by_status"] == {"200": 32, "302": 2, "404": 1}
    # /private/x on 3 hosts, /private/z on 3 hosts (h0, h2, h5 hold robots.txt), /private/y
    assert totals["robots_disallowed"] == 3 + 3 + 1
    # the sharded crawl's own files
    for k in range(3):
        assert (out3 / "shards" / str(k)).is_dir()
    names = warc_check(out3)
    for k in range(3):
        assert any(n.startswith(f"skitter-p{k}-") for n in names), names
    assert not [n for n in names if not n.startswith(("skitter-p0-", "skitter-p1-", "skitter-p2-"))]


# ---------------------------------------------------------------------- --max-pages


def barrier(n: int, handler: Handler) -> list[Handler]:
    """``n`` handlers that answer (with ``handler``) only once all ``n`` have been called
    (bounded wait): e.g. the seeds of every process, so that none is done before all run."""
    arrived: list[int] = [0]
    ready = asyncio.Event()

    async def h(request: web.Request) -> web.StreamResponse:
        arrived[0] += 1
        if arrived[0] >= n:
            ready.set()
        await asyncio.wait_for(ready.wait(), 30)
        return await handler(request)

    return [h] * n


def build_wide_site(site: Site, hosts: list[str], pages: int, delay_s: float) -> list[str]:
    """``pages`` pages per host, each linking to the next two on its host and to one on
    the next host; every page answers after ``delay_s``, the roots only once every root has
    been requested. Returns the seeds (host roots)."""
    roots = barrier(len(hosts), slow_page(page_body("/p/0", "/p/1"), delay_s))
    for i, x in enumerate(hosts):
        nxt = hosts[(i + 1) % len(hosts)]
        site.route(x, "/", roots[i])
        for j in range(pages):
            hrefs = [f"/p/{t}" for t in (j + 1, j + 2) if t < pages]
            hrefs.append(site.url(nxt, f"/p/{(j * 7) % pages}" if j + 1 < pages else "/"))
            body = page_body(*hrefs)
            site.route(x, f"/p/{j}", slow_page(body, delay_s))
    return [site.url(x, "/") for x in hosts]


async def test_max_pages_is_exact_over_two_processes(site: Site, tmp_path: Path) -> None:
    hosts = hosts_on_shards(site.port, 2, [0, 0, 1, 1], "mp")
    seeds = build_wide_site(site, hosts, pages=30, delay_s=0.005)
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, "--processes", "2", "--max-pages", "25")
    # as many requests in flight as possible: the budget must still hold exactly
    args += ["--host-concurrency", "4", "--ip-concurrency", "16"]
    proc = await start_cli(*args, *seeds)
    rc, stdout, err = await finish(proc)
    assert rc == 0, err
    assert "stopped at --max-pages 25 (2xx pages)" in stdout
    recs = records(out)
    assert len(recs) == 25
    assert [r["status"] for r in recs] == [200] * 25
    assert len({r["url"] for r in recs}) == 25
    shards = {owner(site, host_key(r["url"]).rsplit(":", 1)[0], 2) for r in recs}
    assert shards == {0, 1}
    rep = report(out)
    assert rep["stop_reason"] == "max_pages" and rep["finished"] is False
    assert rep["totals"]["records"] == 25 and rep["totals"]["ok"] == 25
    # no request beyond the 25 pages (and the robots.txt files)
    assert len([h for h in site.hits if h.path_qs != "/robots.txt"]) == 25


@pytest.mark.parametrize(
    "processes",
    [
        1,
        2,
    ],
)
async def test_max_pages_holds_on_resume(site: Site, tmp_path: Path, processes: int) -> None:
    hosts = hosts_on_shards(site.port, 2, [0, 0, 1, 1], "mr")
    seeds = build_wide_site(site, hosts, pages=30, delay_s=0.005)
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, "--processes", str(processes), "--max-pages", "20")
    args += ["--host-concurrency", "4", "--ip-concurrency", "16"]
    rc, _, err = await run_cli(*args, *seeds)
    assert rc == 0, err
    assert len(records(out)) == 20 and report(out)["stop_reason"] == "max_pages"
    before = len(site.hits)
    # the limit is reached: a resume fetches nothing more
    rc, _, err = await run_cli(*crawl_args(site, hosts, out), "--resume")
    assert rc == 0, err
    assert [h.path_qs for h in site.hits[before:] if h.path_qs != "/robots.txt"] == []
    assert len(records(out)) == 20
    assert report(out)["totals"]["ok"] == 20


# ---------------------------------------------------------------------- resume rules


async def test_resume_with_other_processes_and_second_coordinator_refused(
    site: Site, tmp_path: Path
) -> None:
    hosts = hosts_on_shards(site.port, 2, [0, 1], "rr")
    gate = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(gate.wait(), 30)
        return web.Response(text="<p>x</p>", content_type="text/html")

    site.route(hosts[0], "/", links_page("/slow", site.url(hosts[1], "/")))
    site.route(hosts[0], "/slow", held)
    site.route(hosts[1], "/", links_page(site.url(hosts[0], "/")))
    seeds = [site.url(x, "/") for x in hosts]
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out)
    proc = await start_cli(*args, "--processes", "2", *seeds)
    try:
        # a second coordinator on the live crawl: refused, nothing touched
        await wait_for(lambda: any(h.path_qs == "/slow" for h in site.hits), proc)
        assert proc.returncode is None
        merged = (out / "pages.jsonl").read_bytes()
        rc, _, err = await run_cli(*args, "--resume")
        assert rc == 2
        assert "Traceback" not in err
        busy = f"skitter: error: {out} is in use by a running skitter crawl (pid {proc.pid});"
        assert len(err.strip().splitlines()) == 1 and err.startswith(busy), err
        rc, _, err = await run_cli(*args, "--processes", "2", *seeds)
        assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert err.startswith(busy), err
        assert (out / "pages.jsonl").read_bytes()[: len(merged)] == merged
    finally:
        gate.set()
    rc, _, err = await finish(proc)
    assert rc == 0, err
    assert len(records(out)) == 3
    # N is fixed for the life of a crawl
    for n in ("3", "1"):
        rc, _, err = await run_cli(*args, "--resume", "--processes", n)
        assert rc == 2, err
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("skitter: error: --processes differs"), err
        assert f"(2 stored, {n} given)" in lines[0]
    # the same N: accepted (a finished crawl: nothing fetched again)
    before = len(site.hits)
    rc, _, err = await run_cli(*args, "--resume", "--processes", "2")
    assert rc == 0, err
    assert len(site.hits) == before
    assert len(records(out)) == 3


# ---------------------------------------------------------------------- trap budgets


def counting(handler: Handler, hits: list[str], event: asyncio.Event, n: int) -> Handler:
    """``handler``, noting each call in ``hits`` and setting ``event`` at the n-th."""

    async def h(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        finally:
            hits.append(request.path_qs)
            if len(hits) >= n:
                event.set()

    return h


@pytest.mark.parametrize("processes", [1, 2])
async def test_max_pages_per_host_is_kept_by_the_hosts_owner(
    site: Site, tmp_path: Path, processes: int
) -> None:
    a, b = hosts_on_shards(site.port, 2, [0, 1], "cap")
    u = site.url
    b_served: list[str] = []
    b_full = asyncio.Event()
    page = links_page("/")
    site.route(a, "/", links_page(*[u(b, f"/{i}") for i in range(1, 11)], "/r"))
    site.route(b, "/", counting(links_page(*[f"/{i}" for i in range(11, 21)]), b_served, b_full, 3))
    site.fallback(b, counting(page, b_served, b_full, 3))

    async def late_redirect(request: web.Request) -> web.StreamResponse:
        # once host b has 3 pages served (its cap of 3 queued URLs is spent): to b
        await asyncio.wait_for(b_full.wait(), 30)
        return web.Response(status=302, headers={"Location": u(b, "/r")})

    site.route(a, "/r", late_redirect)
    out = tmp_path / "out"
    args = crawl_args(site, [a, b], out, "--processes", str(processes))
    rc, _, err = await run_cli(*args, "--max-pages-per-host", "3", u(a, "/"), u(b, "/"))
    assert rc == 0, err
    recs = records(out)
    on_b = [r for r in recs if host_key(r["url"]) == host_key(u(b))]
    assert len(on_b) == 3
    assert u(b, "/") in {r["url"] for r in on_b}
    assert len(b_served) == 3  # nothing more was fetched from b
    assert sorted(r["url"] for r in recs if r not in on_b) == [u(a, "/"), u(a, "/r")]
    r = next(r for r in recs if r["url"] == u(a, "/r"))
    assert (r["status"], r["final_url"], r["redirects"]) == (302, u(a, "/r"), [])
    assert r["error_detail"] == (
        f"redirect to {u(b, '/r')} not followed: max_pages_per_host: its host already has "
        "3 URLs queued (at most 3)"
    )
    traps = report(out)["traps"]["max_pages_per_host"]
    # 20 links to b and the redirect to b/r: 2 admitted besides the seed b/
    assert (traps["limit"], traps["count"]) == (3, 21 - 2)
    assert len(traps["urls"]) == 19 and len(set(traps["urls"])) == 19


@pytest.mark.parametrize(
    "processes",
    [
        1,
        2,
    ],
)
async def test_trap_budgets_after_resume_count_only_admitted_hand_offs(
    site: Site, tmp_path: Path, processes: int
) -> None:
    """Host b's budgets (kept by its owner) after a resume: URLs handed to b that b
    dropped as traps do not spend b's --max-pages-per-host budget."""
    a, b = hosts_on_shards(site.port, 2, [0, 1], "tr")
    u = site.url
    q1_served = asyncio.Event()
    go = asyncio.Event()
    site.route(a, "/", links_page(*[u(b, f"/s?q={i}") for i in range(1, 5)]))
    site.route(b, "/", links_page("/"))
    site.route(b, "/s?q=1", _then_set(links_page("/c1"), q1_served))

    async def c1(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(go.wait(), 30)
        return await links_page("/c2")(request)

    site.route(b, "/c1", c1)
    site.route(b, "/c2", links_page("/c3"))
    site.route(b, "/c3", links_page("/"))
    out = tmp_path / "out"
    args = crawl_args(site, [a, b], out, "--processes", str(processes))
    caps = ["--max-pages-per-host", "5", "--max-query-variants-per-path", "1"]
    proc = await start_cli(*args, *caps, u(a, "/"), u(b, "/"))
    try:
        # b has taken in a's hand-off (it fetched s?q=1, which links to /c1) and is
        # fetching /c1: Ctrl-C twice (the second aborts /c1, fetched again on resume)
        await wait_for(lambda: any(h.path_qs == "/c1" for h in site.hits), proc)
        assert proc.returncode is None
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.stderr is not None
        line = await asyncio.wait_for(proc.stderr.readline(), 30)
        assert line.startswith(b"stopping:"), line
        os.killpg(proc.pid, signal.SIGINT)
        rc, _, err = await finish(proc)
    finally:
        go.set()
    assert rc == 130, err
    rc, _, err = await run_cli(*args, "--resume")
    assert rc == 0, err
    urls = sorted(r["url"] for r in records(out))
    # as without the interruption: b's budget of 5 = b/, s?q=1, c1, c2, c3
    expected = [u(a, "/"), *(u(b, p) for p in ("/", "/c1", "/c2", "/c3", "/s?q=1"))]
    assert urls == sorted(expected)
    traps = report(out)["traps"]
    assert traps["query_variants"]["count"] == 3
    assert traps["max_pages_per_host"]["count"] == 0


# ---------------------------------------------------------------------- per-IP politeness


@pytest.mark.parametrize(
    "processes",
    [
        1,
        3,
    ],
)
async def test_ip_concurrency_holds_across_processes(
    site: Site, tmp_path: Path, processes: int
) -> None:
    """--ip-concurrency 2: at most 2 page requests at once to 127.0.0.1, whatever the
    number of processes its hosts are spread over."""
    hosts = hosts_on_shards(site.port, 3, [0, 0, 1, 1, 2, 2], "ip")
    state = {"inflight": 0, "max": 0}
    released = asyncio.Event()

    def gathered(handler: Handler) -> Handler:
        # hold the first requests until 3 are in flight at once (or 2 s have passed): so
        # that a third concurrent request, if the crawler makes one, is seen for sure
        async def h(request: web.Request) -> web.StreamResponse:
            state["inflight"] += 1
            state["max"] = max(state["max"], state["inflight"])
            try:
                if state["inflight"] >= 3:
                    released.set()
                try:
                    await asyncio.wait_for(released.wait(), 2)
                except TimeoutError:
                    released.set()
                await asyncio.sleep(0.01)
                return await handler(request)
            finally:
                state["inflight"] -= 1

        return h

    for x in hosts:
        site.route(x, "/", gathered(links_page("/a", "/b")))
        site.route(x, "/a", gathered(links_page("/b")))
        site.route(x, "/b", gathered(links_page("/")))
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, "--processes", str(processes))
    args += ["--ip-concurrency", "2", "--host-concurrency", "1", "--dedup", "off"]
    rc, _, err = await run_cli(*args, *(site.url(x, "/") for x in hosts))
    assert rc == 0, err
    assert len(records(out)) == 18
    assert state["max"] <= 2
