"""Table and checks of one `make bench-site` run: Skitter vs wget on one big site.

    python3 bench/site_report.py RESULTS_DIR

RESULTS_DIR holds what bench/run_site.sh left: machine.json, one ../shared/bench/measure.py
record per run (TAG.json, with bench/treewatch.py's process-tree memory and output size), the
run's slice of nginx's access log (TAG.access, format in bench/accesslog.py), /proc/loadavg right
after it (TAG.loadavg) and, for Skitter, its report.json (TAG.report.json) and the status counts
of its pages.jsonl (TAG.pages.json).

Pages are counted from the server's side, the same way for both crawlers: distinct URLs answered
200 with a text/html body (wget also fetches the stylesheets, scripts and images pages link
to: those requests are counted apart). The reference page set is the union of the pages of every
run; a run that misses one of them, or fetched a page robots.txt disallows (the served
robots.txt, read with urllib.robotparser), or (Skitter) did not finish or has records with an
error, FAILs. Writes RESULTS_DIR/summary.md (what it prints) and summary.json; exits 1 if a check
failed.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accesslog import Requests
from accesslog import parse as parse_access
from report import verdict_lines, write_summary

RUN = re.compile(r"^(?P<label>.+)-r(?P<i>\d+)$")

COLS = [
    ("pages", "pages", 0),
    ("other_requests", "other requests", 0),
    ("wall_s", "wall s", 1),
    ("pages_per_s", "pages/s", 1),
    ("cpu_s", "CPU s", 1),
    ("cpu_ms_per_page", "CPU ms/page", 2),
    ("peak_rss_mb", "peak RSS MB (tree)", 1),
    ("peak_pss_mb", "peak PSS MB (tree)", 1),
    ("output_mb", "output MB", 1),
    ("out_bytes_per_page", "output B/page", 0),
    ("nginx_cpu_s", "nginx CPU s", 1),
    ("other_cores", "other cores busy", 2),
    ("loadavg_before", "load before", 2),
    ("loadavg_after", "load after", 2),
]


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "–"
    if nd == 0 and isinstance(v, float):
        v = round(v)
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def med(rs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rs if isinstance(r.get(key), int | float)]
    return statistics.median(vals) if vals else None


def load(rdir: Path, port: int) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Requests]]:
    """Runs by label (in run order) with the figures of the table; each run's requests."""
    groups: dict[str, list[dict[str, Any]]] = {}
    reqs: dict[str, Requests] = {}
    for p in sorted(rdir.glob("*-r*.json"), key=lambda p: p.stat().st_mtime):
        m = RUN.match(p.stem)
        if not m:
            continue
        r = json.loads(p.read_text())
        r["stem"] = p.stem
        r["t"] = p.stat().st_mtime
        acc = p.with_suffix(".access")
        req = parse_access(acc, port) if acc.exists() else Requests()
        reqs[p.stem] = req
        r["pages"] = len(req.ok_html)
        r["other_requests"] = req.requests - sum(req.by_url[u] for u in req.ok_html)
        if r.get("wall_s"):
            r["pages_per_s"] = round(r["pages"] / r["wall_s"], 1)
            r["other_cores"] = round(r.get("other_cpu_s", 0.0) / r["wall_s"], 2)
        if r["pages"]:
            r["cpu_ms_per_page"] = round(1000 * r["cpu_s"] / r["pages"], 2)
            if isinstance(r.get("output_bytes"), int):
                r["out_bytes_per_page"] = round(r["output_bytes"] / r["pages"])
        if isinstance(r.get("output_bytes"), int):
            r["output_mb"] = round(r["output_bytes"] / 2**20, 1)
        la = p.with_suffix(".loadavg")
        if la.exists():
            r["loadavg_after"] = float(la.read_text().split()[0])
        groups.setdefault(r.get("label") or m["label"], []).append(r)
    return groups, reqs


def table(rows: list[tuple[str, list[dict[str, Any]]]], per_run: bool) -> list[str]:
    head = ["run"] if per_run else ["tool (median)", "runs"]
    out = [
        "| " + " | ".join(head + [c[1] for c in COLS]) + " |",
        "|---" * (len(head) + len(COLS)) + "|",
    ]
    for name, rs in rows:
        if per_run:
            out += [
                "| " + " | ".join([r["stem"]] + [fmt(r.get(k), nd) for k, _, nd in COLS]) + " |"
                for r in rs
            ]
        else:
            cells = [name, str(len(rs))] + [fmt(med(rs, k), nd) for k, _, nd in COLS]
            out.append("| " + " | ".join(cells) + " |")
    return out


