"""Table and checks of one `make bench-redis` run (bench/run_redis_bench.sh).

    python3 bench/redis_report.py RESULTS_DIR

RESULTS_DIR holds manifest.json and urls.txt of the site, and per run measure.py's record
(TAG.json, TAG.loadavg, TAG.access: its slice of nginx's access log): redis-wN-rI (N Skitter
workers on one Redis, output folders redis-wN-rI/wK/), skitter-p2-rI (`--processes 2`, SQLite
frontier) and scrapy-rI (with its page list scrapy-rI.urls).

Checks, per run, as bench/report.py: from the access log, every URL of urls.txt answered 200
(for all), robots.txt asked for every host crawled and no URL requested twice (Skitter: FAILs).
Skitter over Redis: every URL of urls.txt has a record of status 200 in one of the workers'
pages.jsonl, no other 200 but the ?ref= variants, no URL with two records across the workers,
no record with an error, every worker exited 0. `--processes 2` and Scrapy: bench/report.py's
own checks. Writes RESULTS_DIR/summary.md (what it prints) and summary.json; exits 1 if a
check failed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import check_access, check_scrapy, check_skitter, fmt, load_runs, med, table

REDIS_COLS = [
    ("workers", "workers", 0),
    ("pages", "pages", 0),
    ("pages_per_s", "pages/s", 1),
    ("cpu_s", "crawler CPU s", 1),
    ("pages_per_cpu_s", "pages/CPU-s", 1),
    ("redis_cpu_s", "Redis CPU s", 2),
    ("redis_cpu_us_per_page", "Redis CPU µs/page", 0),
    ("redis_sys_share", "of it sys", 2),
    ("redis_script_us_per_page", "script exec µs/page", 0),
    ("redis_calls_per_page", "Redis commands/page (scripts' inner included)", 1),
    ("redis_script_calls_per_page", "EVALSHA/page", 2),
    ("redis_peak_mb", "Redis peak MB", 1),
    ("redis_busiest_node_share", "busiest node's share of Redis CPU", 2),
    ("peak_pss_mb", "crawler peak PSS MB", 1),
    ("loadavg_before", "load before", 2),
    ("loadavg_after", "load after", 2),
]


def check_redis(r: dict[str, Any], rdir: Path, urls: set[str], variants: int) -> list[str]:
    """Problems of one Redis run (empty = pass), from every worker's pages.jsonl."""
    problems: list[str] = []
    if r.get("exit") not in (0, None) or any(c != 0 for c in r.get("skitter_exits", [])):
        problems.append(f"exit status {r.get('skitter_exits', r.get('exit'))}")
    seen: Counter[str] = Counter()
    ok: set[str] = set()
    errors: Counter[str] = Counter()
    jsonls = sorted((rdir / r["stem"]).glob("w*/pages.jsonl"))
    if not jsonls:
        return [*problems, "no pages.jsonl"]
    for j in jsonls:
        with j.open() as fh:
            for line in fh:
                rec = json.loads(line)
                seen[rec["url"]] += 1
                if rec.get("error"):
                    errors[rec["error"]] += 1
                elif rec.get("status") == 200:
                    ok.add(rec["url"])
    missing = sorted(urls - ok)
    if missing:
        problems.append(f"{len(missing)} URLs of urls.txt without a 200 record, e.g. {missing[:3]}")
    extra = sorted(u for u in ok - urls if "?ref=" not in u)
    if extra:
        problems.append(f"{len(extra)} unexpected 200 URLs, e.g. {extra[:3]}")
    nvar = len([u for u in ok - urls if "?ref=" in u])
    if nvar != variants:
        problems.append(f"{nvar} ?ref= variants fetched, the manifest links {variants}")
    dup = sorted(u for u, n in seen.items() if n > 1)
    if dup:
        problems.append(f"{len(dup)} URLs with records in two workers, e.g. {dup[:3]}")
    for kind, n in errors.most_common():
        problems.append(f"{n} records with error {kind!r}")
    for j in jsonls:  # every worker's own report: the crawl ran to its end
        rep = j.with_name("report.json")
        reason = json.loads(rep.read_text()).get("stop_reason") if rep.exists() else "no report"
        if reason not in ("done", "finished"):
            problems.append(f"{j.parent.name}: report.json stop_reason {reason!r}")
    return problems


