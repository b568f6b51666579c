"""Name resolution for the fetcher: ``--resolve`` overrides, a TTL cache and address safety.

:class:`SkitterResolver` is an :class:`aiohttp.abc.AbstractResolver`, so the connector asks it
for every connection to a *name*; the address check therefore runs on the address actually
connected to (a DNS answer that changes between a robots.txt fetch and a page fetch, "DNS
rebinding", cannot slip a private address through). aiohttp does not call the resolver for
IP-literal hosts: the fetcher calls :meth:`SkitterResolver.check_ip_literal` for those.

Failed lookups are cached too (a *negative* cache, :data:`NEGATIVE_TTL_S` at most), so a dead
name costs one query however many of its URLs are fetched: each later request fails at once
with the same ``dns`` error (a link checker reports every link of that host together).

Address policy (SSRF), unless ``allow_private`` (``--allow-private``) is set: a connection to
a loopback, private, link-local, multicast, unspecified, reserved or 100.64.0.0/10 address
is refused with :class:`~skitter.errors.ConnectError` kind ``"blocked_address"`` before any
byte is sent, whether the address comes from DNS or from an IP literal in the URL (in any
spelling the WHATWG URL parser accepts: ``0x7f000001``, ``2130706433``,
``[::ffff:127.0.0.1]``...). The exceptions, and only these:

* the addresses ``--resolve HOST:PORT:ADDR`` gives are allowed for *that* host and port
  only: another name, another port, or an IP literal that happens to lead to the same
  private address is still refused (mapping ``www.example.test:80`` to 10.0.0.5 does not
  open ``http://10.0.0.5/`` or ``http://intranet/`` to links);
* a host passed to :meth:`SkitterResolver.allow_host` may use any address on any port: the
  crawler passes every seed's host name, so crawling one's own intranet site works;
* the proxy's host, when a proxy is configured (target addresses are then resolved by the
  proxy and not checked here).

The crawler records a page whose robots.txt fetch was refused this way with
``blocked_address`` too (the page itself is never fetched).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable, Mapping

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from skitter.errors import ConnectError
from skitter.urls import normalize_host

__all__ = ["NEGATIVE_TTL_S", "SkitterResolver", "is_ip_literal"]

#: Longest time (seconds) a failed lookup is remembered (bounded by ``cache_ttl_s`` too).
NEGATIVE_TTL_S = 60.0

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: 100.64.0.0/10 (RFC 6598 shared address space: carrier NAT, some cloud metadata services).
_SHARED_V4 = ipaddress.IPv4Network("100.64.0.0/10")


def _parse_ip(text: str) -> _IPAddress | None:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.split("%", 1)[0]
    if ":" not in text and not text[-1:].isdigit():
        return None  # a name (cheaply): an IPv4 literal ends in a digit, an IPv6 one has a colon
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_ip_literal(host: str) -> bool:
    """True if ``host`` is an IPv4 or IPv6 address literal (brackets allowed), not a name."""
    return _parse_ip(host) is not None


def _norm_host(host: str) -> str:
    """One spelling per host (:func:`skitter.urls.normalize_host`), as URLs carry it."""
    try:
        return normalize_host(host)
    except ValueError:
        return host.strip().lower()


class SkitterResolver(AbstractResolver):
    """DNS for the fetcher: curl-style overrides, a TTL cache, and a private-address guard.

    Args:
        resolve: ``{(host, port): address}`` overrides like curl's ``--resolve host:port:addr``;
            the host is matched case-insensitively and the port exactly. ``address`` may list
            several addresses separated by commas (IPv6 with or without brackets). Answers
            from this map are always allowed, even private ones (only for that host:port).
        resolve_only: names (not IP literals) missing from ``resolve`` fail with
            :class:`~skitter.errors.ConnectError` kind ``"dns"`` without any DNS query.
        allow_private: if False, loopback/private/link-local/multicast/unspecified/reserved
            (and 100.64.0.0/10) addresses are refused with kind ``"blocked_address"``, except
            for hosts given to :meth:`allow_host` and addresses from ``resolve``.
        cache_ttl_s: seconds a system DNS answer is reused (0 = never cached).
        negative_ttl_s: seconds a failed system lookup is remembered: until then the name
            fails again at once with the same ``dns`` error, without a query. None =
            ``min(cache_ttl_s, NEGATIVE_TTL_S)``; 0 = failures are not cached. A failure for
            ``AF_UNSPEC`` (the name does not resolve at all) applies to every family.
        delegate: the resolver asked for names not in ``resolve``; default aiohttp's
            :class:`~aiohttp.resolver.ThreadedResolver` (``getaddrinfo`` in a thread).
        clock: monotonic clock in seconds, for the cache TTL.

    Attributes:
        lookups: number of queries sent to ``delegate`` (cache misses), for tests and stats.
    """

    def __init__(
        self,
        *,
        resolve: Mapping[tuple[str, int], str] | None = None,
        resolve_only: bool = False,
        allow_private: bool = False,
        cache_ttl_s: float = 300.0,
        negative_ttl_s: float | None = None,
        delegate: AbstractResolver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._map: dict[tuple[str, int], list[str]] = {}
        for (host, port), addr in (resolve or {}).items():
            addrs = [a.strip().strip("[]") for a in addr.split(",") if a.strip()]
            for a in addrs:
                if _parse_ip(a) is None:
                    raise ValueError(f"resolve: {host}:{port}: {a!r} is not an IP address")
            self._map[(_norm_host(host), int(port))] = addrs
        self._resolve_only = resolve_only
        self._allow_private = allow_private
        self._ttl = cache_ttl_s
        self._neg_ttl = (
            min(cache_ttl_s, NEGATIVE_TTL_S) if negative_ttl_s is None else negative_ttl_s
        )
        self._delegate = delegate
        self._owns_delegate = delegate is None
        self._clock = clock
        self._allowed_hosts: set[str] = set()
        self._cache: dict[tuple[str, int], tuple[float, list[tuple[str, int]]]] = {}
        #: (host, family) -> (expiry, detail) of a failed lookup.
        self._neg_cache: dict[tuple[str, int], tuple[float, str]] = {}
        self._inflight: dict[tuple[str, int], asyncio.Task[list[tuple[str, int]]]] = {}
        self.lookups = 0

    # ----------------------------------------------------------------- address policy

    def allow_host(self, host: str) -> None:
        """Allow any address for ``host`` (e.g. a seed's own host on a private network)."""
        self._allowed_hosts.add(_norm_host(host).strip("[]"))

    def is_blocked(self, ip: str) -> bool:
        """True if ``ip`` is not publicly routable and private addresses are not allowed.

        Blocked kinds: loopback, private, link-local, multicast, unspecified, reserved,
        100.64.0.0/10; IPv4-mapped IPv6 addresses are judged by their IPv4 address. Always
        False when ``allow_private`` is set. An unparsable string counts as blocked.
        """
        if self._allow_private:
            return False
        addr = _parse_ip(ip)
        if addr is None:
            return True
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        if isinstance(addr, ipaddress.IPv4Address) and addr in _SHARED_V4:
            return True
        return bool(
            addr.is_loopback
            or addr.is_private
            or addr.is_link_local
            or addr.is_multicast
            or addr.is_unspecified
            or addr.is_reserved
        )

    def _check(self, host: str, ip: str) -> None:
        if self._allow_private or host in self._allowed_hosts:
            return
        if self.is_blocked(ip):
            raise ConnectError(
                f"blocked address: {host} resolves to {ip} (private addresses not allowed)",
                kind="blocked_address",
            )

    def check_ip_literal(self, host: str, port: int) -> None:
        """Apply the address policy to an IP-literal host (aiohttp skips the resolver for those).

        Raises:
            ConnectError: kind ``"blocked_address"`` if the address is blocked.
        """
        h = _norm_host(host).strip("[]")
        if (h, port) in self._map:
            return
        self._check(h, h)

    # ----------------------------------------------------------------- resolution

    async def _query(self, host: str, family: socket.AddressFamily) -> list[tuple[str, int]]:
        """System lookup (through ``delegate``) -> [(address, family)]; counts ``lookups``."""
        if self._delegate is None:
            self._delegate = ThreadedResolver()
        self.lookups += 1
        try:
            infos = await self._delegate.resolve(host, 0, family=family)
        except OSError as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise ConnectError(f"dns: {host}: {reason}", kind="dns") from exc
        if not infos:
            raise ConnectError(f"dns: {host}: no addresses", kind="dns")
        return [(info["host"], info["family"]) for info in infos]

    async def _cached(self, host: str, family: socket.AddressFamily) -> list[tuple[str, int]]:
        key = (host, int(family))
        now = self._clock()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        for neg_key in (key, (host, int(socket.AF_UNSPEC))):
            neg = self._neg_cache.get(neg_key)
            if neg is not None and neg[0] > now:
                raise ConnectError(neg[1], kind="dns")
        task = self._inflight.get(key)
        if task is None:  # single-flight: concurrent misses share one query
            task = asyncio.ensure_future(self._query(host, family))
            self._inflight[key] = task
            task.add_done_callback(lambda t: self._query_done(key, t))
        # shield: one caller giving up (deadline) must not cancel the others' lookup
        return await asyncio.shield(task)

    def _query_done(self, key: tuple[str, int], task: asyncio.Task[list[tuple[str, int]]]) -> None:
        self._inflight.pop(key, None)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            if isinstance(exc, ConnectError) and exc.kind == "dns" and self._neg_ttl > 0:
                self._neg_cache[key] = (self._clock() + self._neg_ttl, exc.detail)
            return
        if self._ttl > 0:
            self._cache[key] = (self._clock() + self._ttl, task.result())

    async def _addresses(
        self, host: str, port: int, family: socket.AddressFamily
    ) -> list[tuple[str, int]]:
        h = _norm_host(host)
        mapped = self._map.get((h, port))
        if mapped is None and h.endswith("."):
            mapped = self._map.get((h.rstrip("."), port))
        if mapped is not None:
            return [(a, socket.AF_INET6 if ":" in a else socket.AF_INET) for a in mapped]
        literal = _parse_ip(h)
        if literal is not None:
            self._check(h.strip("[]"), str(literal))
            fam = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
            return [(str(literal), fam)]
        if self._resolve_only:
            raise ConnectError(
                f"dns: {host}:{port} is not in the resolve map (resolve_only)", kind="dns"
            )
        addrs = await self._cached(h, family)
        for ip, _ in addrs:
            self._check(h, ip)
        return addrs

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Addresses to connect to for ``host:port`` (called by aiohttp's connector).

        Order: the ``resolve`` map, IP literals, then the cached system lookup (one query per
        host and family within ``cache_ttl_s``; a failed query is repeated at most once per
        ``negative_ttl_s``). Each address is checked against the policy.

        Raises:
            ConnectError: kind ``"dns"`` (lookup failed, or name not mapped under
                ``resolve_only``) or ``"blocked_address"``.
        """
        addrs = await self._addresses(host, port, family)
        return [
            ResolveResult(
                hostname=host,
                host=ip,
                port=port,
                family=fam,
                proto=socket.IPPROTO_TCP,
                flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            )
            for ip, fam in addrs
        ]

    async def lookup(self, host: str, port: int) -> list[str]:
        """The IP addresses ``host:port`` would connect to (cached; the same policy applies).

        Lets the crawler group hosts by IP for per-IP concurrency.

        Raises:
            ConnectError: as :meth:`resolve`.
        """
        return [ip for ip, _ in await self._addresses(host, port, socket.AF_UNSPEC)]

    async def close(self) -> None:
        """Release the delegate resolver (if this object created it)."""
        if self._delegate is not None and self._owns_delegate:
            await self._delegate.close()
