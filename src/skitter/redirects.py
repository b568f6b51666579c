"""Redirect targets computed as a browser does (WHATWG URL, RFC 9110 §10.2.2 Location)."""

from __future__ import annotations

from skitter.urls import join

__all__ = ["NO_LOCATION", "REDIRECT_STATUSES", "location_target"]

#: error_detail of a redirect status recorded as final because it has no Location.
NO_LOCATION = "redirect without Location"
#: Statuses that are redirects only with a Location (RFC 9110 §15.4); 304 is not one.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

_SAFE = frozenset(range(0x21, 0x7F))


def location_target(base: str, location: str | None) -> str | None:
    """The absolute URL a ``Location`` header value points to, or None.

    ``location`` is the header value decoded as latin-1 (so each char is one wire byte).
    Raw octets outside printable ASCII are percent-encoded byte for byte — no charset is
    guessed (``/caf\\xe9`` → ``/caf%E9``; raw UTF-8 stays UTF-8) — then the reference is
    resolved against ``base`` with WHATWG rules (``///host/p`` after an http(s) base means
    host ``host``). Returns None for a missing, empty or unparseable value.
    """
    if location is None:
        return None
    raw = location.strip().encode("latin-1", errors="replace")
    if not raw:
        return None
    out = []
    for b in raw:
        if b in _SAFE:
            out.append(chr(b))
        else:
            out.append(f"%{b:02X}")
    return join(base, "".join(out))
