"""``--links-compress zstd`` end to end: links.tsv.zst holds the same rows as links.tsv, a kill -9
(and a torn last frame) then --resume gives the same pages and rows, merge / report / graph /
--processes 2 read it, and a resume with another setting is refused."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from skitter.export.linkfile import frame_ends, open_links
from skitter.report import read_output
from skitter.report.data import merged_decisions
from tests.e2e.test_cli import arun_cli
from tests.e2e.test_kill_resume import H, build_site, records, wait_records
from tests.integration.site import Site
from tests.unit.test_links_zstd import FRAME_HEAD, raw_block


def rows(out: Path) -> Counter[str]:
    """The rows of a folder's links file (either format) without the decision column (which
    page first queues a URL depends on timing), as a multiset: a duplicate row shows."""
    with open_links(out) as f:
        lines = f.read().decode().splitlines()
    assert lines[0].startswith("source\t")
    return Counter(r.rsplit("\t", 1)[0] for r in lines[1:])


def args(site: Site, out: Path, *extra: str) -> list[str]:
    return [
        "crawl",
        site.url(H, "/"),
        "--out",
        str(out),
        "--resolve",
        f"{H}:{site.port}:127.0.0.1",
        "--resolve-only",
        "--delay",
        "0",
        "--host-concurrency",
        "4",
        "--no-warc",
        "--quiet",
        *extra,
    ]


async def crawl(site: Site, out: Path, *extra: str) -> None:
    code, _, err = await arun_cli(*args(site, out, *extra), timeout=120)
    assert code == 0, err


@pytest.mark.slow
async def test_zstd_crawl_same_rows_and_readers(site: Site, tmp_path: Path) -> None:
    build_site(site)
    ref, z, z2 = tmp_path / "ref", tmp_path / "z", tmp_path / "z2"
    await crawl(site, ref)
    await crawl(site, z, "--links-compress", "zstd", "--processes", "1")  # the writer's file
    assert not (z / "links.tsv").exists()
    zst = z / "links.tsv.zst"
    # a finished crawl: complete frames only, readable by any zstd tool
    ends, size = frame_ends(zst)
    assert ends and ends[-1] == size
    assert rows(z) == rows(ref)
    assert sum(rows(ref).values()) > 3000
    assert {r["url"] for r in records(z)} == {r["url"] for r in records(ref)}
    # report: same link decisions; graph: same edges
    for d in (ref, z):
        code, _, err = await arun_cli("report", "--quiet", str(d))
        assert code == 0, err
    rep_ref = (ref / "metrics.prom").read_text()
    rep_z = (z / "metrics.prom").read_text()

    def decisions(text: str) -> list[str]:
        return sorted(x for x in text.splitlines() if x.startswith("skitter_link_decisions"))

    assert decisions(rep_z) == decisions(rep_ref) and decisions(rep_z)
    g_ref, g_z = (await arun_cli("graph", str(ref)))[1], (await arun_cli("graph", str(z)))[1]
    assert g_z.splitlines()[1:] and sorted(g_z.splitlines()) == sorted(g_ref.splitlines())
    # skitter merge of a zstd folder (and a plain one): the rows of both, once each
    merged = tmp_path / "merged"
    code, _, err = await arun_cli("merge", str(z), "--out", str(merged))
    assert code == 0, err
    assert rows(merged) == rows(ref)
    assert not (merged / "links.tsv").exists()  # zstd in, zstd out: complete frames
    ends, size = frame_ends(merged / "links.tsv.zst")
    assert ends[-1] == size
    # --processes 2: the shards' frames copied into OUT/links.tsv.zst
    await crawl(site, z2, "--links-compress", "zstd", "--processes", "2")
    assert rows(z2) == rows(ref)
    ends, size = frame_ends(z2 / "links.tsv.zst")
    assert ends[-1] == size
    # the report's decision counts come from merge.json: those of the rows in the file
    with open_links(z2) as f:
        decisions = Counter(r.rsplit("\t", 1)[1] for r in f.read().decode().splitlines()[1:])
    assert sum(decisions.values()) == sum(rows(z2).values()) > 0
    known = merged_decisions(z2, z2 / "links.tsv.zst")
    assert known == Counter({k.encode(): n for k, n in decisions.items()})
    assert read_output(z2).by_decision == decisions


def recorded_urls(out: Path) -> set[str]:
    """url and final_url of every whole record of pages.jsonl (a kill may leave a torn line)."""
    with open(out / "pages.jsonl", "rb") as f:
        recs = [json.loads(x) for x in f if x.endswith(b"\n")]
    return {r["url"] for r in recs} | {r["final_url"] for r in recs}


@pytest.mark.slow
async def test_zstd_kill_9_torn_frame_then_resume(site: Site, tmp_path: Path) -> None:
    build_site(site)
    ref, out = tmp_path / "ref", tmp_path / "out"
    await crawl(site, ref)
    expected = {r["url"] for r in records(ref)}
    zst = out / "links.tsv.zst"
    for k in range(2):  # a zstd crawl killed mid-way, twice
        argv = ["crawl", "--resume", "--out", str(out), "--quiet"] if k else args(site, out)
        if not k:
            # one process: OUT/links.tsv.zst is the writer's journal (with more, it is the
            # merger's copy, cut back to merge.json on resume) and pages.jsonl grows per page
            argv += ["--links-compress", "zstd", "--processes", "1"]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skitter", *argv, stdout=asyncio.subprocess.DEVNULL
        )
        await wait_records(out, 60 + 120 * k, proc)
        # killed mid-crawl (a finished crawl's resume touches no file: nothing tested then)
        assert proc.returncode is None, "the crawl ended before its kill"
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    # a torn frame more (after a whole frame, or inside the frame the kill left open): a whole
    # block of rows of a page that has no record (kept by the repair, cut by the resume),
    # then a block cut short repeating real rows (cut by the repair: they would show twice).
    # Only the last page can lack a record (its rows and record are written together): if
    # the kill came between them, the injected rows are more rows of that page.
    ends, size = frame_ends(zst)
    with open_links(zst) as f:
        lines = f.readlines()
    last = lines[-1].split(b"\t", 1)[0].decode()
    source = "http://never.example.test/x" if last in recorded_urls(out) else last
    fake = f"{source}\thttp://never.example.test/y\t\t\ta\t0\tqueued\n" * 50
    dup = b"".join(lines[-50:])
    torn = raw_block(fake.encode()) + raw_block(dup)[: len(dup) // 2]
    with open(zst, "ab") as f:
        f.write((FRAME_HEAD if ends[-1] == size else b"") + torn)
    code, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--quiet", timeout=120)
    assert code == 0, err
    urls = [r["url"] for r in records(out)]
    assert len(urls) == len(set(urls)), "a URL was recorded twice"
    assert set(urls) == expected
    assert rows(out) == rows(ref)  # no row lost, none twice, none of the torn frame
    ends, size = frame_ends(zst)
    assert ends[-1] == size
    report = json.loads((out / "report.json").read_text())
    assert report["finished"] is True and report["totals"]["records"] == len(expected)
    assert not (out / "shards").exists()  # one process: the journals are OUT's own


async def test_resume_with_another_links_compress_is_refused(site: Site, tmp_path: Path) -> None:
    build_site(site)
    out = tmp_path / "out"
    await crawl(site, out, "--links-compress", "zstd", "--max-pages", "5")
    for value in ("none",):
        code, _, err = await arun_cli(
            "crawl", "--resume", "--out", str(out), "--links-compress", value
        )
        assert code == 2
        assert len(err.strip().splitlines()) == 1
        assert "--links-compress differs" in err


@pytest.mark.slow
async def test_levels_write_links_tsv_zst(tmp_path: Path) -> None:
    from tests.offline.test_fetch_levels import ROOT, _cli, _tree_site

    gate, reached = asyncio.Event(), asyncio.Event()
    gate.set()
    site = _tree_site(gate, reached)
    await site.start()
    proxy = ["--proxy", f"http://127.0.0.1:{site.port}", "--resolve-only", "--delay", "0", "-q"]
    try:
        for name, extra in (("plain", []), ("z", ["--links-compress", "zstd"])):
            out = str(tmp_path / name)
            code, err = await _cli("crawl", "--levels", ROOT, "--out", out, *proxy, *extra)
            assert code == 0, err
    finally:
        await site.close()
    assert not (tmp_path / "z" / "links.tsv").exists()
    assert rows(tmp_path / "z") == rows(tmp_path / "plain") and len(rows(tmp_path / "z")) > 10
    # skitter extract of the same WARCs: links.tsv.zst, then links.tsv again (the old .zst gone)
    warcs = sorted(str(w) for w in (tmp_path / "z").glob("levels/*/*.warc.gz"))
    x = tmp_path / "x"
    for extra in (["--links-compress", "zstd"], []):
        code, _, err = await arun_cli("extract", *warcs, "--out", str(x), *extra)
        assert code == 0, err
        assert (x / "links.tsv.zst").exists() == bool(extra) != (x / "links.tsv").exists()
        assert rows(x) == rows(tmp_path / "plain")
