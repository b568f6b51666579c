"""Link extraction from HTML pages (selectolax / Lexbor, an HTML Standard parser).

One pass over the parsed tree collects, in document order: ``<a href>``, ``<area href>``,
``<frame src>``, ``<iframe src>``, ``<link rel=canonical href>`` and
``<meta http-equiv=refresh>`` targets, plus the document base URL, the title and the
robots directives. Hrefs are resolved with :func:`skitter.urls.join` against the frozen
base URL (HTML Standard §4.2.3) using the document's encoding for the query.

The parser runs with scripting disabled, as a crawler that does not run scripts sees the
page: ``<noscript>`` content is parsed as markup and its links are extracted. Comments and
``<template>`` contents are not part of the document tree, so their links are not seen.

For link checking, :func:`extract` can also collect the page's resources (``<img src>``,
``srcset``, ``<script src>``, stylesheet and icon ``<link href>``; :data:`RESOURCE_KINDS`)
and its fragment targets (``id`` attributes and ``<a name>``, :attr:`Page.ids`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from selectolax.lexbor import LexborHTMLParser, LexborNode

from skitter import urls
from skitter.charset import decode_html
from skitter.html_chunks import SEGMENT_MIN_BYTES, extract_segments
from skitter.html_depth import _flatten_deep as _flatten_deep
from skitter.html_depth import is_deep
from skitter.models import Link, Page
from skitter.url_join import Joiner

__all__ = [
    "MAX_ANCHOR_CHARS",
    "RESOURCE_KINDS",
    "extract",
    "parse_refresh",
    "parse_robots_directives",
    "parse_srcset",
]

#: Anchor text is cut to this many characters (after whitespace collapsing).
MAX_ANCHOR_CHARS = 256

# Lexbor's selector engine walks the tree once and tests each element against every
# selector of the list, so matches come in tree order -- but an element matching two
# selectors is returned twice: keep exactly one selector per tag name.
# ``a[href]`` also matches SVG ``<a xlink:href>`` (attribute local name "href").
_SELECTOR = (
    "a[href], area[href], frame[src], iframe[src], link[href], meta[content], base[href], title"
)
# With resources: <img> and <source> (src and/or srcset), <script src>, media elements and
# SVG <image>/<use> (href or xlink:href), one selector each.
_SELECTOR_RESOURCES = _SELECTOR + ", img, source, script[src], video, audio, track[src], image, use"
# Fragment targets (HTML Standard §7.4.6.3 "find a potential indicated element").
_SELECTOR_IDS = "[id], a[name]"
# The fast path of _candidates: the selector list costs Lexbor one test per element and
# selector (8 here: ~0.8 M instructions on a 20 KB page), a walk for one tag name about a
# seventh of that. Head elements the parser also puts in <head> only when written there.
_HEAD_TAGS = ("link", "meta", "base", "title")
_HEAD_SELECTOR = "link, meta, base, title"
_BODY_TAGS = ("area", "frame", "iframe")

#: Link kinds that are page resources rather than links to other documents (only extracted
#: with ``resources=True``): ``<img src>`` and SVG ``<image href>`` / ``<use href>`` "img",
#: each URL of a ``srcset`` "srcset", ``<video src>``, ``<video poster>``, ``<audio src>``,
#: ``<source src>`` and ``<track src>`` "media", ``<script src>`` "script", ``<link href>``
#: with rel stylesheet / icon / apple-touch-icon / mask-icon / manifest "link".
RESOURCE_KINDS = frozenset({"img", "srcset", "media", "script", "link"})
_RESOURCE_RELS = frozenset(
    {
        "stylesheet",
        "icon",
        "apple-touch-icon",
        "apple-touch-icon-precomposed",
        "mask-icon",
        "manifest",
    }
)

_ASCII_WS = "\t\n\f\r "
_BOM_UTF8 = b"\xef\xbb\xbf"
_WS_RE = re.compile(r"[\t\n\f\r ]+")
_TOKEN_SPLIT_RE = re.compile(r"[\s,;]+")

# X-Robots-Tag directives that carry a value after ":" (so the part before ":" is not a
# user-agent name). https://developers.google.com/search/docs/crawling-indexing/robots-meta-tag
_VALUED_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)


def _collapse(text: str) -> str:
    """Strip and collapse ASCII whitespace (Infra Standard), as document.title does."""
    return _WS_RE.sub(" ", text).strip(" ")


def _anchor(text: str) -> str:
    if not text:
        return ""
    # Fast path: for ASCII, str.split() splits on ASCII whitespace (plus the rare
    # VT and \x1c-\x1f controls, harmless to collapse in anchor text).
    s = " ".join(text.split()) if text.isascii() else _collapse(text)
    if len(s) > MAX_ANCHOR_CHARS:
        s = s[:MAX_ANCHOR_CHARS].rstrip(" ")
    return s


def parse_srcset(value: str) -> list[str]:
    """The URLs of a ``srcset`` attribute, in order (HTML Standard §4.8.4.3.10).

    Candidates are separated by commas; each is a URL (a run of non-whitespace) followed by
    optional descriptors (``1x``, ``480w``). A URL may itself contain commas (``a,b.png``);
    commas ending the URL separate candidates. Descriptor parsing skips to the next comma
    outside parentheses. ``"a.png 1x, b.png 2x"`` gives ``["a.png", "b.png"]``;
    ``"a.png,b.png"`` gives ``["a.png,b.png"]`` (one URL: no whitespace after its comma).

    Args:
        value: the attribute value.

    Returns:
        The URL strings as written (not joined); empty for an empty value. Never raises.
    """
    urls_found: list[str] = []
    n = len(value)
    pos = 0
    while True:
        while pos < n and (value[pos] in _ASCII_WS or value[pos] == ","):
            pos += 1
        if pos >= n:
            return urls_found
        start = pos
        while pos < n and value[pos] not in _ASCII_WS:
            pos += 1
        url = value[start:pos]
        if url.endswith(","):
            url = url.rstrip(",")  # no descriptors follow
        else:
            in_parens = False
            while pos < n:
                c = value[pos]
                pos += 1
                if c == "(":
                    in_parens = True
                elif c == ")":
                    in_parens = False
                elif c == "," and not in_parens:
                    break
        if url:
            urls_found.append(url)


def parse_refresh(content: str) -> str | None:
    """The URL string of a ``<meta http-equiv=refresh content=...>``, or None.

    Implements the HTML Standard §4.2.5.3 "shared declarative refresh steps" up to URL
    parsing: ``"0; URL=/x"``, ``"0;url='/x'"`` (quotes stripped, the URL ends at the
    matching quote), ``"5, /x"``, ``"0; URL=\\n  /x"`` (whitespace skipped) all give ``"/x"``;
    ``"30"`` (reload the same page) and malformed values (``"abc"``, ``"1x; url=/x"``)
    give None. An empty URL part (``"0; url="``) gives ``""`` (refresh to the base URL).

    Args:
        content: the ``content`` attribute value.

    Returns:
        The raw URL string to resolve against the document base URL, or None when the
        declaration names no other URL or is invalid. Never raises.
    """
    s = content
    n = len(s)
    pos = 0
    while pos < n and s[pos] in _ASCII_WS:
        pos += 1
    start = pos
    while pos < n and "0" <= s[pos] <= "9":
        pos += 1
    if pos == start and (pos >= n or s[pos] != "."):
        return None
    while pos < n and ("0" <= s[pos] <= "9" or s[pos] == "."):
        pos += 1
    if pos >= n:
        return None
    if s[pos] not in ";," and s[pos] not in _ASCII_WS:
        return None
    while pos < n and s[pos] in _ASCII_WS:
        pos += 1
    if pos < n and s[pos] in ";,":
        pos += 1
    while pos < n and s[pos] in _ASCII_WS:
        pos += 1
    if pos >= n:
        return None
    url_string = s[pos:]
    # "URL" [ws] "=" [ws], each step optional in the sense that a mismatch jumps ahead.
    if s[pos] in "Uu":
        pos += 1
        if pos < n and s[pos] in "Rr":
            pos += 1
            if pos < n and s[pos] in "Ll":
                pos += 1
                while pos < n and s[pos] in _ASCII_WS:
                    pos += 1
                if pos < n and s[pos] == "=":
                    pos += 1
                    while pos < n and s[pos] in _ASCII_WS:
                        pos += 1
                    url_string = _skip_quotes(s, pos)
        return url_string
    return _skip_quotes(s, pos)


def _skip_quotes(s: str, pos: int) -> str:
    """The "skip quotes" step of the refresh algorithm: the URL from ``pos`` on."""
    if pos < len(s) and s[pos] in "'\"":
        quote = s[pos]
        rest = s[pos + 1 :]
        end = rest.find(quote)
        return rest if end < 0 else rest[:end]
    return s[pos:]


def parse_robots_directives(values: Sequence[str], names: Sequence[str] = ()) -> tuple[bool, bool]:
    """Read noindex / nofollow from X-Robots-Tag header values.

    Each value is a comma-separated directive list (Google's X-Robots-Tag syntax):
    ``"noindex"``, ``"noindex, nofollow"``, ``"none"`` (= both). A part written
    ``"botname: directive"`` scopes it and the following parts of the same value to that
    user agent; scoped directives count only if ``botname`` (case-insensitive) is in
    ``names``. Valued directives such as ``"unavailable_after: 25 Jun 2010 15:00:00 PST"``
    or ``"max-snippet: 20"`` are recognised and ignored.

    Args:
        values: X-Robots-Tag header values, in any order.
        names: user-agent product tokens this crawler answers to (e.g. ``("skitter",)``).

    Returns:
        (noindex, nofollow). Never raises.
    """
    own = {n.strip().lower() for n in names}
    noindex = nofollow = False
    for value in values:
        scope: str | None = None
        for part in value.split(","):
            head, sep, rest = part.partition(":")
            if sep:
                key = head.strip().lower()
                if key in _VALUED_DIRECTIVES:
                    continue
                scope = key
                part = rest
            if scope is not None and scope not in own:
                continue
            for tok in part.lower().split():
                if tok == "noindex":
                    noindex = True
                elif tok == "nofollow":
                    nofollow = True
                elif tok == "none":
                    noindex = nofollow = True
    return noindex, nofollow


def _meta_robots(content: str) -> tuple[bool, bool]:
    noindex = nofollow = False
    for tok in _TOKEN_SPLIT_RE.split(content.lower()):
        if tok == "noindex":
            noindex = True
        elif tok == "nofollow":
            nofollow = True
        elif tok == "none":
            noindex = nofollow = True
    return noindex, nofollow


def _candidates(tree: LexborHTMLParser) -> list[LexborNode]:
    """The elements :func:`extract` reads (no resources), in tree order: those of
    :data:`_SELECTOR`, plus maybe some without the attribute it asks for (the caller skips
    them, as it skips valueless ones).

    Most pages hold no ``<area>``/``<frame>``/``<iframe>``, and their ``<link>``, ``<meta>``,
    ``<base>`` and ``<title>`` all in ``<head>``, which precedes every ``<a>`` in tree order
    (the HTML Standard's tree builder never puts an ``<a>`` in ``<head>``, §13.2.6.4.4-5).
    Then the head's elements and the document's ``<a>`` elements, each in tree order, are
    the same list as the selector's, found by one walk per tag name (a seventh of the
    selector list's cost each). Otherwise (an ``<area>``, a ``<link>`` in the body, an SVG
    ``<title>``...) the selector list is run.
    """
    head = tree.head
    if head is not None and not any(tree.tags(name) for name in _BODY_TAGS):
        in_head = head.css(_HEAD_SELECTOR)
        if len(in_head) == sum(len(tree.tags(name)) for name in _HEAD_TAGS):
            in_head.extend(tree.tags("a"))
            return in_head
    return tree.css(_SELECTOR)


def _utf8_source(body: bytes, text: str, encoding: str) -> str | bytes:
    """What to give the parser for ``text`` decoded from ``body``: ``body`` itself (less
    its BOM) when that is exactly ``text`` in UTF-8, else ``text``. Lexbor parses UTF-8
    bytes; given a str, selectolax encodes it to UTF-8 first (~0.2 M instructions on a
    20 KB rust-doc page holding non-ASCII characters, an eighth of the parse).

    ``body`` is ``text`` in UTF-8 when the encoding is UTF-8 and decoding replaced nothing
    by U+FFFD (a body holding U+FFFD itself takes the text path: same result).
    """
    if encoding != "utf-8" or "\ufffd" in text:
        return text
    return body[3:] if body[:3] == _BOM_UTF8 else body


def _has_token(value: str | None, token: str) -> bool:
    return value is not None and token in value.lower().split()


def extract(
    body: bytes,
    url: str,
    content_type: str | None = None,
    headers_robots: Sequence[str] = (),
    *,
    bot_token: str | None = None,
    resources: bool = False,
    ids: bool = False,
) -> Page:
    """Parse an HTML page and return its links (document order), base URL, title, robots.

    Decoding: :func:`skitter.charset.decode_html` (BOM > Content-Type charset > ``<meta>``
    prescan > UTF-8 > detector > windows-1252). Parsing: Lexbor, an HTML Standard (§13.2)
    tree builder with scripting disabled.

    Links (:class:`skitter.models.Link`), in tree order:

    * ``<a href>`` ("a", anchor = text content), ``<area href>`` ("area", anchor = alt),
      ``<frame src>`` ("frame"), ``<iframe src>`` ("iframe"), ``<link rel=canonical href>``
      ("canonical"), ``<meta http-equiv=refresh content>`` ("refresh", see
      :func:`parse_refresh`; a bare delay is a reload, not a link). An ``href``/``src``
      without a value or absent skips the element; ``href=""`` is a link to the base URL
      itself; ``src=""`` on a frame is about:blank and skipped. SVG ``<a href>`` /
      ``<a xlink:href>`` count as "a".
    * ``url`` = ``urls.join(base_url, raw, encoding)`` (None if unparseable), where the
      query encoding is the document's (UTF-8 for UTF-16 documents, WHATWG URL §4.4
      "encoding-parse a URL"); ``raw`` = the attribute value as written (for "refresh",
      the URL part of ``content``, quotes removed).
    * anchor text: ASCII whitespace stripped and collapsed, at most 256 characters.
    * ``nofollow``: the element's ``rel`` has the token "nofollow" (ASCII
      case-insensitive), or the page is nofollow.
    * with ``resources``, also (kinds in :data:`RESOURCE_KINDS`): ``<img src>`` ("img",
      anchor = alt), SVG ``<image>`` / ``<use>`` ``href`` or ``xlink:href`` ("img"), every
      URL of an ``<img srcset>`` / ``<source srcset>`` ("srcset", see
      :func:`parse_srcset`), ``<video src>``, ``<video poster>``, ``<audio src>``,
      ``<source src>``, ``<track src>`` ("media"), ``<script src>`` ("script"),
      ``<link href>`` whose rel has stylesheet, icon, apple-touch-icon(-precomposed),
      mask-icon or manifest ("link"). Empty values are skipped.

    Base URL: the frozen base URL of the first ``<base>`` with an ``href`` in tree order
    (HTML Standard §4.2.3), resolved against ``url``; falls back to ``url`` when absent or
    unparseable. Robots: ``<meta name=robots content>`` (and ``<meta name=bot_token>``)
    plus ``headers_robots`` (X-Robots-Tag values, see :func:`parse_robots_directives`);
    "none" means noindex + nofollow.

    Args:
        body: the content-decoded response body (any bytes).
        url: the document URL (absolute), the fallback base URL.
        content_type: the raw Content-Type header value, or None.
        headers_robots: the X-Robots-Tag header values.
        bot_token: this crawler's user-agent product token; directives addressed to it
            (``<meta name=TOKEN>``, ``X-Robots-Tag: TOKEN: noindex``) also apply.
        resources: also extract page resources (see above), for link checking.
        ids: also collect the fragment targets into :attr:`Page.ids`: every non-empty
            ``id`` attribute value and every non-empty ``<a name>`` (one extra CSS query).

    Returns:
        A :class:`skitter.models.Page`. Never raises for any input bytes.
    """
    if len(body) > SEGMENT_MIN_BYTES:  # bounded memory: segment by segment
        page = extract_segments(
            _extract_whole, body, url, content_type, headers_robots,
            bot_token=bot_token, resources=resources, ids=ids,
        )  # fmt: skip
        if page is not None:
            return page
    return _extract_whole(
        body, url, content_type, headers_robots, bot_token=bot_token, resources=resources, ids=ids
    )


def _extract_whole(
    body: bytes,
    url: str,
    content_type: str | None,
    headers_robots: Sequence[str],
    *,
    bot_token: str | None,
    resources: bool,
    ids: bool,
) -> Page:
    """:func:`extract` with the page parsed whole (one tree)."""
    text, encoding = decode_html(body, content_type)
    source = _flatten_deep(text) if is_deep(text) else _utf8_source(body, text, encoding)
    url_encoding = "utf-8" if encoding.startswith("utf-16") else encoding
    bot = bot_token.lower() if bot_token else None
    noindex, nofollow = parse_robots_directives(headers_robots, (bot,) if bot is not None else ())
    targets: set[str] = set()
    try:
        tree = LexborHTMLParser(source)
        nodes = tree.css(_SELECTOR_RESOURCES) if resources else _candidates(tree)
        if ids:
            for node in tree.css(_SELECTOR_IDS):
                attrs = node.attributes
                value = attrs.get("id")
                if value:
                    targets.add(value)
                if node.tag == "a":
                    value = attrs.get("name")
                    if value:
                        targets.add(value)
    except Exception:  # the parser must not take the crawl down; treat as an empty page
        return Page(links=[], base_url=url, encoding=encoding, noindex=noindex, nofollow=nofollow)

    base_href: str | None = None
    title: str | None = None
    # (kind, raw, anchor, rel-nofollow) in document order.
    found: list[tuple[str, str, str, bool]] = []
    append = found.append
    for node in nodes:
        tag = node.tag
        # one dict of the element's attributes: half the cost of ``node.attrs`` (a live
        # view asked once per name); same values (first of duplicates, None if valueless)
        attrs = node.attributes
        if tag == "a":
            raw = attrs.get("href")
            if raw is None:
                raw = attrs.get("xlink:href")
                if raw is None:
                    continue
            # text_lexbor: Lexbor's textContent, the same text as text() for less
            append(
                ("a", raw, _anchor(node.text_lexbor()), _has_token(attrs.get("rel"), "nofollow"))
            )
        elif tag == "area":
            raw = attrs.get("href")
            if raw is None:
                continue
            append(
                (
                    "area",
                    raw,
                    _anchor(attrs.get("alt") or ""),
                    _has_token(attrs.get("rel"), "nofollow"),
                )
            )
        elif tag == "meta":
            content = attrs.get("content")
            if content is None:
                continue
            equiv = attrs.get("http-equiv")
            if equiv is not None and equiv.strip(_ASCII_WS).lower() == "refresh":
                target = parse_refresh(content)
                if target is not None:
                    append(("refresh", target, "", False))
                continue
            name = attrs.get("name")
            if name is not None:
                name = name.strip(_ASCII_WS).lower()
                if name == "robots" or (bot is not None and name == bot):
                    ni, nf = _meta_robots(content)
                    noindex = noindex or ni
                    nofollow = nofollow or nf
        elif tag == "link":
            raw = attrs.get("href")
            rel = attrs.get("rel")
            if raw is not None and rel is not None:
                tokens = rel.lower().split()
                if "canonical" in tokens:
                    append(("canonical", raw, "", "nofollow" in tokens))
                elif resources and raw and not _RESOURCE_RELS.isdisjoint(tokens):
                    append(("link", raw, "", False))
        elif tag == "img" or tag == "source":
            alt = _anchor(attrs.get("alt") or "") if tag == "img" else ""
            raw = attrs.get("src")
            if raw:
                append(("img" if tag == "img" else "media", raw, alt, False))
            srcset = attrs.get("srcset")
            if srcset:
                for raw in parse_srcset(srcset):
                    append(("srcset", raw, alt, False))
        elif tag in ("video", "audio", "track"):
            raw = attrs.get("src")
            if raw:
                append(("media", raw, "", False))
            if tag == "video":
                raw = attrs.get("poster")
                if raw:
                    append(("media", raw, "", False))
        elif tag in ("image", "use"):
            # SVG: SVG 2 ``href`` wins over SVG 1.1 ``xlink:href`` when both are present
            raw = attrs.get("href")
            if raw is None:
                raw = attrs.get("xlink:href")
            if raw:
                append(("img", raw, "", False))
        elif tag == "script":
            raw = attrs.get("src")
            if raw:
                append(("script", raw, "", False))
        elif tag in ("iframe", "frame"):
            raw = attrs.get("src")
            if raw:
                append((tag, raw, "", False))
        elif tag == "base":
            if base_href is None and "href" in attrs:  # a valueless href is ""
                base_href = attrs["href"] or ""
        elif tag == "title" and title is None:
            title = _collapse(node.text())

    base_url = url
    if base_href is not None:
        frozen = urls.join(url, base_href, url_encoding)
        if frozen is not None:
            base_url = frozen

    join = Joiner(base_url, url_encoding).join  # the base's prefix and directory once
    resolved: dict[str, str | None] = {}  # pages repeat hrefs; joining dominates the cost
    links: list[Link] = []
    add = links.append
    new = tuple.__new__  # Link(...) without its keyword handling: one per link
    for kind, raw, anchor, rel_nofollow in found:
        if raw in resolved:
            target = resolved[raw]
        else:
            target = resolved[raw] = join(raw)
        add(new(Link, (target, raw, kind, anchor, nofollow or rel_nofollow)))
    return Page(
        links=links,
        base_url=base_url,
        encoding=encoding,
        title=title or "",
        noindex=noindex,
        nofollow=nofollow,
        ids=frozenset(targets),
    )
