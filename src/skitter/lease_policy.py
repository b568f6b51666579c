"""The lease-policy port: what a crawl mode changes in the processing of one lease.

The worker (:mod:`skitter.worker`) asks its policy at a few fixed points; the default,
:class:`LeasePolicy`, is a plain crawl (every method a no-op or the plain answer). Link
checking (:class:`skitter.checklinks.policy.CheckPolicy`) is the other implementation: it
reuses verdicts, fails dead hosts at once, fetches ``check_only`` requests with HEAD/GET and
queues links the crawl would leave out. A new mode plugs in here, not as a branch in the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skitter.export.pages import PageRecord
    from skitter.fetch.base import Fetcher
    from skitter.models import Request, Response

__all__ = ["FetchPolicy", "LeasePolicy", "Pause"]

#: Waits the host's politeness gap (after recording a request to it just now); seconds.
Pause = Callable[[], Awaitable[None]]

#: Robots.txt failures that mean the page cannot be fetched either (a dead host is "dns",
#: not a robots.txt verdict; C27, SSRF).
_FINAL_ROBOTS_ERRORS = frozenset({"dns", "blocked_address"})


class LeasePolicy:
    """A plain crawl: the default policy (every hook a no-op).

    Attributes:
        rejudges_links: True if :meth:`check_only_for` may change a link decision (the
            worker skips the call per link otherwise).
        parses_pages: False if HTML bodies are recorded but never parsed for links.
    """

    rejudges_links = False
    parses_pages = True

    def add_seed(self, canonical_url: str) -> None:
        """Note a seed (canonical URL) before the crawl starts."""

    def reused_record(self, request: Request) -> PageRecord | None:
        """A record to write for ``request`` instead of fetching it (a reused verdict), or
        None to go on."""
        return None

    def failed_host(self, host: str) -> tuple[str, str] | None:
        """``(error kind, detail)`` to record for every request to ``host`` without
        fetching (a host known dead), or None."""
        return None

    def robots_failure_is_final(self, error_kind: str) -> bool:
        """Is an unreachable robots.txt with this error kind the page's own final error
        (not retried, not "robots_unreachable")?"""
        return error_kind in _FINAL_ROBOTS_ERRORS

    async def fetch(self, fetcher: Fetcher, request: Request, host: str, pause: Pause) -> Response:
        """Fetch ``request`` (one hop). Raises what :meth:`Fetcher.fetch` raises."""
        return await fetcher.fetch(request)

    def fetch_failed(self, host: str, kind: str, detail: str) -> None:
        """A fetch of ``host`` failed for good with this error (kind, detail)."""

    def check_only_for(self, decision: str, canonical_url: str, kind: str) -> bool | None:
        """A new decision for a link (``kind``; "redirect" for a redirect target): None keeps
        ``decision``; False queues it as a page; True queues it as ``check_only``."""
        return None


class FetchPolicy(LeasePolicy):
    """``skitter fetch``: the seeds are fetched, archived and recorded like a crawl's pages,
    but never parsed; only redirects are followed (links are found later, offline, by
    ``skitter extract``)."""

    parses_pages = False
