"""Table and checks of one `make bench` run: Skitter vs its peers, ceilings, load, coverage.

    python3 bench/report.py RESULTS_DIR

RESULTS_DIR holds what bench/run_bench.sh left: manifest.json and urls.txt of the site, the
result files of ../shared/bench/measure.py (skitter-*-rN.json, scrapy-*-rN.json, ceil-*.json,
each with a .loadavg file: /proc/loadavg read right after the run), Skitter's output folders
(skitter-*-rN/pages.jsonl), Scrapy's page lists (scrapy-*-rN.urls, see bench/scrapy_urls.py),
Crawlee's (crawlee-*) and spider-rs's (spider-*) result files, and per crawler run the slice of
nginx's access log it caused (*.access, see bench/accesslog.py).

Checks, per run: the crawler exited 0; every URL of urls.txt was fetched with status 200
(Skitter: pages.jsonl records with status 200 and no error; Scrapy: the URLs its spider was
handed, fragment dropped); no other 200 than urls.txt and the site's ?ref= variants; no URL
fetched twice; no transport errors; Scrapy's own "pages" equals the manifest's crawlable_200.
From the access log, for every crawler: every URL of urls.txt answered 200 (a FAIL if not: the
page set is incomplete), robots.txt requested for every host crawled, no URL requested twice,
no 200 outside urls.txt and the ?ref= variants (robots-disallowed pages); for Skitter these are
FAILs too, for the peers notes (their politeness is theirs; the table says what they did).
Writes RESULTS_DIR/summary.md (what it prints) and summary.json; exits 1 if a check failed.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accesslog import parse as parse_access

PEERS = ("scrapy", "crawlee", "spider")
RUN = re.compile(r"^(?P<label>.+)-r(?P<i>\d+)$")


def load_runs(rdir: Path) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(rdir.glob("*.json")):
        m = RUN.match(p.stem)
        if not m:
            continue
        r = json.loads(p.read_text())
        r["run"] = int(m["i"])
        r["stem"] = p.stem
        r["t"] = p.stat().st_mtime  # the order the runs were made in
        la = p.with_suffix(".loadavg")
        if la.exists():
            r["loadavg_after"] = float(la.read_text().split()[0])
        # pages/s up to the last page where the run gives it (spider-rs: its wall includes a
        # 5 s watchdog tail; Skitter: see bench/skitter_bench.py), else over the whole wall
        r["pages_per_s_wall"] = r.get("pages_per_s")
        if r.get("rate_to_last_page"):
            r["pages_per_s"] = round(r["rate_to_last_page"], 1)
        if r.get("pages") and r.get("cpu_s"):
            r["pages_per_cpu_s"] = round(r["pages"] / r["cpu_s"], 1)
        if r.get("pages") and isinstance(r.get("output_bytes"), int):
            r["out_bytes_per_page"] = round(r["output_bytes"] / r["pages"])
        if r.get("wall_s"):
            r["other_cores"] = round(r.get("other_cpu_s", 0.0) / r["wall_s"], 2)
        groups.setdefault(r.get("label") or m["label"], []).append(r)
    for rs in groups.values():
        rs.sort(key=lambda r: r["run"])
    return groups


def processes_of(label: str) -> int:
    """N of a "skitter-pN-..." label (1 for labels without it)."""
    m = re.search(r"-p(\d+)-", label)
    return int(m[1]) if m else 1


def med(rs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rs if isinstance(r.get(key), int | float)]
    return statistics.median(vals) if vals else None


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


COLS = [
    ("pages", "pages", 0),
    ("wall_s", "wall s", 1),
    ("pages_per_s", "pages/s", 1),
    ("pages_per_s_wall", "pages/s (wall)", 1),
    ("cpu_s", "CPU s", 1),
    ("pages_per_cpu_s", "pages/CPU-s", 1),
    ("peak_rss_mb", "peak RSS MB (tree)", 1),
    ("peak_pss_mb", "peak PSS MB (tree)", 1),
    ("out_bytes_per_page", "output B/page", 0),
    ("robots_requests", "robots.txt reqs", 0),
    ("hosts_without_robots", "hosts w/o robots", 0),
    ("nginx_cpu_s", "nginx CPU s", 1),
    ("other_cpu_s", "other CPU s", 1),
    ("other_cores", "other cores busy", 2),
    ("loadavg_before", "load before", 2),
    ("loadavg_after", "load after", 2),
]


def table(rows: list[tuple[str, list[dict[str, Any]]]], per_run: bool) -> list[str]:
    head = ["run" if per_run else "tool (median)", *([] if per_run else ["runs"])]
    out = ["| " + " | ".join(head + [c[1] for c in COLS]) + " |"]
    out.append("|---" * (len(head) + len(COLS)) + "|")
    for name, rs in rows:
        if per_run:
            for r in rs:
                cells = [r["stem"]] + [fmt(r.get(k), nd) for k, _, nd in COLS]
                out.append("| " + " | ".join(cells) + " |")
        else:
            cells = [name, str(len(rs))]
            for k, _, nd in COLS:
                m = med(rs, k)
                cells.append(fmt(int(m) if nd == 0 and m is not None else m, nd))
            out.append("| " + " | ".join(cells) + " |")
    return out


def check_skitter(r: dict[str, Any], rdir: Path, urls: set[str], variants: int) -> list[str]:
    """Problems of one Skitter run (empty list = pass), from its pages.jsonl."""
    problems: list[str] = []
    jsonl = rdir / r["stem"] / "pages.jsonl"
    if r.get("exit") not in (0, None) or r.get("skitter_exit") not in (0, None):
        problems.append(f"exit status {r.get('skitter_exit', r.get('exit'))}")
    if not jsonl.exists():
        return [*problems, f"no {jsonl}"]
    seen: Counter[str] = Counter()
    ok: set[str] = set()
    errors: Counter[str] = Counter()
    samples: dict[str, str] = {}
    with jsonl.open() as fh:
        for line in fh:
            rec = json.loads(line)
            seen[rec["url"]] += 1
            if rec.get("error"):
                errors[rec["error"]] += 1
                samples.setdefault(rec["error"], f"{rec['url']}: {rec.get('error_detail')}")
            elif rec.get("status") == 200:
                ok.add(rec["url"])
    missing = sorted(urls - ok)
    extra = sorted(u for u in ok - urls if "?ref=" not in u)
    dup = sorted(u for u, n in seen.items() if n > 1)
    if missing:
        problems.append(f"{len(missing)} URLs of urls.txt without a 200 record, e.g. {missing[:3]}")
    if extra:
        problems.append(f"{len(extra)} unexpected 200 URLs, e.g. {extra[:3]}")
    nvar = len([u for u in ok - urls if "?ref=" in u])
    if nvar != variants:
        problems.append(f"{nvar} ?ref= variants fetched, the manifest links {variants}")
    if dup:
        problems.append(f"{len(dup)} URLs with more than one record, e.g. {dup[:3]}")
    for kind, n in errors.most_common():
        problems.append(f"{n} records with error {kind!r}, e.g. {samples[kind]}")
    report = rdir / r["stem"] / "report.json"
    if report.exists():
        rep = json.loads(report.read_text())
        if rep.get("stop_reason") not in (None, "done", "finished"):  # "done": a finished crawl
            problems.append(f"report.json stop_reason {rep.get('stop_reason')!r}")
        # report.json's counters describe exactly the page set of pages.jsonl
        totals = rep.get("totals") or {}
        n200, nrec = len(ok), sum(seen.values())
        if totals.get("records") != nrec:
            problems.append(f"report.json records {totals.get('records')} != {nrec} in pages.jsonl")
        if (totals.get("by_status") or {}).get("200") != n200:
            problems.append(
                f"report.json 200s {(totals.get('by_status') or {}).get('200')} != {n200} in "
                "pages.jsonl"
            )
    else:
        problems.append("no report.json")
    return problems


def check_scrapy(
    r: dict[str, Any], rdir: Path, urls: set[str], crawlable: int, start: str
) -> list[str]:
    """Problems of one Scrapy run. Its start URL is requested with dont_filter=True, so the
    dupefilter never records it and the first link back to it fetches it again: "pages" is
    crawlable_200 + 1 and the start URL is expected twice."""
    problems: list[str] = []
    if r.get("exit") not in (0, None):
        problems.append(f"exit status {r.get('exit')}")
    if r.get("finish_reason") != "finished":
        problems.append(f"finish_reason {r.get('finish_reason')!r}")
    if r.get("pages") not in (crawlable, crawlable + 1):
        problems.append(f"pages {r.get('pages')} != manifest crawlable_200 {crawlable} (+1)")
    listed = rdir / (r["stem"] + ".urls")
    if not listed.exists():
        return [*problems, f"no {listed.name}: URL coverage not checked"]
    got = Counter(urldefrag(u)[0] for u in listed.read_text().split())
    missing = sorted(urls - set(got))
    dup = sorted(u for u, n in got.items() if n > (2 if u == start else 1))
    extra = sorted(u for u in set(got) - urls if "?ref=" not in u)
    if missing:
        problems.append(f"{len(missing)} URLs of urls.txt not fetched, e.g. {missing[:3]}")
    if dup:
        problems.append(f"{len(dup)} URLs fetched twice, e.g. {dup[:3]}")
    if extra:
        problems.append(f"{len(extra)} unexpected pages, e.g. {extra[:3]}")
    return problems


def check_access(
    r: dict[str, Any], rdir: Path, urls: set[str], port: int, start: str
) -> tuple[list[str], list[str], list[str]]:
    """(problems, politeness, info) of one run from its slice of nginx's access log
    (``STEM.access``); sets r["robots_requests"], r["hosts_without_robots"], r["log_200"].
    Problems: URLs of urls.txt never answered 200 (an incomplete page set). Politeness: hosts
    crawled without a robots.txt request, URLs requested twice (Scrapy's start URL may be),
    200s outside urls.txt and the ?ref= variants (robots-disallowed pages). Info: the counts."""
    path = rdir / (r["stem"] + ".access")
    if not path.exists():
        return [], [], ["no access-log slice: page set not checked from the server side"]
    req = parse_access(path, port)
    ok = req.ok
    no_robots = req.hosts - set(req.robots_hosts)
    r["robots_requests"] = req.robots_requests
    r["hosts_without_robots"] = len(no_robots)
    r["log_200"] = len(ok)
    r["log_requests"] = req.requests
    problems: list[str] = []
    notes: list[str] = []
    missing = sorted(urls - ok)
    if missing:
        problems.append(
            f"server log: {len(missing)} URLs of urls.txt never answered 200, e.g. {missing[:3]}"
        )
    if no_robots:
        notes.append(
            f"server log: {len(no_robots)} of {len(req.hosts)} hosts crawled without a "
            f"robots.txt request, e.g. {sorted(no_robots)[:3]}"
        )
    dup = sorted(u for u, n in req.by_url.items() if n > (2 if u == start else 1))
    if dup:
        notes.append(f"server log: {len(dup)} URLs requested more than once, e.g. {dup[:3]}")
    extra = sorted(u for u in ok - urls if "?ref=" not in u)
    if extra:
        notes.append(
            f"server log: {len(extra)} pages of status 200 outside urls.txt and the "
            f"?ref= variants (robots-disallowed), e.g. {extra[:3]}"
        )
    nreq = {k: v for k, v in sorted(req.by_status.items())}
    info = (
        f"server log: {req.requests:,} requests {nreq}, {len(ok):,} distinct URLs "
        f"answered 200, robots.txt {req.robots_requests} requests for "
        f"{len(req.robots_hosts)} hosts"
    )
    return problems, notes, [info]


def main(rdir: Path) -> int:
    manifest = json.loads((rdir / "manifest.json").read_text())
    urls = set((rdir / "urls.txt").read_text().split())
    groups = load_runs(rdir)
    mfile = rdir / "machine.json"
    machine = json.loads(mfile.read_text()) if mfile.exists() else {}
    sk = sorted(k for k in groups if k.startswith(("skitter", "polite")))
    peers = sorted(
        (k for k in groups if k.startswith(PEERS)),
        key=lambda k: [k.startswith(p) for p in PEERS].index(True),
    )
    ce = sorted(k for k in groups if k.startswith("ceil-"))
    # the server-side checks first: they fill table columns (robots.txt requests)
    access: dict[str, tuple[list[str], list[str], list[str]]] = {}
    for k in sk + peers:
        for r in groups[k]:
            access[r["stem"]] = check_access(r, rdir, urls, manifest["port"], manifest["start"])
    lines = [f"# Benchmark {rdir.name}", ""]
    if machine:
        lines += ["Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()), ""]
    lines += [
        f"Site: {manifest['hosts']} hosts × {manifest['pages_per_host']} pages, seed "
        f"{manifest['seed']}: {len(urls):,} URLs in urls.txt + {manifest['variants']} ?ref= "
        f"variants = {manifest['crawlable_200']:,} pages of status 200; "
        f"{manifest['missing']} linked 404 URLs.",
        "",
        "## Crawlers (median of runs; pages = responses of status 200)",
        "",
        *table([(k, groups[k]) for k in sk + peers], per_run=False),
        "",
        "Peak RSS/PSS: the largest sum over the crawler's whole process tree, sampled every "
        "0.2 s (RSS counts pages shared by forked processes once per process; PSS splits "
        "them). Output: all bytes the crawler wrote (Scrapy and spider-rs keep nothing; "
        "Crawlee its ./storage). robots.txt requests and hosts crawled without one: from "
        "nginx's access log.",
    ]
    lines.append(
        "pages/s: pages up to the last page, for Skitter (its clock starts just before its "
        "process does: interpreter start, imports and forks included; it stops at the latest "
        "fetched_at of pages.jsonl) and spider-rs (clock from after its module loads to its "
        "last page event: it does not return after the crawl, a watchdog ends it 5 s after "
        "the last page); pages over the whole wall for the others. pages/s (wall): pages / "
        "wall s for every tool (Skitter's wall includes its end: merging the shards' files, "
        "fsync, the end files; and the bench's own count of pages.jsonl; spider-rs's the "
        "5 s watchdog)."
    )
    lines.append("")
    summary: dict[str, Any] = {
        "site": manifest,
        "machine": machine,
        "medians": {},
        "checks": {},
        "notes": {},
    }
    for k in sk + peers + ce:
        summary["medians"][k] = {c: med(groups[k], c) for c, _, _ in COLS}
    if sk and peers:
        keys = ("pages_per_s", "pages_per_cpu_s", "cpu_s", "peak_rss_mb", "out_bytes_per_page")
        lines += ["Ratio Skitter / peer (medians):", ""]
        lines += [
            "| Skitter | peer | pages/s | pages/CPU-s | CPU s | peak RSS | output B/page |",
            "|---|---|---|---|---|---|---|",
        ]
        summary["ratios"] = {}
        for k in sorted(sk, key=processes_of, reverse=True):
            for p in peers:
                ratio = {}
                for key in keys:
                    x, y = med(groups[k], key), med(groups[p], key)
                    ratio[key] = round(x / y, 2) if x is not None and y else None
                cells = " | ".join(f"{fmt(v, 2)}×" for v in ratio.values())
                lines.append(f"| {k} | {p} | {cells} |")
                summary["ratios"][f"{k}/{p}"] = ratio
        lines.append("")
    if ce:
        lines += ["## Ceilings (../shared/bench/run_ceilings.sh, same run)", ""]
        lines += table([(k, groups[k]) for k in ce], per_run=False)
        if sk:
            lines.append("")
            for top in sk:
                s = med(groups[top], "pages_per_s")
                lines += [
                    f"- {top} reaches {100 * s / c:.0f}% of {k} ({fmt(c)} pages/s)"
                    for k in ce
                    if s and (c := med(groups[k], "pages_per_s"))
                ]
        lines.append("")
    lines += ["## Every run, in the order run (load = 1-min loadavg)", ""]
    order = sorted((r for k in sk + peers + ce for r in groups[k]), key=lambda r: r.get("t", 0))
    lines += table([("", order)], per_run=True)
    lines += ["", "## Coverage checks", ""]
    failed = False
    for k in sk + peers:
        for r in groups[k]:
            log_problems, politeness, notes = access[r["stem"]]
            if k in sk:  # Skitter: impolite is a failure
                probs = check_skitter(r, rdir, urls, manifest["variants"])
                probs += log_problems + politeness
            elif k.startswith("scrapy"):  # a peer's politeness is its own: reported
                probs = check_scrapy(r, rdir, urls, manifest["crawlable_200"], manifest["start"])
                probs += log_problems
                notes = politeness + notes
            else:
                probs = list(log_problems)
                notes = politeness + notes
                if r.get("exit") not in (0, None):
                    probs.append(f"exit status {r.get('exit')}")
                if r.get("pages") != manifest["crawlable_200"]:
                    notes.append(
                        f"its own count: {r.get('pages')} pages of status 200, the "
                        f"manifest has {manifest['crawlable_200']}"
                    )
            summary["checks"][r["stem"]] = probs
            summary["notes"][r["stem"]] = notes
            failed |= bool(probs)
            lines += verdict_lines(r["stem"], probs, notes)
    write_summary(rdir, lines, summary)
    return 1 if failed else 0


def verdict_lines(stem: str, probs: list[str], notes: list[str]) -> list[str]:
    """The summary.md lines of one run: PASS/FAIL, then its problems and notes."""
    head = f"- {stem}: " + ("PASS" if not probs else "FAIL")
    return [head] + [f"  - {p}" for p in probs] + [f"  - note: {n}" for n in notes]


def write_summary(rdir: Path, lines: list[str], summary: dict[str, Any]) -> None:
    """Print ``lines`` and write them to ``rdir``/summary.md, ``summary`` to summary.json."""
    text = "\n".join([*lines, ""])
    print(text)
    (rdir / "summary.md").write_text(text + "\n")
    (rdir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
