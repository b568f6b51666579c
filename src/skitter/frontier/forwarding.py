"""A frontier wrapper that forwards every call of the :class:`~skitter.frontier.base.Frontier`
contract to the frontier it wraps.

Wrappers (:class:`skitter.observer.ObservedFrontier`,
:class:`skitter.frontier.routing.RoutingFrontier`) subclass :class:`ForwardingFrontier` and
override only the calls they change, or :meth:`ForwardingFrontier.scheduled` to see every move
of a host's schedule; the contract of each call is documented once, on the protocol.
"""

from __future__ import annotations

from collections.abc import Sequence

from skitter.frontier.base import AddResult, Frontier, FrontierCounts
from skitter.models import Lease, Request

__all__ = ["ForwardingFrontier"]


class ForwardingFrontier:
    """Forwards every :class:`~skitter.frontier.base.Frontier` call to ``inner`` unchanged
    (same arguments, results and errors); each method follows that method's contract on the
    protocol.

    Args:
        inner: the wrapped frontier (any backend or wrapper).
    """

    def __init__(self, inner: Frontier) -> None:
        self.inner = inner

    def scheduled(self, host: str, not_before: float, retry: bool) -> None:
        """Called after :meth:`ack` (``retry`` False), :meth:`retry` (``retry`` =
        ``count_attempt``) and :meth:`delay_host` (False) succeeded: ``host`` (a host key) waits
        until at least ``not_before`` (seconds). Does nothing here; must not raise."""

    async def add(self, requests: Sequence[Request], *, force: bool = False) -> AddResult:
        """``inner.add``: see :meth:`Frontier.add`."""
        return await self.inner.add(requests, force=force)

    async def lease(self, now: float) -> Lease | None:
        """``inner.lease``: see :meth:`Frontier.lease`."""
        return await self.inner.lease(now)

    async def ack(
        self,
        lease: Lease,
        *,
        not_before: float,
        status: int | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> None:
        """``inner.ack``: see :meth:`Frontier.ack`."""
        await self.inner.ack(
            lease, not_before=not_before, status=status, etag=etag, last_modified=last_modified
        )
        self.scheduled(lease.host, not_before, False)

    async def retry(self, lease: Lease, *, not_before: float, count_attempt: bool = True) -> None:
        """``inner.retry``: see :meth:`Frontier.retry`."""
        await self.inner.retry(lease, not_before=not_before, count_attempt=count_attempt)
        self.scheduled(lease.host, not_before, count_attempt)

    async def release(self, lease: Lease, *, not_before: float) -> None:
        """See :meth:`Frontier.release`."""
        await self.inner.release(lease, not_before=not_before)
        self.scheduled(lease.host, not_before, False)

    async def renew(self, lease: Lease, now: float) -> Lease:
        """``inner.renew``: see :meth:`Frontier.renew`."""
        return await self.inner.renew(lease, now)

    async def delay_host(self, host: str, not_before: float) -> None:
        """``inner.delay_host``: see :meth:`Frontier.delay_host`."""
        await self.inner.delay_host(host, not_before)
        self.scheduled(host, not_before, False)

    async def next_ready_at(self) -> float | None:
        """``inner.next_ready_at``: see :meth:`Frontier.next_ready_at`."""
        return await self.inner.next_ready_at()

    async def is_finished(self) -> bool:
        """``inner.is_finished``: see :meth:`Frontier.is_finished`."""
        return await self.inner.is_finished()

    async def note_inlinks(self, links: Sequence[tuple[str, str]]) -> int:
        """``inner.note_inlinks``: see :meth:`Frontier.note_inlinks`."""
        return await self.inner.note_inlinks(links)

    async def mark_done(self, urls: Sequence[str]) -> None:
        """``inner.mark_done``: see :meth:`Frontier.mark_done`."""
        await self.inner.mark_done(urls)

    async def counts(self) -> FrontierCounts:
        """``inner.counts``: see :meth:`Frontier.counts`."""
        return await self.inner.counts()

    async def flush(self) -> None:
        """``inner.flush``: see :meth:`Frontier.flush`."""
        await self.inner.flush()

    async def aclose(self) -> None:
        """``inner.aclose``: see :meth:`Frontier.aclose`."""
        await self.inner.aclose()
