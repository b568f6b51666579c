"""Throughput of the offline tools on WARC files of a crawl: extract, index, graph --rank.

    python bench/offline_bench.py CRAWL_DIR [--jobs N] [--work DIR]

Runs, each as its own process (peak RSS from wait4 of the process and its children):
``skitter extract CRAWL_DIR/*.warc.gz``, ``skitter index`` on the same files, then
``skitter graph CRAWL_DIR --rank`` (edge list) and prints records/s, MB/s (compressed bytes
read), peak RSS, and the graph's size and time. Nothing is asserted: numbers for bench/README.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKITTER = [sys.executable, "-m", "skitter"]


def _run(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MiB of the command or any process it waited for, stderr)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate()
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()[:500]}")
    import resource

    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, peak_kib // 1024, err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("crawl_dir")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--work", default=None, help="scratch folder (default: a temp dir)")
    a = ap.parse_args()
    warcs = sorted(str(p) for p in Path(a.crawl_dir).glob("*.warc.gz"))
    if not warcs:
        sys.exit(f"no *.warc.gz in {a.crawl_dir}")
    size = sum(os.path.getsize(w) for w in warcs)
    work = Path(a.work or tempfile.mkdtemp(prefix="offline-bench-"))
    out = work / "extract"
    wall, rss, _ = _run([*SKITTER, "extract", *warcs, "--out", str(out), "--jobs", str(a.jobs)])
    rep = json.loads((out / "report.json").read_text())
    print(
        f"extract: {len(warcs)} files, {size / 1e6:,.1f} MB, {rep['records']:,} records, "
        f"{rep['pages']:,} pages, {rep['links']:,} links in {wall:.1f} s wall = "
        f"{rep['records'] / wall:,.0f} records/s, {size / 1e6 / wall:,.1f} MB/s "
        f"(--jobs {a.jobs}); peak RSS {rss} MiB"
    )
    wall, _, _ = _run([*SKITTER, "index", *warcs])
    print(f"index: {wall:.1f} s = {size / 1e6 / wall:,.1f} MB/s, one process")
    g = work / "graph.tsv"
    wall, _, err = _run([*SKITTER, "graph", a.crawl_dir, "--rank", "-o", str(g)])
    print(f"graph --rank: {wall:.1f} s wall; {err.strip()}")


if __name__ == "__main__":
    main()
