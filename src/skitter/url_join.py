"""WHATWG URL parsing and joining, with legacy query encodings.

Owns the parse (WHATWG URL Standard via ada-url, with its cffi fast path) and :func:`join`:
resolving an href against a base URL, the query encoded in the document's encoding as the
URL Standard's "URL parser with encoding" does. The canonical form and hosts built on these
are in :mod:`skitter.urls`. Nothing here does I/O.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache

import ada_url

from skitter.url_simple import is_serialized, resolve_simple

__all__ = ["Joiner", "join"]


# --------------------------------------------------------------------------------------
# helpers shared by join / canonicalize
# --------------------------------------------------------------------------------------

#: WHATWG "C0 control or space": U+0000..U+001F and U+0020.
_C0_OR_SPACE = "".join(chr(i) for i in range(0x21))
#: WHATWG "ASCII tab or newline", removed anywhere in the input.
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")

_SPECIAL_SCHEMES = frozenset({"http", "https", "ftp", "file"})  # ws/wss always use UTF-8


def _usv(s: str) -> str:
    """``s`` as a Unicode scalar value string: lone surrogates become U+FFFD (WebIDL USVString)."""
    if s.isascii():
        return s
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        # Pairs stored as two code points are joined, lone ones replaced, as a JS engine would.
        return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return s


def _clean_input(s: str) -> str:
    """Strip leading/trailing C0-control-or-space, drop every TAB/CR/LF (WHATWG URL parser)."""
    s = _usv(s).strip(_C0_OR_SPACE)
    if "\t" in s or "\n" in s or "\r" in s:
        s = s.translate(_TAB_NEWLINE)
    return s


try:  # ada-url's cffi binding: a URL's href without building an ada_url.URL (2x faster)
    from ada_url._ada_wrapper import ffi as _ada_ffi
    from ada_url._ada_wrapper import lib as _ada_lib

    _ADA_DIRECT = all(
        hasattr(_ada_lib, name)
        for name in ("ada_parse", "ada_parse_with_base", "ada_is_valid", "ada_get_href", "ada_free")
    )
except ImportError:  # pragma: no cover - another ada-url layout: use the public API
    _ADA_DIRECT = False


def _href_raw(url: str, base: str | None) -> str | None:
    """ada's href of ``url`` (against ``base``), None if invalid; raises UnicodeError for
    lone surrogates."""
    if not _ADA_DIRECT:  # pragma: no cover
        try:
            return str(ada_url.URL(url, base=base).href)
        except ValueError:
            return None
    u = url.encode()
    if base is None:
        obj = _ada_lib.ada_parse(u, len(u))
    else:
        b = base.encode()
        obj = _ada_lib.ada_parse_with_base(u, len(u), b, len(b))
    try:
        if not _ada_lib.ada_is_valid(obj):
            return None
        s = _ada_lib.ada_get_href(obj)
        return _ada_ffi.unpack(s.data, s.length).decode() if s.length else ""
    finally:
        _ada_lib.ada_free(obj)


def _parse_href(url: str, base: str | None = None) -> str | None:
    """The WHATWG serialisation (href) of ``url`` parsed against ``base``; None on failure.
    Same result as ``_parse(url, base).href``, faster. Never raises."""
    try:
        return _href_raw(url, base)
    except UnicodeError:  # lone surrogates: parse the USVString instead
        try:
            return _href_raw(_usv(url), None if base is None else _usv(base))
        except UnicodeError:
            return None


def _parse(url: str, base: str | None = None) -> ada_url.URL | None:
    """WHATWG-parse ``url`` (against ``base``); None on failure.  Never raises."""
    try:
        return ada_url.URL(url, base=base)
    except UnicodeError:  # lone surrogates: parse the USVString instead
        try:
            return ada_url.URL(_usv(url), base=None if base is None else _usv(base))
        except (ValueError, UnicodeError):
            return None
    except ValueError:
        return None


# --------------------------------------------------------------------------------------
# join (with legacy query encodings)
# --------------------------------------------------------------------------------------

# Python codec name -> codec that matches the WHATWG Encoding Standard's encoder better
# (browsers treat these labels as the superset encodings).
_WHATWG_CODEC = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gbk",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
}

#: Bytes percent-encoded by the WHATWG special-query percent-encode set.
_QUERY_BYTE_ESCAPES = tuple(
    f"%{b:02X}" if (b < 0x21 or b > 0x7E or b in b"\"#<>'") else chr(b) for b in range(256)
)

_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


@lru_cache(maxsize=64)
def _query_codec(encoding: str) -> str | None:
    """The Python codec used for query strings of a document in ``encoding``; None = UTF-8."""
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError, ValueError):
        return None
    # WHATWG: UTF-16BE/LE (and any UTF variant) use UTF-8 for URLs.
    if name.startswith("utf"):
        return None
    codec = _WHATWG_CODEC.get(name, name)
    try:
        "a".encode(codec)
    except (LookupError, TypeError, ValueError):  # not a text encoding (e.g. "base64")
        return None
    return codec


def _encode_run(run: str, codec: str) -> str:
    """Percent-encode a run of non-ASCII characters after encoding it with ``codec``.

    Unencodable characters become ``%26%23NNNN%3B`` (a percent-encoded HTML numeric
    character reference), as the WHATWG "percent-encode after encoding" algorithm says.
    """
    out: list[str] = []
    while run:
        try:
            data = run.encode(codec)
        except UnicodeEncodeError as exc:
            data = run[: exc.start].encode(codec)
            out.extend(_QUERY_BYTE_ESCAPES[b] for b in data)
            out.extend(f"%26%23{ord(ch)}%3B" for ch in run[exc.start : exc.end])
            run = run[exc.end :]
            continue
        out.extend(_QUERY_BYTE_ESCAPES[b] for b in data)
        break
    return "".join(out)


def _encode_query(href: str, codec: str) -> str | None:
    """``href`` with its query's non-ASCII characters encoded in ``codec``; None if unchanged."""
    q = href.find("?")
    if q < 0:
        return None
    h = href.find("#")
    if 0 <= h < q:
        return None  # the '?' is inside the fragment
    end = len(href) if h < 0 else h
    query = href[q + 1 : end]
    if query.isascii():
        return None
    encoded = _NON_ASCII_RUN.sub(lambda m: _encode_run(m.group(), codec), query)
    return href[: q + 1] + encoded + href[end:]


