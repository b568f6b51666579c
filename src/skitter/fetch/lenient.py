"""Response header sections as browsers read them, in front of aiohttp's HTTP parser.

aiohttp's parsers (the C one from llhttp and the pure-Python one, ``AIOHTTP_NO_EXTENSIONS=1``)
are stricter than browsers, and not in the same ways (case C29): the C parser refuses a space
before the colon and a repeated identical ``Content-Length``; the Python parser accepts the
repeat but also *differing* lengths (one silently wins). :class:`LenientHeadParser` wraps
either parser and rewrites each response's header section before it sees it, per RFC 9112:

* a bare LF ends a line (§2.2); lines are passed on ending in CRLF;
* whitespace between a field name and its colon is removed (§5.1, as proxies must);
* an obs-fold continuation line is joined to its field with one space (§5.2);
* ``Content-Length`` given several times or as a list with *one* value is one
  ``Content-Length`` (RFC 9110 §8.6); *different* values are refused as a framing error
  (RFC 9112 §6.3), so the response is discarded and the connection closed;
* lines without a colon, or whose field name is not a token (spaces, non-ASCII, empty), are
  ignored, a NUL in a value becomes a space, and ``http/1.1`` is read as ``HTTP/1.1``;
* interim ``1xx`` responses (but 101) are dropped whole, however many come and whether
  asked for or not (RFC 9110 §15.2): their headers never mix with the final response's.

Control and Latin-1 bytes in field values are left alone (both parsers take them). The
header section of the final response is kept *as received* in ``raw_head`` for the WARC
record. Only header sections are touched: once the final response's head is passed on, the
rest of the stream (the body) goes to the parser unchanged until the next request.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from aiohttp.client_proto import ResponseHandler
from aiohttp.http_exceptions import BadHttpMessage

__all__ = ["LenientHeadParser", "LenientResponseHandler", "install", "normalize_head"]

#: RFC 9110 §5.6.2 token: a valid field name.
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

#: Largest header section buffered here (bytes); a longer one goes to the parser as is
#: (which refuses it: its line and field limits are far lower).
MAX_HEAD_BYTES = 512 * 1024


def _head_end(buf: bytes | bytearray) -> int:
    """Index just past the empty line ending the header section in ``buf``, or -1."""
    crlf = buf.find(b"\n\r\n")
    # a bare-LF end counts only before the CRLF one: never scan the body after the head
    lf = buf.find(b"\n\n", 0, len(buf) if crlf < 0 else crlf + 1)
    if crlf < 0 and lf < 0:
        return -1
    if lf < 0 or (0 <= crlf < lf):
        return crlf + 3
    return lf + 2


def normalize_head(head: bytes) -> tuple[bytes, int | None]:
    """``(rewritten header section, status code)`` of one response head (see the module).

    Args:
        head: status line, header lines and the empty line, as received.

    Returns:
        The section with CRLF line ends, obs-folds joined, no space before colons and at
        most one ``Content-Length``; the status code (None if the status line is not one).

    Raises:
        BadHttpMessage: ``Content-Length`` values differ (or one is not a number).
    """
    status = _plain_status(head)
    if status is not None:
        return head, status  # nothing to rewrite (the common case)
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in head.split(b"\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)  # stray empty lines before the status line (RFC 9112 §2.2)
    if not lines:
        return head, None
    status_line, fields = lines[0], lines[1:]
    if status_line[:5].lower() == b"http/":
        status_line = b"HTTP/" + status_line[5:]  # the version's name in any case
    parts = status_line.split(None, 2)
    status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None
    joined: list[bytes] = []
    for line in fields:
        if line[:1] in (b" ", b"\t") and joined:
            joined[-1] = joined[-1].rstrip(b" \t") + b" " + line.strip(b" \t")  # obs-fold
        else:
            joined.append(line)
    out: list[bytes] = [status_line]
    length: bytes | None = None
    at = -1  # where the (first) Content-Length line goes
    for line in joined:
        name, colon, value = line.partition(b":")
        name = name.rstrip(b" \t")
        if not colon or not _TOKEN.fullmatch(name):
            continue  # no field name (a stray line, spaces or non-ASCII in it): ignored
        if b"\0" in value:
            value = value.replace(b"\0", b" ")
        if name.lower() == b"content-length":
            for item in value.split(b","):
                v = item.strip(b" \t")
                if not v.isdigit():
                    raise BadHttpMessage(f"invalid Content-Length {value.strip()!r}")
                if length is not None and int(v) != int(length):
                    raise BadHttpMessage(
                        f"differing Content-Length values {length.decode()} and {v.decode()}"
                    )
                length = v
            if at < 0:
                at = len(out)
                out.append(b"")
            continue
        out.append(name + b":" + value)
    if at >= 0:
        out[at] = b"Content-Length: " + (length or b"")
    return b"\r\n".join(out) + b"\r\n\r\n", status


#: A header section both aiohttp parsers take as it is: CRLF lines, token names right
#: before the colon, no obs-fold, no NUL.
_PLAIN = re.compile(
    rb"HTTP/1\.[01] ([0-9]{3})[^\r\n\0]*\r\n"
    rb"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\r\n\0]*\r\n)*\r\n"
)


def _plain_status(head: bytes) -> int | None:
    """The status of a head :func:`normalize_head` would leave as it is, else None."""
    m = _PLAIN.fullmatch(head)
    if m is None:
        return None
    low = head.lower()
    n = low.count(b"content-length")
    if n > 1:
        return None
    if n == 1:
        at = low.find(b"\ncontent-length:")
        if at < 0 or not head[at + 16 : head.find(b"\r\n", at + 1)].strip(b" \t").isdigit():
            return None
    return int(m.group(1))


class LenientHeadParser:
    """Wraps an aiohttp response parser (C or Python): header sections are normalised
    (:func:`normalize_head`) and 1xx interim responses dropped before it sees them.

    Attributes:
        raw_head: the final response's header section exactly as received (or None).
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._buf = bytearray()
        self._in_head = True
        self.raw_head: bytes | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def feed_data(self, data: bytes) -> Any:
        """As the wrapped parser's ``feed_data``; raises its errors and BadHttpMessage."""
        if not self._in_head:
            return self._inner.feed_data(data)
        if not self._buf:
            # the common case: the whole head of a final response in one read, as it is
            end = _head_end(data)
            if end >= 0:
                raw = bytes(data[:end])
                head, status = normalize_head(raw)
                if head is raw and not (status is not None and 100 <= status < 200):
                    self._in_head = False
                    self.raw_head = raw
                    return self._inner.feed_data(data)
        self._buf += data
        out = bytearray()
        while self._in_head:
            end = _head_end(self._buf)
            if end < 0:
                if len(self._buf) > MAX_HEAD_BYTES:  # let the parser refuse it
                    self._in_head = False
                    out += self._buf
                    self._buf.clear()
                break
            raw = bytes(self._buf[:end])
            del self._buf[:end]
            head, status = normalize_head(raw)
            if status is not None and 100 <= status < 200 and status != 101:
                continue  # interim response: dropped
            self._in_head = False
            self.raw_head = raw
            out += head
            out += self._buf
            self._buf.clear()
        if not out:
            return [], False, b""
        return self._inner.feed_data(bytes(out))

    def feed_eof(self) -> Any:
        """As the wrapped parser's ``feed_eof`` (bytes still buffered go first)."""
        if self._buf:
            data, self._buf = bytes(self._buf), bytearray()
            self._in_head = False
            self._inner.feed_data(data)
        return self._inner.feed_eof()


class LenientResponseHandler(ResponseHandler):
    """aiohttp's connection protocol with a :class:`LenientHeadParser` per request."""

    def set_response_params(self, **kwargs: Any) -> None:
        super().set_response_params(**kwargs)
        if self._parser is not None:
            self._parser = LenientHeadParser(self._parser)  # type: ignore[assignment]

    @property
    def raw_head(self) -> bytes | None:
        """The last final response's header section as received (None if not known)."""
        parser = self._parser
        return parser.raw_head if isinstance(parser, LenientHeadParser) else None


def install(connector: Any) -> None:
    """Make ``connector`` (an aiohttp ``TCPConnector``) create :class:`LenientResponseHandler`
    protocols. Relies on its ``_factory`` attribute (aiohttp 3.9 - 3.14); the C29 tests pin
    the behaviour this gives, under both parsers.

    Raises:
        RuntimeError: the connector has no such attribute (another aiohttp layout).
    """
    factory = getattr(connector, "_factory", None)
    if not isinstance(factory, functools.partial) or factory.func is not ResponseHandler:
        raise RuntimeError("aiohttp connector layout not supported (no ResponseHandler factory)")
    connector._factory = functools.partial(
        LenientResponseHandler, *factory.args, **factory.keywords
    )
