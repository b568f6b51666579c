"""Seed spellings: what a user may give as a seed, and the URL it means.

The one rule shared by the command line (``SEED`` arguments, ``--seeds-file``, the config
file) and the library (:class:`skitter.settings.CrawlSettings` validation), so that both
accept and refuse the same inputs.
"""

from __future__ import annotations

import re

from skitter.errors import ConfigError

__all__ = ["canonical_host", "list_line", "read_seed_lines", "seed_url"]

#: RFC 3986 §3.1 scheme, then ":".
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
#: ``name:port``, ``name:port/path``, ``name:port?q`` -- digits after the colon.
_NAME_PORT = re.compile(r"^[^:/?#\s]+:\d{1,5}(?:[/?#]|$)")
#: A comment in a seeds or URL list line: ``#`` at its start or after white space.
_COMMENT = re.compile(r"(?:^|\s)#.*$")
#: One label of a bare host name as canonical form spells it (punycode, lower case): letters,
#: digits, ``-`` and ``_``, with at least one letter or digit (``-``, ``*``, empty labels: no).
_LABEL = re.compile(r"^[a-z0-9_-]*[a-z0-9][a-z0-9_-]*$")


def seed_url(text: str) -> str:
    """The URL a seed spelling means.

    * ``http://…`` / ``https://…``: the URL itself (WHATWG URL Standard parsing);
    * a bare name ``example.org`` → ``https://example.org/``; with a path
      ``example.org/a`` → ``https://example.org/a``; its labels are letters, digits, ``-``
      and ``_`` (or it is an IP literal): ``*.example.org``, ``-``, ``a..b`` are refused;
    * ``name:port`` and ``name:port/path`` (digits after the colon, like curl and wget):
      host and port → ``https://name:port/…``;
    * any other ``scheme:`` (``mailto:a@b.test``, ``ftp://…``, ``tel:…``, ``javascript:…``)
      is refused, never taken for a host name.

    Raises:
        ConfigError: not an http(s) URL or a domain name (message names the seed).
    """
    from skitter.urls import canonicalize

    if not isinstance(text, str):
        raise ConfigError(f"a seed must be a string, got {type(text).__name__}: {text!r}")
    s = text.strip()
    m = _SCHEME.match(s)
    bare = not m or bool(_NAME_PORT.match(s))  # no scheme: a host name, maybe port and path
    if m and not bare:
        url = s if m.group(1).lower() in ("http", "https") else ""
    elif s.startswith("//"):
        url = f"https:{s}"
    else:
        url = f"https://{s}" if any(c in s for c in "/?#") else f"https://{s}/"
    canon = canonicalize(url) if s and url else None
    if canon is None or (bare and not _bare_host_ok(s, canon)):
        raise ConfigError(f"not an http(s) URL or domain name: {text!r}")
    return url


def _bare_host_ok(seed: str, canon: str) -> bool:
    """Whether a seed without a scheme names a host a user can mean: no white space in its
    name (the URL parser would drop a tab), and an IP literal or labels of :data:`_LABEL`
    (``*.example.org``, ``-``, ``a..b`` are refused, though the WHATWG parser would take them
    in a URL)."""
    from skitter.urls import hostname

    if any(c.isspace() for c in re.split(r"[/?#]", seed.removeprefix("//"), maxsplit=1)[0]):
        return False
    host = hostname(canon)
    if host.startswith("[") or host.replace(".", "").isdigit():
        return True
    return all(_LABEL.match(label) for label in host.split("."))


def list_line(line: str) -> str:
    """A line of a seeds file or URL list without its comment (``#`` at the start or after
    white space: ``https://a.test/  # home`` is ``https://a.test/``; a fragment ``/x#y`` stays)
    and surrounding white space; ``""`` for a blank or comment line."""
    return _COMMENT.sub("", line).strip()


def read_seed_lines(lines: list[str], source: str) -> list[str]:
    """Seeds from the lines of a seeds file (blank lines and ``#`` comments skipped,
    :func:`list_line`).

    Args:
        lines: the file's lines.
        source: the file's name for messages (``-`` is stdin).

    Raises:
        ConfigError: a bad line ("seeds file F line N: …") or no seed at all.
    """
    seeds: list[str] = []
    for number, line in enumerate(lines, 1):
        t = list_line(line)
        if not t:
            continue
        try:
            seeds.append(seed_url(t))
        except ConfigError as exc:
            raise ConfigError(f"seeds file {source} line {number}: {exc}") from None
    if not seeds:
        raise ConfigError(f"seeds file {source} has no seeds")
    return seeds


def canonical_host(name: str) -> str | None:
    """A host name in the form URLs use: IDNA (punycode), lower case, IPv4 normalised,
    IPv6 in brackets (WHATWG URL Standard host parser); None when it is not a valid host."""
    from skitter.urls import canonicalize, hostname

    n = name.strip()
    if not n or any(c in n for c in "/?#@ "):
        return None
    if ":" in n and not n.startswith("["):
        n = f"[{n}]"  # a bare IPv6 literal
    url = canonicalize(f"http://{n}/")
    return None if url is None else hostname(url)
