"""Plain value types passed between Skitter's parts.

All are immutable: frozen, slotted dataclasses, or named tuples for the two built once per
link found (:class:`Link`, :class:`Request`); none does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Hop", "Lease", "Link", "Page", "Request", "Response"]


@dataclass(frozen=True, slots=True)
class Hop:
    """One redirect hop: ``url`` answered with ``status`` (3xx) pointing onwards."""

    url: str
    status: int


class Request(NamedTuple):
    """A URL to fetch (an immutable named tuple: one is built per link found, so it is
    built cheaply).

    Attributes:
        url: canonical absolute URL, exactly as sent on the wire.
        depth: hops from a seed (seed = 0).
        referer: URL of the page that linked here, or None for seeds.
        origin_url: for a redirect continuation, the URL first requested; else None.
        redirects: hops already followed on the way here (empty unless a continuation).
        priority: lower is fetched first within a host (default 0).
        check_only: only check that the URL answers (link checking: HEAD first, falling
            back to GET; the body is not stored or parsed, and no links are followed).
    """

    url: str
    depth: int = 0
    referer: str | None = None
    origin_url: str | None = None
    redirects: tuple[Hop, ...] = ()
    priority: int = 0
    check_only: bool = False

    @property
    def requested_url(self) -> str:
        """The URL this request's outcome is recorded under (the origin of a redirect chain)."""
        return self.origin_url if self.origin_url is not None else self.url


@dataclass(frozen=True, slots=True)
class Lease:
    """A request handed out by the frontier for fetching.

    Attributes:
        request: the request to fetch.
        host: the host key the request belongs to (politeness unit).
        token: fencing token; ack/retry with a stale token is rejected.
        expires_at: clock time (seconds) after which the lease may be handed out again.
        attempts: fetch attempts already made for this URL before this lease.
    """

    request: Request
    host: str
    token: int
    expires_at: float
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class Response:
    """One HTTP response (a single hop; redirects are not followed by the fetcher).

    Attributes:
        url: the URL requested.
        status: HTTP status code.
        reason: reason phrase.
        headers: response headers as (name, value) pairs in wire order, values decoded
            as latin-1 (so raw bytes round-trip).
        body: decoded (Content-Encoding removed) body, at most ``max_body_bytes``.
        raw_body: body bytes as received (still content-encoded), for the WARC record.
        http_version: e.g. "1.1".
        elapsed_s: seconds from request start to the end of the body.
        request_headers: the request headers actually sent, in order.
        peer_ip: the IP address connected to, if known.
        truncated: the body was cut at the size cap (only when the fetch asked for that,
            e.g. robots.txt); ``body`` holds the first ``max_body_bytes`` decoded bytes.
        raw_head: the status line and header section exactly as received (bytes, ending
            with the empty line), for the WARC record; None if not known.
        note: how the body was read when it was not as labelled (e.g. "Content-Encoding
            gzip not applied: ..."), for ``error_detail`` of a good page; None normally.
    """

    url: str
    status: int
    reason: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    raw_body: bytes = b""
    http_version: str = "1.1"
    elapsed_s: float = 0.0
    request_headers: tuple[tuple[str, str], ...] = ()
    peer_ip: str | None = None
    truncated: bool = False
    note: str | None = None
    raw_head: bytes | None = None

    def header(self, name: str) -> str | None:
        """The first header value named ``name`` (case-insensitive), or None."""
        low = name.lower()
        for k, v in self.headers:
            if k.lower() == low:
                return v
        return None

    def header_all(self, name: str) -> list[str]:
        """Every value of header ``name`` (case-insensitive), in wire order."""
        low = name.lower()
        return [v for k, v in self.headers if k.lower() == low]

    @property
    def content_type(self) -> str | None:
        """Media type without parameters, lower-cased (e.g. "text/html"), or None."""
        ct = self.header("content-type")
        if not ct:
            return None
        return ct.split(";", 1)[0].strip().lower() or None


class Link(NamedTuple):
    """A link element found in a page.

    Attributes:
        url: absolute URL after WHATWG joining against the document base (not canonical),
            fragment included; None if the href could not be parsed.
        raw: the attribute value as written.
        kind: "a", "area", "frame", "iframe", "canonical", "refresh", "redirect"; with
            resource extraction also "img", "srcset", "media", "script", "link"
            (see :data:`skitter.links.RESOURCE_KINDS`).
        anchor: anchor text, whitespace collapsed, at most 256 characters.
        nofollow: rel contains "nofollow" (or the page's meta robots says nofollow).
    """

    url: str | None
    raw: str
    kind: str
    anchor: str = ""
    nofollow: bool = False


@dataclass(frozen=True, slots=True)
class Page:
    """What parsing a fetched HTML page yields.

    Attributes:
        links: link elements in document order.
        base_url: the document base URL used for joining.
        encoding: the Python codec name used to decode the body.
        title: document title ("" if none).
        noindex / nofollow: from meta robots and X-Robots-Tag.
        ids: the fragment targets of the page -- every ``id`` value and every ``<a name>``
            -- when extraction was asked for them (link checking), else empty.
    """

    links: list[Link] = field(default_factory=list)
    base_url: str = ""
    encoding: str = "utf-8"
    title: str = ""
    noindex: bool = False
    nofollow: bool = False
    ids: frozenset[str] = frozenset()