def main(rdir: Path) -> int:
    manifest = json.loads((rdir / "manifest.json").read_text())
    urls = set((rdir / "urls.txt").read_text().split())
    groups = load_runs(rdir)
    for rs in groups.values():
        for r in rs:
            if isinstance(r.get("redis_peak_memory_b"), int):
                r["redis_peak_mb"] = round(r["redis_peak_memory_b"] / 2**20, 1)
            if isinstance(r.get("redis_cpu_sys_s"), float) and r.get("redis_cpu_s"):
                r["redis_sys_share"] = round(r["redis_cpu_sys_s"] / r["redis_cpu_s"], 2)
            if r.get("redis_node_cpu_s") and r.get("redis_cpu_s"):
                r["redis_busiest_node_share"] = round(
                    max(r["redis_node_cpu_s"]) / r["redis_cpu_s"], 3
                )
    mfile = rdir / "machine.json"
    machine = json.loads(mfile.read_text()) if mfile.exists() else {}
    redis_k = sorted((k for k in groups if k.startswith("skitter-redis")),
                     key=lambda k: (groups[k][0].get("redis_nodes", 1),
                                    groups[k][0].get("workers", 0)))  # fmt: skip
    others = sorted(k for k in groups if k not in redis_k)
    keys = redis_k + others
    access = {
        r["stem"]: check_access(r, rdir, urls, manifest["port"], manifest["start"])
        for k in keys
        for r in groups[k]
    }
    lines = [f"# Redis benchmark {rdir.name}", ""]
    if machine:
        lines += ["Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()), ""]
    lines += [
        f"Site: {manifest['hosts']} hosts × {manifest['pages_per_host']} pages, seed "
        f"{manifest['seed']}: {len(urls):,} URLs in urls.txt, {manifest['crawlable_200']:,} "
        "pages of status 200.",
        "",
        "## All crawlers (median of runs)",
        "",
        *table([(k, groups[k]) for k in keys], per_run=False),
        "",
        "## Redis runs (median of runs)",
        "",
        "| label | runs | " + " | ".join(c[1] for c in REDIS_COLS) + " |",
        "|---" * (len(REDIS_COLS) + 2) + "|",
    ]
    for k in redis_k:
        cells = []
        for c, _, nd in REDIS_COLS:
            m = med(groups[k], c)
            cells.append(fmt(int(m) if nd == 0 and m is not None else m, nd))
        lines.append(f"| {k} | {len(groups[k])} | " + " | ".join(cells) + " |")
    lines += ["", "## Every run, in the order run (load = 1-min loadavg)", ""]
    order = sorted((r for k in keys for r in groups[k]), key=lambda r: r.get("t", 0))
    lines += table([("", order)], per_run=True)
    lines += ["", "Redis commands per run (deltas of INFO commandstats):", ""]
    for r in order:
        if r.get("redis_by_command"):
            top = ", ".join(f"{c} {n}" for c, n in list(r["redis_by_command"].items())[:12])
            nodes = r.get("redis_node_cpu_s") or []
            per_node = f" (CPU s per master: {nodes})" if len(nodes) > 1 else ""
            lines.append(f"- {r['stem']}: {top}{per_node}")
    lines += ["", "## Coverage checks", ""]
    summary: dict[str, Any] = {"site": manifest, "machine": machine, "medians": {}, "checks": {}}
    cols = sorted({c for c, _, _ in REDIS_COLS} | {"wall_s", "peak_rss_mb", "other_cpu_s"})
    for k in keys:
        summary["medians"][k] = {c: med(groups[k], c) for c in cols}
    failed = False
    for k in keys:
        for r in groups[k]:
            log_problems, politeness, notes = access[r["stem"]]
            if k in redis_k:
                probs = check_redis(r, rdir, urls, manifest["variants"]) + log_problems
                probs += politeness
            elif k.startswith("skitter"):
                probs = check_skitter(r, rdir, urls, manifest["variants"])
                probs += log_problems + politeness
            else:
                probs = check_scrapy(r, rdir, urls, manifest["crawlable_200"], manifest["start"])
                probs += log_problems
                notes = politeness + notes
            summary["checks"][r["stem"]] = probs
            failed |= bool(probs)
            lines.append(f"- {r['stem']}: " + ("PASS" if not probs else "FAIL"))
            lines += [f"  - {p}" for p in probs]
            lines += [f"  - note: {n}" for n in notes]
    text = "\n".join(lines)
    print(text)
    (rdir / "summary.md").write_text(text + "\n")
    (rdir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
