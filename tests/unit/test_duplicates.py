"""DuplicateStage: verdicts, revisit decisions, the host ratio cut, resume rebuild."""

from __future__ import annotations

import gzip
import hashlib
import random
from dataclasses import replace

from skitter.duplicates import DuplicateStage
from skitter.settings import QualitySettings

_SYL = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "da", "fo", "gu", "hi"]
_RNG = random.Random(3)
_TEXT = " ".join(_RNG.choice(_SYL) + _RNG.choice(_SYL) + _RNG.choice(_SYL) for _ in range(300))
PAGE = f"<html><body><p>{_TEXT}</p></body></html>".encode()


def test_exact_duplicate_with_equal_payload_gets_a_revisit() -> None:
    st = DuplicateStage(QualitySettings())
    v1 = st.examine("http://a/1", "a", PAGE, PAGE, "text/html", True)
    assert v1.duplicate is None and v1.revisit is None and v1.simhash is None
    st.captured("http://a/1", v1, "2025-01-01T00:00:00Z")
    v2 = st.examine("http://a/2", "a", PAGE, PAGE, "text/html", True)
    assert v2.duplicate is not None and (v2.duplicate.kind, v2.duplicate.of) == (
        "exact",
        "http://a/1",
    )
    assert v2.revisit is not None
    assert (v2.revisit.refers_to_uri, v2.revisit.refers_to_date) == (
        "http://a/1",
        "2025-01-01T00:00:00Z",
    )
    # the same body gzip-encoded on the wire: a duplicate, but its WARC payload differs
    v3 = st.examine("http://a/3", "a", PAGE, gzip.compress(PAGE), "text/html", True)
    assert v3.duplicate is not None and v3.revisit is None


def test_each_revisit_refers_to_its_own_originals_date() -> None:
    """The captures (payload digest and WARC-Date packed in one bytes object a page) give each
    duplicate its own original's date, and only for the same payload."""
    st = DuplicateStage(QualitySettings())
    for i in range(50):
        body = PAGE + f"<!-- {i} -->".encode()
        v = st.examine(f"http://a/{i}", "a", body, body, "text/html", True)
        st.captured(f"http://a/{i}", v, f"2025-01-01T00:00:{i:02d}.123456Z")
    for i in (0, 7, 49):
        body = PAGE + f"<!-- {i} -->".encode()
        dup = st.examine(f"http://b/{i}", "a", body, body, "text/html", True)
        assert dup.revisit is not None
        assert dup.revisit.refers_to_uri == f"http://a/{i}"
        assert dup.revisit.refers_to_date == f"2025-01-01T00:00:{i:02d}.123456Z"
        wire = gzip.compress(body)  # the same page, another payload: no revisit
        assert st.examine(f"http://c/{i}", "a", body, wire, "text/html", True).revisit is None


def test_payload_digest_is_the_body_digest_without_content_coding() -> None:
    st = DuplicateStage(QualitySettings())
    plain = st.examine("http://a/1", "a", PAGE, PAGE, "text/html", True)
    assert plain.sha1 == hashlib.sha1(PAGE).hexdigest()
    assert plain.payload_sha1 == hashlib.sha1(PAGE).digest()
    wire = gzip.compress(PAGE)
    coded = st.examine("http://a/2", "a", PAGE, wire, "text/html", True)
    assert coded.sha1 == hashlib.sha1(PAGE).hexdigest()
    assert coded.payload_sha1 == hashlib.sha1(wire).digest()


def test_near_duplicates_keep_their_response_record() -> None:
    st = DuplicateStage(QualitySettings(dedup="near"))
    v1 = st.examine("http://a/1", "a", PAGE, PAGE, "text/html", True)
    st.captured("http://a/1", v1, "d")
    other = PAGE.replace(b"<body>", b"<body><p>Updated 2025-10-21</p>")
    v2 = st.examine("http://a/2", "a", other, other, "text/html", True)
    assert v1.simhash is not None and v2.simhash is not None
    assert v2.duplicate is not None and v2.duplicate.kind == "near" and v2.revisit is None


def test_off_finds_nothing() -> None:
    st = DuplicateStage(QualitySettings(dedup="off"))
    for i in range(3):
        v = st.examine(f"http://a/{i}", "a", PAGE, PAGE, "text/html", True)
        assert v.duplicate is None and v.sha1 is not None
    assert not st.enabled and not st.host_cut("a")


def test_host_cut_after_min_pages_when_mostly_duplicates() -> None:
    q = replace(QualitySettings(), duplicate_ratio_min_pages=10, max_duplicate_ratio=0.5)
    st = DuplicateStage(q)
    for i in range(4):
        body = PAGE + str(i).encode()
        st.examine(f"http://a/u{i}", "a", body, body, "text/html", True)
    for i in range(5):
        st.examine(f"http://a/d{i}", "a", PAGE, PAGE, "text/html", True)
    # d0 is the first page with PAGE's body: 5 originals, 4 duplicates
    assert not st.host_cut("a")  # 9 pages: under the minimum
    st.examine("http://a/d9", "a", PAGE, PAGE, "text/html", True)
    assert not st.host_cut("a")  # 10 pages, 5 duplicates: not more than half
    st.examine("http://a/d10", "a", PAGE, PAGE, "text/html", True)  # 6 of 11
    assert st.host_cut("a") and not st.host_cut("b")
    assert st.report()["hosts_cut"] == ["a"]


def test_rebuild_from_pages_rows() -> None:
    st = DuplicateStage(QualitySettings(dedup="near"))
    v = st.examine("http://a/1", "a", PAGE, PAGE, "text/html", True)
    rows = [
        {"url": "http://a/1", "final_url": "http://a/1", "status": 200, "bytes": 5,
         "sha1": v.sha1, "simhash": v.simhash},
        {"url": "http://a/2", "final_url": "http://a/2", "status": 200, "bytes": 5,
         "sha1": v.sha1, "duplicate": "exact", "duplicate_of": "http://a/1"},
        {"url": "http://a/3", "final_url": "http://a/3", "status": 404, "bytes": 5, "sha1": "x"},
        {"url": "http://a/4", "final_url": "http://a/4", "status": 200, "bytes": 0, "sha1": None},
    ]  # fmt: skip
    again = DuplicateStage(QualitySettings(dedup="near"))
    assert again.rebuild(rows, lambda u: "a") == 2
    v2 = again.examine("http://a/5", "a", PAGE, PAGE, "text/html", True)
    assert v2.duplicate is not None and v2.duplicate.of == "http://a/1"
    assert v2.revisit is None  # the capture's payload digest and date are not known
    rep = again.report()
    assert rep["by_host"] == {"a": {"pages": 3, "duplicates": 2}}
    assert (rep["exact"], rep["near"]) == (2, 0)
