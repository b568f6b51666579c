"""Table and checks of one `make bench` run: Skitter vs Scrapy, ceilings, load, coverage.

    python3 bench/report.py RESULTS_DIR

RESULTS_DIR holds what bench/run_bench.sh left: manifest.json and urls.txt of the site, the
result files of ../shared/bench/measure.py (skitter-*-rN.json, scrapy-*-rN.json, ceil-*.json,
each with a .loadavg file: /proc/loadavg read right after the run), Skitter's output folders
(skitter-*-rN/pages.jsonl) and Scrapy's page lists (scrapy-*-rN.urls, see bench/scrapy_urls.py).

Checks, per run: the crawler exited 0; every URL of urls.txt was fetched with status 200
(Skitter: pages.jsonl records with status 200 and no error; Scrapy: the URLs its spider was
handed, fragment dropped); no other 200 than urls.txt and the site's ?ref= variants; no URL
fetched twice; no transport errors; Scrapy's own "pages" equals the manifest's crawlable_200.
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
        if r.get("pages") and r.get("cpu_s"):
            r["pages_per_cpu_s"] = round(r["pages"] / r["cpu_s"], 1)
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
    ("cpu_s", "CPU s", 1),
    ("pages_per_cpu_s", "pages/CPU-s", 1),
    ("peak_rss_mb", "peak RSS MB", 1),
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
    for line in jsonl.open():
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
        if rep.get("stop_reason") not in (None, "finished"):
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


def main(rdir: Path) -> int:
    manifest = json.loads((rdir / "manifest.json").read_text())
    urls = set((rdir / "urls.txt").read_text().split())
    groups = load_runs(rdir)
    mfile = rdir / "machine.json"
    machine = json.loads(mfile.read_text()) if mfile.exists() else {}
    sk = sorted(k for k in groups if k.startswith(("skitter", "polite")))
    sc = sorted(k for k in groups if k.startswith("scrapy"))
    ce = sorted(k for k in groups if k.startswith("ceil-"))
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
        *table([(k, groups[k]) for k in sk + sc], per_run=False),
        "",
    ]
    summary: dict[str, Any] = {"site": manifest, "machine": machine, "medians": {}, "checks": {}}
    for k in sk + sc + ce:
        summary["medians"][k] = {c: med(groups[k], c) for c, _, _ in COLS}
    if sk and sc:
        b = groups[sc[0]]
        lines += [f"Ratio Skitter / {sc[0]} (medians):", ""]
        lines += [
            "| Skitter | pages/s | pages/CPU-s | wall s | CPU s | peak RSS |",
            "|---|---|---|---|---|---|",
        ]
        summary["ratios"] = {}
        for k in sorted(sk, key=processes_of, reverse=True):
            ratio = {}
            for key in ("pages_per_s", "pages_per_cpu_s", "wall_s", "cpu_s", "peak_rss_mb"):
                x, y = med(groups[k], key), med(b, key)
                ratio[key] = round(x / y, 2) if x is not None and y else None
            cells = " | ".join(f"{fmt(v, 2)}×" for v in ratio.values())
            lines.append(f"| {k} | {cells} |")
            summary["ratios"][k] = ratio
            summary.setdefault("ratio", ratio)  # the run with the most processes
        lines.append("")
    if ce:
        lines += ["## Ceilings (../shared/bench/run_ceilings.sh, same run)", ""]
        lines += table([(k, groups[k]) for k in ce], per_run=False)
        if sk:
            top = max(sk, key=processes_of)
            s = med(groups[top], "pages_per_s")
            lines += [""] + [
                f"- {top} reaches {100 * s / c:.0f}% of {k} ({fmt(c)} pages/s)"
                for k in ce
                if s and (c := med(groups[k], "pages_per_s"))
            ]
        lines.append("")
    lines += ["## Every run, in the order run (load = 1-min loadavg)", ""]
    order = sorted((r for k in sk + sc + ce for r in groups[k]), key=lambda r: r.get("t", 0))
    lines += table([("", order)], per_run=True)
    lines += ["", "## Coverage checks", ""]
    failed = False
    for k in sk + sc:
        for r in groups[k]:
            if k in sk:
                probs = check_skitter(r, rdir, urls, manifest["variants"])
            else:
                probs = check_scrapy(r, rdir, urls, manifest["crawlable_200"], manifest["start"])
            summary["checks"][r["stem"]] = probs
            failed |= bool(probs)
            lines.append(f"- {r['stem']}: " + ("PASS" if not probs else "FAIL"))
            lines += [f"  - {p}" for p in probs]
    lines.append("")
    text = "\n".join(lines)
    print(text)
    (rdir / "summary.md").write_text(text + "\n")
    (rdir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