#: Authority prefix of an http(s) base URL as ada serialises it: lower-case ASCII host
#: (no userinfo, no IPv6), optional port. Only such bases take :func:`join`'s cached path.
_PLAIN_PREFIX_RE = re.compile(r"https?://[a-z0-9.\-]+(?::[0-9]+)?\Z")


#: The base :func:`join` resolves absolute ``http(s)://`` hrefs against (any valid base
#: gives the same result for them).
_ANY_BASE = "http://invalid/"


def _authority_start(url: str) -> int:
    """Index where the authority of an ``http://`` / ``https://`` URL starts, else -1."""
    if url.startswith("http://"):
        return 7
    if url.startswith("https://"):
        return 8
    return -1


@lru_cache(maxsize=1024)
def _base_prefix(base: str) -> str | None:
    """``"scheme://host[:port]"`` of ``base``, serialised (WHATWG), when :func:`join` may
    resolve path-absolute hrefs against that prefix alone (``base`` is an http(s) URL with a
    plain authority, then a ``/``), else None."""
    start = _authority_start(base)
    if start < 0:
        return None
    p = base.find("/", start)
    if p < 0:
        return None
    return _serialized_prefix(base[:p])


@lru_cache(maxsize=1024)
def _serialized_prefix(prefix: str) -> str | None:
    """:func:`_base_prefix` of the ``scheme://host[:port]`` part (one parse per origin)."""
    if _PLAIN_PREFIX_RE.match(prefix) is None:
        return None
    # The base is valid: the path, query and fragment after the prefix cannot make a
    # WHATWG parse fail, so its validity is that of the prefix. Its serialisation
    # ("http://h:80" -> "http://h") resolves every path-absolute href the same way.
    href = _parse_href(prefix + "/")
    return None if href is None else href[:-1]


