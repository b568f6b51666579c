"""`skitter check-links` on the real PostgreSQL documentation, with 20 pages deleted.

    python bench/check_links_pgdocs.py [--root /usr/share/doc/postgresql-doc-15/html]
                                       [--seed 15] [--delete 20] [--keep DIR]

Copies ROOT to a temporary folder, deletes N of its pages (chosen with a fixed random seed,
index.html excepted), serves the copy with demo/serve.py on 127.0.0.1 and runs

    skitter check-links http://pgdocs.test:PORT/index.html --resolve pgdocs.test:PORT:127.0.0.1
        --resolve-only --delay 0 --format json

Every other host name fails as a DNS error without any query (nothing leaves the machine).
Then it checks the JSON report independently, with the standard library's HTML parser (not
Skitter's): a breadth-first walk over the files from index.html finds, for every page still
reachable, its links (``<a href>``, ``<area href>``, ``<frame/iframe src>``, ``<link
rel=canonical>``) with their anchor texts and its fragment targets (``id``, ``<a name>``):

- the report's internal broken links are exactly the links to the deleted pages, each with
  every (page, anchor text, count) that links to it -- and nothing else internal is broken
  (a pre-existing missing ``#fragment`` would be listed apart);
- every link to another host is broken with error ``dns`` (counted apart).

Prints the run time and the counts; exit status 0 if everything matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "demo"))
from serve import DemoServer  # noqa: E402

HOST = "pgdocs.test"
_WS = re.compile(r"[\t\n\f\r ]+")


def anchor_text(text: str) -> str:
    """Anchor text as Skitter reports it: ASCII whitespace collapsed, 256 characters."""
    s = _WS.sub(" ", text).strip(" ")
    return s[:256].rstrip(" ") if len(s) > 256 else s


class _Page(HTMLParser):
    """Links (href, anchor text), the base href and the fragment targets of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.base: str | None = None
        self._open: list[list[str]] = []  # text buffers of the <a> elements being read
        self._open_href: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v for k, v in attrs}
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"] or "")
        if tag == "base" and self.base is None and a.get("href") is not None:
            self.base = a["href"]
        if tag == "a" and a.get("href") is not None:
            self._open.append([])
            self._open_href.append(a["href"] or "")
        elif tag == "area" and a.get("href") is not None:
            self.links.append((a["href"] or "", anchor_text(a.get("alt") or "")))
        elif tag in ("frame", "iframe") and a.get("src"):
            self.links.append((a["src"] or "", ""))
        elif (
            tag == "link"
            and "canonical" in (a.get("rel") or "").lower().split()
            and a.get("href") is not None
        ):
            self.links.append((a["href"] or "", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open:
            text = "".join(self._open.pop())
            self.links.append((self._open_href.pop(), anchor_text(text)))
            if self._open:
                self._open[-1].append(text)

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1].append(data)


def normalise(url: str) -> str:
    """Light URL normalisation (scheme/host lower case, default port, no fragment)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and not (
        (parts.scheme == "http" and port == 80) or (parts.scheme == "https" and port == 443)
    ):
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme.lower(), host, parts.path or "/", parts.query, ""))


@dataclass
class Expected:
    """What the independent walk found."""

    pages: int
    missing_pages: dict[str, Counter[tuple[str, str]]]
    missing_fragments: dict[str, Counter[tuple[str, str]]]
    external: dict[str, Counter[tuple[str, str]]]
    schemes: Counter[str]


def expected(root: Path, base_url: str) -> Expected:
    """Walk the copy from index.html; what a correct link check must report."""
    netloc = urlsplit(base_url).netloc
    start = base_url + "index.html"
    queue, seen = [start], {start}
    pages: dict[str, _Page] = {}
    missing_pages: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    external: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    fragment_links: list[tuple[str, str, str, str]] = []  # target, fragment, source, anchor
    schemes: Counter[str] = Counter()
    while queue:
        url = queue.pop()
        path = root / unquote(urlsplit(url).path).lstrip("/")
        if not path.is_file():
            continue
        if path.suffix != ".html":
            continue
        p = _Page()
        p.feed(path.read_text(encoding="utf-8", errors="replace"))
        p.close()
        pages[url] = p
        base = urljoin(url, p.base) if p.base else url
        for href, anchor in p.links:
            target = urljoin(base, href.strip())
            scheme = urlsplit(target).scheme.lower()
            if scheme not in ("http", "https"):
                schemes[scheme] += 1
                continue
            frag = urlsplit(target).fragment
            target = normalise(target)
            if urlsplit(target).netloc != netloc:
                external[target][(url, anchor)] += 1
                continue
            tpath = root / unquote(urlsplit(target).path).lstrip("/")
            if not tpath.exists():
                missing_pages[target][(url, anchor)] += 1
                continue
            if frag:
                fragment_links.append((target, frag, url, anchor))
            if target not in seen:
                seen.add(target)
                queue.append(target)
    missing_fragments: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    for target, frag, src, anchor in fragment_links:
        page = pages.get(target)
        if page is None or frag.lower() == "top":
            continue
        if frag not in page.ids and unquote(frag) not in page.ids:
            missing_fragments[f"{target}#{frag}"][(src, anchor)] += 1
    return Expected(len(pages), missing_pages, missing_fragments, external, schemes)


def sources(entry: dict[str, Any]) -> Counter[tuple[str, str]]:
    """(page, anchor) -> count of one report entry."""
    out: Counter[tuple[str, str]] = Counter()
    for s in entry["sources"]:
        out[(s["url"], s["anchor"])] += s["count"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/usr/share/doc/postgresql-doc-15/html")
    ap.add_argument("--seed", type=int, default=15, help="random seed choosing the pages")
    ap.add_argument("--delete", type=int, default=20, help="pages to delete")
    ap.add_argument("--keep", help="work in this folder and keep it")
    a = ap.parse_args()
    src_root = Path(a.root)
    if not (src_root / "index.html").exists():
        print(f"no {src_root}/index.html: apt-get install postgresql-doc-15", file=sys.stderr)
        return 2
    work = Path(a.keep or tempfile.mkdtemp(prefix="skitter-pgdocs-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    site = work / "site"
    shutil.copytree(src_root, site)
    candidates = sorted(p.name for p in site.glob("*.html") if p.name != "index.html")
    deleted = sorted(random.Random(a.seed).sample(candidates, a.delete))
    for name in deleted:
        (site / name).unlink()
    server = DemoServer(site)
    try:
        port = server.start()
        base_url = f"http://{HOST}:{port}/"
        report_path = work / "report.json"
        cmd = [
            sys.executable, "-m", "skitter", "check-links", base_url + "index.html",
            "--resolve", f"{HOST}:{port}:127.0.0.1", "--resolve-only", "--delay", "0",
            "--format", "json", "--output", str(report_path), "--out", str(work / "check"),
            "--quiet",
        ]  # fmt: skip
        started = time.monotonic()
        code = subprocess.run(cmd, cwd=REPO).returncode
        seconds = time.monotonic() - started
    finally:
        server.stop()
    report = json.loads(report_path.read_text())
    exp = expected(site, base_url)
    ok = code == 1
    print(f"PostgreSQL docs: {len(candidates) + 1} pages, deleted {len(deleted)} (seed {a.seed})")
    print(f"check-links: exit {code}, {seconds:.1f} s, summary {report['summary']}")
    print(f"independent walk: {exp.pages} pages reachable from index.html")

    internal = [e for e in report["broken"] if urlsplit(e["url"]).netloc == f"{HOST}:{port}"]
    other = [e for e in report["broken"] if e not in internal]
    missing_pages, missing_frags, external = exp.missing_pages, exp.missing_fragments, exp.external
    got_pages = {e["url"]: e for e in internal if e["error"] is None and e["status"] == 404}
    got_frags = {e["url"]: e for e in internal if e["error"] == "missing_fragment"}
    rest = [e for e in internal if e["url"] not in got_pages and e["url"] not in got_frags]
    deleted_urls = {base_url + name for name in deleted}
    linked = sorted(set(missing_pages) & deleted_urls)
    print(
        f"deleted pages linked from reachable pages: {len(linked)} of {len(deleted)}; "
        f"links to them: {sum(sum(c.values()) for c in missing_pages.values())} "
        f"from {len({s for c in missing_pages.values() for s, _ in c})} pages"
    )
    if set(missing_pages) - deleted_urls:
        print(f"  links to other missing files: {sorted(set(missing_pages) - deleted_urls)}")
    same = set(got_pages) == set(missing_pages) and all(
        sources(got_pages[u]) == missing_pages[u] for u in missing_pages
    )
    print(f"report: {len(got_pages)} broken (404) internal targets; equal to expected: {same}")
    if not same:
        ok = False
        for u in sorted(set(got_pages) | set(missing_pages)):
            g = sources(got_pages[u]) if u in got_pages else Counter()
            if g != missing_pages.get(u, Counter()):
                print(f"  DIFF {u}: report {dict(g)} expected {dict(missing_pages.get(u, {}))}")
    same_frags = set(got_frags) == set(missing_frags) and all(
        sources(got_frags[u]) == missing_frags[u] for u in missing_frags
    )
    print(
        f"missing fragments: report {len(got_frags)}, expected {len(missing_frags)}; "
        f"equal: {same_frags}"
    )
    ok = ok and same_frags
    print(f"other broken internal links: {len(rest)}")
    for e in rest:
        print(f"  UNEXPECTED {e['url']} {e['status']} {e['error']}")
    ok = ok and not rest
    dns = [e for e in other if e["error"] == "dns"]
    not_dns = [e for e in other if e["error"] != "dns"]
    got_ext = {normalise(e["url"]) for e in other}
    print(
        f"external links: {len(other)} distinct targets broken, {len(dns)} with error dns, "
        f"{sum(sum(sources(e).values()) for e in other)} links; expected "
        f"{len(external)} targets, {sum(sum(c.values()) for c in external.values())} links"
    )
    if got_ext != set(external) or not_dns:
        ok = False
        print(f"  only in report: {sorted(got_ext - set(external))[:10]}")
        print(f"  only expected: {sorted(set(external) - got_ext)[:10]}")
        print(f"  not dns: {[(e['url'], e['error']) for e in not_dns][:10]}")
    print(f"other schemes (excluded, not checked): {dict(exp.schemes)}")
    print(f"unverified: {len(report['unverified'])}, redirected: {len(report['redirected'])}")
    print("RESULT:", "OK" if ok else "MISMATCH")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
