"""Sitemaps: reading sitemap files and bounding the sitemap graph (pure, no I/O).

Formats read (sitemaps.org protocol 0.9, "Sitemaps XML format" and "Other Sitemap formats"):

* XML ``<urlset>`` (``<url><loc>``, ``<lastmod>``) and ``<sitemapindex>`` (``<sitemap><loc>``,
  ``<lastmod>``), any namespace (or none);
* RSS 2.0 / RSS 1.0 (``<item><link>``, ``<pubDate>``/``<dc:date>`` as lastmod) and Atom
  0.3/1.0 feeds (``<entry><link href>`` with no ``rel`` or ``rel="alternate"``,
  ``<updated>``/``<modified>`` as lastmod);
* plain text: one URL per line (UTF-8), blank lines ignored.

Bodies are gunzipped as many layers as the bytes hold (a ``.xml.gz`` served with
``Content-Encoding: gzip`` arrives gzipped twice, and some servers compress again), whatever
the headers say, up to ``max_bytes`` decoded (the protocol's 50 MiB). XML is parsed with
defusedxml: any entity declaration (billion laughs) or external reference (XXE) aborts the
parse with an error; the entries read before an error or the size cap are kept. A file lists
at most ``max_entries`` URLs (the protocol's 50,000); more are cut and counted.

:class:`SitemapGraph` bounds the walk through indexes: each sitemap URL is read once (loops,
self-references and redirects back to a sitemap already read are dropped), index nesting is
bounded by ``max_depth`` and the number of sitemap files by ``max_files``.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from skitter import urls

__all__ = [
    "MAX_SITEMAP_BYTES",
    "MAX_SITEMAP_DEPTH",
    "MAX_SITEMAP_ENTRIES",
    "SITEMAP_MODES",
    "SitemapDoc",
    "SitemapEntry",
    "SitemapGraph",
    "SitemapStats",
    "gunzip_layers",
    "parse_sitemap",
]

#: Values of ``--sitemaps``.
SITEMAP_MODES = ("robots", "also", "only", "off")
#: Decoded size cap of one sitemap file (bytes; sitemaps.org: 50 MiB uncompressed).
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
#: URLs read from one sitemap file (sitemaps.org: at most 50,000).
MAX_SITEMAP_ENTRIES = 50_000
#: Index nesting: sitemaps more than this many index levels below a root are not read.
MAX_SITEMAP_DEPTH = 5
#: Sitemap files read in one crawl.
MAX_SITEMAP_FILES = 10_000
#: gzip layers undone at most (each layer is bounded by the size cap anyway).
_MAX_LAYERS = 8
_GZIP_MAGIC = b"\x1f\x8b"

Kind = Literal["urlset", "index", "feed", "text", "unknown"]


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One URL listed by a sitemap.

    Attributes:
        url: absolute URL (a relative ``loc`` is joined against the sitemap URL), not
            canonicalised.
        lastmod: the ``lastmod`` (or feed date) text as written, stripped, or None.
    """

    url: str
    lastmod: str | None = None


@dataclass(slots=True)
class SitemapDoc:
    """What one sitemap file holds.

    Attributes:
        kind: "urlset", "index" (a ``<sitemapindex>``), "feed" (RSS/Atom), "text" or
            "unknown" (nothing recognisable).
        urls: page URLs listed (urlset, feed, text), in file order.
        sitemaps: child sitemaps listed (index), in file order.
        error: why reading stopped early (XML error, entities forbidden, bad gzip), or None.
        cut: the size or entry cap was reached (entries past it are dropped).
        decoded_bytes: size after gunzipping (bytes).
    """

    kind: Kind = "unknown"
    urls: list[SitemapEntry] = field(default_factory=list)
    sitemaps: list[SitemapEntry] = field(default_factory=list)
    error: str | None = None
    cut: bool = False
    decoded_bytes: int = 0


