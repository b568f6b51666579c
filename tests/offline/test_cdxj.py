"""CDXJ indexes: lines equal cdxj-indexer's; written beside the crawl's WARCs on rotation and
close, completed on resume; ``skitter index`` on other WARCs."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from cdxj_indexer.main import CDXJIndexer

from skitter.export.warc import RecordWritten, WarcRevisit, WarcWriter
from skitter.models import Response
from skitter.offline.cdxj import CrawlIndexer, cdxj_path_for, index_lines, index_missing
from skitter.offline.reader import Damage
from tests.cases.test_c41_offline_extract import _write_warcs
from tests.integration.site import crawl
from tests.offline.site import ROOT, build_site

pytestmark = pytest.mark.timeout(90)


def _theirs(path: Path) -> list[str]:
    out = io.StringIO()
    CDXJIndexer(output=out, inputs=[str(path)], records="response,revisit,resource").process_all()
    return sorted(line + "\n" for line in out.getvalue().splitlines())


def _mine(path: Path) -> list[str]:
    damage: list[Damage] = []
    lines = index_lines(str(path), damage.append)
    assert damage == []
    return lines


# cdxj-indexer leaves a temporary file unclosed when it computes a missing digest
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_lines_equal_cdxj_indexer_on_other_tools_warcs(tmp_path: Path) -> None:
    warcs = _write_warcs(tmp_path)
    for name in ("wget", "enc"):
        mine = _mine(warcs[name])
        assert mine == _theirs(warcs[name]), name
    enc = _mine(warcs["enc"])
    assert len(enc) == 7
    assert any('"mime": "warc/revisit"' in line for line in enc)
    assert enc == sorted(enc)
    assert all(line.startswith("test,example)/") for line in enc)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_damaged_parts_bound_the_lengths(tmp_path: Path) -> None:
    warcs = _write_warcs(tmp_path)
    starts = json.loads((tmp_path / "damaged.offsets").read_text())
    damage: list[Damage] = []
    lines = index_lines(str(warcs["damaged"]), damage.append)
    assert [d.offset for d in damage] == [starts[3], starts[6]]
    got = {int(json.loads(x.split(" ", 2)[2])["offset"]): x for x in lines}
    assert sorted(got) == [starts[i] for i in (0, 1, 2, 4, 5)]
    for i in (0, 1, 2, 4, 5):  # each record's length ends where the next member starts
        assert json.loads(got[starts[i]].split(" ", 2)[2])["length"] == str(
            starts[i + 1] - starts[i]
        )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_whole_file_gzip_refused_with_a_message(tmp_path: Path) -> None:
    warcs = _write_warcs(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "index", str(warcs["whole"])],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "whole-file gzip" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "index", str(warcs["enc"]), str(warcs["wget"])],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "encodings.cdxj").read_text().splitlines(keepends=True) == _theirs(
        warcs["enc"]
    )
    assert (tmp_path / "wget-style.cdxj").exists()


async def test_crawl_writes_cdxj_on_rotation_close_and_resume(tmp_path: Path) -> None:
    site = build_site()
    await site.start()
    out = tmp_path / "crawl"
    proxy = f"http://127.0.0.1:{site.port}"
    try:
        await crawl(site, out, [ROOT], fetch_proxy=proxy, warc_max_bytes=1500)
        warcs = sorted(out.rglob("*.warc.gz"))
        assert len(warcs) >= 3  # rotated
        lines = 0
        for w in warcs:
            cdxj = Path(cdxj_path_for(str(w)))
            assert cdxj.read_text().splitlines(keepends=True) == _theirs(w)
            lines += len(_theirs(w))
        assert lines >= 9  # robots.txt + the site's pages
        # a crawl killed before closing its file leaves it unindexed: resume completes it
        os.remove(cdxj_path_for(str(warcs[-1])))
        await crawl(site, out, [ROOT], fetch_proxy=proxy, warc_max_bytes=1500, resume=True)
    finally:
        await site.close()
    assert Path(cdxj_path_for(str(warcs[-1]))).read_text().splitlines(keepends=True) == _theirs(
        warcs[-1]
    )
    assert index_missing(str(warcs[0].parent), "nothing-here") == []


def _exchanges(w: WarcWriter) -> None:
    """Responses of every shape the crawl writes: gzip-encoded and plain bodies (small and
    large), a raw head with bare LF line ends and a repeated Content-Type, an empty body,
    revisits with and without a payload."""
    big = b"<html>" + b"<p>plain text that deflates well</p>" * 3000 + b"</html>"
    gz = gzip.compress(big)
    w.write_exchange(
        "http://a.test/gz",
        Response(
            "http://a.test/gz",
            200,
            "OK",
            (("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip")),
            big,
            gz,
        ),
        fetched_at=1714564800.25,
    )
    w.write_exchange(
        "http://a.test/big",
        Response("http://a.test/big", 200, "OK", (("Content-Type", "text/html"),), big, big),
        fetched_at=1714564801.0,
    )
    head = b"HTTP/1.1 404 Not Found\nContent-Type: text/plain\nContent-Type: text/html\n\n"
    w.write_exchange(
        "http://a.test/lf",
        Response(
            "http://a.test/lf", 404, "Not Found", (), b"x\r\n\r\ny", b"x\r\n\r\ny", raw_head=head
        ),
        fetched_at=1714564802.0,
    )
    w.write_exchange(
        "http://a.test/empty",
        Response("http://a.test/empty", 204, "No Content", ()),
        fetched_at=1714564803.0,
    )
    w.write_exchange(
        "http://a.test/copy",
        Response("http://a.test/copy", 200, "OK", (("Content-Type", "text/html"),), big, big),
        fetched_at=1714564804.0,
        revisit=WarcRevisit(
            "identical-payload-digest", "http://a.test/big", "2024-05-01T12:00:01Z"
        ),
    )
    w.write_exchange(
        "http://a.test/nm",
        Response("http://a.test/nm", 304, "Not Modified", (("ETag", '"v1"'),)),
        fetched_at=1714564805.0,
        revisit=WarcRevisit("server-not-modified", "http://a.test/nm", "2024-04-01T00:00:00Z"),
    )


@pytest.mark.parametrize("max_bytes", [1 << 30, 1])  # one file; rotated after each exchange
@pytest.mark.parametrize("run_lines", [4096, 1, 2, 4])  # all in memory; spooled in sorted runs
def test_index_made_while_writing_equals_the_index_read_back(
    tmp_path: Path, max_bytes: int, run_lines: int
) -> None:
    indexer = CrawlIndexer(run_lines=run_lines)
    w = WarcWriter(tmp_path, max_bytes=max_bytes, on_file_done=indexer, on_record=indexer.on_record)
    _exchanges(w)
    w.close()
    # the spool files are unnamed: only the WARC files and their indexes are in the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        n for f in w.files for n in (Path(f).name, Path(cdxj_path_for(f)).name)
    )
    assert len(w.files) == (1 if max_bytes > 1 else 6)
    total = 0
    for path in w.files:
        written = Path(cdxj_path_for(path)).read_text().splitlines(keepends=True)
        assert written == _mine(Path(path))
        total += len(written)
    assert total == 6  # every response and revisit


KILLED_SCRIPT = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from skitter.export.warc import WarcWriter
from skitter.offline.cdxj import CrawlIndexer
from tests.offline.test_cdxj import _exchanges
indexer = CrawlIndexer(run_lines=2)
w = WarcWriter(sys.argv[1], on_file_done=indexer, on_record=indexer.on_record)
_exchanges(w)
w.sync()
os.kill(os.getpid(), signal.SIGKILL)  # with 3 runs spooled and the file open
"""


