"""The crawl observer port: what a crawl tells whoever watches it (the status page, the metrics,
the terminal display), without a branch in the crawl loop for each of them.

A crawl calls its observer (:attr:`skitter.events.CrawlHooks.observer`, a no-op
:data:`NULL_OBSERVER` by default) when it writes a pages.jsonl record and when robots.txt decides
on a URL; host scheduling (politeness gaps, backoffs) and newly queued URLs are seen by wrapping
the frontier in :class:`ObservedFrontier`, which forwards every call unchanged.
Observers must be quick and must not raise (they run on the crawl's event loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from skitter.frontier.base import AddResult, Frontier
from skitter.frontier.forwarding import ForwardingFrontier
from skitter.models import Request

if TYPE_CHECKING:
    from skitter.export.pages import PageRecord

__all__ = [
    "NULL_OBSERVER",
    "CrawlObserver",
    "NullObserver",
    "ObservedFrontier",
    "observe_frontier",
]


class CrawlObserver(Protocol):
    """Receives a crawl's events (all times in seconds, epoch as the crawl's clock)."""

    def on_record(self, rec: PageRecord, host: str) -> None:
        """A pages.jsonl record of ``host`` (a politeness host key) was written."""
        ...

    def on_robots(self, host: str, decision: str, crawl_delay_s: float | None) -> None:
        """robots.txt decided on one URL of ``host``: ``allowed``, ``disallowed`` or
        ``unreachable`` (RFC 9309 §2.3.1.4: disallow all); ``crawl_delay_s`` is the
        Crawl-delay that applies (None: none)."""
        ...

    def on_schedule(self, host: str, not_before: float, retry: bool) -> None:
        """``host`` may be requested again from ``not_before``; ``retry``: after a failure
        (429/5xx, transport error, unreachable robots.txt) the request waits to be retried."""
        ...

    def on_queued(self, urls: frozenset[str]) -> None:
        """These canonical URLs were newly queued."""
        ...


class NullObserver:
    """An observer that ignores everything (the default)."""

    def on_record(self, rec: PageRecord, host: str) -> None:
        """Ignored."""

    def on_robots(self, host: str, decision: str, crawl_delay_s: float | None) -> None:
        """Ignored."""

    def on_schedule(self, host: str, not_before: float, retry: bool) -> None:
        """Ignored."""

    def on_queued(self, urls: frozenset[str]) -> None:
        """Ignored."""


#: The shared no-op observer.
NULL_OBSERVER = NullObserver()


class ObservedFrontier(ForwardingFrontier):
    """A :class:`~skitter.frontier.base.Frontier` that tells ``observer`` about queued URLs
    (:meth:`add`) and host schedules (:meth:`ack`, :meth:`retry`, :meth:`delay_host`), and
    otherwise forwards every call to ``inner`` unchanged (same results, same errors)."""

    def __init__(self, inner: Frontier, observer: CrawlObserver) -> None:
        super().__init__(inner)
        self.observer = observer

    async def add(self, requests: Sequence[Request], *, force: bool = False) -> AddResult:
        """See :meth:`Frontier.add`."""
        result = await self.inner.add(requests, force=force)
        if result.added_urls:
            self.observer.on_queued(result.added_urls)
        return result

    def scheduled(self, host: str, not_before: float, retry: bool) -> None:
        """Tell the observer (:meth:`CrawlObserver.on_schedule`)."""
        self.observer.on_schedule(host, not_before, retry)


def observe_frontier(frontier: Frontier, observer: CrawlObserver) -> Frontier:
    """``frontier`` itself for the null observer (no overhead), else an
    :class:`ObservedFrontier` around it."""
    if isinstance(observer, NullObserver):
        return frontier
    return ObservedFrontier(frontier, observer)