@lru_cache(maxsize=1024)
def _base_dir(base: str) -> str | None:
    """``base`` up to the last ``/`` of its path (its query and fragment left out) when
    :func:`join` may resolve path-relative hrefs against that alone (``base`` has a plain
    prefix, see :func:`_base_prefix`), else None. WHATWG "path state": a relative path
    replaces the base's last path segment, its query and fragment; so ``"../x"`` against
    ``http://h/a/b?q`` gives the same as against ``http://h/a/``. Only for a base in its
    WHATWG serialisation (no ``\\``, no dot segments left in its path)."""
    prefix = _base_prefix(base)
    if prefix is None or _parse_href(base) != base:
        return None
    start = len(prefix)
    end = len(base)
    for c in "?#":
        i = base.find(c, start, end)
        if i >= 0:
            end = i
    slash = base.rfind("/", start, end)  # the path starts with "/" (see _base_prefix)
    return base[: slash + 1]


#: Entries of the cache of base-independent joins (~220 bytes each: ~1 MB; 32,768 held ~7 MB).
JOIN_CACHE_ENTRIES = 1 << 12


@lru_cache(maxsize=JOIN_CACHE_ENTRIES)
def _join_cached(base: str, href: str, encoding: str) -> str | None:
    """:func:`_join` of an href whose result does not depend on the rest of the base URL
    (see :func:`join`); pages repeat such hrefs (navigation, absolute links) endlessly."""
    return _join(base, href, encoding)


def join(base: str, href: str, encoding: str = "utf-8") -> str | None:
    """Resolve ``href`` against ``base`` as a browser does (WHATWG URL Standard, "URL parser").

    Leading/trailing C0 controls and spaces are stripped and TAB/CR/LF removed anywhere;
    ``\\`` counts as ``/`` for special schemes (http, https, ...).  The path and fragment
    are always UTF-8 percent-encoded; when ``encoding`` (a Python codec name or WHATWG
    label, e.g. "cp1251", "shift_jis", "gbk", "latin-1") is not UTF-8 and the result's
    scheme is http, https, ftp or file, the *query* taken from ``href`` is encoded in that
    encoding first, characters it cannot represent becoming ``%26%23NNNN%3B``.  Unknown
    encodings count as UTF-8.

    Args:
        base: absolute base URL (the document base).
        href: the attribute value as written (already decoded to ``str``).
        encoding: the document's character encoding.

    Returns:
        The absolute URL (serialised, fragment included, not canonicalised), or None if
        ``base`` or the result is not a valid URL.  Never raises.
    """
    href = _clean_input(href)
    # Results that depend on at most the base's authority are cached across pages:
    # "http(s)://..." does not use the base at all (WHATWG "special authority slashes"),
    # and a path-absolute "/..." keeps only the base's scheme, host and port; a relative
    # path only the base's directory (pages of one folder share it).
    # Plain references (ASCII letters, digits, a few marks) are resolved with string
    # operations (skitter.url_simple), the others parsed by ada-url.
    if href.startswith("/"):
        if not href.startswith(("//", "/\\")):
            prefix = _base_prefix(base)
            if prefix is not None:
                return _resolve(prefix, "/", href, encoding)
    elif href.startswith(("http://", "https://")) and _base_prefix(base) is not None:
        if is_serialized(href):
            _remember("", href, href)
            return href
        return _join_cached(_ANY_BASE, href, encoding)
    elif (
        href
        and href[0] not in "?#"
        and ":" not in href.partition("/")[0]  # "http:", "http:?q" may keep all of the base
        and (base_dir := _base_dir(base)) is not None
    ):
        # a relative path ("x", "../x", "x?q"): only the base's directory counts
        return _resolve(base_dir, "", href, encoding)
    return _join(base, href, encoding)


#: Entries of the caches of plain references resolved against a base's prefix or directory,
#: and of absolute hrefs that are their own serialisation, all together (~250 bytes each:
#: ~1 MB; all emptied when full). In crawl order they answer ~92% of rust-doc's relative
#: links (sidebars: the same hrefs on every page of a folder) and ~26% of the benchmark web's.
RESOLVED_CACHE_ENTRIES = 1 << 12

#: Resolved plain references by stem (a base's serialised prefix, or its directory), then by
#: href: ``_MEMOS[stem][href]`` is ``join`` of ``href`` against any base with that stem.
#: Stem ``""``: absolute http(s) hrefs that are their own WHATWG serialisation (``join``
#: gives them back against any base with a plain prefix).
_MEMOS: dict[str, dict[str, str]] = {}
_entries = 0


def _memo(stem: str) -> dict[str, str]:
    """The memo of plain references resolved against ``stem`` (created empty)."""
    memo = _MEMOS.get(stem)
    if memo is None:
        memo = _MEMOS[stem] = {}
    return memo


