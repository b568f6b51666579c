"""Bounded-memory link extraction for large HTML pages: parse them segment by segment.

An HTML tree costs about 20-28 bytes of memory per byte of markup (Lexbor: a 10 MB rustdoc
source page builds a ~200 MB tree), so parsing a large page whole makes a crawler's memory
jump with page size. :func:`extract_segments` cuts a body larger than
:data:`SEGMENT_MIN_BYTES` into segments of about :data:`SEGMENT_BYTES` and extracts each
with the ordinary whole-page extractor, so the peak is proportional to a segment, not to the
page; the body itself is never decoded whole (its encoding is sniffed as
:func:`skitter.charset.decode_html` does, step by step, without decoding).

Cut points (bytes of the undecoded body, so the encoding must be ASCII-compatible with
``<`` never inside a multi-byte character: UTF-16 and ISO-2022-JP pages are parsed whole):

* a segment ends just before a start tag, preferably an ``<a`` start tag (which ends any
  open ``<a>`` in the whole-page parse too, so anchor texts are kept), else any start tag
  whose preceding markup is closed (the last ``<`` or ``>`` before it is ``>``);
* never inside a comment, ``<![CDATA[``, a raw-text or RCDATA element (``script``,
  ``style``, ``textarea``, ``title``, ``xmp``, ``iframe``, ``noembed``, ``noframes``), a
  ``<template>`` (its content is not part of the document: no links) or a ``<select>``
  (where ``<a>`` is ignored); ``<plaintext>`` runs to the end. Such a region longer than a
  segment makes its segment longer: memory follows the longest such region, not the page.

Merging (the same :class:`skitter.models.Page` as a whole-page parse, up to the documented
approximations): links in document order; the base URL is the first segment's that has a
``<base href>``, given to every later segment as a ``<base>`` of its own (links of earlier
segments stay joined against the page URL: a ``<base>`` belongs in ``<head>``, i.e. in the
first segment); the title is the first non-empty one; noindex / nofollow are those of any
segment (a page-level nofollow marks every link); fragment ids are the union.
Approximations (never seen on the rust-doc pages, whose 144 pages over 256 KiB give exactly
the whole-page result): markup that looks like a tag inside an attribute value (``title="<a x"``)
can be taken for a cut point; an element left open across a cut (a table, a list, ``<a>``
around other tags) is closed at the cut, which can shorten an anchor text or change what
the next segment's parser sees; a ``<base href>`` after the first segment does not apply
to earlier segments' links.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator, Sequence
from html import escape

from skitter.charset import _content_type_charset, _detected_codec, prescan
from skitter.encoding_labels import _LABEL_TO_CODEC
from skitter.models import Link, Page

__all__ = ["SEGMENT_BYTES", "SEGMENT_MIN_BYTES", "extract_segments", "segment_bounds", "sniff"]

#: Bodies larger than this are extracted segment by segment (bytes). 256 KiB (was 1 MiB: a
#: page just under it built a ~28 MB tree, which the parsing process then kept resident,
#: freed into its heap; rust-doc ``--processes 2``: the parse-lane sibling peaked at 61-71 MiB
#: against 70-76). Rust-doc's 98 pages between 256 KiB and 1 MiB give exactly the whole-page
#: Page by segments, in 15% less CPU (0.74 s against 0.87 s for the 98).
SEGMENT_MIN_BYTES = 256 * 1024
#: The target segment size (bytes); a segment ends at the first cut point past it. 256 KiB:
#: a 10 MB rustdoc source page peaks 7 MB over its body (512 KiB: 14 MB), same CPU.
SEGMENT_BYTES = 256 * 1024
#: An ``<a`` start tag is preferred as a cut point within this many bytes past the target.
_PREFER_A_BYTES = SEGMENT_BYTES // 2

_WS = rb"[\t\n\f\r />]"
_WS_BYTES = frozenset(b"\t\n\f\r />")
# openers of the regions a cut must not fall in (lower case; names need a delimiter after)
# openers of the regions a cut must not fall in, searched in a lower-cased window
_OPENER_RE = re.compile(
    rb"<(?:!--|!\[cdata\[|(?:script|style|textarea|title|xmp|iframe|noembed|noframes|template"
    rb"|select|plaintext)(?=" + _WS + rb"))"
)
_WINDOW = SEGMENT_BYTES
_OVERLAP = 16  # > the longest opener
_COMMENT_END_RE = re.compile(rb"--!?>")
_A_TAG_RE = re.compile(rb"<[aA](?=[\t\n\f\r />])")
_TAG_RE = re.compile(rb"<[a-zA-Z]")
_TEMPLATE_RE = re.compile(rb"<(/?)template(?=" + _WS + rb")", re.IGNORECASE)
_END_RES: dict[bytes, re.Pattern[bytes]] = {}
#: codecs whose bytes cannot be cut at a "<" byte.
_UNCUTTABLE = frozenset({"utf-16-le", "utf-16-be", "iso2022_jp"})
# codec -> a label that names it (for the Content-Type given to each segment)
_CODEC_LABEL: dict[str, str] = {}
for _label, _codec in _LABEL_TO_CODEC.items():
    _CODEC_LABEL.setdefault(_codec, _label)

Extractor = Callable[..., Page]


def sniff(body: bytes, content_type: str | None) -> str:
    """The codec :func:`skitter.charset.decode_html` would choose for ``body``, without
    decoding it whole (memory: one segment-sized chunk for the UTF-8 validity check).

    Returns:
        A canonical Python codec name; "utf-8" also for a body with a UTF-8 BOM.
    """
    if body[:3] == codecs.BOM_UTF8:
        return "utf-8"
    if body[:2] == codecs.BOM_UTF16_LE:
        return "utf-16-le"
    if body[:2] == codecs.BOM_UTF16_BE:
        return "utf-16-be"
    codec = _content_type_charset(content_type) or prescan(body)
    if codec is not None:
        return codec
    if body.isascii() or _valid_utf8(body):
        return "utf-8"
    return _detected_codec(body) or "cp1252"


def _valid_utf8(body: bytes) -> bool:
    """Is ``body`` UTF-8 (a multi-byte sequence cut off at the very end tolerated when an
    earlier part is non-ASCII)? As :func:`skitter.charset._as_utf8`, chunk by chunk."""
    dec = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(body)
    n = len(body)
    try:
        for i in range(0, n, SEGMENT_BYTES):
            dec.decode(view[i : i + SEGMENT_BYTES], final=False)
    except UnicodeDecodeError:
        return False
    tail = len(dec.getstate()[0])  # an incomplete sequence at the very end
    return tail == 0 or not body[: n - tail].isascii()


def _openers(body: bytes) -> Iterator[tuple[int, bytes]]:
    """The no-cut region openers of ``body`` in order: (offset, opener in lower case).

    One regular-expression pass over lower-cased windows of :data:`_WINDOW` bytes (memory:
    one window; ~2 ms per MB)."""
    n = len(body)
    for w in range(0, n, _WINDOW):
        low = body[w : w + _WINDOW + _OVERLAP].lower()
        for m in _OPENER_RE.finditer(low, 0, min(len(low), _WINDOW + _OVERLAP)):
            if m.start() >= _WINDOW:
                break
            yield w + m.start(), m.group()


def _region_end(body: bytes, start: int, opener: bytes) -> int:
    """Where the no-cut region opened by ``opener`` at ``start`` ends."""
    n = len(body)
    if opener.startswith(b"<!"):
        if opener == b"<![cdata[":
            end = body.find(b"]]>", start + len(opener))
            return n if end < 0 else end + 3
        pos = start + len(opener)
        if body.startswith(b">", pos):  # <!-->
            return pos + 1
        if body.startswith(b"->", pos):  # <!--->
            return pos + 2
        c = _COMMENT_END_RE.search(body, pos)
        return n if c is None else c.end()
    name = opener[1:]
    if name == b"plaintext":
        return n
    if name == b"template":
        depth = 1
        for t in _TEMPLATE_RE.finditer(body, start + len(opener)):
            depth += -1 if t.group(1) else 1
            if depth == 0:
                return t.end()
        return n
    end_re = _END_RES.get(name)
    if end_re is None:
        end_re = _END_RES[name] = re.compile(b"</" + name + rb"(?=" + _WS + rb")", re.I)
    c = end_re.search(body, start + len(opener))
    return n if c is None else c.end()


def _cut_in(body: bytes, lo: int, hi: int) -> int | None:
    """The first cut point in ``[lo, hi)`` (a region free of no-cut regions), or None."""
    for pattern, stop in ((_A_TAG_RE, min(hi, lo + _PREFER_A_BYTES)), (_TAG_RE, hi)):
        pos = lo
        while True:
            m = pattern.search(body, pos, stop)
            if m is None:
                break
            at = m.start()
            if body.rfind(b">", 0, at) >= body.rfind(b"<", 0, at):
                return at
            pos = at + 1
    return None


def segment_bounds(body: bytes, size: int = SEGMENT_BYTES) -> Iterator[tuple[int, int]]:
    """Split ``body`` (HTML bytes in an ASCII-compatible encoding) into segments.

    Args:
        body: the page.
        size: the target segment size in bytes (> 0).

    Yields:
        (start, end) byte offsets, consecutive, covering the body; each segment but the
        last is at least ``size`` bytes and ends just before a start tag outside any
        no-cut region (see the module docstring).
    """
    n = len(body)
    openers = _openers(body)
    opener = next(openers, None)
    start = 0
    while start < n:
        target = start + size
        pos = start
        cut: int | None = None
        while cut is None and pos < n:
            while opener is not None and opener[0] < pos:
                opener = next(openers, None)
            m = opener
            region = n if m is None else m[0]
            if region > target:
                cut = _cut_in(body, max(pos, target), region)
            if m is None:
                break
            pos = _region_end(body, *m)
        end = n if cut is None else cut
        yield start, end
        start = end


def extract_segments(
    extract: Extractor,
    body: bytes,
    url: str,
    content_type: str | None,
    headers_robots: Sequence[str],
    **options: object,
) -> Page | None:
    """Extract a large page's links segment by segment (see the module docstring).

    Args:
        extract: the whole-page extractor (:func:`skitter.links.extract`), called per
            segment with ``options`` (bot_token, resources, ids).
        body, url, content_type, headers_robots: as for :func:`skitter.links.extract`.

    Returns:
        The merged Page, or None when the page must be parsed whole (not larger than
        :data:`SEGMENT_MIN_BYTES`, or an encoding that cannot be cut at a byte).
    """
    if len(body) <= SEGMENT_MIN_BYTES:
        return None
    codec = sniff(body, content_type)
    label = _CODEC_LABEL.get(codec)
    if codec in _UNCUTTABLE or label is None:
        return None
    seg_type = f"text/html; charset={label}"
    links: list[Link] = []
    base_url: str | None = None
    prefix = b""
    title = ""
    noindex = nofollow = False
    ids: set[str] = set()
    for start, end in segment_bounds(body):
        page = extract(prefix + body[start:end], url, seg_type, headers_robots, **options)
        links.extend(page.links)
        if base_url is None and page.base_url != url:
            base_url = page.base_url
            prefix = b'<base href="' + escape(base_url).encode("ascii", "replace") + b'">'
        title = title or page.title
        noindex = noindex or page.noindex
        nofollow = nofollow or page.nofollow
        ids.update(page.ids)
    if nofollow:
        links = [link if link.nofollow else link._replace(nofollow=True) for link in links]
    return Page(
        links=links,
        base_url=base_url or url,
        encoding=codec,
        title=title,
        noindex=noindex,
        nofollow=nofollow,
        ids=frozenset(ids),
    )
