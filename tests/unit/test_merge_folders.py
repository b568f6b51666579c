"""Pieces of ``skitter merge`` (:func:`skitter.merge.merge_folders`): the whole-line extent of
a journal, links whose page was recorded in another folder, report totals recounted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import skitter.merge as merge_mod
from skitter.export.links import HEADER
from skitter.merge import merge_folders, whole_lines_end


@pytest.mark.parametrize("chunk", [1, 3, 4, 1 << 20])
def test_whole_lines_end_across_read_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(merge_mod, "COPY_CHUNK_BYTES", chunk)
    p = tmp_path / "j"
    assert whole_lines_end(p) == 0  # missing
    p.write_bytes(b"")
    assert whole_lines_end(p) == 0
    p.write_bytes(b"no newline yet")
    assert whole_lines_end(p) == 0
    p.write_bytes(b"ab\ncdef\n")
    assert whole_lines_end(p) == 8
    p.write_bytes(b"ab\ncdef\nghijklmnop-torn")
    assert whole_lines_end(p) == 8


def folder(
    d: Path, recs: list[dict[str, object]], rows: list[str], report: dict[str, object]
) -> None:
    d.mkdir()
    (d / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (d / "links.tsv").write_text(HEADER + "\n" + "".join(r + "\n" for r in rows))
    (d / "report.json").write_text(json.dumps(report))


def test_links_follow_the_latest_fetch_and_totals_are_recounted(tmp_path: Path) -> None:
    a, b = "http://a.test/", "http://a.test/b"

    def r(url: str, at: str, status: int = 200, n: int = 10) -> dict[str, object]:
        return {"url": url, "final_url": url, "status": status, "depth": 0, "bytes": n,
                "fetched_at": at}  # fmt: skip

    folder(
        tmp_path / "x",
        [r(a, "2026-01-01T00:00:01.000Z"), r(b, "2026-01-01T00:00:09.000Z", 404, 3)],
        [f"{a}\t{b}\t\told\ta\t0\tqueued"],
        {"totals": {"robots_disallowed": 2, "elapsed_s": 5.0}, "finished": True,
         "robots": {"http://a.test": {"status": 200}}, "seeds": [a]},
    )  # fmt: skip
    folder(
        tmp_path / "y",
        [r(a, "2026-01-01T00:00:05.000Z")],  # a fetched again, later: its links come from y
        [f"{a}\t{b}\t\tnew\ta\t0\tseen", f"{a}\thttp://c.test/\t\tc\ta\t0\tscope"],
        {"totals": {"robots_disallowed": 1, "elapsed_s": 7.0}, "finished": False,
         "traps": {"calendar": {"limit": 5, "count": 1, "urls": [b]}}, "seeds": [a]},
    )  # fmt: skip
    out = tmp_path / "m"
    s = merge_folders([tmp_path / "x", tmp_path / "y"], out)
    assert (s.records, s.superseded, s.links, s.torn) == (2, 1, 2, 0)
    lines = (out / "pages.jsonl").read_text().splitlines()
    assert [json.loads(x)["fetched_at"] for x in lines] == [
        "2026-01-01T00:00:09.000Z",  # x's b (folder order, then file order)
        "2026-01-01T00:00:05.000Z",  # y's a
    ]
    rows = (out / "links.tsv").read_text().splitlines()
    assert rows[0] == HEADER and [x.split("\t")[3] for x in rows[1:]] == ["new", "c"]
    rep = json.loads((out / "report.json").read_text())
    t = rep["totals"]
    assert (t["records"], t["ok"], t["bytes"], t["robots_disallowed"]) == (2, 1, 13, 3)
    assert t["by_status"] == {"200": 1, "404": 1}
    assert t["by_decision"] == {"seen": 1, "scope": 1}
    assert t["by_verdict"]["excluded"] == 3 and t["elapsed_s"] == 7.0
    assert rep["finished"] is False and rep["stop_reason"] == "merged"
    assert rep["robots"] == {"http://a.test": {"status": 200}}
    assert rep["traps"]["calendar"]["count"] == 1 and rep["seeds"] == [a]


def test_damaged_lines_are_left_out_and_counted(tmp_path: Path) -> None:
    """Lines that are JSON but not a record (url not a string, depth not a number, a list)
    are left out and counted, never a traceback; the good records are all merged."""
    good = {"url": "http://a.test/", "final_url": "http://a.test/", "status": 200, "depth": 0,
            "bytes": 5, "fetched_at": "2026-01-01T00:00:01.000Z"}  # fmt: skip
    bad = [{"url": 5}, {"url": "http://a.test/x", "depth": "deep"}, [1, 2], {"url": "nope"},
           {"url": "http://a.test/y", "status": "200"}, {"url": "http://a.test/z",
           "redirects": "oops"}]  # fmt: skip
    folder(tmp_path / "x", [good, *bad], [], {})
    with (tmp_path / "x" / "pages.jsonl").open("a") as f:
        f.write("{not json\n")
    s = merge_folders([tmp_path / "x"], tmp_path / "m")
    assert (s.records, s.damaged, s.superseded) == (1, len(bad) + 1, 0)
    assert (tmp_path / "m" / "pages.jsonl").read_text() == json.dumps(good) + "\n"
    report = json.loads((tmp_path / "m" / "report.json").read_text())
    assert (report["totals"]["records"], report["totals"]["by_status"]) == (1, {"200": 1})
def test_disk_full_names_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    """A merge whose output cannot be written (injected: RLIMIT_FSIZE, EFBIG at 4 KiB) says
    one line naming the file, exits 2 and leaves no ``*.tmp`` behind."""
    import resource
    import signal
    import subprocess
    import sys

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    rec = {"url": "http://a.test/", "final_url": "http://a.test/", "status": 200, "depth": 0,
           "bytes": 1, "fetched_at": "2026-01-01T00:00:01.000Z", "pad": "x" * 3000}  # fmt: skip
    for name in ("x", "y"):
        folder(tmp_path / name, [rec, {**rec, "url": f"http://a.test/{name}"}], [], {})
    out = tmp_path / "m"
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "merge", "--out", str(out),
         str(tmp_path / "x"), str(tmp_path / "y")],
        capture_output=True, text=True, timeout=60, preexec_fn=small_files,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"skitter: error: File too large: {out / 'pages.jsonl'}\n"
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


def test_newest_fencing_token_wins_over_a_later_fetch(tmp_path: Path) -> None:
    """A worker frozen past its lease writes its page late (later fetched_at, older
    fence): the record of the newer lease (the one Redis accepted) and its links win."""
    a, b = "http://a.test/", "http://a.test/b"

    def r(url: str, at: str, fence: int | None) -> dict[str, object]:
        rec: dict[str, object] = {"url": url, "final_url": url, "status": 200, "depth": 0,
                                  "bytes": 5, "fetched_at": at}  # fmt: skip
        if fence is not None:
            rec["fence"] = fence
        return rec

    folder(
        tmp_path / "frozen",
        [r(a, "2026-01-01T00:00:09.000Z", 1000), r(b, "2026-01-01T00:00:09.500Z", 3000)],
        [f"{a}\thttp://a.test/late\t\tlate\ta\t0\tqueued"],
        {},
    )
    folder(
        tmp_path / "other",
        [r(a, "2026-01-01T00:00:05.000Z", 2000), r(b, "2026-01-01T00:00:01.000Z", None)],
        [f"{a}\thttp://a.test/ok\t\tok\ta\t0\tqueued"],
        {},
    )
    s = merge_folders([tmp_path / "frozen", tmp_path / "other"], tmp_path / "m")
    got = [json.loads(x) for x in (tmp_path / "m" / "pages.jsonl").read_text().splitlines()]
    assert {g["url"]: g["fence"] for g in got} == {a: 2000, b: 3000}  # fenced beats unfenced
    assert (s.records, s.superseded, s.stale_leases) == (2, 2, 1)
    rows = (tmp_path / "m" / "links.tsv").read_text().splitlines()[1:]
    assert rows == [f"{a}\thttp://a.test/ok\t\tok\ta\t0\tqueued"]
    stamp = json.loads((tmp_path / "m" / "merged.json").read_text())
    assert stamp["stale_leases"] == 1


def test_zstd_inputs_give_a_zstd_merge_and_plain_ones_a_plain_one(tmp_path: Path) -> None:
    """Regression: merge wrote a plain links.tsv even from links.tsv.zst folders."""
    from skitter.export.linkfile import compress_links, frame_ends, iter_lines

    a, b = "http://a.test/", "http://b.test/"
    rec = {"url": a, "final_url": a, "status": 200, "depth": 0, "bytes": 1,
           "fetched_at": "2026-01-01T00:00:01.000Z"}  # fmt: skip
    rec_b = {**rec, "url": b, "final_url": b}
    folder(tmp_path / "x", [rec], [f"{a}\t{b}\t\tto b\ta\t0\tqueued"], {"totals": {}})
    folder(tmp_path / "y", [rec_b], [f"{b}\t{a}\t\tto a\ta\t0\tseen"], {"totals": {}})
    compress_links(tmp_path / "x" / "links.tsv")  # x: links.tsv.zst, y: links.tsv
    out = tmp_path / "m"
    s = merge_folders([tmp_path / "x", tmp_path / "y"], out)
    zst = out / "links.tsv.zst"
    assert s.links == 2 and zst.exists() and not (out / "links.tsv").exists()
    ends, size = frame_ends(zst)
    assert len(ends) == 2 and ends[-1] == size  # the header frame, then the rows' frame
    lines = [line.decode() for _, line in iter_lines(zst, 0, size)]
    assert lines == [HEADER + "\n", f"{a}\t{b}\t\tto b\ta\t0\tqueued\n",
                     f"{b}\t{a}\t\tto a\ta\t0\tseen\n"]  # fmt: skip
    # the same MERGED again from plain folders only: links.tsv, and the old .zst is gone
    merge_folders([tmp_path / "y"], out)
    assert not zst.exists()
    assert (out / "links.tsv").read_text().splitlines() == [HEADER, f"{b}\t{a}\t\tto a\ta\t0\tseen"]