def gunzip_layers(
    data: bytes, max_bytes: int = MAX_SITEMAP_BYTES
) -> tuple[bytes, bool, str | None]:
    """Undo gzip layers while the bytes start with the gzip magic (RFC 1952 §2.3.1).

    Returns ``(data, cut, error)``: ``cut`` when a layer decoded past ``max_bytes`` (the data
    is then its first ``max_bytes`` bytes and no further layer is tried); ``error`` when a
    layer is corrupt (the data decoded from it so far is returned, or the layer's input if
    nothing came out). Never raises.
    """
    cut = False
    for _ in range(_MAX_LAYERS):
        if not data.startswith(_GZIP_MAGIC):
            break
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(data, max_bytes + 1)
        except zlib.error as e:
            return data, cut, f"bad gzip data: {e}"
        if len(out) > max_bytes:
            return out[:max_bytes], True, None
        if not d.eof:  # truncated stream: keep what came out
            return out, cut, "truncated gzip data"
        data = out
    if len(data) > max_bytes:
        data, cut = data[:max_bytes], True
    return data, cut, None


def _local(tag: object) -> str:
    """An element's local name, lower-cased (namespace dropped)."""
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _child_text(elem: Element, *names: str) -> str | None:
    for child in elem:
        if _local(child.tag) in names and child.text and child.text.strip():
            return child.text.strip()
    return None


def _atom_link(elem: Element) -> str | None:
    for child in elem:
        if _local(child.tag) != "link":
            continue
        rel = (child.get("rel") or "alternate").strip().lower()
        href = child.get("href")
        if rel == "alternate" and href and href.strip():
            return href.strip()
    return None


def _entries_xml(data: bytes, doc: SitemapDoc) -> Iterator[tuple[str, str, str | None]]:
    """Yield ``("url"|"sitemap", loc, lastmod)`` from an XML sitemap or feed, setting
    ``doc.kind``; raises ParseError / DefusedXmlException on bad or hostile XML."""
    root_seen = False
    for event, elem in SafeET.iterparse(io.BytesIO(data), events=("start", "end")):
        name = _local(elem.tag)
        if event == "start":
            if not root_seen:
                root_seen = True
                if name == "urlset":
                    doc.kind = "urlset"
                elif name == "sitemapindex":
                    doc.kind = "index"
                elif name in ("rss", "rdf", "feed", "channel"):
                    doc.kind = "feed"
            continue
        kind = doc.kind
        if kind == "urlset" and name == "url":
            loc = _child_text(elem, "loc")
            if loc:
                yield "url", loc, _child_text(elem, "lastmod")
            elem.clear()
        elif kind == "index" and name == "sitemap":
            loc = _child_text(elem, "loc")
            if loc:
                yield "sitemap", loc, _child_text(elem, "lastmod")
            elem.clear()
        elif kind == "feed" and name == "item":
            loc = _child_text(elem, "link")
            if loc:
                yield "url", loc, _child_text(elem, "pubdate", "date", "updated")
            elem.clear()
        elif kind == "feed" and name == "entry":
            loc = _atom_link(elem)
            if loc:
                yield "url", loc, _child_text(elem, "updated", "modified", "published")
            elem.clear()


def _entries_text(data: bytes) -> Iterator[tuple[str, str, str | None]]:
    text = data.decode("utf-8", "replace")
    for line in text.splitlines():
        line = line.strip()
        if line[:8].lower().startswith(("http://", "https://")):
            yield "url", line, None


def parse_sitemap(
    body: bytes,
    sitemap_url: str,
    *,
    max_bytes: int = MAX_SITEMAP_BYTES,
    max_entries: int = MAX_SITEMAP_ENTRIES,
) -> SitemapDoc:
    """Read one sitemap file (see the module doc for the formats).

    Args:
        body: the response body with HTTP Content-Encoding already removed (further gzip
            layers are undone here).
        sitemap_url: the URL the file was read from (after redirects); relative locations
            are joined against it (lenient: the protocol asks for absolute URLs).
        max_bytes: decoded size cap in bytes; the rest is not read (``cut``).
        max_entries: URLs plus child sitemaps read at most; the rest are dropped (``cut``).

    Returns:
        A :class:`SitemapDoc`; never raises. Only http(s) URLs are kept.
    """
    data, cut, error = gunzip_layers(body, max_bytes)
    doc = SitemapDoc(cut=cut, error=error, decoded_bytes=len(data))
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        return doc
    xml = head.startswith(b"<")
    entries = _entries_xml(head, doc) if xml else _entries_text(head)
    if not xml:
        doc.kind = "text"
    n = 0
    try:
        for what, loc, lastmod in entries:
            if n >= max_entries:
                doc.cut = True
                break
            url = urls.join(sitemap_url, loc)
            if url is None or not urls.is_http(url):
                continue
            n += 1
            entry = SitemapEntry(url, lastmod)
            (doc.urls if what == "url" else doc.sitemaps).append(entry)
    except DefusedXmlException as e:
        doc.error = f"XML refused: {type(e).__name__}"
    except ParseError as e:
        if not doc.cut:  # a file cut at the size cap ends in the middle of an element
            doc.error = f"XML error: {e}"
    return doc


