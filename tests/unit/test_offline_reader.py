"""The offline WARC reader: framing kinds, damage read past with the right offsets."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from skitter.errors import ConfigError
from skitter.offline.extract import ExtractOptions, extract_warcs
from skitter.offline.payload import dechunk, looks_chunked
from skitter.offline.reader import Damage, WarcReader
from tests.offline.warcs import chunk, record, response

pytestmark = pytest.mark.timeout(30)

HTML = [("Content-Type", "text/html")]


def _recs(n: int) -> list[bytes]:
    return [
        response(f"http://a.test/{i}", f'<a href="/{i + 1}">next</a>'.encode(), HTML)
        for i in range(n)
    ]


def _read(data: bytes) -> tuple[list[str], list[Damage], list[int]]:
    damage: list[Damage] = []
    recs = list(WarcReader(io.BytesIO(data), damage.append))
    return [r.target_uri for r in recs], damage, [r.offset for r in recs]


def test_uncompressed_offsets_and_bad_header_resync() -> None:
    recs = _recs(3)
    bad = recs[1].replace(b"WARC/1.1", b"WARX/1.1", 1)
    urls, damage, offsets = _read(recs[0] + bad + recs[2])
    assert urls == ["http://a.test/0", "http://a.test/2"]
    assert offsets == [0, len(recs[0]) + len(bad)]
    assert damage == [Damage(len(recs[0]), damage[0].reason)]
    assert "version line" in damage[0].reason


def test_corrupt_deflate_member_skipped_to_next_member() -> None:
    members = [gzip.compress(r) for r in _recs(3)]
    broken = bytearray(members[1])
    broken[12:40] = b"\xff" * 28  # deflate data garbled
    data = members[0] + bytes(broken) + members[2]
    urls, damage, offsets = _read(data)
    assert urls == ["http://a.test/0", "http://a.test/2"]
    assert offsets == [0, len(members[0]) + len(broken)]
    assert [d.offset for d in damage] == [len(members[0])]


def test_truncated_whole_file_gzip_ends_with_a_report() -> None:
    data = gzip.compress(b"".join(_recs(50)))
    urls, damage, _ = _read(data[: len(data) - 40])
    assert 40 <= len(urls) < 50
    assert len(damage) == 1 and damage[0].offset == 0 and "cut short" in damage[0].reason


def test_trailing_garbage_reported_once() -> None:
    members = [gzip.compress(r) for r in _recs(2)]
    urls, damage, _ = _read(b"".join(members) + b"not gzip at all")
    assert len(urls) == 2
    assert [d.offset for d in damage] == [sum(map(len, members))]


def test_kept_bytes_bounded_and_rest_counted() -> None:
    big = response("http://a.test/big", b"x" * 100_000, HTML)
    recs = list(WarcReader(io.BytesIO(gzip.compress(big)), lambda d: None, keep_bytes=1000))
    assert len(recs[0].block) == 1000 and recs[0].dropped == recs[0].content_length - 1000


def test_dechunk_only_when_chunked() -> None:
    assert looks_chunked(chunk(b"hello world")) and not looks_chunked(b"<html>")
    assert dechunk(chunk(b"hello world", 3)) == (b"hello world", True)
    assert dechunk(b"5\r\nhel") == (b"hel", False)


def test_several_files_two_processes(tmp_path: Path) -> None:
    paths = []
    for i in range(3):
        p = tmp_path / f"{i}.warc.gz"
        p.write_bytes(b"".join(gzip.compress(r) for r in _recs(5 + i)))
        paths.append(str(p))
    plain = tmp_path / "plain.warc"
    plain.write_bytes(record("warcinfo", None, b"software: x\r\n") + _recs(1)[0])
    paths.append(str(plain))
    res = extract_warcs(paths, tmp_path / "out", ExtractOptions(jobs=2))
    assert (res.files, res.pages, res.skipped) == (4, 5 + 6 + 7 + 1, [])
    lines = (tmp_path / "out" / "links.tsv").read_text().splitlines()
    assert len(lines) == 1 + res.links == 1 + 19
    # file order is kept: the rows of 0.warc.gz come first
    assert lines[1].startswith("http://a.test/0\thttp://a.test/1\t")


def test_heritrix_dns_and_metadata_records_are_not_pages(tmp_path: Path) -> None:
    warc = tmp_path / "heritrix.warc.gz"
    recs = [
        record("warcinfo", None, b"software: Heritrix/3.4\r\n", version="WARC/1.0"),
        record(
            "response",
            "dns:a.test",
            b"20240501120000\na.test.\t300\tIN\tA\t10.0.0.1\n",
            version="WARC/1.0",
            content_type="text/dns",
        ),
        response("http://a.test/", b'<a href="/x">x</a>', HTML, version="WARC/1.0"),
        record(
            "metadata",
            "http://a.test/",
            b"outlink: http://a.test/x L a/@href\r\n",
            version="WARC/1.0",
            content_type="application/warc-fields",
        ),
    ]
    warc.write_bytes(b"".join(gzip.compress(r) for r in recs))
    res = extract_warcs([str(warc)], tmp_path / "out", ExtractOptions())
    assert (res.records, res.pages, res.links, res.skipped) == (4, 1, 1, [])


def _lying_length(rec: bytes, length: int) -> bytes:
    head, sep, rest = rec.partition(b"\r\n\r\n")
    lines = [
        b"Content-Length: %d" % length if ln.lower().startswith(b"content-length:") else ln
        for ln in head.split(b"\r\n")
    ]
    return b"\r\n".join(lines) + sep + rest


@pytest.mark.parametrize("gz", [False, True])
def test_content_length_past_the_record_loses_only_that_record(gz: bool) -> None:
    """A Content-Length far too large (a gzip member per record, or an uncompressed file)
    is reported and the records after it are still read, not swallowed as its block."""
    recs = _recs(5)
    recs[1] = _lying_length(recs[1], 10**12)
    parts = [gzip.compress(r) for r in recs] if gz else recs
    urls, damage, offsets = _read(b"".join(parts))
    assert urls == ["http://a.test/0", "http://a.test/2", "http://a.test/3", "http://a.test/4"]
    assert offsets[1] == len(parts[0]) + len(parts[1])
    assert [d.offset for d in damage] == [len(parts[0])]
    assert "cut short" in damage[0].reason


def test_content_length_past_the_end_of_the_last_record_ends_the_file() -> None:
    recs = _recs(3)
    recs[2] = _lying_length(recs[2], 10**6)
    urls, damage, _ = _read(b"".join(recs))
    assert urls == ["http://a.test/0", "http://a.test/1"]
    assert [d.offset for d in damage] == [len(recs[0]) + len(recs[1])]


def test_resync_scan_over_a_large_uncompressed_gap_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Scanning for the next ``WARC/1.`` line after a bad header drops what it has scanned
    (the buffer stays near the read size) and still finds a line that straddles reads."""
    import skitter.offline.reader as reader_mod

    monkeypatch.setattr(reader_mod, "_READ_BYTES", 1000)
    recs = _recs(2)
    gap = b"WARX/1.1\r\n" + b"x" * 20_000 + b"\r\n"
    data = recs[0] + gap + recs[1]
    seen: list[int] = []
    real_more = reader_mod._Source.more

    def more(self: reader_mod._Source) -> bool:
        seen.append(len(self.buf))
        return real_more(self)

    monkeypatch.setattr(reader_mod._Source, "more", more)
    urls, damage, offsets = _read(data)
    assert urls == ["http://a.test/0", "http://a.test/1"]
    assert offsets == [0, len(recs[0]) + len(gap)]
    assert len(damage) == 1
    assert max(seen) < 3000


