"""Flag value types of the command line: argparse ``type=`` callables.

Owns the parsing of one flag value each (numbers, sizes, durations, deadlines, proxies,
``--resolve`` entries, headers, regular expressions, TCP ports): each returns the value in
its unit (seconds, bytes) or raises ``argparse.ArgumentTypeError`` with a one-line message.
The flags themselves are defined in :mod:`skitter.cli.common`.
"""

from __future__ import annotations

import argparse
import re


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return v


def deadline(text: str) -> float:
    """Seconds for a deadline: finite and > 0."""
    v = positive_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds: {text!r}")
    return v


def proxy(text: str) -> str:
    """An http:// or https:// proxy URL with a host."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"expected an http:// proxy URL, got {text!r}")
    return text


def folder(text: str) -> str:
    """``--out DIR``: a folder name, not empty (``--out "$UNSET"`` would name the current
    folder, or reach the settings' check as ``CrawlSettings.out_dir``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an output folder name is needed, got {text!r}")
    return text


def _whole(text: str, low: int) -> int:
    """A whole number >= ``low`` (argparse type errors otherwise)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}: {text!r}")
    return v


def positive_int(text: str) -> int:
    """A whole number >= 0 (counts and caps where 0 is meaningful)."""
    return _whole(text, 0)


def at_least_one(text: str) -> int:
    """A whole number >= 1."""
    return _whole(text, 1)


def processes(text: str) -> int:
    """``--processes``: 1 .. 4 x the cores (each process holds ~70 MB and a share of the
    crawl; far more than the cores only adds memory and scheduling, never speed)."""
    from skitter.processes import default_processes

    v = at_least_one(text)
    cap = 4 * default_processes()
    if v > cap:
        raise argparse.ArgumentTypeError(
            f"at most {cap} (4 x the {cap // 4} cores of this machine): {text!r}"
        )
    return v


def warc_level(text: str) -> int:
    """``--warc-level``: a gzip level 1 .. 9."""
    v = at_least_one(text)
    if v > 9:
        raise argparse.ArgumentTypeError(f"a gzip level is 1 .. 9: {text!r}")
    return v


def limit_or_off(text: str) -> int | None:
    """A whole number >= 0 where 0 turns the limit off (None)."""
    v = positive_int(text)
    return v or None


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.I)


def size(text: str) -> int:
    """Bytes from ``10485760``, ``10M``, ``10MiB``, ``512k`` (powers of 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (e.g. 10485760 or 10MiB)")
    n = float(m.group(1))
    unit = (m.group(2) or "b").lower()[0]
    mult = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]
    return int(n * mult)


def header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c in name for c in " \t\r\n"):
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {text!r}")
    if any(c in text for c in "\r\n\0"):
        raise argparse.ArgumentTypeError(f"control characters in header {text!r}")
    return name.strip(), value.strip()


def resolve(text: str) -> tuple[str, int, str]:
    """``HOST:PORT:ADDR`` (like curl); HOST goes through the URL host rules (IDNA, case:
    ``dócs.test`` is ``xn--dcs-gna.test``), ADDR is an IP address (IPv6 with or without
    brackets)."""
    from skitter.seeds import canonical_host

    if text.startswith("["):  # [v6]:PORT:ADDR
        host, sep, rest = text[1:].partition("]:")
        parts = [host, *rest.split(":", 1)] if sep else []
    else:
        parts = text.split(":", 2)
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT:ADDR, got {text!r}")
    host, port_s, addr = parts
    try:
        port = int(port_s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port in --resolve {text!r}") from None
    addr = addr.strip()
    if addr.startswith("[") and addr.endswith("]"):
        addr = addr[1:-1]
    import ipaddress

    try:
        ipaddress.ip_address(addr)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad address in --resolve {text!r}") from None
    name = canonical_host(host) if host else None
    if name is None or not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"bad host or port in --resolve {text!r}")
    return name.strip("[]"), port, addr


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.I)


def duration_or_off(text: str) -> float | None:
    """A :func:`duration`, or ``0`` (``0s``...): no limit (None)."""
    m = _DURATION.match(text)
    if m and float(m.group(1)) == 0:
        return None
    return duration(text)


def duration(text: str) -> float:
    """Seconds from ``90``, ``30s``, ``20m``, ``2h``, ``1d``; must be > 0."""
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90, 30s, 20m, 2h)")
    v = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2).lower()]
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0 seconds: {text!r}")
    return v


def regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"bad regular expression {text!r}: {exc}") from None
    return text


def tcp_port(text: str) -> int:
    """A TCP port 0..65535 (0: the system picks a free one)."""
    v = positive_int(text)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port (0..65535): {text!r}")
    return v
