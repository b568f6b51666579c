"""The aiohttp :class:`~skitter.fetch.base.Fetcher`: one session, deadlines, capped decoding.

Deadlines (all in seconds, from :class:`~skitter.settings.FetchSettings`):

- ``timeout_s``: whole fetch (DNS + connect + request + headers + body), enforced with
  :func:`asyncio.timeout` around everything, so a server trickling one byte per second (in the
  headers or the body) is cut off at ``timeout_s`` (case C19). Detail "timeout (total deadline)".
- ``read_timeout_s``: idle read, no byte received for that long (aiohttp ``sock_read``).
  Detail "timeout (idle read)".
- ``connect_timeout_s``: TCP (and TLS) connect (aiohttp ``sock_connect``). Detail
  "timeout (connect)".

Bodies are read chunk by chunk and decoded as they arrive by
:class:`~skitter.fetch.decode.ContentDecoder` with a cap on the decoded size (case C13); the
raw (encoded) size is capped at the same number (:mod:`skitter.fetch.body`). Going over aborts
the connection (it is closed, not drained) and raises :class:`~skitter.errors.BodyTooLarge`.

Labels that lie are tolerated as browsers do (:mod:`skitter.fetch.decode`): a body not in
its labelled coding is used as sent (``Response.note`` says so), a text body encoded twice is
decoded twice, a compressed file (``application/gzip``) stays as sent. A 3xx with a Location
is returned whatever its body holds (damaged, cut short, too large: ``Response.note``); its
connection is then closed. HEAD requests say ``Connection: close``: a connection that answered
HEAD is never reused (a body sent after a HEAD answer would corrupt the next response on it).

aiohttp removes the chunked transfer coding: ``Response.raw_body`` is the *content-encoded*
body without chunk framing, while ``Response.headers`` still says
``Transfer-Encoding: chunked``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ClientResponse
from aiohttp.connector import Connection
from multidict import CIMultiDict
from yarl import URL

from skitter.errors import (
    BodyTooLarge,
    FetchTimeout,
    ProtocolError,
)
from skitter.fetch import lenient
from skitter.fetch.body import is_redirect as _is_redirect
from skitter.fetch.body import read_body
from skitter.fetch.decode import ACCEPT_ENCODING
from skitter.fetch.errormap import Progress as _Progress
from skitter.fetch.errormap import map_error
from skitter.fetch.lenient import LenientResponseHandler
from skitter.fetch.resolver import SkitterResolver, is_ip_literal
from skitter.models import Request, Response
from skitter.settings import FetchSettings

__all__ = ["DEFAULT_ACCEPT", "MAX_FIELD_SIZE", "MAX_HEADERS", "MAX_LINE_SIZE", "AiohttpFetcher"]

#: ``Accept`` sent unless ``FetchSettings.headers`` overrides it.
DEFAULT_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
#: Longest status line / header line accepted, in bytes (aiohttp's default, set explicitly).
MAX_LINE_SIZE = 8190
#: Longest header field (name + value, folded lines joined), in bytes.
MAX_FIELD_SIZE = 8190
#: Most header fields accepted in one response.
MAX_HEADERS = 256
#: Read buffer size in bytes (also roughly the largest chunk handed to the decoder).
READ_BUFSIZE = 64 * 1024


class _PeerResponse(ClientResponse):
    """ClientResponse that remembers the peer address (the connection may be released early)."""

    skitter_peer: str | None = None
    skitter_protocol: ResponseHandler | None = None
    skitter_raw_head: bytes | None = None

    async def start(self, connection: Connection) -> ClientResponse:
        protocol = self.skitter_protocol = connection.protocol
        transport = connection.transport
        if transport is not None:
            peer = transport.get_extra_info("peername")
            if isinstance(peer, tuple) and peer:
                self.skitter_peer = str(peer[0])
        if self.method == "HEAD" and protocol is not None:
            protocol.force_close()  # never reused after HEAD (see _request_headers)
        started = await super().start(connection)
        if isinstance(protocol, LenientResponseHandler):
            self.skitter_raw_head = protocol.raw_head
        return started


def _phase_setter(
    phase: str,
) -> Callable[[aiohttp.ClientSession, SimpleNamespace, object], Awaitable[None]]:
    async def set_phase(
        _session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: object
    ) -> None:
        progress = getattr(ctx, "trace_request_ctx", None)
        if isinstance(progress, _Progress):
            progress.phase = phase

    return set_phase


def _trace_config() -> aiohttp.TraceConfig:
    """Trace hooks recording which phase a fetch is in (for timeout details)."""
    tc = aiohttp.TraceConfig()
    tc.on_connection_queued_start.append(_phase_setter("queue"))
    tc.on_dns_resolvehost_start.append(_phase_setter("dns"))
    tc.on_connection_create_start.append(_phase_setter("connect"))
    tc.on_request_headers_sent.append(_phase_setter("headers"))
    return tc


def _base_headers(s: FetchSettings) -> CIMultiDict[str]:
    """The headers every request of ``s`` starts with: User-Agent, Accept, Accept-Encoding,
    then ``s.headers`` (a name given there replaces that default, in its place)."""
    headers: CIMultiDict[str] = CIMultiDict()
    headers["User-Agent"] = s.user_agent
    headers["Accept"] = DEFAULT_ACCEPT
    headers["Accept-Encoding"] = ACCEPT_ENCODING
    overridden: set[str] = set()
    for name, value in s.headers:
        low = name.lower()
        if low in headers and low not in overridden:
            headers[name] = value  # replaces the default of that name
            overridden.add(low)
        else:
            headers.add(name, value)
    return headers


class AiohttpFetcher:
    """:class:`~skitter.fetch.base.Fetcher` on one :class:`aiohttp.ClientSession`.

    Connections are kept alive and pooled (at most ``concurrency`` in total and
    ``host_concurrency`` per host); names go through :class:`SkitterResolver` (``resolve``
    overrides, DNS cache of ``dns_cache_ttl_s`` s, private-address guard); cookies are kept
    per host across requests and can be saved/loaded for ``--resume``.

    Create and use it inside a running event loop; close it with :meth:`aclose` (or use
    ``async with``).

    Args:
        settings: user agent, extra headers, deadlines (s), body cap (bytes), proxy, DNS.
        concurrency: connections open at once overall.
        host_concurrency: connections open at once per host (0 = unlimited).
        clock: monotonic clock in seconds, used for ``Response.elapsed_s`` and the DNS cache.
        resolver: resolver to use; default one built from ``settings``.

    Attributes:
        resolver: the :class:`SkitterResolver` (``allow_host``, ``lookup``, ``lookups``).
    """

    def __init__(
        self,
        settings: FetchSettings,
        *,
        concurrency: int = 64,
        host_concurrency: int = 8,
        clock: Callable[[], float] = time.monotonic,
        resolver: SkitterResolver | None = None,
    ) -> None:
        self.settings = settings
        self._concurrency = concurrency
        self._host_concurrency = host_concurrency
        self._clock = clock
        self.resolver = resolver or SkitterResolver(
            resolve=settings.resolve,
            resolve_only=settings.resolve_only,
            allow_private=settings.allow_private,
            cache_ttl_s=settings.dns_cache_ttl_s,
            clock=clock,
        )
        if settings.proxy:
            proxy_host = URL(settings.proxy).host
            if proxy_host:
                self.resolver.allow_host(proxy_host)  # the proxy may well be on a private net
        self._jar: aiohttp.CookieJar | None = None
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._base_headers: tuple[FetchSettings, CIMultiDict[str]] | None = None
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def cookie_jar(self) -> aiohttp.CookieJar:
        """The cookie jar (created on first use; needs a running event loop)."""
        if self._jar is None:
            # unsafe=True: also keep cookies set by IP-address hosts.
            self._jar = aiohttp.CookieJar(unsafe=True)
        return self._jar

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("AiohttpFetcher is closed")
        if self._session is None:
            s = self.settings
            connector = aiohttp.TCPConnector(
                limit=self._concurrency,
                limit_per_host=self._host_concurrency,
                resolver=self.resolver,
                # The resolver caches (TTL dns_cache_ttl_s) and checks addresses on every
                # connection; a second cache in the connector would skip that check.
                use_dns_cache=False,
            )
            lenient.install(connector)  # header sections read as browsers do (C29, C30)
            timeout = aiohttp.ClientTimeout(
                total=None,  # the whole-fetch deadline is asyncio.timeout in fetch()
                sock_connect=s.connect_timeout_s,
                sock_read=s.read_timeout_s,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=timeout,
                cookie_jar=self.cookie_jar,
                auto_decompress=False,
                response_class=_PeerResponse,
                read_bufsize=READ_BUFSIZE,
                max_line_size=MAX_LINE_SIZE,
                max_field_size=MAX_FIELD_SIZE,
                max_headers=MAX_HEADERS,
                trust_env=False,
                trace_configs=[_trace_config()],
            )
        return self._session

    async def aclose(self) -> None:
        """Close all connections and the resolver. Idempotent."""
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None
        await self.resolver.close()

    async def __aenter__(self) -> AiohttpFetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def save_cookies(self, path: str | os.PathLike[str]) -> None:
        """Write the cookie jar to ``path`` (JSON, atomically: temp file + ``os.replace``)."""
        target = Path(path)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            self.cookie_jar.save(tmp)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                tmp.unlink()

    def load_cookies(self, path: str | os.PathLike[str]) -> None:
        """Replace the jar's cookies with those saved at ``path``; a missing file is ignored.

        Call it from inside the event loop (the jar needs a running loop), before fetching.
        """
        if Path(path).exists():
            self.cookie_jar.load(Path(path))

    # ------------------------------------------------------------------ resolver helpers

    def allow_host(self, host: str) -> None:
        """Let ``host`` (e.g. a seed's) be fetched even if it resolves to a private address."""
        self.resolver.allow_host(host)

    async def lookup_url(self, url: str) -> list[str]:
        """The IP addresses ``url``'s host:port would connect to (cached, honours ``resolve``).

        Lets the crawler group hosts by IP (``--ip-concurrency``). An IP-literal host gives
        itself.

        Raises:
            ConnectError: kind "dns" (lookup failed, or unmapped under ``resolve_only``) or
                "blocked_address".
            ProtocolError: ``url`` has no host.
        """
        try:
            parsed = URL(url, encoded=True)
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"invalid url: {exc}") from exc
        if not parsed.raw_host:
            raise ProtocolError(f"invalid url: {url!r} has no host")
        return await self.resolver.lookup(parsed.raw_host, parsed.port or 0)

    # ------------------------------------------------------------------ fetching

    def _request_headers(
        self, request: Request, method: str = "GET", extra: Sequence[tuple[str, str]] = ()
    ) -> CIMultiDict[str]:
        s = self.settings
        base = self._base_headers
        if base is None or base[0] is not s:
            base = self._base_headers = (s, _base_headers(s))
        headers = base[1].copy()
        if request.referer:
            headers["Referer"] = request.referer
        for name, value in extra:
            headers[name] = value
        if method == "HEAD":
            # Servers that answer HEAD with a body leave bytes on the connection that would
            # be read as the start of the next response: a HEAD connection is never reused.
            headers["Connection"] = "close"
        return headers

    def _timeout(self, idle_s: float) -> aiohttp.ClientTimeout:
        """The aiohttp timeouts of a fetch whose idle-read deadline is ``idle_s`` seconds
        (0: none), one object per distinct deadline."""
        key = (self.settings.connect_timeout_s, idle_s)
        timeout = self._timeouts.get(key)
        if timeout is None:
            if len(self._timeouts) > 64:  # --timeout auto: deadlines vary; keep a few
                self._timeouts.clear()
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(
                total=None, sock_connect=key[0], sock_read=idle_s or None
            )
        return timeout

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
        """Fetch ``request.url`` once (no redirects followed) and return the response.

        The URL is sent exactly as given (``yarl.URL(url, encoded=True)``, no re-encoding).
        Sent headers: User-Agent, Accept, ``Accept-Encoding: gzip, deflate, br, zstd`` (only
        codings decoded here), ``settings.headers``, ``Referer`` if ``request.referer`` is set,
        cookies from the jar.

        Args:
            request: what to fetch.
            method: "GET" or "HEAD" (no body is read for HEAD).
            max_body_bytes: cap in bytes on the decoded body (and on the raw body);
                None = ``settings.max_body_bytes``.
            truncate: instead of raising :class:`BodyTooLarge`, stop reading at the cap
                and return the first ``max_body_bytes`` decoded bytes with
                ``Response.truncated`` set (the connection is closed, not drained). For
                files that are defined by their first N bytes, e.g. robots.txt
                (RFC 9309 §2.5: parse at least the first 500 KiB).
            headers: extra request headers for this request only (added after the
                others, values sent as given: a recrawl's validators).
            keep_body: called with (status, headers) when the headers arrive; False drops
                the response there: its body is not read (the connection is closed) and
                ``body``/``raw_body`` are empty (:mod:`skitter.typefocus`).
            read_timeout_s: this fetch's idle-read deadline in seconds (None =
                ``settings.read_timeout_s``; ``--timeout auto``: :mod:`skitter.autotune`).

        Returns:
            :class:`~skitter.models.Response`: ``headers`` from the raw header bytes decoded
            latin-1 (``value.encode("latin-1")`` gives the wire bytes, e.g. a raw UTF-8
            ``Location``), ``raw_body`` as received (content-encoded, de-chunked), ``body``
            decoded, ``request_headers`` as sent, ``peer_ip``, ``elapsed_s`` in seconds.
            4xx/5xx are returned, not raised.

        Raises:
            FetchTimeout: "timeout (total deadline)", "timeout (idle read)" or
                "timeout (connect)"; ``bytes_read`` = decoded body bytes so far.
            ConnectError: kind "dns" (lookup failed / not in the resolve map with
                resolve_only), "connect" (refused, reset, unreachable, proxy failure),
                "tls", "blocked_address".
            BodyTooLarge: the decoded or raw body passed the cap, or Content-Length did.
            ProtocolError: "incomplete body: N of M bytes", bad status line or headers
                (e.g. a header line over 8190 bytes), server disconnected,
                "content decoding failed: ...".
        """
        s = self.settings
        cap = s.max_body_bytes if max_body_bytes is None else max_body_bytes
        method = method.upper()
        progress = _Progress(keep_body=keep_body)
        progress.idle_s = s.read_timeout_s if read_timeout_s is None else read_timeout_s
        start = self._clock()
        deadline = asyncio.timeout(s.timeout_s)
        try:
            async with deadline:
                return await self._fetch(request, method, cap, progress, start, truncate, headers)
        except Exception as exc:
            if deadline.expired():
                raise FetchTimeout(
                    f"timeout (total deadline): {s.timeout_s:g} s passed "
                    f"during {progress.phase}, {progress.raw_bytes} body bytes read",
                    bytes_read=progress.decoded_bytes,
                ) from exc
            error = map_error(exc, progress, self.settings)
            if error is None or error is exc:
                raise  # ours already, or a programming error (e.g. fetch after aclose)
            raise error from exc

    async def _fetch(
        self,
        request: Request,
        method: str,
        cap: int,
        progress: _Progress,
        start: float,
        truncate: bool = False,
        extra_headers: Sequence[tuple[str, str]] = (),
    ) -> Response:
        s = self.settings
        request_method = method
        try:
            url = URL(request.url, encoded=True)
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"invalid url: {exc}") from exc
        if url.scheme not in ("http", "https") or not url.raw_host:
            raise ProtocolError(f"invalid url: {request.url!r} (need an absolute http(s) URL)")
        if not s.proxy and is_ip_literal(url.raw_host):
            # aiohttp connects to IP literals without asking the resolver: check here.
            self.resolver.check_ip_literal(url.raw_host, url.port or 0)
        session = self._get_session()
        resp = await session.request(
            method,
            url,
            headers=self._request_headers(request, method, extra_headers),
            allow_redirects=False,
            proxy=s.proxy or None,
            trace_request_ctx=progress,
            timeout=self._timeout(progress.idle_s),
        )
        complete = False
        try:
            progress.phase = "body"
            raw_headers = resp.raw_headers
            headers = tuple([(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers])
            notes: list[str] = []
            keep = progress.keep_body
            if keep is not None and not keep(resp.status, headers):
                method = "HEAD"  # dropped on its headers: the body is not read (closed below)
            try:
                protocol = resp.skitter_protocol if isinstance(resp, _PeerResponse) else None
                raw, body, truncated = await read_body(
                    resp, protocol, headers, method, cap, progress, truncate, notes
                )
            except BodyTooLarge as exc:
                if not _is_redirect(resp.status, headers):
                    # The status helps a link checker: a 200 that is too large is still alive.
                    raise BodyTooLarge(
                        f"{exc.detail} (HTTP status {resp.status})", bytes_read=exc.bytes_read
                    ) from None
                raw, body, truncated = b"", b"", True
                notes.append(f"redirect body not read: {exc.detail}")
            except (
                ProtocolError,
                aiohttp.ClientPayloadError,
                aiohttp.ServerDisconnectedError,
                aiohttp.ServerTimeoutError,
            ) as exc:
                # A redirect is followed whatever its body holds: the body is never needed.
                if not _is_redirect(resp.status, headers):
                    raise
                raw, body, truncated = b"", b"", True
                err = map_error(exc, progress, self.settings)
                notes.append(f"redirect body not read: {err.detail if err else exc}")
            # a truncated or dropped body was not read to its end: close
            complete = not truncated and method == request_method
        finally:
            if complete:
                resp.release()
            else:
                resp.close()  # abort the connection: never drain a body we gave up on
        version = resp.version
        return Response(
            url=request.url,
            status=resp.status,
            reason=resp.reason or "",
            headers=headers,
            body=body,
            raw_body=raw,
            http_version=f"{version.major}.{version.minor}" if version else "1.1",
            elapsed_s=self._clock() - start,
            request_headers=tuple(resp.request_info.headers.items()),
            peer_ip=resp.skitter_peer if isinstance(resp, _PeerResponse) else None,
            truncated=truncated and not _is_redirect(resp.status, headers),
            raw_head=resp.skitter_raw_head if isinstance(resp, _PeerResponse) else None,
            note="; ".join(notes) or None,
        )
