"""``skitter merge DIR... --out MERGED`` end to end: real crawls of a loopback site joined,
one record per URL (the latest attempt wins), a folder cut by kill -9, a merge killed and
run again, one-line errors for bad input."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from aiohttp import web

from tests.e2e.test_cli import arun_cli, run_cli
from tests.integration.site import Site, html

A = "merge-a.example.test"
B = "merge-b.example.test"
N = 30


def build(site: Site, version: str) -> None:
    """Two hosts of N pages each; every page's body names ``version`` (a recrawl after the
    site changed gives other sha1s)."""
    for host in (A, B):
        for i in range(N):
            other = B if host == A else A
            body = (
                f"<title>{version} {i}</title><a href='/p{(i + 1) % N}.html'>next</a>"
                f"<a href='/p{(i + 7) % N}.html'>skip</a>"
                f"<a href='http://{other}:{site.port}/p{i}.html'>other</a>"
            )
            site.route(host, f"/p{i}.html", html(body))
        site.route(host, "/", html(f"<a href='/p0.html'>{version}</a>"))


def crawl_args(site: Site, out: Path, *extra: str) -> list[str]:
    return [
        "crawl",
        site.url(A, "/"),
        site.url(B, "/"),
        "--out",
        str(out),
        "--resolve",
        f"{A}:{site.port}:127.0.0.1",
        "--resolve",
        f"{B}:{site.port}:127.0.0.1",
        "--resolve-only",
        "--delay",
        "0",
        "--no-warc",
        "--quiet",
        *extra,
    ]


def records(folder: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (folder / "pages.jsonl").read_bytes().splitlines()]


def link_rows(folder: Path) -> list[str]:
    return (folder / "links.tsv").read_text().splitlines()[1:]


async def test_two_crawls_merged_latest_attempt_wins(site: Site, tmp_path: Path) -> None:
    build(site, "old")
    c1, c2 = tmp_path / "c1", tmp_path / "c2"
    code, _, err = await arun_cli(*crawl_args(site, c1, "--processes", "1"))
    assert code == 0, err
    build(site, "new")  # the site changed: the second crawl sees other bodies
    code, _, err = await arun_cli(*crawl_args(site, c2, "--processes", "1"))
    assert code == 0, err
    r1, r2 = records(c1), records(c2)
    urls = {r["url"] for r in r1}
    assert urls == {r["url"] for r in r2} and len(urls) == len(r1) == 2 * N + 2

    for order in ((c1, c2), (c2, c1)):  # fetched_at decides, not the order
        out = tmp_path / f"m-{order[0].name}"
        code, stdout, err = await arun_cli("merge", *map(str, order), "--out", str(out))
        assert code == 0, err
        assert f"{2 * N + 2} records ({2 * N + 2} earlier attempts superseded)" in stdout
        merged = records(out)
        assert sorted(merged, key=lambda r: str(r["url"])) == sorted(
            r2, key=lambda r: str(r["url"])
        )
        # the links are those of the latest fetch of each page
        assert sorted(link_rows(out)) == sorted(link_rows(c2))
        report = json.loads((out / "report.json").read_text())
        totals = report["totals"]
        assert totals["records"] == 2 * N + 2 and totals["ok"] == 2 * N + 2
        assert (
            totals["by_decision"]
            == json.loads((c2 / "report.json").read_text())["totals"]["by_decision"]
        )
        assert report["merged_from"] == [str(p.resolve()) for p in order]
        assert report["finished"] is True
        assert json.loads((out / "merged.json").read_text())["records"] == 2 * N + 2


async def test_ties_go_to_the_later_folder(tmp_path: Path) -> None:
    """Two records of one URL with the same fetched_at: the folder given later wins."""
    rec = {"url": "http://t.test/", "final_url": "http://t.test/", "status": 200, "depth": 0}
    for name, sha in (("x", "aaa"), ("y", "bbb")):
        d = tmp_path / name
        d.mkdir()
        line = json.dumps({**rec, "sha1": sha, "fetched_at": "2026-01-01T00:00:00.000Z"})
        (d / "pages.jsonl").write_text(line + "\n")
        row = f"http://t.test/\thttp://t.test/{name}\t\t{name}\ta\t0\tqueued\n"
        (d / "links.tsv").write_text(
            "source\ttarget\tfragment\tanchor\tkind\tnofollow\tdecision\n" + row
        )
    for order, sha, target in ((("x", "y"), "bbb", "y"), (("y", "x"), "aaa", "x")):
        out = tmp_path / ("m" + "".join(order))
        r = run_cli("merge", *(str(tmp_path / n) for n in order), "--out", str(out))
        assert r.returncode == 0, r.stderr
        assert [x["sha1"] for x in records(out)] == [sha]
        assert link_rows(out) == [
            f"http://t.test/\thttp://t.test/{target}\t\t{target}\ta\t0\tqueued"
        ]


@pytest.mark.slow
async def test_folder_cut_by_kill_9_and_a_killed_merge(site: Site, tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await gate.wait()  # the crawl stalls here until the test has killed it
        return web.Response(text="late", content_type="text/html")

    build(site, "v")
    site.route(A, "/p20.html", slow)
    cut = tmp_path / "cut"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "skitter",
        *crawl_args(site, cut, "--processes", "1", "--host-concurrency", "1"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        for _ in range(3000):  # bounded: 30 s for the stall to be reached
            if any(p == "/p20.html" for p in site.paths(A)):
                break
            await asyncio.sleep(0.01)
        assert "/p20.html" in site.paths(A)
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        gate.set()
    whole = records(cut)
    assert whole
    # the kill came mid-write: a partial last line in each journal
    with open(cut / "pages.jsonl", "ab") as fh:
        fh.write(b'{"url":"http://merge-a.example.test:1/torn","final_')
    with open(cut / "links.tsv", "ab") as fh:
        fh.write(b"http://merge-a.example.test/torn\thttp://x")
    other = tmp_path / "other"
    code, _, err = await arun_cli(*crawl_args(site, other, "--processes", "1"))
    assert code == 0, err

    out = tmp_path / "merged"
    code, stdout, err = await arun_cli("merge", str(cut), str(other), "--out", str(out))
    assert code == 0, err
    assert "2 journal(s) ended in a partial line, left out" in stdout
    merged = records(out)  # every line whole JSON
    urls = [r["url"] for r in merged]
    assert len(urls) == len(set(urls)) == len({r["url"] for r in whole + records(other)})
    assert not any("torn" in str(u) for u in urls)
    recorded_pages = {r["final_url"] for r in merged}
    assert {row.split("\t")[0] for row in link_rows(out)} <= recorded_pages
    expect = (out / "pages.jsonl").read_bytes(), (out / "links.tsv").read_bytes()

    # a merge killed -9 part-way: MERGED has no merged.json or whole files; a re-run works
    (out / "merged.json").unlink()
    (out / "pages.jsonl.tmp").write_bytes(b'{"url": "half')
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "skitter",
        "merge",
        str(cut),
        str(other),
        "--out",
        str(out),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    for _ in range(2000):  # bounded: until it has started writing (or finished)
        if proc.returncode is not None or (out / "links.tsv.tmp").exists():
            break
        await asyncio.sleep(0.005)
    if proc.returncode is None:
        proc.send_signal(signal.SIGKILL)
    await proc.wait()
    for name in ("pages.jsonl", "links.tsv"):  # whatever instant it died: whole files
        assert (out / name).read_bytes() in expect
    code, _, err = await arun_cli("merge", str(cut), str(other), "--out", str(out))
    assert code == 0, err
    assert ((out / "pages.jsonl").read_bytes(), (out / "links.tsv").read_bytes()) == expect
    assert (out / "merged.json").exists()
    assert not [p.name for p in out.iterdir() if p.suffix == ".tmp"]


@pytest.mark.slow
async def test_merge_of_the_shards_is_the_coordinators_output(site: Site, tmp_path: Path) -> None:
    build(site, "v")
    out = tmp_path / "sharded"
    # stopped by a limit (a finished crawl removes the shards' journals: nothing to merge)
    code, _, err = await arun_cli(*crawl_args(site, out, "--processes", "2", "--max-pages", "9"))
    assert code == 0, err
    assert json.loads((out / "report.json").read_text())["stop_reason"] == "max_pages"
    m = tmp_path / "m"
    shards = [str(out / "shards" / str(k)) for k in range(2)]
    code, _, err = await arun_cli("merge", *shards, "--out", str(m))
    assert code == 0, err
    assert sorted((m / "pages.jsonl").read_bytes().splitlines()) == sorted(
        (out / "pages.jsonl").read_bytes().splitlines()
    )
    assert sorted(link_rows(m)) == sorted(link_rows(out))
    mine = json.loads((m / "report.json").read_text())["totals"]
    theirs = json.loads((out / "report.json").read_text())["totals"]
    for key in ("records", "ok", "bytes", "by_status", "by_decision", "by_depth", "by_host"):
        assert mine[key] == theirs[key], key


def test_bad_input_one_line_errors(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    (crawl / "pages.jsonl").write_text("")
    (tmp_path / "empty").mkdir()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    cases = [
        ([str(tmp_path / "nope")], tmp_path / "o1", "no such folder"),
        ([str(tmp_path / "empty")], tmp_path / "o2", "not a crawl folder"),
        ([str(crawl)], crawl / "merged", "is inside the input folder"),
        ([str(crawl)], crawl, "is inside the input folder"),
        ([str(crawl), str(crawl)], tmp_path / "o3", "folder given twice"),
        ([str(crawl)], tmp_path / "busy", "is not the output of a merge"),
    ]
    for folders, out, message in cases:
        r = run_cli("merge", *folders, "--out", str(out))
        assert r.returncode == 2, (folders, r.stdout)
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr
    assert not (crawl / "merged").exists() and not (tmp_path / "o1").exists()
    assert os.listdir(tmp_path / "busy") == ["notes.txt"]
