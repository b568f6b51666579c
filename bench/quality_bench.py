"""Duplicate pages and in-link order, measured (issue 12).

    python bench/quality_bench.py docs [--root /usr/share/doc/python3.11/html]
    python bench/quality_bench.py synth [--hosts 40 --pages 40]

``docs``: (1) offline, the CPU cost per HTML page of the duplicate stage (exact: SHA-1 only;
near: decoding, visible text, SimHash, banded index) over every page of ROOT; (2) crawls of
ROOT served on 127.0.0.1 (demo/serve.py) with --dedup off, exact and near: pages, duplicates
found, CPU seconds of the crawl process per page.

``synth``: the shared benchmark web (../shared/bench/synthweb.py, served by our own nginx on
a free port, names mapped with --resolve): the same three crawls, then --order bfs against
inlinks (--delay 0.05): the fetch position (rank in pages.jsonl) of the 100 URLs linked from
the most distinct other hosts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import mean, median
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "demo"))
sys.path.insert(0, str(REPO / "src"))


def offline(root: Path) -> None:
    from skitter.duplicates import DuplicateStage
    from skitter.settings import QualitySettings

    files = sorted(root.rglob("*.html"))
    bodies = [f.read_bytes() for f in files]
    for mode in ("exact", "near"):
        stage = DuplicateStage(QualitySettings(dedup=mode))
        t0 = time.process_time()
        found = 0
        for f, body in zip(files, bodies, strict=True):
            v = stage.examine(str(f), "h", body, body, "text/html; charset=utf-8", True)
            found += v.duplicate is not None
        cpu = time.process_time() - t0
        print(
            f"offline {mode}: {len(files)} pages, {found} duplicates "
            f"({100 * found / len(files):.1f}%), {1e6 * cpu / len(files):.0f} µs CPU per page "
            f"(mean {sum(map(len, bodies)) / len(bodies) / 1024:.0f} KiB)"
        )


def crawl(out: Path, seeds: list[str], resolve: list[str], *args: str) -> dict[str, float]:
    cmd = [
        sys.executable, "-m", "skitter", "crawl", *seeds, "--out", str(out), "--quiet",
        "--resolve-only", "--processes", "1", "--concurrency", "32", *args,
    ]  # fmt: skip
    for r in resolve:
        cmd += ["--resolve", r]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, cwd=REPO)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads((out / "report.json").read_text())
    pages = report["totals"]["records"]
    if pages < 2:
        print((out / "pages.jsonl").read_text()[:1000], file=sys.stderr)
    dups = report.get("duplicates", {})
    return {
        "pages": pages,
        "duplicates": dups.get("duplicates", 0),
        "exact": dups.get("exact", 0),
        "near": dups.get("near", 0),
        "revisits": dups.get("revisits", 0),
        "cpu_s": cpu,
        "wall_s": wall,
    }


def dedup_crawls(tmp: Path, seeds: list[str], resolve: list[str], *args: str) -> None:
    base: float | None = None
    for mode in ("off", "exact", "near"):
        r = crawl(tmp / f"dedup-{mode}", seeds, resolve, "--dedup", mode, *args)
        per = 1e3 * r["cpu_s"] / max(r["pages"], 1)
        extra = "" if base is None else f" ({per - base:+.2f} ms vs off)"
        base = per if base is None else base
        print(
            f"crawl --dedup {mode}: {r['pages']:.0f} pages, {r['duplicates']:.0f} duplicates "
            f"({r['exact']:.0f} exact, {r['near']:.0f} near, {r['revisits']:.0f} revisit "
            f"records), {r['cpu_s']:.1f} CPU s = {per:.2f} ms/page{extra}, {r['wall_s']:.1f} s"
        )


def recrawl(prev: Path, out: Path, resolve: list[str]) -> None:
    """A recrawl of an unchanged site: what the conditional requests saved."""
    r = crawl(out, [], resolve, "--since", str(prev), "--delay", "0", "--host-concurrency", "8")
    rc = json.loads((out / "report.json").read_text())["recrawl"]
    first = json.loads((prev / "report.json").read_text())["totals"]
    print(
        f"recrawl --since of the unchanged site: {rc['unchanged']} unchanged, "
        f"{rc['changed']} changed, {rc['gone']} gone, {rc['new']} new; "
        f"{rc['bytes_saved'] / 2**20:.1f} MiB of bodies not sent (first crawl: "
        f"{first.get('bytes', 0) / 2**20:.1f} MiB), {r['cpu_s']:.1f} CPU s, {r['wall_s']:.1f} s"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def inlink_ranks(out: Path, top: set[str]) -> list[int]:
    urls = [json.loads(line)["url"] for line in (out / "pages.jsonl").read_text().splitlines()]
    pos = {u: i for i, u in enumerate(urls)}
    return sorted(pos[u] for u in top if u in pos)


def top_inlinked(out: Path, n: int) -> set[str]:
    srcs: dict[str, set[str]] = defaultdict(set)
    with open(out / "links.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[6] not in ("queued", "seen"):
                continue
            sh, th = urlsplit(p[0]).netloc, urlsplit(p[1]).netloc
            if sh != th:
                srcs[p[1]].add(sh)
    ranked = sorted(srcs, key=lambda u: (-len(srcs[u]), u))
    return set(ranked[:n])


def synth(hosts: int, pages: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="quality-bench-"))
    tmp.chmod(0o755)  # nginx's workers run as another user
    site = tmp / "synthweb"
    port = free_port()
    subprocess.run(
        [sys.executable, str(SHARED / "bench" / "synthweb.py"), "--hosts", str(hosts),
         "--pages", str(pages), "--seed", "1", "--out", str(site), "--port", str(port)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    names = [ln.split()[1] for ln in (site / "hosts.txt").read_text().splitlines() if ln.strip()]
    resolve = [f"{h}:{port}:127.0.0.1" for h in names]
    subprocess.run(["nginx", "-p", f"{site}/", "-c", "nginx.conf", "-e", "error.log"], check=True)
    try:
        time.sleep(0.5)
        seed = [f"http://{names[0]}:{port}/"]
        print(f"synthweb {hosts} hosts x {pages} pages on 127.0.0.1:{port}")
        dedup_crawls(tmp, seed, resolve, "--delay", "0", "--scope", "any")
        order_args = ("--delay", "0.05", "--scope", "any", "--dedup", "off")
        bfs = tmp / "order-bfs"
        crawl(bfs, seed, resolve, "--order", "bfs", *order_args)
        top = top_inlinked(bfs, 100)
        total = len((bfs / "pages.jsonl").read_text().splitlines())
        for order in ("bfs", "inlinks"):
            out = tmp / f"order-{order}"
            if order != "bfs":
                crawl(out, seed, resolve, "--order", order, *order_args)
            ranks = inlink_ranks(out, top)
            print(
                f"--order {order}: the 100 most in-linked URLs fetched at rank "
                f"median {median(ranks):.0f}, mean {mean(ranks):.0f}, last {ranks[-1]} "
                f"of {total} (median at {100 * median(ranks) / total:.0f}% of the crawl)"
            )
    finally:
        pid = (site / "nginx.pid").read_text().strip()
        os.kill(int(pid), 3)  # QUIT
        time.sleep(0.5)
        shutil.rmtree(tmp, ignore_errors=True)


def docs(root: Path) -> None:
    from serve import DemoServer

    offline(root)
    tmp = Path(tempfile.mkdtemp(prefix="quality-bench-"))
    server = DemoServer(root)
    port = server.start()
    try:
        host = "docs.python.test"
        resolve = [f"{host}:{port}:127.0.0.1"]
        dedup_crawls(
            tmp, [f"http://{host}:{port}/index.html"], resolve,
            "--delay", "0", "--host-concurrency", "8",
        )  # fmt: skip
        recrawl(tmp / "dedup-exact", tmp / "recrawl", resolve)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("docs")
    d.add_argument("--root", type=Path, default=Path("/usr/share/doc/python3.11/html"))
    s = sub.add_parser("synth")
    s.add_argument("--hosts", type=int, default=40)
    s.add_argument("--pages", type=int, default=40)
    a = ap.parse_args()
    if a.what == "docs":
        docs(a.root)
    else:
        synth(a.hosts, a.pages)


if __name__ == "__main__":
    main()
