"""The WARC record builder's short cuts (issue 16) give the text of the plain library calls
they stand for: request targets (``urlsplit`` + ``quote``), ``WARC-Date`` from a Unix time
(``datetime.fromtimestamp``), the ``Transfer-Encoding`` rename in a head as received."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from skitter.export.warc_record import (
    _TARGET_SAFE,
    ORIG_TRANSFER_ENCODING,
    _raw_head,
    _request_target,
    build_request_block,
    warc_date,
    warc_date_at,
)


def _target_by_library(url: str) -> str:
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    return quote(target, safe=_TARGET_SAFE)


def _raw_head_by_lines(raw: bytes) -> bytes:
    lines = raw.split(b"\n")
    for i, line in enumerate(lines):
        name, colon, value = line.partition(b":")
        if colon and name.strip(b" \t").lower() == b"transfer-encoding":
            lines[i] = ORIG_TRANSFER_ENCODING.encode() + b":" + value
    return b"\n".join(lines)


URLS = [
    "http://a.test",
    "http://a.test/",
    "http://a.test?x=1",
    "http://a.test/?",
    "http://a.test/p?q=1#f",
    "http://a.test#f?x",
    "http://[::1]:8080/a[b]?c]=%41",
    "HTTP://A.test/%41 b",
    "http://a.test/é?ü=1",
    'http://a.test/p"q<>',
    "http://a.test/p?q#frag with space",
    "http://a.test/p\t?q\n",
    "https://u:p@a.test:99/x;y,z?z?w#",
    "http:/a",
    "http://a.test/a|b^`{}\\",
    " http://a.test/lead",
    "http://a b.test/x",
]


def test_request_targets_are_urlsplit_then_quote() -> None:
    for url in URLS:
        assert _request_target(url) == _target_by_library(url), url
    assert _request_target("http://a.test/p?q=1#f") == "/p?q=1"
    assert build_request_block("http://a.test/é", [("Host", "a.test")]).startswith(
        b"GET /%C3%A9 HTTP/1.1\r\nHost: a.test\r\n"
    )


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["http://", "https://", "HTTP://", "http:/", "x+y://"]),
    st.text(alphabet=st.sampled_from("ab.:[]@1 \t"), max_size=8),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    st.text(alphabet="/?#%&=;[]\"| ab~!$'()*+,é\t\x00\x7f", max_size=20),
)
def test_request_targets_of_any_url(scheme: str, host: str, rest: str, marks: str) -> None:
    for url in (scheme + host + "/" + rest, scheme + host + marks, scheme + host + marks + rest):
        try:
            expected = _target_by_library(url)
        except ValueError:  # urlsplit refuses a bad [IPv6] authority; a target is made anyway
            continue
        assert _request_target(url) == expected, repr(url)


def test_warc_date_at_is_warc_date_of_fromtimestamp() -> None:
    stamps = [0.0, 1714564800.0, 1714564800.25, 1714564800.0000005, 1714564800.0000015]
    stamps += [1714564800.9999996, 1714564800.123456, 1714564801.0, 253402300799.0, -1.5]
    for ts in stamps:
        assert warc_date_at(ts) == warc_date(datetime.fromtimestamp(ts, UTC)), ts
    assert warc_date_at(1714564800.5) == "2024-05-01T12:00:00.500000Z"
    assert warc_date_at(1714564800.0) == "2024-05-01T12:00:00Z"  # same second, cached text
    assert warc_date_at(1714564801.9999999) == "2024-05-01T12:00:02Z"  # rounded up


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-6e10, max_value=2.5e11, allow_nan=False))
def test_warc_date_at_of_any_time(ts: float) -> None:
    assert warc_date_at(ts) == warc_date(datetime.fromtimestamp(ts, UTC))


def test_transfer_encoding_renamed_as_line_by_line() -> None:
    heads = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: t/h\r\n\r\n",
        b"HTTP/1.1 200 OK\nTRANSFER-encoding : gzip, chunked\n\n",
        b"HTTP/1.1 200 OK\r\n \tTransfer-Encoding\t:x\r\nX-Transfer-Encoding: y\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: transfer-encoding: no\r\nTransfer-Encoding\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
    ]
    for raw in heads:
        assert _raw_head(raw) == _raw_head_by_lines(raw), raw
    assert _raw_head(heads[0]).startswith(
        b"HTTP/1.1 200 OK\r\nX-Skitter-Orig-Transfer-Encoding: chunked\r\n"
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"Transfer-Encoding", b" transfer-ENCODING\t", b"A", b":",
                                 b" ", b"\t", b"\r\n", b"\n", b"chunked", b"\xe9", b"-"]),
                max_size=24))  # fmt: skip
def test_transfer_encoding_rename_of_any_head(parts: list[bytes]) -> None:
    raw = b"HTTP/1.1 200 OK\r\n" + b"".join(parts)
    assert _raw_head(raw) == _raw_head_by_lines(raw)
