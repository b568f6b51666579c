"""URL canonical form, fingerprints and hosts.

Parsing and joining (:mod:`skitter.url_join`, whose :func:`join` is re-exported here) follow
the WHATWG URL Standard (https://url.spec.whatwg.org/) via ada-url; the canonical form
applies the RFC 3986 §6.2.2 syntax-based normalisations on top (case, percent-encoding, dot
segments) plus a scheme-based one (default port) and removes well-known session ids.
Nothing here does I/O.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

try:  # CPython's own BLAKE2 (what hashlib.blake2b is) without importing hashlib, which loads
    from _blake2 import blake2b  # and initialises OpenSSL: ~4 MiB resident in the coordinator
except ImportError:  # pragma: no cover - a Python without it
    from hashlib import blake2b

from skitter.url_join import _authority_start, _parse, _parse_href
from skitter.url_join import _clean_input as _clean_input
from skitter.url_join import _join as _join
from skitter.url_join import join as join
from skitter.url_simple import is_serialized, path_start

__all__ = [
    "canonicalize",
    "canonicalize_with_host",
    "fingerprint",
    "host_key",
    "hostname",
    "is_http",
    "join",
    "normalize_host",
    "origin",
    "registered_domain",
    "split_fragment",
]


# --------------------------------------------------------------------------------------
# canonical form
# --------------------------------------------------------------------------------------

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _build_pct_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for b in range(256):
        upper = f"{b:02X}"
        repl = chr(b) if chr(b) in _UNRESERVED else "%" + upper
        for hi in {upper[0], upper[0].lower()}:
            for lo in {upper[1], upper[1].lower()}:
                table["%" + hi + lo] = repl
    table["%"] = "%25"  # a "%" not starting a valid escape
    return table


_PCT_TABLE = _build_pct_table()
_PCT_RE = re.compile(r"%(?:[0-9A-Fa-f]{2})?")
# Characters ada (WHATWG) leaves raw in path/query that RFC 3986 does not allow there.
_RFC3986_EXTRA_RE = re.compile(r"[\[\\\]^`{|}]")
_RFC3986_EXTRA = str.maketrans({c: f"%{ord(c):02X}" for c in "[\\]^`{|}"})

_SESSION_NAMES = (
    r"(?:phpsessid|jsessionid|aspsessionid[^=&;/]*|asp\.net_sessionid"
    r"|sid|sessionid|session_id|cfid|cftoken)"
)
_QUERY_SESSION_RE = re.compile(r"(?:^|&)" + _SESSION_NAMES + "=", re.IGNORECASE)
# the same, searched in a whole URL from its "?"
_URL_QUERY_SESSION_RE = re.compile(r"[?&]" + _SESSION_NAMES + "=", re.IGNORECASE)
_QUERY_SESSION_KEY_RE = re.compile(_SESSION_NAMES + r"\Z", re.IGNORECASE)
_PATH_SESSION_RE = re.compile(";" + _SESSION_NAMES + r"=[^;/]*", re.IGNORECASE)


def _pct_fix(s: str) -> str:
    """Upper-case percent escapes, decode those of unreserved characters (RFC 3986 §6.2.2.1-2),
    and percent-encode characters RFC 3986 forbids in paths and queries (including a "%"
    that does not start a valid escape)."""
    if "%" in s:
        s = _PCT_RE.sub(lambda m: _PCT_TABLE[m.group()], s)
    if _RFC3986_EXTRA_RE.search(s) is not None:
        s = s.translate(_RFC3986_EXTRA)
    return s


def _strip_query_sessions(query: str) -> str:
    if _QUERY_SESSION_RE.search(query) is None:
        return query
    return "&".join(
        part
        for part in query.split("&")
        if "=" not in part or _QUERY_SESSION_KEY_RE.match(part.partition("=")[0]) is None
    )


def _canon_once(url: str) -> tuple[str, str, bool] | None:
    """One canonicalisation pass: (canonical, host key, path session ids were removed)."""
    href = url if is_serialized(url) else _parse_href(url)
    if href is None:
        return None
    start = _authority_start(href)
    if start < 0:
        return None
    # ada serialises special URLs as scheme "://" authority path ["?" query] ["#" fragment];
    # '/', '?' and '#' are percent-encoded inside userinfo and path, so plain finds suffice.
    h = href.find("#", start)
    if h >= 0:
        href = href[:h]
    p = href.find("/", start)
    if p < 0:  # cannot happen for http(s); be defensive
        href += "/"
        p = len(href) - 1
    authority = href[start:p]
    # _pct_fix never creates or removes a "?", so the first one still starts the query.
    tail = _pct_fix(href[p:])
    q = tail.find("?")
    if q >= 0:
        path, query = tail[:q], _strip_query_sessions(tail[q + 1 :])
    else:
        path, query = tail, ""
    stripped = False
    if ";" in path:
        new_path = _PATH_SESSION_RE.sub("", path)
        if new_path != path:
            stripped = True
            path = new_path
    at = authority.rfind("@")
    hk = authority if at < 0 else authority[at + 1 :]
    prefix = href[:p]
    fixed = _strip_host_dots(hk)
    if fixed != hk:
        if not fixed or fixed.startswith(":"):
            return None  # the host was only dots
        prefix = href[: start + (at + 1 if at >= 0 else 0)] + fixed
        hk = fixed
    if query:
        return f"{prefix}{path}?{query}", hk, stripped
    return prefix + path, hk, stripped


def _strip_host_dots(host_port: str) -> str:
    """``host[:port]`` with the trailing dots of a domain name removed ("a.test.:81" ->
    "a.test:81"): a fully qualified name and its relative spelling name one host."""
    if host_port.startswith("["):
        return host_port
    colon = host_port.rfind(":")
    host, port = (host_port, "") if colon < 0 else (host_port[:colon], host_port[colon:])
    if not host.endswith("."):
        return host_port
    return host.rstrip(".") + port


#: Entries of the canonicalisation cache (~280 bytes each: ~1 MB). Links repeat within a page
#: and across neighbouring pages; 65,536 entries held ~18 MB on a 21,635-page site for a CPU
#: saving below the noise (figures: issue 16).
CANON_CACHE_ENTRIES = 1 << 12


def canonicalize_with_host(url: str) -> tuple[str, str] | None:
    """:func:`canonicalize` plus the :func:`host_key` of the result, in one parse.

    Returns:
        ``(canonical_url, host_key)``, or None when :func:`canonicalize` gives None.
    """
    # A URL in its WHATWG serialisation made of plain code points (skitter.url_simple:
    # no escapes, no characters RFC 3986 forbids, no userinfo, no trailing host dot) needs
    # only its fragment, an empty "?" and session ids removed.
    p = path_start(url)
    if p >= 0:
        h = url.find("#", p)
        if h >= 0:
            url = url[:h]
        q = url.find("?", p)
        if q >= 0:
            if q == len(url) - 1:
                url = url[:q]
            elif _URL_QUERY_SESSION_RE.search(url, q) is not None:
                return _canonicalize_parsed(url)
        if url.find(";", p, q if q >= 0 else len(url)) < 0:
            return url, url[url.find("//") + 2 : p]
    return _canonicalize_parsed(url)


@lru_cache(maxsize=CANON_CACHE_ENTRIES)
def _canonicalize_parsed(url: str) -> tuple[str, str] | None:
    """:func:`canonicalize_with_host` through a WHATWG parse (any URL)."""
    res = _canon_once(url)
    # Removing a path session id can expose a new dot segment ("/.;jsessionid=1/x");
    # re-run until stable so the result is idempotent.
    for _ in range(4):
        if res is None or not res[2]:
            break
        res = _canon_once(res[0])
    if res is None:
        return None
    return res[0], res[1]


def canonicalize(url: str) -> str | None:
    """The canonical form of an absolute http(s) URL: the URL-seen key and the wire form.

    Starting from the WHATWG URL Standard serialisation (ada-url), which already gives a
    lower-case scheme and host, IDNA (punycode) host, IPv4 normalised, default port
    dropped, dot segments removed and an empty path as "/", this applies:

    * fragment dropped;
    * RFC 3986 §6.2.2 percent-encoding normalisation in path and query: hex digits of
      escapes upper-cased, escapes of unreserved characters (ALPHA DIGIT - . _ ~) decoded,
      reserved escapes (``%2F %3F %26 %3D %23 %25`` ...) never decoded, characters
      RFC 3986 forbids there (``[ \\ ] ^ ` { | }``, and a ``%`` not starting a valid
      escape) percent-encoded;
    * session ids removed: query parameters named (case-insensitively) PHPSESSID,
      JSESSIONID, ASPSESSIONID*, ASP.NET_SessionId, sid, sessionid, session_id, CFID,
      CFTOKEN, and path parameters such as ``;jsessionid=ABC.node7`` or ``;phpsessid=...``;
    * an empty query ("?" alone) dropped.

    Query parameter order, bare keys (``?a&b=``), userinfo and the case of path and query
    are kept.  The result is idempotent: ``canonicalize(canonicalize(u)) == canonicalize(u)``.

    Args:
        url: an absolute URL (any string is accepted).

    Returns:
        The canonical URL (ASCII), or None if ``url`` is unparseable or not http/https.
        Never raises.
    """
    res = canonicalize_with_host(url)
    return None if res is None else res[0]


def split_fragment(url: str) -> tuple[str, str]:
    """Split ``url`` at its first ``#`` (WHATWG: the fragment starts there).

    Returns:
        ``(url without the fragment, fragment without "#")``; the fragment is "" when
        there is none (or it is empty).
    """
    head, _, frag = url.partition("#")
    return head, frag


def fingerprint(canonical_url: str) -> int:
    """A stable 64-bit signed integer key for a canonical URL (fits an SQLite INTEGER).

    It is the BLAKE2b digest (``digest_size=8``) of the UTF-8 bytes of ``canonical_url``,
    read as a big-endian signed integer, so it is the same in every process and run
    (unlike :func:`hash`).  Range: -2**63 .. 2**63-1.
    """
    data = canonical_url.encode("utf-8", "surrogatepass")
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "big", signed=True)


# --------------------------------------------------------------------------------------
# hosts
# --------------------------------------------------------------------------------------


def _host_of(url: str) -> tuple[str, str]:
    """(scheme, host[:port]) of ``url``: the WHATWG serialisation, trailing dots removed."""
    p = path_start(url)
    if p >= 0:  # a plain serialised URL (skitter.url_simple): no parse needed
        s = url.find("://")
        return url[:s], url[s + 3 : p]
    parsed = _parse(url)
    if parsed is None:
        raise ValueError(f"invalid URL: {url!r}")
    host = _strip_host_dots(str(parsed.host))
    if not host or host.startswith(":"):
        raise ValueError(f"URL has no host: {url!r}")
    return str(parsed.protocol)[:-1], host


@lru_cache(maxsize=4096)
def normalize_host(host: str) -> str:
    """The one spelling of a host name that every part of Skitter uses.

    UTS #46 processing as the WHATWG URL Standard's host parser does it (via ada-url):
    percent-decoding, case folding, full-width and other compatibility forms mapped
    (``ＥＸＡＭＰＬＥ.test`` -> ``example.test``), Unicode labels to punycode
    (``bücher.test`` -> ``xn--bcher-kva.test``, non-transitional: ``faß`` stays distinct
    from ``fass``), IPv4 in any WHATWG form normalised to dotted decimal; then the trailing
    dots of a fully qualified name are removed (``example.test.`` -> ``example.test``).
    Used for URL hosts (:func:`canonicalize`, :func:`host_key`) and for ``--resolve`` names.

    Args:
        host: a host name or IP literal without port; IPv6 with or without brackets.
            Surrounding whitespace is ignored.

    Returns:
        ASCII, lower-case; IPv6 in brackets (``[::1]``).

    Raises:
        ValueError: not a valid host (empty, forbidden code points, bad punycode, a port
            or path given, ...).
    """
    h = host.strip()
    if h and ":" in h and not h.startswith("["):
        h = f"[{h}]"  # a bare IPv6 address
    if not h or any(c in h for c in "/?#@\\"):
        raise ValueError(f"invalid host: {host!r}")
    parsed = _parse(f"http://{h}/")
    if parsed is None or parsed.port or not parsed.hostname:
        raise ValueError(f"invalid host: {host!r}")
    name = _strip_host_dots(str(parsed.hostname))
    if not name:
        raise ValueError(f"invalid host: {host!r}")
    return name


def host_key(url: str) -> str:
    """The politeness unit of ``url``: lower-case host, plus ``:port`` when not the default.

    The host is the WHATWG serialisation (punycode; IPv6 in brackets).  The port is
    omitted when it is the scheme's default, so ``http://A.test:80/x`` → ``"a.test"``,
    ``https://a.test/`` → ``"a.test"`` and ``http://a.test:8080/`` → ``"a.test:8080"``.

    Raises:
        ValueError: ``url`` is not a valid absolute URL or has no host.
    """
    return _host_of(url)[1]


def origin(url: str) -> str:
    """``"scheme://host[:port]"`` of ``url``, default port omitted (RFC 6454 serialisation;
    the unit robots.txt applies to, RFC 9309 §2.3).

    Raises:
        ValueError: ``url`` is not a valid absolute URL or has no host.
    """
    scheme, host = _host_of(url)
    return f"{scheme}://{host}"


def hostname(url: str) -> str:
    """Lower-case host of ``url`` without the port (punycode; IPv6 in brackets, WHATWG).

    Raises:
        ValueError: ``url`` is not a valid absolute URL or has no host.
    """
    parsed = _parse(url)
    if parsed is None:
        raise ValueError(f"invalid URL: {url!r}")
    name = _strip_host_dots(str(parsed.hostname))
    if not name:
        raise ValueError(f"URL has no host: {url!r}")
    return name


def is_http(url: str) -> bool:
    """True if ``url`` parses (WHATWG URL Standard) as an absolute http or https URL."""
    parsed = _parse(url)
    return parsed is not None and parsed.protocol in ("http:", "https:")


@lru_cache(maxsize=1)
def _tld_extract() -> Any:
    """tldextract's extractor over its bundled Public Suffix List snapshot only (no HTTP
    fetch, no cache directory). Imported and built on first use: a crawl whose scope is not
    "domain" never needs it (tldextract, its trie and its imports cost ~0.15 s)."""
    import tldextract

    return tldextract.TLDExtract(
        suffix_list_urls=(),
        cache_dir=None,
        fallback_to_snapshot=True,
        include_psl_private_domains=True,
    )


_IPV4_RE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}\Z")


@lru_cache(maxsize=65536)
def registered_domain(host: str) -> str:
    """The registered domain (eTLD+1) of ``host``, per the Public Suffix List algorithm.

    Uses tldextract's bundled PSL snapshot (private section included, so
    ``alice.github.io`` is its own domain); it never touches the network or the disk.
    Suffixes not in the list get the PSL default rule ``*`` (the last label is the
    suffix): ``www.example.test`` → ``example.test``, ``a.b.co.uk`` → ``b.co.uk``.
    IP addresses, single labels (``localhost``) and bare public suffixes are returned
    as they are.  The result is lower-case, without a trailing dot; results are cached.

    Args:
        host: a host name without port (ASCII/punycode or Unicode).
    """
    h = host.strip().rstrip(".").lower()
    if not h or h.startswith("[") or ":" in h or _IPV4_RE.match(h) or "." not in h:
        return h
    ext = _tld_extract()(h)
    if ext.suffix:
        if not ext.domain:
            return h  # the host is itself a public suffix
        return f"{ext.domain}.{ext.suffix}"
    # No listed suffix: default rule "*".
    return ".".join(h.rsplit(".", 2)[-2:])
