"""The crawl's duplicate-page stage: verdicts, WARC revisits, the per-host ratio cut.

Wraps the pure :class:`skitter.dedup.Deduper` with what the crawl needs around it:

* :meth:`DuplicateStage.examine` -- for one fetched 2xx response: its body digest (the
  pages.jsonl ``sha1``), its SimHash (``--dedup near``, HTML), whether it duplicates an
  earlier page and, for an exact duplicate whose WARC payload (the body as received) is
  byte for byte the earlier capture's, the ``revisit`` record to write instead of a response
  (WARC 1.1 §6.7.2, identical-payload-digest);
* :meth:`DuplicateStage.captured` -- after the WARC write: remembers an original's payload
  digest and ``WARC-Date`` (what a later revisit refers to);
* :meth:`DuplicateStage.host_cut` -- a host whose recorded pages are mostly duplicates
  (``--max-duplicate-ratio`` after ``duplicate_ratio_min_pages`` pages) gets no more links
  queued (links.tsv decision ``trap``);
* :meth:`DuplicateStage.rebuild` -- on resume, the index and the per-host counts come back
  from pages.jsonl (``sha1``, ``simhash``, ``duplicate``). Payload digests and dates of
  captures made before the resume are not in pages.jsonl: :attr:`DuplicateStage.earlier`
  (:class:`skitter.earlier_captures.EarlierCaptures`) finds them in the crawl's WARC files
  and their CDXJ indexes when a duplicate of such a page comes; one it cannot find gets a
  full response record (never a revisit that could point at nothing).

Not thread-safe; one per crawler process (with ``--processes`` each process dedups the
pages of the hosts it owns: duplicates across processes are not found).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from skitter.charset import decode_html
from skitter.dedup import Deduper, Duplicate, digest_key, simhash, simhash_hex, visible_text
from skitter.earlier_captures import EarlierCaptures
from skitter.export.warc import WarcRevisit
from skitter.settings import QualitySettings

__all__ = ["DuplicateStage", "PageVerdict"]

#: URLs listed per defence in report.json.
MAX_REPORTED_URLS = 100


@dataclass(frozen=True, slots=True)
class PageVerdict:
    """What the stage found about one response.

    Attributes:
        sha1: hex SHA-1 of the decoded body (pages.jsonl ``sha1``), None for no body.
        simhash: 16 hex digits (``--dedup near``, HTML pages), else None.
        duplicate: the earlier page this one duplicates, or None.
        revisit: the revisit record to write instead of the response record, or None.
        payload_sha1: SHA-1 of the body as received (the WARC payload), raw bytes.
    """

    sha1: str | None
    simhash: str | None = None
    duplicate: Duplicate | None = None
    revisit: WarcRevisit | None = None
    payload_sha1: bytes = b""


class DuplicateStage:
    """See the module doc.

    Args:
        settings: the crawl's :class:`~skitter.settings.QualitySettings`.

    Raises:
        ValueError: bad ``dedup`` mode or distance.
    """

    def __init__(self, settings: QualitySettings) -> None:
        self.settings = settings
        self._dedup = Deduper(settings.dedup, settings.near_dup_distance)
        #: digest_key of an original's decoded-body digest -> its payload SHA-1's first 12
        #: bytes then its WARC-Date (UTF-8): what a revisit of the same payload refers to. One
        #: bytes object a page (~80 bytes, not ~170 for a tuple of an int and a str: 2 MB less
        #: on rust-doc's 21,663 pages)
        self._captures: dict[int | str, bytes] = {}
        self._pages: Counter[str] = Counter()  # host -> pages examined
        self._dups: Counter[str] = Counter()  # host -> duplicates among them
        self._kinds: Counter[str] = Counter()
        #: hosts cut by the ratio (links to them are dropped as traps)
        self.cut_hosts: set[str] = set()
        self.revisits = 0
        self.trapped = 0
        #: captures of the sessions before a resume (set by :mod:`skitter.recovery`)
        self.earlier: EarlierCaptures | None = None
        self._trapped_urls: list[str] = []

    @property
    def enabled(self) -> bool:
        """False for ``--dedup off``."""
        return self._dedup.mode != "off"

    def examine(
        self,
        url: str,
        host: str,
        body: bytes,
        raw_body: bytes,
        content_type: str | None,
        is_html: bool,
    ) -> PageVerdict:
        """Judge one 2xx response (``url``: its final URL, ``host``: its host key).

        ``content_type`` is the raw Content-Type header (for the HTML charset). Counts the
        page for its host's ratio. Never raises.
        """
        if not body:
            return PageVerdict(None)
        body_sha1 = hashlib.sha1(body).digest()
        digest = body_sha1.hex()
        # a body sent without content-coding is its payload: one SHA-1 for both
        payload = body_sha1 if raw_body is body else hashlib.sha1(raw_body).digest()
        fp: int | None = None
        if self._dedup.wants_simhash and is_html:
            text, _ = decode_html(body, content_type)
            fp = simhash(visible_text(text))
        dup = self._dedup.check(url, digest, fp)
        self._pages[host] += 1
        revisit: WarcRevisit | None = None
        if dup is not None:
            self._dups[host] += 1
            if self.host_cut(host):
                self.cut_hosts.add(host)
            self._kinds[dup.kind] += 1
            cap = self._captures.get(digest_key(digest)) if dup.kind == "exact" else None
            if cap is None and dup.kind == "exact" and self.earlier:
                cap = self._earlier_capture(digest, dup.of, payload)
            if cap is not None and cap[:12] == payload[:12]:
                revisit = WarcRevisit("identical-payload-digest", dup.of, cap[12:].decode())
        return PageVerdict(
            digest,
            simhash_hex(fp) if fp is not None else None,
            dup,
            revisit,
            payload,
        )

    def _earlier_capture(self, digest: str, of: str, payload: bytes) -> bytes | None:
        """The capture of ``of`` (an original page of an earlier session) with this payload,
        found in the WARC files (:attr:`earlier`), remembered as this session's are."""
        assert self.earlier is not None
        date = self.earlier.date_of(of, payload)
        if date is None:
            return None
        cap = payload[:12].ljust(12, b"\0") + date.encode()
        self._captures.setdefault(digest_key(digest), cap)
        return cap

    def captured(self, url: str, verdict: PageVerdict, warc_date: str) -> None:
        """The response of an original page went to the WARC at ``warc_date`` (its
        ``WARC-Date``): later exact duplicates with the same payload refer to it."""
        if verdict.duplicate is None and verdict.sha1 is not None and self.enabled:
            cap = verdict.payload_sha1[:12].ljust(12, b"\0") + warc_date.encode()
            self._captures.setdefault(digest_key(verdict.sha1), cap)

    def host_cut(self, host: str) -> bool:
        """True when ``host`` serves mostly duplicates: no more of its links are queued."""
        ratio = self.settings.max_duplicate_ratio
        if ratio is None or not self.enabled:
            return False
        n = self._pages.get(host, 0)
        return n >= self.settings.duplicate_ratio_min_pages and self._dups[host] > ratio * n

    def note_trapped(self, url: str) -> None:
        """A link to a cut host was dropped (links.tsv ``trap``)."""
        self.trapped += 1
        if len(self._trapped_urls) < MAX_REPORTED_URLS:
            self._trapped_urls.append(url)

    def rebuild(self, records: Iterable[dict[str, Any]], host_of: Any) -> int:
        """Resume: replay pages.jsonl objects (file order); ``host_of(url)`` gives a host
        key. Returns the pages replayed."""
        n = 0
        for r in records:
            digest = r.get("sha1")
            status = r.get("status")
            if not isinstance(digest, str) or not isinstance(status, int):
                continue
            if not 200 <= status < 300 or not r.get("bytes"):
                continue
            url = r.get("final_url") or r.get("url")
            if not isinstance(url, str):
                continue
            host = host_of(r.get("url") or url)
            kind = r.get("duplicate")
            hexfp = r.get("simhash")
            self._pages[host] += 1
            n += 1
            if kind in ("exact", "near"):
                self._dups[host] += 1
                self._kinds[kind] += 1
                if self.host_cut(host):
                    self.cut_hosts.add(host)
                continue
            self._dedup.rebuild([(url, digest, hexfp if isinstance(hexfp, str) else None, False)])
        return n

    def to_state(self) -> dict[str, Any]:
        """Counters for the checkpoint (the index itself is rebuilt from pages.jsonl)."""
        return {
            "trapped": self.trapped,
            "trapped_urls": list(self._trapped_urls),
            "revisits": self.revisits,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`to_state` (bad values ignored)."""
        t = state.get("trapped")
        if isinstance(t, int) and t >= 0:
            self.trapped = t
        r = state.get("revisits")
        if isinstance(r, int) and r >= 0:
            self.revisits = r
        urls = state.get("trapped_urls")
        if isinstance(urls, list):
            self._trapped_urls = [u for u in urls if isinstance(u, str)][:MAX_REPORTED_URLS]

    def report(self) -> dict[str, Any]:
        """The report.json ``duplicates`` block: mode, counts by kind, revisits written,
        per host ``{"pages": n, "duplicates": n}`` for hosts with duplicates, hosts cut."""
        hosts = {
            h: {"pages": self._pages[h], "duplicates": d} for h, d in sorted(self._dups.items())
        }
        return {
            "mode": self._dedup.mode,
            "duplicates": sum(self._kinds.values()),
            "exact": self._kinds.get("exact", 0),
            "near": self._kinds.get("near", 0),
            "revisits": self.revisits,
            "by_host": hosts,
            "hosts_cut": sorted(self.cut_hosts),
        }

    def trap_report(self) -> dict[str, Any]:
        """The report.json ``traps.duplicate_ratio`` entry (same shape as the others)."""
        return {
            "limit": self.settings.max_duplicate_ratio,
            "count": self.trapped,
            "urls": list(self._trapped_urls),
        }
