"""File-type focus: which responses are results, which are only followed, which are dropped.

The rules follow wget's ``-A``/``-R`` accept and reject lists, in two kinds:

- **types** (``--accept-type`` / ``--reject-type``) match the response's ``Content-Type``
  media type (RFC 9110 §8.3.1, parameters ignored, case-insensitive); a pattern is a type
  (``application/pdf``), a family (``image/*``) or ``*/*``;
- **extensions** (``--accept-ext`` / ``--reject-ext``) match the last segment of the URL
  path (percent-decoded, case-insensitive; ``/a/b.PDF`` has extension ``pdf``); a
  multi-part one matches as a suffix, as wget's ``-A tar.gz`` (``/x.tar.gz`` has both
  ``tar.gz`` and ``gz``).

A 2xx response gets one :class:`Verdict` as soon as its headers arrive:

- ``accept``: a result: archived in the WARC, counted, saved with ``--save-files``;
- ``follow``: an HTML page that is not a result: read and parsed for links only;
- ``reject``: dropped at once, its body never read; recorded in pages.jsonl with error
  :data:`REJECTED_TYPE` (a decision, not a failure).

Responses that are not 2xx are always ``follow`` (redirects must be followed, errors
recorded). A discovered link whose extension is rejected (or, with ``--accept-ext``, neither
accepted nor a page extension such as ``.html``) is not queued: links.tsv decision
:data:`TYPE_DECISION`.

:class:`Focus` is the port the worker (:mod:`skitter.worker`) calls; :class:`NoFocus` is the
plain crawl, :class:`TypeFocusPort` applies :class:`TypeRules` and writes files with a
:class:`skitter.savefiles.FileSaver`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from skitter.fetch.base import Fetcher
    from skitter.models import Request, Response
    from skitter.savefiles import FileSaver
    from skitter.settings import CrawlSettings

__all__ = [
    "PAGE_EXTENSIONS",
    "REJECTED_TYPE",
    "TYPE_DECISION",
    "Focus",
    "NoFocus",
    "TypeFocusPort",
    "TypeRules",
    "Verdict",
    "focus_port",
    "merged_sections",
    "path_extension",
    "path_extensions",
    "type_matches",
]

#: pages.jsonl ``error`` of a response dropped on its headers (a decision, not a failure).
REJECTED_TYPE = "rejected_type"
#: links.tsv decision of a link not queued because of its path extension.
TYPE_DECISION = "type"
#: Extensions of pages that lead to more links (queued even when ``--accept-ext`` is given,
#: like wget, which still downloads HTML to follow it); "" is a path without extension.
PAGE_EXTENSIONS = frozenset(
    {"", "html", "htm", "xhtml", "shtml", "php", "asp", "aspx", "jsp", "cgi", "pl", "cfm"}
)
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

#: The signature of the fetcher's header hook: (status, headers) -> read the body?
HeaderCheck = Callable[[int, tuple[tuple[str, str], ...]], bool]


class Verdict(StrEnum):
    """What becomes of a response (see the module doc)."""

    ACCEPT = "accept"
    FOLLOW = "follow"
    REJECT = "reject"


def path_extensions(url: str) -> frozenset[str]:
    """Every dotted suffix of ``url``'s last path segment, lower-cased (wget ``-A`` matches
    suffixes): ``http://h/x.Tar.GZ`` → ``{"tar.gz", "gz"}``; ``http://h/.profile`` → ``{}``."""
    ext = path_extension(url)
    if not ext:
        return frozenset()
    try:
        last = unquote(urlsplit(url).path.rsplit("/", 1)[-1]).lower()
    except ValueError:
        return frozenset({ext})
    parts = last.split(".")
    return frozenset(".".join(parts[i:]) for i in range(1, len(parts)) if "".join(parts[:i]))


def path_extension(url: str) -> str:
    """The lower-cased extension of ``url``'s last path segment ("" if none).

    ``http://h/a/Doc.PDF?x=1`` → ``"pdf"``; ``http://h/a.b/`` → ``""``;
    ``http://h/.profile`` → ``""`` (a leading dot is not an extension).
    """
    try:
        path = urlsplit(url).path
    except ValueError:
        return ""
    last = unquote(path.rsplit("/", 1)[-1])
    stem, dot, ext = last.rpartition(".")
    if not dot or not stem:
        return ""
    return ext.lower()


