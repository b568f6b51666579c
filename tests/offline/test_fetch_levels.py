"""``skitter fetch`` then ``extract`` equals ``crawl``; ``crawl --levels`` gives a plain crawl's
page set, and resumes after kill -9."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
from aiohttp import web

from skitter.export.links import read_rows
from skitter.offline.extract import ExtractOptions, extract_warcs
from tests.integration.site import crawl, html
from tests.offline.site import HOST, ROOT, ProxySite, build_site

pytestmark = pytest.mark.timeout(120)


def _rows(out: Path) -> set[tuple[object, ...]]:
    return {
        (r.source, r.target, r.fragment, r.anchor, r.kind, r.nofollow)
        for r in read_rows(out / "links.tsv")
    }


def _urls(out: Path) -> set[str]:
    return {json.loads(line)["url"] for line in (out / "pages.jsonl").read_text().splitlines()}


async def _cli(*args: str, stdin: bytes | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(stdin), 90)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_fetch_then_extract_equals_crawl(tmp_path: Path) -> None:
    site = build_site()
    await site.start()
    proxy = ["--proxy", f"http://127.0.0.1:{site.port}", "--resolve-only", "--delay", "0"]
    try:
        live = await crawl(site, tmp_path / "crawl", [ROOT], fetch_proxy=proxy[1])
        urls = "\n".join(r["url"] for r in live.records) + "\n# a comment\n"
        code, err = await _cli(
            "fetch", "--urls", "-", "--out", str(tmp_path / "f"), "-q", *proxy,
            stdin=urls.encode(),
        )  # fmt: skip
        assert code == 0, err
        code, err = await _cli("fetch", "--urls", "-", "--out", str(tmp_path / "g"), stdin=b"x\n")
        assert code == 2 and "stdin:1" in err
    finally:
        await site.close()
    assert _urls(tmp_path / "f") == _urls(tmp_path / "crawl")
    # nothing parsed: only the redirect the fetch followed is in links.tsv
    assert {r[4] for r in _rows(tmp_path / "f")} == {"redirect"}
    warcs = [str(p) for p in (tmp_path / "f").glob("*.warc.gz")]
    extract_warcs(warcs, tmp_path / "x", ExtractOptions())
    assert _rows(tmp_path / "x") == _rows(tmp_path / "crawl")


def _tree_site(gate: asyncio.Event, reached: asyncio.Event):  # type: ignore[no-untyped-def]
    """A 3-level tree: / → /l1-i (4) → /l2-i-j (3 each); /l1-2 waits for ``gate``."""
    site = ProxySite()
    kids = "".join(f'<a href="/l1-{i}">l1 {i}</a>' for i in range(4))
    site.route(HOST, "/", html(f"<!doctype html>{kids}"))
    for i in range(4):
        body = "".join(f'<a href="/l2-{i}-{j}">l2</a>' for j in range(3)) + '<a href="/">up</a>'
        handler = html(f"<!doctype html>{body}")
        if i == 2:

            async def slow(request: web.Request, h=handler) -> web.StreamResponse:  # type: ignore[no-untyped-def]
                reached.set()
                await gate.wait()
                return await h(request)

            site.route(HOST, f"/l1-{i}", slow)
        else:
            site.route(HOST, f"/l1-{i}", handler)
        for j in range(3):
            site.route(HOST, f"/l2-{i}-{j}", html('<!doctype html><a href="/l1-0">x</a>'))
    return site


@pytest.mark.slow
async def test_levels_equal_plain_crawl_and_resume_after_kill9(tmp_path: Path) -> None:
    gate, reached = asyncio.Event(), asyncio.Event()
    site = _tree_site(gate, reached)
    await site.start()
    proxy = ["--proxy", f"http://127.0.0.1:{site.port}", "--resolve-only", "--delay", "0", "-q"]
    out = tmp_path / "lv"
    try:
        gate.set()
        plain = await crawl(site, tmp_path / "plain", [ROOT], fetch_proxy=proxy[1])
        gate.clear()
        reached.clear()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skitter", "crawl", "--levels", ROOT, "--out", str(out),
            *proxy,
        )  # fmt: skip
        await asyncio.wait_for(reached.wait(), 60)  # level 1 is being fetched
        proc.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL
        assert not (out / "levels" / "0001" / "fetched").exists()
        gate.set()
        code, err = await _cli("crawl", "--resume", "--out", str(out), "-q")
        assert code == 0, err
    finally:
        gate.set()
        await site.close()
    assert _urls(out) == {r["url"] for r in plain.records} and len(_urls(out)) == 17
    report = json.loads((out / "report.json").read_text())
    assert [lv["pages"] for lv in report["levels"]] == [1, 4, 12]
    lines = (out / "pages.jsonl").read_text().splitlines()
    depth = {json.loads(x)["url"]: json.loads(x)["depth"] for x in lines}
    assert depth[ROOT] == 0 and depth[ROOT + "l1-2"] == 1 and depth[ROOT + "l2-3-2"] == 2


async def test_levels_max_pages_is_one_budget_and_a_plain_crawl_is_not_resumed_as_levels(
    tmp_path: Path,
) -> None:
    """`--levels --max-pages 7` fetches 7 pages over the levels (1 + 4 + 2), not all 17; and
    `crawl --resume --levels` of a plain crawl's folder is refused (exit 2), leaving its
    pages.jsonl and links.tsv as they were (they used to be replaced by empty files)."""
    gate, reached = asyncio.Event(), asyncio.Event()
    gate.set()
    site = _tree_site(gate, reached)
    await site.start()
    proxy = ["--proxy", f"http://127.0.0.1:{site.port}", "--resolve-only", "--delay", "0", "-q"]
    try:
        out = tmp_path / "lv"
        code, err = await _cli("crawl", "--levels", ROOT, "--max-pages", "7", "--out", str(out),
                               *proxy)  # fmt: skip
        assert code == 0, err
        report = json.loads((out / "report.json").read_text())
        assert [lv["pages"] for lv in report["levels"]] == [1, 4, 2]
        assert len(_urls(out)) == 7
        plain = tmp_path / "plain"
        code, err = await _cli("crawl", ROOT, "--out", str(plain), "--processes", "1", *proxy)
        assert code == 0, err
        before = {n: (plain / n).read_bytes() for n in ("pages.jsonl", "links.tsv")}
        code, err = await _cli("crawl", "--resume", "--levels", "--out", str(plain))
    finally:
        await site.close()
    assert code == 2
    assert err.splitlines() == [
        f"skitter: error: {plain} is not a --levels crawl; continue it with "
        f"'skitter crawl --resume --out {plain}'"
    ]
    assert {n: (plain / n).read_bytes() for n in before} == before
    assert not (plain / "levels").exists()
async def test_fetch_exit_4_when_no_url_answered(tmp_path: Path) -> None:
    """As crawl: exit 4 when no URL of the list got an HTTP response (nothing listens on the
    port; robots.txt unreachable too), 0 when one did, the cause in pages.jsonl."""
    import socket

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = f"http://dead.example.test:{port}/"
    res = ["--resolve", f"dead.example.test:{port}:127.0.0.1", "--resolve-only"]
    out = tmp_path / "f"
    rc, err = await _cli(
        "fetch", "--urls", "-", "--out", str(out), *res, "--retries", "0",
        stdin=f"{dead}\n{dead}a\n".encode(),
    )  # fmt: skip
    assert rc == 4, err
    assert err.strip().splitlines()[-1] == (
        "skitter: no URL of the list got any HTTP response "
        f"(see error and error_detail in {out / 'pages.jsonl'})"
    )
    recs = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    assert sorted(r["url"] for r in recs) == [dead, dead + "a"]
    assert all(r["status"] is None and r["error_detail"] for r in recs)
    rc, err = await _cli("fetch", "--resume", "--out", str(out))  # finished: the same verdict
    assert rc == 4, err
