"""LinksWriter: escaping round-trip, header once, one write per page, crash repair."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skitter.errors import StateError
from skitter.export.links import (
    HEADER,
    LinkRow,
    LinksWriter,
    escape,
    format_rows,
    parse_row,
    read_rows,
    unescape,
)

SRC = "https://example.test/"


def row(anchor: str = "home", **kw: object) -> LinkRow:
    fields: dict[str, object] = {
        "source": SRC,
        "target": "https://example.test/a",
        "fragment": "",
        "anchor": anchor,
        "kind": "a",
        "nofollow": False,
        "decision": "queued",
    }
    fields.update(kw)
    return LinkRow(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("plain", "plain"),
        ("a\tb", "a\\tb"),
        ("a\nb\r\n", "a\\nb\\r\\n"),
        ("back\\slash", "back\\\\slash"),
        ("literal \\t not a tab", "literal \\\\t not a tab"),
        ("\\\t", "\\\\\\t"),
        ("", ""),
        ("日本 ☕", "日本 ☕"),
    ],
)
def test_escape_table(raw: str, escaped: str) -> None:
    assert escape(raw) == escaped
    assert unescape(escaped) == raw


def test_unescape_leaves_unknown_sequences() -> None:
    assert unescape("a\\xb\\") == "a\\xb\\"


@given(st.text())
def test_escape_round_trip(s: str) -> None:
    e = escape(s)
    assert "\t" not in e and "\n" not in e and "\r" not in e
    assert unescape(e) == s


def test_exact_file_and_header_once(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    with LinksWriter(path) as w:
        w.write_rows([row(), row(anchor="", nofollow=True, decision="out_of_scope")])
    with LinksWriter(path) as w:
        w.write_rows([row(fragment="top", kind="canonical")])
    assert path.read_text("utf-8") == (
        HEADER + "\n"
        f"{SRC}\thttps://example.test/a\t\thome\ta\t0\tqueued\n"
        f"{SRC}\thttps://example.test/a\t\t\ta\t1\tout_of_scope\n"
        f"{SRC}\thttps://example.test/a\ttop\thome\tcanonical\t0\tqueued\n"
    )
    assert HEADER == "source\ttarget\tfragment\tanchor\tkind\tnofollow\tdecision"


def test_round_trip_with_tabs_and_newlines(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    rows = [
        row(anchor="tab\there"),
        row(anchor="new\nline\r\nand CR\r"),
        row(anchor="back\\slash \\n literal"),
        row(anchor="日本語 ☕", target="https://bücher.example/straße", fragment="a\tb"),
        row(anchor="", nofollow=True, decision="skip\tweird"),
    ]
    with LinksWriter(path) as w:
        w.write_rows(rows)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) == 1 + len(rows) + 1
    assert all(line.count(b"\t") == 6 for line in lines[:-1])
    assert list(read_rows(path, strict=True)) == rows


def test_empty_rows_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    with LinksWriter(path) as w:
        size = w.offset()
        assert w.write_rows([]) == 0
        assert w.offset() == size == len(HEADER) + 1


def test_one_os_write_per_page(tmp_path: Path, count_os_writes: Callable[[], list[int]]) -> None:
    path = tmp_path / "links.tsv"
    w = LinksWriter(path)
    calls = count_os_writes()
    n = w.write_rows([row(anchor=str(i)) for i in range(500)])
    w.close()
    assert calls == [n]
    assert w.offset() == path.stat().st_size


def test_repair_partial_row(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    rows = [row(anchor=str(i)) for i in range(3)]
    with LinksWriter(path) as w:
        w.write_rows(rows)
    good = path.read_bytes()
    with open(path, "ab") as f:
        f.write(b"https://example.test/\thttps://exa")
    assert list(read_rows(path)) == rows  # tolerant reader skips the partial line
    assert LinksWriter.repair(path) == 33
    assert path.read_bytes() == good
    assert LinksWriter.repair(path) == 0


def test_partial_header_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    path.write_bytes(b"source\ttar")
    with LinksWriter(path) as w:
        assert w.repaired_bytes == 10
        w.write_rows([row()])
    assert path.read_text("utf-8").startswith(HEADER + "\n")
    assert list(read_rows(path, strict=True)) == [row()]


def test_foreign_file_rejected(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    path.write_bytes(b"a,b,c\n")
    with pytest.raises(StateError):
        LinksWriter(path)


def test_reader_tolerant_and_strict(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    path.write_bytes(
        (HEADER + "\n").encode()
        + b"s\tt\tf\ta\tk\t1\td\n"
        + b"too\tfew\n"
        + b"s2\tt2\t\t\xff\tk\t0\td\n"
    )
    got = list(read_rows(path))
    assert got == [
        LinkRow("s", "t", "f", "a", "k", True, "d"),
        LinkRow("s2", "t2", "", "\ufffd", "k", False, "d"),
    ]
    with pytest.raises(ValueError, match=":3:"):
        list(read_rows(path, strict=True))


def test_parse_row() -> None:
    assert parse_row(HEADER + "\n") is None
    assert parse_row("a\tb\n") is None
    line = row(anchor="x\ty\\z", nofollow=True).to_line()
    assert line.endswith("\n") and line.count("\t") == 6
    assert parse_row(line) == row(anchor="x\ty\\z", nofollow=True)
    assert parse_row(line[:-1]) == row(anchor="x\ty\\z", nofollow=True)


def test_offset_follows_external_truncation(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    w = LinksWriter(path)
    w.write_rows([row(anchor="1")])
    keep = w.offset()
    w.write_rows([row(anchor="2")])
    os.truncate(path, keep)  # e.g. a resume cutting an orphan block
    assert w.offset() == keep
    w.write_rows([row(anchor="3")])
    w.close()
    assert [r.anchor for r in read_rows(path, strict=True)] == ["1", "3"]
    assert w.offset() == path.stat().st_size


_FIELD = st.text(alphabet=st.sampled_from("ab\\\t\n\r é"), max_size=6)


@given(st.lists(st.tuples(_FIELD, _FIELD, _FIELD, _FIELD, _FIELD, st.booleans(), _FIELD)))
def test_format_rows_is_to_line_of_each_row(rows: list[tuple[object, ...]]) -> None:
    expected = "".join(LinkRow(*r).to_line() for r in rows)  # type: ignore[arg-type]
    assert format_rows(rows) == expected
    assert format_rows(iter(rows)) == expected
    assert format_rows([list(r) for r in rows]) == expected


def test_write_text_and_rows_agree(tmp_path: Path) -> None:
    rows = [row(), row(anchor="a\tb\\c\r\n"), row(fragment="top", nofollow=True)]
    with LinksWriter(tmp_path / "a.tsv") as a, LinksWriter(tmp_path / "b.tsv") as b:
        a.write_rows(rows)
        assert b.write_text(format_rows([r.fields() for r in rows])) > 0
        assert b.write_text("") == 0
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()
    assert list(read_rows(tmp_path / "b.tsv")) == rows