def test_extract_refuses_a_warc_given_twice_and_a_crawl_folder_as_out(tmp_path: Path) -> None:
    """`extract X X` would write every page twice; `extract X --out CRAWL` would replace the
    crawl's own pages.jsonl, links.tsv and report.json: both are refused before any work."""
    warc = tmp_path / "a.warc.gz"
    warc.write_bytes(b"".join(gzip.compress(r) for r in _recs(2)))
    with pytest.raises(ConfigError, match="given twice"):
        extract_warcs([str(warc), str(tmp_path / "." / "a.warc.gz")], tmp_path / "x",
                      ExtractOptions())  # fmt: skip
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    (crawl / "state.json").write_text("{}")
    (crawl / "pages.jsonl").write_text("kept\n")
    with pytest.raises(ConfigError, match=r"holds a crawl or merge \(state.json\)"):
        extract_warcs([str(warc)], crawl, ExtractOptions())
    assert (crawl / "pages.jsonl").read_text() == "kept\n"
    assert sorted(p.name for p in crawl.iterdir()) == ["pages.jsonl", "state.json"]
    res = extract_warcs([str(warc)], tmp_path / "x", ExtractOptions())
    assert res.pages == 2
    res = extract_warcs([str(warc)], tmp_path / "x", ExtractOptions())  # its own output: again
    assert len((tmp_path / "x" / "pages.jsonl").read_text().splitlines()) == 2
