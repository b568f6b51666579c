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