def media_type(content_type: str | None) -> str:
    """``"Text/HTML; charset=x"`` → ``"text/html"``; None or empty → ``""``."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def type_matches(mime: str, patterns: Iterable[str]) -> bool:
    """Does media type ``mime`` (lower-case, no parameters) match one of ``patterns``
    (``type/subtype``, ``type/*`` or ``*/*``)?"""
    if not mime:
        return False
    major = mime.split("/", 1)[0]
    return any(p in (mime, "*/*") or (p.endswith("/*") and p[:-2] == major) for p in patterns)


def normalize_type(text: str) -> str:
    """A ``--accept-type`` / ``--reject-type`` value, checked and lower-cased.

    Raises:
        ValueError: not ``type/subtype``, ``type/*`` or ``*/*``.
    """
    t = text.strip().lower()
    major, slash, minor = t.partition("/")
    token_ok = all(c.isalnum() or c in "!#$&-^_.+" for c in (major + minor).replace("*", ""))
    if not slash or not major or not minor or not token_ok or ("*" in major and t != "*/*"):
        raise ValueError(f"not a media type or family (e.g. application/pdf, image/*): {text!r}")
    if "*" in minor and minor != "*":
        raise ValueError(f"a family is written type/*: {text!r}")
    return t


def normalize_ext(text: str) -> str:
    """A ``--accept-ext`` / ``--reject-ext`` value: ``".PDF"`` → ``"pdf"``.

    Raises:
        ValueError: empty, or contains ``/`` or whitespace.
    """
    e = text.strip().lstrip(".").lower()
    if not e or any(c in e for c in "/\\ \t") or e.startswith("."):
        raise ValueError(f"not a file extension (e.g. pdf): {text!r}")
    return e


class TypeRules:
    """The accept/reject lists (pure; see the module doc).

    Args:
        accept_types, reject_types: media types or families, lower-case.
        accept_exts, reject_exts: extensions without the dot, lower-case.
    """

    def __init__(
        self,
        accept_types: Iterable[str] = (),
        reject_types: Iterable[str] = (),
        accept_exts: Iterable[str] = (),
        reject_exts: Iterable[str] = (),
    ) -> None:
        self.accept_types = tuple(accept_types)
        self.reject_types = tuple(reject_types)
        self.accept_exts = frozenset(accept_exts)
        self.reject_exts = frozenset(reject_exts)

    @property
    def active(self) -> bool:
        """True if any list is given (else every response is accepted)."""
        return bool(self.accept_types or self.reject_types or self.accept_exts or self.reject_exts)

    @property
    def filters_links(self) -> bool:
        """True if some links may be left out by extension."""
        return bool(self.accept_exts or self.reject_exts)

    def link_allowed(self, url: str) -> bool:
        """May a discovered link to ``url`` be queued (its extension is not rejected, and,
        with accepted extensions, is one of them or a page extension)?"""
        exts = path_extensions(url)
        if exts & self.reject_exts:
            return False
        if not self.accept_exts or exts & self.accept_exts:
            return True
        return path_extension(url) in PAGE_EXTENSIONS

    def verdict(self, url: str, status: int, content_type: str | None) -> Verdict:
        """The verdict on a response to ``url`` from its status and ``Content-Type``."""
        if not 200 <= status < 300:
            return Verdict.FOLLOW
        mime = media_type(content_type)
        html = mime in _HTML_TYPES
        if type_matches(mime, self.reject_types):
            return Verdict.REJECT
        exts = path_extensions(url)
        ext_ok = (not self.accept_exts or bool(exts & self.accept_exts)) and not (
            exts & self.reject_exts
        )
        type_ok = not self.accept_types or type_matches(mime, self.accept_types)
        if ext_ok and type_ok:
            return Verdict.ACCEPT
        if html or not mime:
            # a page to follow (no Content-Type: read it, the worker sniffs for HTML)
            return Verdict.FOLLOW
        return Verdict.REJECT


class Focus:
    """The focus port: what the worker asks about each page response. This default is
    the plain crawl (everything is a result, nothing dropped); see :class:`TypeFocusPort`.

    Attributes:
        filters_links: True if :meth:`link_allowed` may say no (the worker skips the call
            per link otherwise).
    """

    filters_links = False

    def page_fetcher(self, fetcher: Fetcher) -> Fetcher:
        """The fetcher for pages (robots.txt always uses the plain one)."""
        return fetcher

    def link_allowed(self, url: str) -> bool:
        """May a discovered link to ``url`` (canonical) be queued?"""
        return True

    def archive(self, url: str, resp: Response) -> bool:
        """Write ``resp`` to the WARC?"""
        return True

    def outcome(
        self, request: Request, resp: Response, counts: Counter[str]
    ) -> tuple[str, str] | None:
        """Handle the final response of ``request`` before its record is written (count it
        in ``counts``, ``Stats.by_focus``; save its file); returns ``(error kind, detail)``
        for the record or None."""
        return None

    def report_sections(self, counts: Counter[str]) -> dict[str, Any]:
        """Sections added to report.json (``counts``: ``Stats.by_focus``)."""
        return {}

    def close(self) -> None:
        """Release files."""


class NoFocus(Focus):
    """A plain crawl."""


class _CheckingFetcher:
    """A :class:`~skitter.fetch.base.Fetcher` that drops bodies the rules reject."""

    def __init__(self, inner: Any, check: Callable[[str], HeaderCheck]) -> None:
        self._inner = inner
        self._check = check

    async def fetch(self, request: Request, **kw: Any) -> Response:
        if kw.get("method", "GET") == "GET" and "keep_body" not in kw:
            kw["keep_body"] = self._check(request.url)
        resp: Response = await self._inner.fetch(request, **kw)
        return resp

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TypeFocusPort(Focus):
    """``--accept-type/--reject-type/--accept-ext/--reject-ext`` and ``--save-files``.

    Counts (the ``focus`` section of report.json; kept in :class:`skitter.stats.Stats`
    ``by_focus``, so they survive a resume): ``results`` (accepted 2xx responses),
    ``followed`` (pages read only for their links), ``rejected`` (dropped on headers),
    ``saved`` / ``save_refused`` (files written / refused by the saver).

    Args:
        rules: the lists.
        saver: writes accepted bodies (``--save-files``), or None.
    """

    def __init__(self, rules: TypeRules, saver: FileSaver | None = None) -> None:
        self.rules = rules
        self.saver = saver
        self.filters_links = rules.filters_links

    def page_fetcher(self, fetcher: Fetcher) -> Fetcher:
        """Wrap ``fetcher`` so a GET asks :meth:`TypeRules.verdict` when the headers arrive."""
        rules = self.rules

        def check_for(url: str) -> HeaderCheck:
            def keep(status: int, headers: tuple[tuple[str, str], ...]) -> bool:
                ct = next((v for k, v in headers if k.lower() == "content-type"), None)
                return rules.verdict(url, status, ct) is not Verdict.REJECT

            return keep

        wrapped: Any = _CheckingFetcher(fetcher, check_for)
        return wrapped  # type: ignore[no-any-return]

    def link_allowed(self, url: str) -> bool:
        return self.rules.link_allowed(url)

    def _verdict(self, url: str, resp: Response) -> Verdict:
        return self.rules.verdict(url, resp.status, resp.header("content-type"))

    def archive(self, url: str, resp: Response) -> bool:
        """Only results are written to the WARC's response records."""
        return self._verdict(url, resp) is Verdict.ACCEPT

    def outcome(
        self, request: Request, resp: Response, counts: Counter[str]
    ) -> tuple[str, str] | None:
        v = self._verdict(request.url, resp)
        if v is Verdict.REJECT:
            counts["rejected"] += 1
            why = media_type(resp.header("content-type")) or "no Content-Type"
            ext = path_extension(request.url)
            return REJECTED_TYPE, f"{why} (extension {ext or 'none'}) not accepted: body not read"
        if v is Verdict.FOLLOW:
            if 200 <= resp.status < 300:
                counts["followed"] += 1
            return None
        counts["results"] += 1
        if self.saver is not None:
            if self.saver.save(request.url, resp.body) is None:
                counts["save_refused"] += 1
            else:
                counts["saved"] += 1
        return None

    def close(self) -> None:
        if self.saver is not None:
            self.saver.close()

    def report_sections(self, counts: Counter[str]) -> dict[str, Any]:
        """``{"focus": {lists, results, followed, rejected[, save_files, saved,
        save_refused]}}``."""
        r = self.rules
        doc: dict[str, Any] = {
            "accept_types": list(r.accept_types),
            "reject_types": list(r.reject_types),
            "accept_exts": sorted(r.accept_exts),
            "reject_exts": sorted(r.reject_exts),
            "results": counts.get("results", 0),
            "followed": counts.get("followed", 0),
            "rejected": counts.get("rejected", 0),
        }
        if self.saver is not None:
            doc["save_files"] = str(self.saver.root)
            doc["saved"] = counts.get("saved", 0)
            doc["save_refused"] = counts.get("save_refused", 0)
        return {"focus": doc}


