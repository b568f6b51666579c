"""Header sections rewritten as browsers read them (skitter.fetch.lenient.normalize_head)."""

from __future__ import annotations

import pytest
from aiohttp.http_exceptions import BadHttpMessage

from skitter.fetch.lenient import normalize_head

OK = b"HTTP/1.1 200 OK\r\n"


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (OK + b"X-A : b\r\n\r\n", OK + b"X-A: b\r\n\r\n"),
        (OK + b"X-A\t: b\r\n\r\n", OK + b"X-A: b\r\n\r\n"),
        (b"HTTP/1.1 200 OK\nX-A: b\n\n", OK + b"X-A: b\r\n\r\n"),
        (OK + b"X-Long: one\r\n  two\r\n\r\n", OK + b"X-Long: one two\r\n\r\n"),
        (
            OK + b"Content-Length: 5\r\nX: y\r\ncontent-length: 5\r\n\r\n",
            OK + b"Content-Length: 5\r\nX: y\r\n\r\n",
        ),
        (OK + b"Content-Length: 5, 5\r\n\r\n", OK + b"Content-Length: 5\r\n\r\n"),
        (OK + b"no colon here\r\nX: y\r\n\r\n", OK + b"X: y\r\n\r\n"),
        (OK + b"X Y: z\r\n: e\r\n\xc3\x84: u\r\n\r\n", OK + b"\r\n"),
        (OK + b"X: a\x00b\r\n\r\n", OK + b"X: a b\r\n\r\n"),
        (OK + b"X: a\x01b\xe9\r\n\r\n", OK + b"X: a\x01b\xe9\r\n\r\n"),  # kept as is
        (b"http/1.1 200 OK\r\n\r\n", OK + b"\r\n"),
        (b"\r\n" + OK + b"\r\n", OK + b"\r\n"),
    ],
)
def test_header_sections_browsers_accept(head: bytes, expected: bytes) -> None:
    assert normalize_head(head) == (expected, 200)


@pytest.mark.parametrize(
    "head",
    [
        OK + b"Content-Length: 5\r\nContent-Length: 12\r\n\r\n",
        OK + b"Content-Length: 5, 6\r\n\r\n",
        OK + b"Content-Length: five\r\n\r\n",
    ],
)
def test_ambiguous_lengths_are_refused(head: bytes) -> None:
    with pytest.raises(BadHttpMessage):
        normalize_head(head)


def test_status_of_interim_and_odd_status_lines() -> None:
    assert normalize_head(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")[1] == 103
    assert normalize_head(b"HTTP/1.1 200\r\n\r\n") == (b"HTTP/1.1 200\r\n\r\n", 200)
    assert normalize_head(b"garbage\r\n\r\n")[1] is None


class _Inner:
    """Stands for aiohttp's parser: records the bytes it is given."""

    def __init__(self) -> None:
        self.seen = bytearray()

    def feed_data(self, data: bytes) -> tuple[list[object], bool, bytes]:
        self.seen += data
        return [], False, b""


@pytest.mark.parametrize(
    ("stream", "passed", "raw_head"),
    [
        # the common case, whole in one read: passed on as is (body with blank lines in it)
        (
            OK + b"X: y\r\n\r\nbody\n\nmore\n\r\n",
            OK + b"X: y\r\n\r\nbody\n\nmore\n\r\n",
            OK + b"X: y\r\n\r\n",
        ),
        # a bare-LF head whose body holds a CRLF blank line: the head ends at the first
        (
            b"HTTP/1.1 200 OK\nX: y\n\nb\r\n\r\n",
            OK + b"X: y\r\n\r\nb\r\n\r\n",
            b"HTTP/1.1 200 OK\nX: y\n\n",
        ),
        # an interim response is dropped, a head to rewrite is rewritten
        (
            b"HTTP/1.1 100 Continue\r\n\r\n" + OK + b"X : y\r\n\r\nbody",
            OK + b"X: y\r\n\r\nbody",
            OK + b"X : y\r\n\r\n",
        ),
    ],
)
def test_head_parser_gives_the_same_bytes_however_the_stream_is_cut(
    stream: bytes, passed: bytes, raw_head: bytes
) -> None:
    from skitter.fetch.lenient import LenientHeadParser

    for cut in [len(stream), *range(1, len(stream))]:
        inner = _Inner()
        parser = LenientHeadParser(inner)
        parser.feed_data(stream[:cut])
        if cut < len(stream):
            parser.feed_data(stream[cut:])
        assert bytes(inner.seen) == passed, cut
        assert parser.raw_head == raw_head, cut