def checks(
    r: dict[str, Any], req: Requests, union: set[str], robots: RobotFileParser, rdir: Path
) -> tuple[list[str], list[str]]:
    """(problems, notes) of one run."""
    problems: list[str] = []
    notes: list[str] = []
    label = r.get("label", "")
    # wget exits 8 when a linked URL answered an error (links out of the served tree: 404)
    allowed_exit = (0, 8) if label.startswith("wget") else (0,)
    if r.get("exit") not in allowed_exit:
        problems.append(f"exit status {r.get('exit')}")
    pages = req.ok_html
    missing = sorted(union - pages)
    if missing:
        problems.append(f"{len(missing)} pages other runs got are missing, e.g. {missing[:3]}")
    disallowed = sorted(u for u in req.by_url if not robots.can_fetch("*", u))
    if disallowed:
        problems.append(
            f"{len(disallowed)} robots.txt-disallowed URLs requested, e.g. {disallowed[:3]}"
        )
    if not req.robots_requests:
        problems.append("robots.txt never requested")
    twice = sorted(u for u, n in req.by_url.items() if n > 1)
    if twice:
        notes.append(f"{len(twice)} URLs requested more than once, e.g. {twice[:3]}")
    by_status = dict(sorted(req.by_status.items()))
    notes.append(
        f"server log: {req.requests:,} requests {by_status}, {len(pages):,} pages (text/html, "
        f"200), {req.body_bytes / 2**20:,.1f} MB of bodies sent"
    )
    if label.startswith("skitter"):
        rep_file = rdir / (r["stem"] + ".report.json")
        rep = json.loads(rep_file.read_text()) if rep_file.exists() else {}
        if rep.get("stop_reason") not in ("done", "finished"):  # "done": a finished crawl
            problems.append(f"report.json stop_reason {rep.get('stop_reason')!r}")
        pj = rdir / (r["stem"] + ".pages.json")
        counts = json.loads(pj.read_text()) if pj.exists() else {}
        if not counts:
            problems.append("no pages.jsonl counts")
        elif counts.get("error"):
            problems.append(f"{counts['error']} pages.jsonl records with an error")
        if counts:
            notes.append(f"pages.jsonl: {counts}")
    return problems, notes


def main(rdir: Path) -> int:
    machine = json.loads((rdir / "machine.json").read_text())
    start = machine["start"]
    port = urlsplit(start).port or 80
    robots = RobotFileParser()
    robots_txt = Path(machine["root"]) / "robots.txt"
    robots.parse(robots_txt.read_text().splitlines() if robots_txt.exists() else [])
    groups, reqs = load(rdir, port)
    union: set[str] = set().union(*(req.ok_html for req in reqs.values())) if reqs else set()
    labels = list(groups)
    lines = [f"# Single-site benchmark {rdir.name}", ""]
    lines += ["Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()), ""]
    lines += [
        f"Site: {machine['root']} served by nginx (1 worker, no compression) as {start}; "
        f"{len(union):,} pages (distinct URLs answered 200 with text/html) found by the runs "
        "together.",
        "",
        "## Crawlers (median of runs; pages counted from nginx's access log)",
        "",
        *table([(k, groups[k]) for k in labels], per_run=False),
        "",
        "other requests: robots.txt, 404s, and what is not a page (wget fetches the "
        "stylesheets, scripts and images pages link to). Peak RSS/PSS: largest sum over the "
        "crawler's whole process tree, sampled every 0.2 s. Output: every byte the crawler "
        "wrote (wget: the mirror, its log and, with --warc-file, the WARC; Skitter: WARC, "
        "links.tsv, pages.jsonl, frontier, shards).",
        "",
    ]
    summary: dict[str, Any] = {"machine": machine, "pages": len(union), "medians": {}, "checks": {}}
    for k in labels:
        summary["medians"][k] = {c: med(groups[k], c) for c, _, _ in COLS}
    sk = [k for k in labels if k.startswith("skitter")]
    wg = [k for k in labels if k.startswith("wget")]
    if sk and wg:
        lines += [
            "Ratio Skitter / wget (medians; pages/s: > 1 is faster, CPU/page and RSS: < 1 is "
            "less):",
            "",
            "| Skitter | wget | pages/s | CPU ms/page | peak RSS | output B/page |",
            "|---|---|---|---|---|---|",
        ]
        summary["ratios"] = {}
        for k in sk:
            for w in wg:
                ratio = {}
                for key in ("pages_per_s", "cpu_ms_per_page", "peak_rss_mb", "out_bytes_per_page"):
                    x, y = med(groups[k], key), med(groups[w], key)
                    ratio[key] = round(x / y, 2) if x is not None and y else None
                lines.append(
                    f"| {k} | {w} | " + " | ".join(f"{fmt(v, 2)}×" for v in ratio.values()) + " |"
                )
                summary["ratios"][f"{k}/{w}"] = ratio
        lines.append("")
    lines += ["## Every run, in the order run (load = 1-min loadavg)", ""]
    order = sorted((r for k in labels for r in groups[k]), key=lambda r: r["t"])
    lines += table([("", order)], per_run=True)
    lines += ["", "## Checks", ""]
    failed = False
    for k in labels:
        for r in groups[k]:
            probs, notes = checks(r, reqs[r["stem"]], union, robots, rdir)
            summary["checks"][r["stem"]] = probs
            failed |= bool(probs)
            lines += verdict_lines(r["stem"], probs, notes)
    write_summary(rdir, lines, summary)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
