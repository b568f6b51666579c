"""PagesWriter: exact pages.jsonl lines, crash repair, tolerant reading."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from skitter.export.pages import PAGE_KEYS, PageRecord, PagesWriter, iso_utc, read_records
from skitter.models import Hop


def record(url: str = "https://example.test/a", **kw: object) -> PageRecord:
    fields: dict[str, object] = {
        "url": url,
        "final_url": "https://example.test/b",
        "status": 200,
        "depth": 1,
        "content_type": "text/html",
        "bytes": 5120,
        "sha1": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        "fetched_at": "2024-05-01T12:00:00.123Z",
        "elapsed_s": 0.23149,
        "attempts": 1,
        "redirects": [Hop("https://example.test/a", 301)],
        "error": None,
        "error_detail": None,
    }
    fields.update(kw)
    return PageRecord(**fields)  # type: ignore[arg-type]


def test_exact_line(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    with PagesWriter(path) as w:
        n = w.write(record())
    data = path.read_bytes()
    assert n == len(data)
    assert data == (
        b'{"url":"https://example.test/a","final_url":"https://example.test/b","status":200,'
        b'"depth":1,"content_type":"text/html","bytes":5120,'
        b'"sha1":"da39a3ee5e6b4b0d3255bfef95601890afd80709",'
        b'"fetched_at":"2024-05-01T12:00:00.123Z","elapsed_s":0.231,"attempts":1,'
        b'"redirects":[{"url":"https://example.test/a","status":301}],'
        b'"error":null,"error_detail":null}\n'
    )


def test_key_order_and_error_record(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    with PagesWriter(path) as w:
        w.write(
            record(
                status=None,
                content_type=None,
                bytes=0,
                sha1=None,
                redirects=[],
                error="timeout",
                error_detail="read timeout after 20.0 s",
                elapsed_s=20.0004,
                attempts=3,
            )
        )
    pairs = json.loads(path.read_bytes(), object_pairs_hook=lambda kv: kv)
    assert tuple(k for k, _ in pairs) == PAGE_KEYS
    values = dict(pairs)
    assert values["status"] is None and values["sha1"] is None
    assert values["redirects"] == [] and values["error"] == "timeout"
    assert values["elapsed_s"] == 20.0 and values["attempts"] == 3


def test_non_ascii_kept_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    url = "https://bücher.example/straße?q=日本"
    with PagesWriter(path) as w:
        w.write(record(url=url, error_detail="café ☕"))
    data = path.read_bytes()
    assert url.encode("utf-8") in data
    assert b"\\u" not in data
    assert data.count(b"\n") == 1
    (obj,) = read_records(path)
    assert obj["url"] == url and obj["error_detail"] == "café ☕"


def test_newlines_and_lone_surrogates_stay_one_line(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    with PagesWriter(path) as w:
        w.write(record(error_detail="line1\nline2\r\u2028"))
        w.write(record(error_detail="bad \udc80 surrogate"))
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 3 and lines[2] == b""
    objs = list(read_records(path, strict=True))
    assert objs[0]["error_detail"] == "line1\nline2\r\u2028"
    assert objs[1]["error_detail"] == "bad \udc80 surrogate"


def test_non_finite_elapsed_rejected(tmp_path: Path) -> None:
    with PagesWriter(tmp_path / "p.jsonl") as w, pytest.raises(ValueError):
        w.write(record(elapsed_s=float("nan")))
    assert (tmp_path / "p.jsonl").read_bytes() == b""


def test_iso_utc() -> None:
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"
    assert iso_utc(1714564800.1234) == "2024-05-01T12:00:00.123Z"
    assert iso_utc(1714564800.9999) == "2024-05-01T12:00:00.999Z"
    # the same text as the strftime spelling it replaced (milliseconds truncated, never rounded)
    import random
    from datetime import UTC, datetime

    rng = random.Random(16)
    for t in [0.0, 0.0005, 59.9996, 951782399.9999] + [rng.uniform(0, 4e9) for _ in range(2000)]:
        dt = datetime.fromtimestamp(t, tz=UTC)
        assert iso_utc(t) == dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def test_lines_are_json_dumps_of_the_record(tmp_path: Path) -> None:
    """pages.jsonl lines are ``json.dumps`` with the compact options, non-ASCII kept, lone
    surrogates escaped (one shared encoder, not one per record)."""
    import json

    for url in ("http://a.test/ü€😀", "http://a.test/\udc80"):
        rec = record(url=url, final_url=url, etag='W/"x"')
        with PagesWriter(tmp_path / f"{len(url)}.jsonl") as w:
            w.write(rec)
        line = (tmp_path / f"{len(url)}.jsonl").read_bytes()
        opts: dict[str, object] = {"separators": (",", ":")}
        try:
            want = json.dumps(rec.to_dict(), ensure_ascii=False, **opts).encode() + b"\n"
        except UnicodeEncodeError:
            want = json.dumps(rec.to_dict(), ensure_ascii=True, **opts).encode() + b"\n"
        assert line == want


def test_offset_append_and_one_write_per_record(
    tmp_path: Path, count_os_writes: Callable[[], list[int]]
) -> None:
    path = tmp_path / "pages.jsonl"
    with PagesWriter(path) as w:
        w.write(record())
    size = path.stat().st_size
    calls = count_os_writes()
    with PagesWriter(path) as w:
        assert w.offset() == size
        n = w.write(record())
        w.sync()
        assert w.offset() == 2 * size == path.stat().st_size
    assert calls == [n]
    assert len(list(read_records(path))) == 2


def test_failed_write_leaves_no_partial_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pages.jsonl"
    w = PagesWriter(path)
    w.write(record())
    good = path.read_bytes()
    real_write = os.write

    def half_then_fail(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 10:
            real_write(fd, bytes(data[: len(data) // 2]))
            return len(data) // 2
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError):
        w.write(record())
    monkeypatch.undo()
    assert path.read_bytes() == good
    assert w.offset() == len(good)
    w.write(record())
    w.close()
    assert len(list(read_records(path, strict=True))) == 2


def test_repair_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    with PagesWriter(path) as w:
        for i in range(3):
            w.write(record(url=f"https://example.test/{i}"))
    good = path.read_bytes()
    partial = b'{"url":"https://example.test/3","final_url":"htt'
    with open(path, "ab") as f:
        f.write(partial)
    # The tolerant reader already skips it.
    assert [r["url"] for r in read_records(path)] == [f"https://example.test/{i}" for i in range(3)]
    assert PagesWriter.repair(path) == len(partial)
    assert path.read_bytes() == good
    assert PagesWriter.repair(path) == 0


def test_repair_edge_cases(tmp_path: Path) -> None:
    assert PagesWriter.repair(tmp_path / "missing.jsonl") == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert PagesWriter.repair(empty) == 0
    only_partial = tmp_path / "partial.jsonl"
    only_partial.write_bytes(b'{"url":')
    assert PagesWriter.repair(only_partial) == 7
    assert only_partial.read_bytes() == b""
    # A long partial tail (longer than the 64 KiB scan block).
    long = tmp_path / "long.jsonl"
    long.write_bytes(b"{}\n" + b"x" * 200_000)
    assert PagesWriter.repair(long) == 200_000
    assert long.read_bytes() == b"{}\n"


def test_writer_repairs_on_open(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    with PagesWriter(path) as w:
        w.write(record())
    with open(path, "ab") as f:
        f.write(b'{"url":"x')
    with PagesWriter(path) as w:
        assert w.repaired_bytes == 9
        w.write(record())
    assert len(list(read_records(path, strict=True))) == 2


def test_reader_strict_and_tolerant(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    path.write_bytes(b'{"url":"a"}\nnot json\n[1]\n{"url":"b"}\n{"url":')
    assert [r["url"] for r in read_records(path)] == ["a", "b"]
    with pytest.raises(ValueError, match=":2:"):
        list(read_records(path, strict=True))


def test_write_after_close_raises(tmp_path: Path) -> None:
    w = PagesWriter(tmp_path / "p.jsonl")
    w.close()
    w.close()
    with pytest.raises(ValueError):
        w.write(record())
