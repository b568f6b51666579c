"""What the status server costs, and how fast its page loads with 100,000 hosts.

    python bench/status_bench.py [--hosts 20] [--pages 100] [--runs 3] [--processes 1]
                                 [--baseline-src ../main/src] [--skip-crawl] [--skip-page]

1. Crawl overhead: generates ../shared/bench's synthetic web (synthweb.py) in a temporary folder,
   serves it with its own nginx on a free 127.0.0.1 port (started here, stopped at the end by
   its pid; /etc/hosts is not touched: every host is given with --resolve, --resolve-only), and
   runs ``skitter crawl`` alternately without ("off") and with ("on") ``--status-port 0``
   (plus a client polling /api/status, /api/hosts and /metrics every second, as an open page
   does), and with --baseline-src a third variant ("base": the package from that folder, e.g.
   main without the observer). Prints the pages/s (2xx records / wall seconds) of every run and
   the medians.
2. Page load: a StatusServer over a LiveState holding 100,000 hosts (fake data, no crawl),
   opened in headless Chromium (tests/browser.py, loopback only): time from navigation to the
   first complete render (totals and the first page of the host table), and the time of
   /api/hosts sorted by each of three columns and filtered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "bench"
sys.path.insert(0, str(REPO))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def count_ok(out: Path) -> int:
    n = 0
    with (out / "pages.jsonl").open() as f:
        for line in f:
            if json.loads(line).get("status") == 200:
                n += 1
    return n


async def poll_status(url: str, stop: asyncio.Event) -> int:
    """Poll like an open page (and a Prometheus scrape) until ``stop``; returns requests."""
    n = 0
    async with aiohttp.ClientSession() as s:
        while not stop.is_set():
            for path in ("api/status", "api/hosts?sort=fetched&order=desc", "metrics"):
                try:
                    async with s.get(url + path) as r:
                        await r.read()
                        n += 1
                except aiohttp.ClientError:
                    pass
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    return n


async def one_crawl(
    cmd: list[str], status: bool, env: dict[str, str] | None = None
) -> tuple[float, float, int]:
    """Run one crawl; returns (wall seconds, CPU seconds of the crawl's processes, status
    requests made). CPU time is the steadier figure on a shared machine."""
    if status:
        cmd = [*cmd, "--status-port", "0"]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env
    )
    assert proc.stderr is not None
    polls = 0
    stop = asyncio.Event()
    poller = None
    if status:
        line = (await proc.stderr.readline()).decode()
        poller = asyncio.create_task(poll_status(line.split(" ", 1)[1].strip(), stop))
    err = await proc.stderr.read()
    rc = await proc.wait()
    wall = time.perf_counter() - t0
    stop.set()
    if poller is not None:
        polls = await poller
    assert rc == 0, f"crawl exited {rc}: {err.decode(errors='replace')[-1000:]}"
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, polls


async def crawl_overhead(a: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="skitter-status-bench-"))
    tmp.chmod(0o755)  # nginx workers run as another user
    port = free_port()
    site = tmp / "site"
    subprocess.run(
        [sys.executable, str(SHARED / "synthweb.py"), "--hosts", str(a.hosts), "--pages",
         str(a.pages), "--seed", "1", "--out", str(site), "--port", str(port)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    subprocess.run([nginx, "-p", f"{site}/", "-c", "nginx.conf", "-e", "error.log"], check=True)
    pid = int((site / "nginx.pid").read_text())
    try:
        await measure(a, tmp, site, port)
    finally:
        os.kill(pid, 15)
        if not os.environ.get("KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


async def measure(a: argparse.Namespace, tmp: Path, site: Path, port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:  # ours answers
        c.sendall(b"GET / HTTP/1.0\r\nHost: h0001.test\r\n\r\n")
        head = c.recv(200)
        assert head.startswith(b"HTTP/1.1 200"), f"nginx does not serve the site: {head!r}"
    hosts = [ln.split()[1] for ln in (site / "hosts.txt").read_text().splitlines() if ln]
    seeds = tmp / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}/\n" for h in hosts))
    variants = ["off", "on"] + (["base"] if a.baseline_src else [])
    results: dict[str, list[float]] = {v: [] for v in variants}
    per_cpu: dict[str, list[float]] = {v: [] for v in variants}
    for run in range(a.runs):
        for variant in variants[run % len(variants) :] + variants[: run % len(variants)]:
            out = tmp / f"out-{run}-{variant}"
            cmd = [sys.executable, "-m", "skitter", "crawl", "--seeds-file", str(seeds),
                   "--out", str(out), "--resolve-only", "--delay", "0", "--concurrency",
                   "128", "--ip-concurrency", "128", "--processes", str(a.processes),
                   "--no-warc"]  # fmt: skip
            for h in hosts:
                cmd += ["--resolve", f"{h}:{port}:127.0.0.1"]
            env = None
            if variant == "base":  # the same venv, the package from another checkout
                env = {**os.environ, "PYTHONPATH": str(Path(a.baseline_src).resolve())}
            wall, cpu, polls = await one_crawl(cmd, variant == "on", env)
            ok = count_ok(out)
            assert ok > 0, (out / "pages.jsonl").read_text()[:500]
            results[variant].append(ok / wall)
            per_cpu[variant].append(ok / cpu)
            print(f"run {run} {variant:>4}: {ok} pages in {wall:.2f} s = {ok / wall:.1f} "
                  f"pages/s; {cpu:.2f} CPU s = {ok / cpu:.0f} pages/CPU-s "
                  f"({polls} status requests)", flush=True)  # fmt: skip
            shutil.rmtree(out)
    for name, figures in (("pages/s", results), ("pages/CPU-s", per_cpu)):
        med = {v: statistics.median(r) for v, r in figures.items()}
        print(f"median {name}: " + ", ".join(f"{v} {m:.1f}" for v, m in med.items())
              + f"; on vs off {100 * (med['on'] - med['off']) / med['off']:+.1f}%"
              + (f"; off vs base {100 * (med['off'] - med['base']) / med['base']:+.1f}%"
                 if "base" in med else ""))  # fmt: skip


async def page_load(n_hosts: int) -> None:
    from tests.browser import Browser

    from skitter.status.server import StatusServer
    from skitter.status.source import LiveState

    st = LiveState(delay_s=1.0)
    for i in range(n_hosts):
        h = f"host{i:06d}.example"
        st.queued({h: 3})
        st.record(h, 200 if i % 10 else 503, None if i % 7 else "timeout",
                  "text/html" if i % 3 else "image/png", 1000 + i, 0.01 * (i % 50), 1)  # fmt: skip
    async with StatusServer(st, title=f"{n_hosts:,} fake hosts") as srv:
        async with aiohttp.ClientSession() as s:
            for q in ("sort=fetched&order=desc", "sort=host&order=asc", "sort=avg_s&order=desc",
                      "q=host09&sort=errors&order=desc&per_page=1000"):  # fmt: skip
                t0 = time.perf_counter()
                async with s.get(srv.url + "api/hosts?" + q) as r:
                    body = await r.read()
                print(f"/api/hosts?{q}: {1000 * (time.perf_counter() - t0):.0f} ms, "
                      f"{len(body):,} bytes")  # fmt: skip
        times = []
        for _ in range(3):
            async with Browser() as b:
                t0 = time.perf_counter()
                await b.goto(srv.url)
                await b.wait_for(
                    "document.querySelectorAll('#hosts-body tr').length === 50 && "
                    "document.getElementById('t-fetched').textContent !== '–'"
                )
                times.append(time.perf_counter() - t0)
                assert b.exceptions == [] and b.outside_requests() == []
        print(f"page load to first full render with {n_hosts:,} hosts: "
              f"{', '.join(f'{1000 * t:.0f}' for t in times)} ms (median "
              f"{1000 * statistics.median(times):.0f} ms)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument(
        "--baseline-src",
        help="also crawl with the package from this src/ folder (e.g. ../main/src): "
        "the cost of the observer itself",
    )
    ap.add_argument("--page-hosts", type=int, default=100_000)
    ap.add_argument("--skip-crawl", action="store_true")
    ap.add_argument("--skip-page", action="store_true")
    a = ap.parse_args()
    if not a.skip_page:
        asyncio.run(page_load(a.page_hosts))
    if not a.skip_crawl:
        asyncio.run(crawl_overhead(a))


if __name__ == "__main__":
    main()
