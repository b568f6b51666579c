"""Crawl a real documentation tree served on 127.0.0.1 and check the result independently.

    python bench/docs_crawl.py [--root /usr/share/doc/python3.11/html] [--kills 3]

Serves ROOT with demo/serve.py, crawls it with `skitter crawl` (every name mapped with --resolve,
--resolve-only), then checks, with the standard library's HTML parser (not Skitter's):
- every page reachable from index.html within the host was fetched exactly once;
- no transport errors; 404s listed apart;
- links.tsv has one row per link element of every fetched HTML page;
- every WARC file passes `warcio check`.
With --kills N, a second crawl is killed with SIGKILL N times at random moments and resumed;
its page set must equal the uninterrupted crawl's.
Prints pages, seconds, pages/s and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "demo"))
from serve import DemoServer  # noqa: E402

HOST = "docs.python.test"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.base: str | None = None
        self.elements = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "base" and self.base is None and a.get("href"):
            self.base = a["href"]
        if tag in ("a", "area") and a.get("href") is not None:
            self.elements += 1
            self.hrefs.append(a["href"] or "")
        elif tag in ("frame", "iframe") and a.get("src") is not None:
            self.elements += 1
            self.hrefs.append(a["src"] or "")
        elif tag == "link" and "canonical" in (a.get("rel") or "").lower().split():
            if a.get("href") is not None:
                self.elements += 1
                self.hrefs.append(a["href"] or "")
        elif tag == "meta" and (a.get("http-equiv") or "").lower() == "refresh":
            content = a.get("content") or ""
            if "url=" in content.lower():
                self.elements += 1


def reachable(root: Path, base_url: str) -> tuple[set[str], dict[str, int]]:
    """BFS over the files from index.html: reachable URLs and link elements per HTML page."""
    start = base_url + "index.html"
    seen = {start}
    queue = [start]
    elements: dict[str, int] = {}
    netloc = urlsplit(base_url).netloc
    while queue:
        url = queue.pop()
        path = root / unquote(urlsplit(url).path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file() or path.suffix not in (".html", ".htm"):
            continue
        p = _Links()
        p.feed(path.read_text(encoding="utf-8", errors="replace"))
        elements[url] = p.elements
        base = urljoin(url, p.base) if p.base else url
        for h in p.hrefs:
            target = urljoin(base, h.strip()).split("#", 1)[0]
            parts = urlsplit(target)
            if parts.scheme not in ("http", "https") or parts.netloc != netloc:
                continue
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return seen, elements


def run_crawl(out: Path, port: int, resume: bool, kill_after: int | None = None) -> int:
    cmd = [
        sys.executable,
        "-m",
        "skitter",
        "crawl",
        "--out",
        str(out),
        "--quiet",
        "--resolve",
        f"{HOST}:{port}:127.0.0.1",
        "--resolve-only",
        "--delay",
        "0",
    ]
    cmd += ["--resume"] if resume else [f"http://{HOST}:{port}/index.html"]
    proc = subprocess.Popen(cmd)
    if kill_after is None:
        return proc.wait()
    deadline = time.monotonic() + 300
    pages = out / "pages.jsonl"
    while proc.poll() is None and time.monotonic() < deadline:
        if pages.exists() and pages.read_bytes().count(b"\n") >= kill_after:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    return proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/usr/share/doc/python3.11/html")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--keep", help="keep the output in this folder")
    a = ap.parse_args()
    root = Path(a.root)
    if not (root / "index.html").exists():
        print(f"no {root}/index.html: apt-get install python3.11-doc", file=sys.stderr)
        return 2
    work = Path(a.keep or tempfile.mkdtemp(prefix="skitter-docs-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    server = DemoServer(root)
    try:
        port = server.start()
        out = work / "crawl"
        t0 = time.monotonic()
        rc = run_crawl(out, port, resume=False)
        secs = time.monotonic() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if rc != 0:
            print(f"crawl failed: exit {rc}", file=sys.stderr)
            return 1
        recs = [json.loads(x) for x in (out / "pages.jsonl").read_text().splitlines()]
        urls = [r["url"] for r in recs]
        dup = [u for u, n in Counter(urls).items() if n > 1]
        errors = [r for r in recs if r["error"]]
        statuses = Counter(r["status"] for r in recs)
        expect, elements = reachable(root, f"http://{HOST}:{port}/")
        missing = expect - set(urls)
        extra = set(urls) - expect
        rows = Counter()
        with open(out / "links.tsv", encoding="utf-8") as fh:
            next(fh)
            for line in fh:
                rows[line.split("\t", 1)[0]] += 1
        bad_rows = {u: (n, rows.get(u, 0)) for u, n in elements.items() if rows.get(u, 0) != n}
        warc_ok = all(
            subprocess.run(
                [str(Path(sys.executable).parent / "warcio"), "check", str(w)], capture_output=True
            ).returncode
            == 0
            for w in out.glob("*.warc.gz")
        )
        print(
            f"pages: {len(recs)} records ({statuses[200]} x 200, "
            f"{sum(v for k, v in statuses.items() if k != 200)} other statuses: "
            f"{dict(statuses)}), transport errors: {len(errors)}"
        )
        print(
            f"time: {secs:.1f} s, {len(recs) / secs:.1f} pages/s, peak RSS {peak_kb / 1024:.0f} MB"
        )
        print(
            f"reachable from index.html: {len(expect)}; fetched: {len(set(urls))}; "
            f"missing: {len(missing)}; extra: {len(extra)}; fetched twice: {len(dup)}"
        )
        print(
            f"links.tsv rows: {sum(rows.values())}; pages whose row count differs from their "
            f"link elements: {len(bad_rows)} {list(bad_rows.items())[:3]}"
        )
        print(f"warcio check: {'all files pass' if warc_ok else 'FAILED'}")
        ok = not missing and not extra and not dup and not errors and not bad_rows and warc_ok
        if a.kills:
            out2 = work / "killed"
            rng = random.Random()
            resume = False
            n = len(recs)
            for k in range(a.kills):
                at = rng.randrange(
                    max(1, n * k // (a.kills + 1)), max(2, n * (k + 1) // (a.kills + 1))
                )
                rc = run_crawl(out2, port, resume=resume, kill_after=at)
                print(f"kill -9 #{k + 1} after >= {at} records (exit {rc})")
                resume = True
            rc = run_crawl(out2, port, resume=True)
            recs2 = [json.loads(x) for x in (out2 / "pages.jsonl").read_text().splitlines()]
            urls2 = [r["url"] for r in recs2]
            same = set(urls2) == set(urls) and len(urls2) == len(set(urls2))
            print(
                f"killed {a.kills}x and resumed: exit {rc}, {len(urls2)} records, "
                f"same page set as uninterrupted: {same}"
            )
            ok = ok and same and rc == 0
        print("RESULT:", "OK" if ok else "FAILED")
        return 0 if ok else 1
    finally:
        server.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
