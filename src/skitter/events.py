"""Hooks a library user can attach to a crawl (typed, all optional)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skitter.observer import NULL_OBSERVER, CrawlObserver

if TYPE_CHECKING:
    from skitter.export.pages import PageRecord
    from skitter.models import Link, Page, Response

__all__ = ["CrawlHooks"]

PageHook = Callable[["PageRecord", "Response", "Page | None"], Awaitable[None] | None]
ErrorHook = Callable[["PageRecord"], Awaitable[None] | None]
LinkFilter = Callable[[str, "Link"], bool | Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class CrawlHooks:
    """Callbacks called by the crawler; each may be a plain function or a coroutine function.

    Attributes:
        on_page: called for every record that has an HTTP response, with the record, the final
            Response and the parsed Page (None when the body is not HTML).
        on_error: called for every record that ended with a transport error (no response).
        link_filter: ``(source_url, link) -> bool`` (or an awaitable of it); False drops the
            link (decision "scope").
        observer: told of every record, robots.txt decision, host schedule and queued URL
            (:class:`skitter.observer.CrawlObserver`; the status page and metrics).
    """

    on_page: PageHook | None = None
    on_error: ErrorHook | None = None
    link_filter: LinkFilter | None = None
    observer: CrawlObserver = NULL_OBSERVER