def test_a_crawl_killed_with_a_spooled_index_leaves_no_spool_and_resume_indexes(
    tmp_path: Path,
) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", KILLED_SCRIPT, str(tmp_path), str(root)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == -9, done.stderr
    [warc] = [p for p in tmp_path.iterdir()]  # no index yet, no spool left behind
    assert warc.name.endswith(".warc.gz")
    assert index_missing(str(tmp_path), warc.name.split("-2")[0]) == [cdxj_path_for(str(warc))]
    written = Path(cdxj_path_for(str(warc))).read_text().splitlines(keepends=True)
    assert len(written) == 6 and written == _mine(warc)


def test_a_record_that_cannot_be_indexed_makes_its_file_read_back(tmp_path: Path) -> None:
    indexer = CrawlIndexer()

    def on_record(path: str, rec: RecordWritten) -> None:
        if rec.target_uri.endswith("/lf"):
            rec = replace(rec, block=None)  # type: ignore[arg-type]  # indexing it raises
        indexer.on_record(path, rec)

    w = WarcWriter(tmp_path, on_file_done=indexer, on_record=on_record)
    _exchanges(w)
    w.close()
    [path] = w.files
    written = Path(cdxj_path_for(path)).read_text().splitlines(keepends=True)
    assert len(written) == 6
    assert written == _mine(Path(path))


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_index_made_while_writing_equals_cdxj_indexers(tmp_path: Path) -> None:
    """The hook's lines (fast SURT keys, JSON built by hand) are cdxj-indexer's."""
    indexer = CrawlIndexer()
    w = WarcWriter(tmp_path, on_file_done=indexer, on_record=indexer.on_record)
    _exchanges(w)
    w.write_exchange(
        "http://www.A.test:8080/Q/x/?b=1&a=%22%C3%A9",
        Response("http://a.test/", 200, "OK", (("Content-Type", 'text/"x"; q=1'),), b"b", b"b"),
        fetched_at=1714564806.5,
    )
    w.close()
    [path] = w.files
    written = Path(cdxj_path_for(path)).read_text().splitlines(keepends=True)
    # (a 304 revisit without payload digest: cdxj-indexer gives no digest, we the empty one's)
    nm = "test,a)/nm "
    assert [x for x in written if not x.startswith(nm)] == [
        x for x in _theirs(Path(path)) if not x.startswith(nm)
    ]
    assert len(written) == 7
    assert any(line.startswith('test,a:8080)/q/x?a="%c3%a9&b=1 2024') for line in written)


def test_line_is_json_dumps_and_timestamp_the_date_digits() -> None:
    from skitter.offline.cdxj import _line, _timestamp

    index = {"url": 'http://a/"\\\x01é\u2028', "mime": "t/h", "status": "200", "digest": "d"}
    index |= {"offset": "12", "filename": "f é.warc.gz"}
    for keys in (("url",), ("url", "mime"), ("url", "status", "digest")):
        ordered = {k: index[k] for k in keys} | {"length": "5"}
        ordered |= {"offset": "12", "filename": "f é.warc.gz"}
        part = {k: v for k, v in index.items() if k in keys or k in ("offset", "filename")}
        assert _line("k 1", part, 5) == "k 1 " + json.dumps(ordered) + "\n"
    for date in ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00.250000Z", "2024-13-01T25:00:00Z"):
        assert _timestamp(date) == "".join(c for c in date if c.isdigit())[:14]
    assert _timestamp("2024-05-01T12:00:00+02:00") == "20240501100000"
