"""One Skitter crawl of a served synthweb, as a command for ../shared/bench/measure.py.

    python bench/skitter_bench.py --site SITE --out DIR [--delay 0] [--concurrency 128]
                                  [-- extra skitter crawl flags]

SITE is the --out of ../shared/bench/synthweb.py, served by ../shared/bench/serve.sh. Every
host of SITE/hosts.txt is a seed (http://hNNNN.test:PORT/, PORT from SITE/manifest.json) and is
mapped with --resolve HOST:PORT:127.0.0.1, with --resolve-only, so no DNS and no /etc/hosts is
involved. DIR must not exist (a fresh crawl); the seeds file is written beside it (DIR.seeds).
All hosts share 127.0.0.1, so --ip-concurrency is raised to --concurrency (the default per-IP
cap of 4 would throttle the crawl).

--processes N (default: the number of cores) is passed on. While the crawl
runs, the memory of its whole process tree (the coordinator and its crawler processes) is
sampled from /proc every 0.2 s by bench/treewatch.py's Sampler: peak_rss_mb is the largest SUM
of RSS over the tree (pages shared by the forked processes are counted once per process, so
this over-counts), peak_pss_mb the largest sum of PSS (shared pages split between sharers),
largest_process_rss_mb the largest single process (GNU time's figure). output_bytes is the
size of everything the crawl wrote in DIR (WARC, links.tsv, pages.jsonl, frontier, shards).

Afterwards writes {"pages": N, ...} to $BENCH_OUT (N = records of DIR/pages.jsonl with status
200, the figure Scrapy's "pages" counts) and exits with Skitter's exit code. Also
``seconds_to_last_page`` and ``rate_to_last_page`` (N / those seconds): from just before the
Skitter process is started (its interpreter start, imports and forks included) to the latest
``fetched_at`` of pages.jsonl (a record is written when its page is done), the figure
../shared/bench/spider_bench.js gives for spider-rs (whose clock starts after its module loads).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from treewatch import output_size, run_sampled  # bench/treewatch.py, beside this script


def skitter_cmd() -> list[str]:
    """The `skitter` console script of the running venv, else `python -m skitter`."""
    script = Path(sys.executable).parent / "skitter"
    return [str(script)] if script.exists() else [sys.executable, "-m", "skitter"]


def site_args(site: Path, out: Path) -> tuple[list[str], list[str]]:
    """(hosts, crawl args): every host of SITE/hosts.txt as a seed (a seeds file written
    beside ``out``, OUT.seeds) and mapped to 127.0.0.1 with --resolve, plus --resolve-only."""
    port = int(json.loads((site / "manifest.json").read_text())["port"])
    hosts = [ln.split()[1] for ln in (site / "hosts.txt").read_text().splitlines() if ln.strip()]
    seeds = out.with_name(out.name + ".seeds")
    seeds.write_text("".join(f"http://{h}:{port}/\n" for h in hosts))
    args = ["--seeds-file", str(seeds)]
    for h in hosts:  # no resolve-file option: ~2 args per host, far below argv limits
        args += ["--resolve", f"{h}:{port}:127.0.0.1"]
    return hosts, [*args, "--resolve-only"]


def count_pages(jsonls: list[Path]) -> tuple[int, Counter[str], Counter[str], float | None]:
    """(records of status 200 without error, records per status, records per error, the
    latest ``fetched_at`` as Unix seconds or None) over the given pages.jsonl files (missing
    ones: nothing)."""
    pages, statuses, errors = 0, Counter[str](), Counter[str]()
    last = ""
    for jsonl in jsonls:
        if not jsonl.exists():
            continue
        with jsonl.open() as f:
            for line in f:
                r = json.loads(line)
                statuses[str(r.get("status"))] += 1
                last = max(last, r.get("fetched_at") or "")  # ISO 8601 UTC: sorts as time
                if r.get("error"):
                    errors[r["error"]] += 1
                elif r.get("status") == 200:
                    pages += 1
    return pages, statuses, errors, datetime.fromisoformat(last).timestamp() if last else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--site", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--delay", default="0")
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--processes", type=int, help="default: the number of cores")
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="-- then extra skitter crawl flags")
    a = ap.parse_args()
    extra = a.extra[1:] if a.extra[:1] == ["--"] else a.extra
    if a.processes is None:
        a.processes = os.cpu_count() or 1
    if a.out.exists():
        print(f"skitter_bench: {a.out} exists; the benchmark wants a fresh crawl", file=sys.stderr)
        return 2
    hosts, seed_args = site_args(a.site, a.out)
    cmd = [*skitter_cmd(), "crawl", *seed_args, "--out", str(a.out)]
    cmd += [
        "--delay", a.delay,
        "--concurrency", str(a.concurrency),
        "--ip-concurrency", str(a.concurrency),
        "--processes", str(a.processes),
        "--quiet",
        *extra,
    ]  # fmt: skip
    started = time.time()
    rc, memory = run_sampled(cmd)
    out_bytes, out_files = output_size([a.out])
    pages, statuses, errors, last = count_pages([a.out / "pages.jsonl"])
    to_last = {}
    if last is not None and last > started and pages:
        to_last = dict(
            seconds_to_last_page=round(last - started, 3),
            rate_to_last_page=round(pages / (last - started), 1),
        )
    res = dict(
        tool="skitter",
        pages=pages,
        records=sum(statuses.values()),
        by_status=dict(statuses),
        by_error=dict(errors),
        skitter_exit=rc,
        hosts=len(hosts),
        processes=a.processes,
        output_bytes=out_bytes,
        output_files=out_files,
        **to_last,
        **memory,
    )
    print(json.dumps(res))
    if os.environ.get("BENCH_OUT"):
        Path(os.environ["BENCH_OUT"]).write_text(json.dumps(res))
    return rc


if __name__ == "__main__":
    sys.exit(main())
