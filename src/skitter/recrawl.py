"""Recrawl: revisiting a previous crawl's pages with conditional requests (``--since``).

:func:`load_previous` reads a finished (or stopped) crawl folder -- never writes to it --
and :class:`Recrawl` answers, for the new crawl:

* which URLs to revisit (every requested URL of the previous pages.jsonl, at its depth);
* the validators to send, byte for byte as stored (RFC 9110 §13.1): ``If-None-Match`` with
  the ETag as received (quotes and ``W/`` included), ``If-Modified-Since`` with the
  Last-Modified value as received (an HTTP-date echoed, never reformatted);
* for a 304: the revisit record's ``WARC-Refers-To-Target-URI``/``-Date``/``WARC-Refers-To``
  (the previous response record of that URL, read from the previous WARC files) and the
  previous links of the page (carried over into links.tsv and followed);
* how each new record compares (:meth:`Recrawl.classify`): ``unchanged`` (304, or the same
  body digest), ``changed``, ``gone`` (404/410 where there was a page), ``new`` (not in the
  previous crawl); the report.json ``recrawl`` block adds ``bytes_saved`` (the previous body
  sizes of the 304 answers).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skitter.errors import StateError
from skitter.export.linkfile import links_file
from skitter.export.links import LinkRow, read_rows
from skitter.export.pages import read_records
from skitter.export.warc import WarcRevisit
from skitter.fetch.base import Fetcher
from skitter.lease_policy import LeasePolicy, Pause
from skitter.models import Link, Page, Request, Response
from skitter.settings import CrawlSettings
from skitter.state import PAGES_FILE, STATE_FILE, load_state

__all__ = ["PreviousPage", "Recrawl", "RecrawlPolicy", "load_previous"]

#: Statuses that mean the page is gone.
GONE_STATUSES = frozenset({404, 410})


@dataclass(frozen=True, slots=True)
class PreviousPage:
    """One pages.jsonl record of the previous crawl (the fields a recrawl uses)."""

    url: str
    final_url: str
    status: int | None
    depth: int
    sha1: str | None
    bytes: int
    etag: str | None
    last_modified: str | None


class Recrawl:
    """The previous crawl, as the new one needs it; see the module doc.

    Args:
        settings: the previous crawl's settings (from its state.json).
        pages: its records by requested URL and by final URL.
        captures: ``WARC-Target-URI`` -> (``WARC-Date``, ``WARC-Record-ID``) of its response
            records (the last one of each URI).
        links: its links.tsv rows by source URL.
        path: the folder it was read from (``--since PREV`` as given; the stored
            ``settings.out_dir`` is where it was written, which may have moved since).
    """

    def __init__(
        self,
        settings: CrawlSettings,
        pages: dict[str, PreviousPage],
        captures: dict[str, tuple[str, str]],
        links: dict[str, list[LinkRow]],
        path: str | None = None,
    ) -> None:
        self.settings = settings
        self.path = settings.out_dir if path is None else path
        self.pages = pages
        self.captures = captures
        self.links = links
        self._by_final = {p.final_url: p for p in pages.values()}
        self.counts: Counter[str] = Counter()
        self.bytes_saved = 0

    def revisits(self) -> list[PreviousPage]:
        """The previous pages to request again (requested URLs, file order, once each)."""
        seen: set[str] = set()
        out = []
        for p in self.pages.values():
            if p.url not in seen:
                seen.add(p.url)
                out.append(p)
        return out

    def validators(self, url: str) -> tuple[tuple[str, str], ...]:
        """The conditional request headers for ``url`` (empty if nothing was stored): the
        validators of the previous response of that URL (a redirect's target included)."""
        p = self._by_final.get(url) or self.pages.get(url)
        if p is None or p.status is None or not 200 <= p.status < 300:
            return ()
        h: list[tuple[str, str]] = []
        if p.etag:
            h.append(("If-None-Match", p.etag))
        if p.last_modified:
            h.append(("If-Modified-Since", p.last_modified))
        return tuple(h)

    def not_modified(self, url: str) -> WarcRevisit | None:
        """The server-not-modified revisit record for a 304 of ``url``, naming the previous
        response record of that URL (None if the previous crawl archived none)."""
        cap = self.captures.get(url)
        if cap is None:
            return None
        return WarcRevisit("server-not-modified", url, cap[0], cap[1] or None)

    def previous_page(self, url: str) -> Page:
        """A :class:`Page` holding the previous links of ``url`` (for a 304: its links are
        still part of the link graph and are followed)."""
        links = []
        for r in self.links.get(url, ()):
            if r.kind in ("redirect", "sitemap"):
                continue
            target = r.target + ("#" + r.fragment if r.fragment else "")
            links.append(Link(target or None, target, r.kind, r.anchor, r.nofollow))
        return Page(links=links, base_url=url)

    def classify(self, url: str, status: int | None, sha1: str | None) -> str:
        """``new``, ``unchanged``, ``changed``, ``gone`` or ``error`` (no response) for a
        record of the new crawl (``url``: its requested URL)."""
        p = self.pages.get(url)
        if p is None:
            return "new"
        if status is None:
            return "error"
        if status == 304:
            return "unchanged"
        if status in GONE_STATUSES:
            return (
                "gone" if p.status is not None and p.status not in GONE_STATUSES else ("unchanged")
            )
        if sha1 is not None and sha1 == p.sha1 and status == p.status:
            return "unchanged"
        return "changed"

    def note(self, url: str, status: int | None, sha1: str | None) -> str:
        """Classify and count one record of the new crawl; returns its class."""
        kind = self.classify(url, status, sha1)
        self.counts[kind] += 1
        if status == 304:
            p = self.pages.get(url)
            if p is not None:
                self.bytes_saved += p.bytes
        return kind

    def report(self) -> dict[str, Any]:
        """The report.json ``recrawl`` block."""
        return {
            "since": self.path,
            "unchanged": self.counts.get("unchanged", 0),
            "changed": self.counts.get("changed", 0),
            "gone": self.counts.get("gone", 0),
            "new": self.counts.get("new", 0),
            "errors": self.counts.get("error", 0),
            "bytes_saved": self.bytes_saved,
        }


class RecrawlPolicy(LeasePolicy):
    """The lease policy of a recrawl: a plain crawl whose fetches carry the previous
    response's validators (:meth:`Recrawl.validators`).

    Attributes:
        recrawl: the previous crawl.
    """

    def __init__(self, recrawl: Recrawl) -> None:
        self.recrawl = recrawl

    async def fetch(self, fetcher: Fetcher, request: Request, host: str, pause: Pause) -> Response:
        """GET ``request`` with ``If-None-Match`` / ``If-Modified-Since`` when known."""
        return await fetcher.fetch(request, headers=self.recrawl.validators(request.url))


def _read_captures(out_dir: Path) -> dict[str, tuple[str, str]]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    captures: dict[str, tuple[str, str]] = {}
    files = [  # a crawl's, a --processes crawl's shards', a --levels crawl's levels'
        *sorted(out_dir.glob("*.warc.gz")),
        *sorted(out_dir.glob("shards/*/*.warc.gz")),
        *sorted(out_dir.glob("levels/*/*.warc.gz")),
    ]
    for path in files:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=False):
                h = rec.headers
                uri = h.get("WARC-Target-URI")
                if uri:
                    captures[uri] = (h.get("WARC-Date") or "", h.get("WARC-Record-ID") or "")
    return captures


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def load_previous(path: str | os.PathLike[str], *, warc: bool = True) -> Recrawl:
    """Read the previous crawl folder ``path`` (state.json, pages.jsonl, links.tsv, and the
    WARC files' response record headers unless ``warc`` is False: a quick validation).

    Raises:
        StateError: no crawl there (a check-links or fetch folder included), another format
            version, or damaged files (one line).
    """
    out = Path(path)
    if not (out / STATE_FILE).exists():
        raise StateError(f"--since {out}: no crawl there (state.json missing)")
    settings = load_state(out)
    if settings.check_links or not settings.extract_links:  # its settings would be inherited
        what = "skitter check-links" if settings.check_links else "skitter fetch"
        raise StateError(f"--since {out}: written by {what}, not by a crawl")
    pages_path = out / PAGES_FILE
    if not pages_path.exists():
        raise StateError(f"--since {out}: no {PAGES_FILE} (not a crawl folder)")
    pages: dict[str, PreviousPage] = {}
    try:
        for r in read_records(pages_path, strict=True):
            url, final = r.get("url"), r.get("final_url")
            if not isinstance(url, str) or not isinstance(final, str):
                raise ValueError(f"{pages_path}: a record without url")
            status = r.get("status")
            p = PreviousPage(
                url=url,
                final_url=final,
                status=status if isinstance(status, int) else None,
                depth=_int(r.get("depth")),
                sha1=r.get("sha1") if isinstance(r.get("sha1"), str) else None,
                bytes=_int(r.get("bytes")),
                etag=r.get("etag") if isinstance(r.get("etag"), str) else None,
                last_modified=(
                    r.get("last_modified") if isinstance(r.get("last_modified"), str) else None
                ),
            )
            pages[url] = p
        links: dict[str, list[LinkRow]] = defaultdict(list)
        links_path = links_file(out)
        if links_path.exists():
            for row in read_rows(links_path, strict=True):
                links[row.source].append(row)
        captures = _read_captures(out) if warc else {}
    except (OSError, ValueError) as exc:
        raise StateError(f"--since {out} is damaged: {exc}") from None
    except Exception as exc:  # a WARC reader error on a damaged file
        raise StateError(f"--since {out} is damaged: {type(exc).__name__}: {exc}") from None
    return Recrawl(settings, pages, captures, dict(links), os.fspath(path))