def focus_port(settings: CrawlSettings) -> Focus:
    """The focus port of a crawl: :class:`NoFocus` unless a list or ``save_files`` is set.

    Raises:
        OSError: the ``save_files`` folder cannot be created.
    """
    f = settings.focus
    rules = TypeRules(f.accept_types, f.reject_types, f.accept_exts, f.reject_exts)
    if not rules.active and f.save_files is None:
        return NoFocus()
    from skitter.savefiles import FileSaver

    return TypeFocusPort(rules, FileSaver(f.save_files) if f.save_files is not None else None)


def merged_sections(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The sections of a sharded crawl's report.json that come from its processes'
    reports: ``focus`` (counts summed), ``concurrency``, ``timeouts`` and ``parse``
    (``{"per_process": [...]}``, in process order); absent sections stay absent."""
    out: dict[str, Any] = {}
    focus = [r["focus"] for r in reports if isinstance(r.get("focus"), dict)]
    if focus:
        merged = dict(focus[0])
        for f in focus[1:]:
            for k, v in f.items():
                if isinstance(v, int) and not isinstance(v, bool):
                    merged[k] = merged.get(k, 0) + v
        out["focus"] = merged
    for name in ("concurrency", "timeouts", "parse"):
        parts = [r[name] for r in reports if isinstance(r.get(name), dict)]
        if parts:
            out[name] = {"per_process": parts}
    return out