def _remember(stem: str, href: str, result: str) -> None:
    """``_MEMOS[stem][href] = result``, every memo emptied (and dropped) first when they
    hold :data:`RESOLVED_CACHE_ENTRIES` entries together."""
    global _entries
    if _entries >= RESOLVED_CACHE_ENTRIES:
        for m in _MEMOS.values():
            m.clear()  # (a Joiner holding one finds nothing more in it: join's answers)
        _MEMOS.clear()
        _entries = 0
    memo = _memo(stem)
    if href not in memo:
        _entries += 1
    memo[href] = result


def _resolve_plain(stem: str, tail: str, href: str) -> str | None:
    """``href`` (path-absolute or relative, a path reference: see
    :func:`skitter.url_simple.resolve_simple`) resolved against ``stem + tail`` (a base's
    serialised prefix + "/", or its directory + "") when it is plain: remembered by stem and
    href, else by string operations (then remembered); None when it is not plain."""
    hit = _memo(stem).get(href)
    if hit is not None:
        return hit
    simple = resolve_simple(stem + tail, href)
    if simple is not None:
        _remember(stem, href, simple)
    return simple


def _resolve(stem: str, tail: str, href: str, encoding: str) -> str | None:
    """``href`` (cleaned) resolved against ``stem + tail`` (see :func:`_resolve_plain`), by
    :func:`_join_cached` when it is not plain."""
    resolved = _resolve_plain(stem, tail, href)
    return resolved if resolved is not None else _join_cached(stem + tail, href, encoding)


class Joiner:
    """:func:`join` of many hrefs against one base URL (the links of one document).

    The base's prefix and directory are worked out once. A relative href as written is looked
    up first in what :func:`join` remembered for the directory, an absolute one in the hrefs
    known to be their own serialisation; then, if plain, it is resolved by string operations
    against them (:func:`skitter.url_simple.resolve_simple`,
    :func:`skitter.url_simple.is_serialized`), as is a plain path-absolute href against the
    prefix; all without cleaning it: a plain href has nothing to clean (no space, no
    control), and a remembered href is plain or already clean, so an href equal to it
    resolves the same. Anything else is :func:`join`'s, which cleans it first.

    Args:
        base: absolute base URL (the document base). encoding: the document's encoding.
    """

    def __init__(self, base: str, encoding: str = "utf-8") -> None:
        self.base = base
        self.encoding = encoding
        prefix = _base_prefix(base)
        self._plain = prefix is not None
        self._root = "" if prefix is None else prefix + "/"
        self._absolute = _memo("")
        self._dir: str | None = None
        self._rel_known = not self._plain

    def join(self, href: str) -> str | None:
        """``join(base, href, encoding)``. Never raises."""
        if href.startswith("/"):
            # a plain path-absolute href: the prefix + the href with its dot segments
            # removed; cheaper worked out again than remembered (the benchmark web's pages
            # are spread over 200 hosts: a memo there is emptied before it is asked again)
            if self._plain and not href.startswith(("//", "/\\")):
                simple = resolve_simple(self._root, href)
                if simple is not None:
                    return simple
        elif href.startswith(("http://", "https://")):
            if self._plain:
                hit = self._absolute.get(href)
                if hit is not None:
                    return hit
                if is_serialized(href):
                    _remember("", href, href)
                    return href
        elif href and href[0] not in "?#" and ":" not in href.partition("/")[0]:
            if not self._rel_known:  # the directory, at the first relative href
                self._rel_known = True
                self._dir = _base_dir(self.base)
            if self._dir is not None:
                simple = _resolve_plain(self._dir, "", href)
                if simple is not None:
                    return simple
        return join(self.base, href, self.encoding)


def _join(base: str, href: str, encoding: str) -> str | None:
    """:func:`join` of an already cleaned ``href``."""
    if href.isascii() or encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        return _parse_href(href, base)
    url = _parse(href, base)
    if url is None:
        return None
    result: str = url.href
    codec = _query_codec(encoding)
    if codec is None or url.protocol[:-1] not in _SPECIAL_SCHEMES:
        return result
    encoded = _encode_query(href, codec)
    if encoded is None:
        return result
    url2 = _parse(encoded, base)
    return result if url2 is None else str(url2.href)
