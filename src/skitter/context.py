"""What the parts of one crawl share: settings, components, counters, trap budgets, the
mode's lease policy, the peers, and the one way a pages.jsonl record is written.

Built by :class:`skitter.crawler.Crawler` once its components exist; used by the worker
(:mod:`skitter.worker`), redirect continuations (:mod:`skitter.continuations`), resume
reconciliation (:mod:`skitter.recovery`), the peers (:mod:`skitter.peers`) and the report
(:mod:`skitter.reporting`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skitter.checklinks.verdicts import record_verdict
from skitter.events import CrawlHooks
from skitter.frontier.routing import add_routed
from skitter.lease_policy import LeasePolicy
from skitter.peers import Meta, Peers
from skitter.settings import CrawlSettings, QualitySettings
from skitter.stats import Stats
from skitter.traps import TrapGuard

if TYPE_CHECKING:
    from skitter.build import Components
    from skitter.duplicates import DuplicateStage
    from skitter.export.pages import PageRecord
    from skitter.models import Request
    from skitter.recrawl import Recrawl

__all__ = ["MAX_REPORTED_URLS", "CrawlContext", "RobotsNotes"]

#: URLs listed per origin in report.json's robots section (disallowed, unreachable).
MAX_REPORTED_URLS = 100


@dataclass(slots=True)
class RobotsNotes:
    """URLs not fetched because of robots.txt, per origin (the first
    :data:`MAX_REPORTED_URLS` of each), for report.json."""

    blocked: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    unreachable: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @staticmethod
    def note(where: dict[str, list[str]], origin: str, url: str) -> None:
        """Add ``url`` to ``where[origin]`` unless the list is full."""
        lst = where[origin]
        if len(lst) < MAX_REPORTED_URLS:
            lst.append(url)

    def to_state(self) -> dict[str, dict[str, list[str]]]:
        """Serialisable form for the checkpoint (restored with :meth:`load_state`)."""
        return {"blocked": dict(self.blocked), "unreachable": dict(self.unreachable)}

    def load_state(self, data: dict[str, dict[str, list[str]]]) -> None:
        """Take back the URLs of the earlier sessions (:meth:`to_state` output)."""
        for name, where in (("blocked", self.blocked), ("unreachable", self.unreachable)):
            for origin, urls in (data.get(name) or {}).items():
                for url in urls:
                    self.note(where, origin, str(url))


@dataclass(slots=True, eq=False)
class CrawlContext:
    """The state one crawl's parts share (one per :class:`skitter.crawler.Crawler`).

    Attributes:
        stats: the counters (replaced by resume reconciliation with the checkpointed ones).
        clock: seconds (epoch) for politeness schedules.
        quality: the duplicate / sitemap / order settings in force (all off for link
            checking).
        dups: the duplicate-page stage (:mod:`skitter.duplicates`), None when off.
        recrawl: the previous crawl of ``--since`` (:mod:`skitter.recrawl`), or None.
        sitemap_stats: the report.json ``sitemaps`` block once the sitemaps are read.
    """

    settings: CrawlSettings
    components: Components
    hooks: CrawlHooks
    clock: Callable[[], float]
    out_dir: Path
    stats: Stats
    traps: TrapGuard
    policy: LeasePolicy
    peers: Peers
    robots_notes: RobotsNotes
    quality: QualitySettings = field(default_factory=QualitySettings)
    dups: DuplicateStage | None = None
    recrawl: Recrawl | None = None
    sitemap_stats: dict[str, Any] = field(default_factory=dict)
    #: Canonical URLs of links this process already put to the frontier (queued, seen or
    #: handed to their owner): a repeat is SEEN without a frontier call
    #: (:func:`skitter.link_decisions.decide_links`; bounded there).
    known_links: set[str] = field(default_factory=set)

    def write_record(self, rec: PageRecord, host: str) -> None:
        """Append ``rec`` to pages.jsonl and count it (``host``: its politeness key)."""
        self.components.pages.write(rec)
        if self.recrawl is not None:
            self.recrawl.note(rec.url, rec.status, rec.sha1)
        first = rec.redirects[0].status if rec.redirects else None
        verdict = (
            "excluded"  # a decision of the file-type focus, not a failure
            if rec.error == "rejected_type"
            else record_verdict(rec.status, rec.error, rec.error_detail, first)
        )
        self.stats.count_record(host, rec.depth, rec.status, rec.error, rec.bytes, verdict)
        self.hooks.observer.on_record(rec, host)

    async def add(
        self,
        reqs: Sequence[Request],
        *,
        force: bool = False,
        meta: Meta | None = None,
        owners: Sequence[int] | None = None,
    ) -> frozenset[str]:
        """Queue ``reqs`` in the frontier (a routing frontier hands other processes' hosts
        to them, with ``meta``; ``owners``: each request's owner if known,
        :func:`skitter.frontier.routing.add_routed`); returns the URLs queued (new to the
        frontier, or handed off)."""
        res = await add_routed(
            self.components.frontier, reqs, force=force, meta=meta, owners=owners
        )
        return res.added_urls