@dataclass(slots=True)
class SitemapStats:
    """The report.json ``sitemaps`` block.

    Attributes:
        read: sitemap files fetched and parsed.
        entries: page URLs listed by them (before filters).
        out_of_scope: entries dropped by the scope.
        robots_disallowed: entries dropped by robots.txt.
        cut: sitemaps or entries dropped by a bound (nesting depth, file count, size or
            entry cap).
        loops: sitemap URLs dropped because they were already read or queued (loops,
            self-references, redirects back).
        errors: sitemap files that failed (fetch error, non-2xx, XML error).
    """

    read: int = 0
    entries: int = 0
    out_of_scope: int = 0
    robots_disallowed: int = 0
    cut: int = 0
    loops: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, int]:
        """The block as written to report.json."""
        return {
            "read": self.read,
            "entries": self.entries,
            "out_of_scope": self.out_of_scope,
            "robots_disallowed": self.robots_disallowed,
            "cut": self.cut,
            "loops": self.loops,
            "errors": self.errors,
        }


class SitemapGraph:
    """Which sitemap files to read: each canonical URL once, nesting and count bounded.

    A root sitemap (from robots.txt, ``--sitemap`` or the ``/sitemap.xml`` probe) is at
    level 0; a sitemap listed by an index at level ``L`` is at level ``L + 1`` and is read
    only when ``L + 1 <= max_depth``. So index files are expanded at most ``max_depth``
    levels below a root; the children of a deeper index are dropped and counted as cut.

    Args:
        max_depth: see above (>= 0).
        max_files: sitemap files admitted in all (>= 1).
        stats: the counters to update (a new :class:`SitemapStats` if None).
    """

    __slots__ = ("_known", "max_depth", "max_files", "stats")

    def __init__(
        self,
        max_depth: int = MAX_SITEMAP_DEPTH,
        max_files: int = MAX_SITEMAP_FILES,
        stats: SitemapStats | None = None,
    ) -> None:
        if max_depth < 0:
            raise ValueError(f"max sitemap depth must be >= 0, got {max_depth}")
        if max_files < 1:
            raise ValueError(f"max sitemap files must be >= 1, got {max_files}")
        self.max_depth = max_depth
        self.max_files = max_files
        self.stats = stats if stats is not None else SitemapStats()
        self._known: dict[str, int] = {}  # canonical sitemap URL -> level

    def __len__(self) -> int:
        return len(self._known)

    def admit(self, url: str, level: int = 0) -> str | None:
        """Should the sitemap at ``url`` (listed at ``level``) be read? Returns its canonical
        URL to fetch, or None (unparseable, already known, too deep, too many files; the
        reason is counted in :attr:`stats`)."""
        canon = urls.canonicalize(url)
        if canon is None or not urls.is_http(canon):
            self.stats.errors += 1
            return None
        if canon in self._known:
            self.stats.loops += 1
            return None
        if level > self.max_depth or len(self._known) >= self.max_files:
            self.stats.cut += 1
            return None
        self._known[canon] = level
        return canon

    def arrived(self, url: str, final_url: str) -> bool:
        """A fetch of ``url`` was redirected to ``final_url``: True to read the body, False
        when the target is another sitemap already known (a redirect back; counted in
        ``loops``). An unknown target is recorded at the level of ``url``."""
        canon = urls.canonicalize(final_url)
        if canon is None or canon == url:
            return True
        if canon in self._known:
            self.stats.loops += 1
            return False
        self._known[canon] = self._known.get(url, 0)
        return True

    def level(self, url: str) -> int:
        """The level a known sitemap URL was admitted at (0 if unknown)."""
        return self._known.get(url, 0)

    def restore(self, url: str, level: int) -> None:
        """Mark ``url`` (canonical) known at ``level`` (resume from a journal)."""
        self._known.setdefault(url, level)
