"""The :class:`Fetcher` port: one HTTP request, one hop, one :class:`~skitter.models.Response`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from skitter.models import Request, Response

__all__ = ["Fetcher"]


@runtime_checkable
class Fetcher(Protocol):
    """Fetches single URLs. Implementations: :class:`skitter.fetch.aiohttp.AiohttpFetcher`."""

    async def fetch(
        self,
        request: Request,
        *,
        method: str = "GET",
        max_body_bytes: int | None = None,
        truncate: bool = False,
        headers: Sequence[tuple[str, str]] = (),
        keep_body: Callable[[int, tuple[tuple[str, str], ...]], bool] | None = None,
        read_timeout_s: float | None = None,
    ) -> Response:
        """Make one request and return the response of that single hop.

        Never follows redirects: a 3xx is returned as is (``Location`` in ``headers``).
        ``request.url`` is sent exactly as given (it is already canonical and percent-encoded;
        it is not re-encoded). ``Referer: request.referer`` is sent when set.

        Args:
            request: what to fetch.
            method: ``"GET"`` or ``"HEAD"`` (``HEAD`` reads no body).
            max_body_bytes: cap on the decoded body in bytes; None = the fetcher's default.
            truncate: return the first ``max_body_bytes`` bytes (``Response.truncated``
                set) instead of raising ``BodyTooLarge`` (robots.txt, RFC 9309 §2.5).
            headers: extra request headers for this request only, sent as given after
                the others (e.g. a recrawl's ``If-None-Match`` / ``If-Modified-Since``).
            keep_body: called with (status, headers) as they arrive; False: the body is
                not read, the connection closed, ``body`` empty (file-type focus).
            read_timeout_s: idle-read deadline of this fetch, seconds (None: the default).

        Returns:
            The response; HTTP 4xx/5xx are responses too, never exceptions.

        Raises:
            FetchTimeout: kind ``"timeout"`` (``detail`` names the deadline that fired).
            ConnectError: kind ``"dns"``, ``"connect"``, ``"tls"`` or ``"blocked_address"``.
            BodyTooLarge: kind ``"body_too_large"``.
            ProtocolError: kind ``"protocol"`` (bad framing, incomplete body, bad coding).
        """
        ...

    async def aclose(self) -> None:
        """Close connections and release resources; the fetcher is unusable afterwards."""
        ...
