"""Hooks a library user can attach to a crawl (typed, all optional)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skitter.errors import ConfigError, HookError
from skitter.observer import NULL_OBSERVER, CrawlObserver

if TYPE_CHECKING:
    from skitter.export.pages import PageRecord
    from skitter.models import Link, Page, Response

__all__ = ["HOOK_ERROR_MODES", "CrawlHooks", "call_hook"]

#: What a hook that raises does (``CrawlHooks.errors``).
HOOK_ERROR_MODES = ("log", "stop")

log = logging.getLogger("skitter")

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
        errors: what an exception raised by a hook does: ``"log"`` (default) logs one
            error naming the hook and the URL, with the traceback, and the crawl goes on (a
            failing ``link_filter`` keeps the link); ``"stop"`` stops the crawl:
            :meth:`skitter.crawler.Crawler.run` raises :class:`~skitter.errors.HookError`
            (the crawl stays resumable).

    Raises:
        ConfigError: ``errors`` is not one of :data:`HOOK_ERROR_MODES`, or a hook is not
            callable.
    """

    on_page: PageHook | None = None
    on_error: ErrorHook | None = None
    link_filter: LinkFilter | None = None
    observer: CrawlObserver = NULL_OBSERVER
    errors: str = "log"

    def __post_init__(self) -> None:
        if self.errors not in HOOK_ERROR_MODES:
            raise ConfigError(f"CrawlHooks.errors must be 'log' or 'stop', got {self.errors!r}")
        for name in ("on_page", "on_error", "link_filter"):
            fn = getattr(self, name)
            if fn is not None and not callable(fn):
                raise ConfigError(f"CrawlHooks.{name} must be callable, got {fn!r}")


async def call_hook(hooks: CrawlHooks, name: str, url: str, *args: Any, default: Any = None) -> Any:
    """Call hook ``name`` of ``hooks`` with ``args`` (awaiting it if it returns an awaitable)
    for the record or link of ``url``; returns its result, or ``default`` if it is not set.

    An exception from the hook is the user's, not Skitter's: with ``errors="log"`` it is
    logged once ("hook on_page raised for URL: …") and ``default`` is returned; with
    ``errors="stop"`` it is raised as :class:`~skitter.errors.HookError`.

    Raises:
        HookError: the hook raised and ``hooks.errors`` is "stop".
    """
    fn = getattr(hooks, name)
    if fn is None:
        return default
    try:
        result = fn(*args)
        if inspect.isawaitable(result):
            result = await result
        return result
    except Exception as exc:
        if hooks.errors == "stop":
            raise HookError(name, url, exc) from exc
        log.error("hook %s raised for %s: %s: %s", name, url, type(exc).__name__, exc,
                  exc_info=exc)  # fmt: skip
        return default
