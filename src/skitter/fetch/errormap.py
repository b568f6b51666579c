"""aiohttp and OS exceptions -> the :class:`~skitter.errors.FetchError` tree, with details
that say how far a fetch got (used by :mod:`skitter.fetch.aiohttp`)."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from skitter.errors import ConnectError, FetchError, FetchTimeout, ProtocolError
from skitter.settings import FetchSettings

__all__ = ["Progress", "map_error", "payload_detail", "reason", "short"]


@dataclass(slots=True)
class Progress:
    """What one fetch got to, for error details (phase; body bytes raw and decoded;
    Content-Length and chunked framing of the response)."""

    phase: str = "connect"  # queue -> dns -> connect -> headers -> body
    raw_bytes: int = 0
    decoded_bytes: int = 0
    content_length: int | None = None
    chunked: bool = False
    idle_s: float = 0.0  # the idle-read deadline of this fetch
    keep_body: Callable[[int, tuple[tuple[str, str], ...]], bool] | None = None


def map_error(exc: Exception, progress: Progress, s: FetchSettings) -> FetchError | None:
    """Translate an aiohttp / OS exception into the FetchError tree.

    Args:
        exc: what the fetch raised.
        progress: how far the fetch got (for the detail).
        s: the fetch settings (deadlines in seconds, for the detail).

    Returns:
        The :class:`~skitter.errors.FetchError` to raise, ``exc`` itself if it is one, or
        None if ``exc`` is not a fetch error (a programming error: re-raise it).
    """
    n = progress.decoded_bytes
    if isinstance(exc, FetchError):
        return exc
    if isinstance(exc, aiohttp.ClientConnectorError):
        inner: BaseException = exc.os_error
        if isinstance(inner, FetchError):
            return inner  # raised by our resolver (dns / blocked_address)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ConnectError(f"dns: {exc.host}: {reason(exc.os_error)}", kind="dns")
    if isinstance(exc, aiohttp.ClientSSLError | aiohttp.ServerFingerprintMismatch):
        return ConnectError(f"tls: {exc}", kind="tls")
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return FetchTimeout(f"timeout (connect): no connection within {s.connect_timeout_s:g} s")
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return FetchTimeout(
            f"timeout (idle read): no data for {progress.idle_s:g} s "
            f"during {progress.phase}, {progress.raw_bytes} body bytes read",
            bytes_read=n,
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectError(
            f"connect: {exc.host}:{exc.port}: {reason(exc.os_error)}", kind="connect"
        )
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return ConnectError(f"connect: proxy answered {exc.status} {exc.message}")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ProtocolError(payload_detail(exc, progress), bytes_read=n)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ProtocolError(
            f"server disconnected during {progress.phase} ({progress.raw_bytes} body bytes read)",
            bytes_read=n,
        )
    if isinstance(exc, aiohttp.ClientResponseError):
        return ProtocolError(f"bad response: {short(exc.message)}", bytes_read=n)
    if isinstance(exc, aiohttp.InvalidURL):
        return ProtocolError(f"invalid url: {short(str(exc))}")
    if isinstance(exc, ssl.SSLError):
        return ConnectError(f"tls: {exc}", kind="tls")
    if isinstance(exc, TimeoutError):
        return FetchTimeout(f"timeout: {short(str(exc)) or type(exc).__name__}", bytes_read=n)
    if isinstance(exc, OSError):  # includes aiohttp.ClientOSError: reset, unreachable...
        return ConnectError(f"connect: {reason(exc)} during {progress.phase}", bytes_read=n)
    if isinstance(exc, aiohttp.ClientError | ValueError | UnicodeError):
        return ProtocolError(f"{type(exc).__name__}: {short(str(exc))}", bytes_read=n)
    return None


def payload_detail(exc: aiohttp.ClientPayloadError, progress: Progress) -> str:
    """The detail of a body framing error: "incomplete body: N of M bytes" or "bad body
    framing: ..."."""
    cause: Any = exc.__cause__ or exc
    text = str(getattr(cause, "message", "") or cause)
    got = progress.raw_bytes
    short_of_length = progress.content_length is not None and got < progress.content_length
    if short_of_length or "not enough data" in text.lower() or isinstance(cause, ConnectionError):
        if progress.content_length is not None:
            return f"incomplete body: {got} of {progress.content_length} bytes"
        if progress.chunked:
            return f"incomplete body: {got} bytes, chunked body ended without its last chunk"
        return f"incomplete body: {got} bytes"
    return f"bad body framing: {short(text)} ({got} body bytes read)"


def reason(exc: BaseException) -> str:
    """The OS error text of ``exc`` (its strerror), else its text or class name."""
    strerror = getattr(exc, "strerror", None)
    return str(strerror or exc or type(exc).__name__)


def short(text: str, limit: int = 200) -> str:
    """``text`` with whitespace collapsed, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
