"""Simple URLs resolved and recognised with string operations, no WHATWG parse.

Most links on the web are plain: ``/docs/a.html``, ``../b/c.html?x=1``,
``http://host.example:8080/p``, written in ASCII letters, digits and a few punctuation
marks. For those, the WHATWG URL Standard's parser (ada-url, :mod:`skitter.url_join`) does
nothing but split the path at ``/`` and drop dot segments, and its serialisation is the
input itself. This module recognises such inputs and gives the same strings the parser
would, several times faster; anything else returns None and takes the full parse. The
equality with ada-url is tested on generated inputs (``tests/unit/test_url_simple.py``).

Pure functions, no I/O.
"""

from __future__ import annotations

import re

__all__ = ["is_serialized", "path_start", "resolve_simple"]

# Code points a path, query or fragment keeps as they are in the WHATWG serialisation of a
# special URL (outside every percent-encode set used there): ASCII alphanumerics and
# ``-._~!$&()*+,;=:@/``. Not here, so never simple: ``%`` (escapes), ``'`` (encoded in
# special queries), ``\\`` (a slash in special URLs), space, controls, non-ASCII, ``"<>`^{|}[]``.
_PATH = r"[A-Za-z0-9\-._~!$&()*+,;=:@/]"
_REST = r"[A-Za-z0-9\-._~!$&()*+,;=:@/?]"

#: A relative or path-absolute reference made of simple code points: path, optional
#: ``?query``, optional ``#fragment`` (no second ``#``).
_SIMPLE_REF_RE = re.compile(rf"({_PATH}*)(\?{_REST}*)?(#{_REST}*)?\Z")

# A domain the WHATWG host parser serialises unchanged: lower-case ASCII labels of letters,
# digits and hyphens, none empty, none an "xn--" A-label (checked as Punycode), the last one
# starting with a letter (so never an IPv4 address, WHATWG "ends in a number checker").
_LABEL = r"(?!xn--)[a-z0-9\-]+"
_HOST = rf"(?:{_LABEL}\.)*(?!xn--)[a-z][a-z0-9\-]*"
# A port kept as written: no leading zero, at most 5 digits (range checked in code).
_ORIGIN_RE = re.compile(rf"(https?)://{_HOST}(?::([1-9][0-9]{{0,4}}))?\Z")
#: What follows the authority of a serialised URL: path, optional query and fragment.
_TAIL_RE = re.compile(rf"/{_PATH}*(?:\?{_REST}*)?(?:#{_REST}*)?\Z")

_DEFAULT_PORT = {"http": "80", "https": "443"}

#: Verdicts of :func:`_plain_origin` by ``scheme://authority``; hosts repeat, so this stays
#: small (cleared when it reaches the limit).
_ORIGINS: dict[str, bool] = {}
_ORIGINS_MAX = 4096


def _plain_origin(origin: str) -> bool:
    """Whether ``origin`` (``scheme://host[:port]``) is serialised as written (see
    :func:`is_serialized`)."""
    ok = _ORIGINS.get(origin)
    if ok is None:
        m = _ORIGIN_RE.match(origin)
        port = None if m is None else m.group(2)
        ok = m is not None and (
            port is None or (port != _DEFAULT_PORT[m.group(1)] and int(port) <= 65535)
        )
        if len(_ORIGINS) >= _ORIGINS_MAX:
            _ORIGINS.clear()
        _ORIGINS[origin] = ok
    return ok


def _has_dot_segment(path: str) -> bool:
    """Whether ``path`` (starting with "/", no query or fragment) has a "." or ".." segment."""
    return "/." in path and any(s in (".", "..") for s in path.split("/"))


def path_start(url: str) -> int:
    """Index of the "/" that starts the path of ``url`` when :func:`is_serialized` holds,
    else -1 (``url[:i]`` is then the origin, ``scheme://host[:port]``). Never raises."""
    if url.startswith("http://"):
        p = url.find("/", 7)
    elif url.startswith("https://"):
        p = url.find("/", 8)
    else:
        return -1
    if p < 0 or not _plain_origin(url[:p]) or _TAIL_RE.match(url, p) is None:
        return -1
    if "/." in url:
        q = url.find("?", p)
        h = url.find("#", p)
        end = min(i for i in (q, h, len(url)) if i >= 0)
        if _has_dot_segment(url[p:end]):
            return -1
    return p


def is_serialized(url: str) -> bool:
    """Whether ``url`` is certainly its own WHATWG URL serialisation (an ``href``).

    True only for ``http(s)://host[:port]/path[?query][#fragment]`` with a lower-case
    plain domain (see module notes), a port that is neither the scheme's default nor
    written with a leading zero (1–65535), a path without dot segments, and only simple
    code points in path, query and fragment. False means "not known", not "invalid".

    Args:
        url: any string.

    Returns:
        True when parsing ``url`` (WHATWG URL Standard, basic URL parser) would give back
        ``url`` unchanged. Never raises.
    """
    return path_start(url) >= 0


def _remove_dot_segments(path: str) -> str:
    """WHATWG "path state" applied to an absolute path of simple code points: "." segments
    dropped, ".." segments remove the segment before them (never past the root); a final
    "." or ".." leaves an empty last segment (a trailing "/")."""
    segs = path.split("/")
    last = len(segs) - 1
    out: list[str] = []
    for i in range(1, last + 1):
        s = segs[i]
        if s == "..":
            if out:
                out.pop()
            if i == last:
                out.append("")
        elif s == ".":
            if i == last:
                out.append("")
        else:
            out.append(s)
    return "/" + "/".join(out)


def resolve_simple(base: str, href: str) -> str | None:
    """``href`` resolved against ``base`` with string operations, or None when not simple.

    ``base`` must be the WHATWG serialisation of an http(s) URL with a valid authority,
    reduced to what the reference can use: for a path-absolute ``href`` ("/x") the origin
    plus "/" (``"http://h:81/"``), for a relative path ("x", "../x", "x?q") the URL up to
    and including the last "/" of its path (``"http://h/a/b/"``). ``href`` must already be
    cleaned (WHATWG: C0 controls and spaces stripped, tab and newlines removed) and must not
    start with "//", "?" or "#" nor hold a ":" before its first "/" (those are not
    path references).

    Args:
        base: see above (the callers in :mod:`skitter.url_join` guarantee its form).
        href: the reference as written.

    Returns:
        The resolved URL's href (fragment included), equal to what the WHATWG basic URL
        parser gives, or None when ``href`` has a code point outside the simple set (then the
        caller parses it fully). Never raises.
    """
    m = _SIMPLE_REF_RE.match(href)
    if m is None:
        return None
    path = m.group(1)
    if path.startswith("/"):
        authority_end = base.find("/", base.find("//") + 2)
        full = base[:authority_end] + path
        cut = authority_end
    else:
        cut = base.find("/", base.find("//") + 2)
        # leading "../" segments (most dot segments of the web) climb the base's directory
        # as the path state does, one "/" each and never past the root; any dot segment
        # left is removed below, over the whole path (same result: the directory has none)
        stem = base
        while path.startswith("../"):
            path = path[3:]
            if len(stem) - 1 > cut:
                stem = stem[: stem.rfind("/", 0, len(stem) - 1) + 1]
        full = stem + path
    if "/." in full:
        full = full[:cut] + _remove_dot_segments(full[cut:])
    end = m.end(1)
    return full + href[end:] if end < len(href) else full
