"""Crawl statistics: typed counters and a frozen snapshot (the basis of report.json).

Counters are updated synchronously by the crawler as records are written, so a snapshot taken
together with the output files' offsets is consistent with them (see :mod:`skitter.state`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NOT_ERRORS", "Stats", "StatsSnapshot"]

#: pages.jsonl ``error`` values that are decisions, not failures (``rejected_type``: a
#: file-type flag, :mod:`skitter.typefocus`): listed in ``by_error``, never counted as errors.
NOT_ERRORS = frozenset({"rejected_type"})


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """A frozen view of the crawl's counters.

    Attributes:
        records: pages.jsonl records written (one per requested URL's final outcome).
        ok: records with a 2xx status.
        by_status: {"200": n, ...}; records without a response are not counted here.
        by_error: {error kind: n}.
        by_decision: {links.tsv decision: n}.
        by_host: {host: {"records": n, "ok": n, "errors": n, "bytes": n}}.
        by_depth: {"0": n, ...} records per depth.
        by_verdict: {verdict: n} in the link checker's vocabulary (ok, broken, unverified,
            redirected, excluded); robots.txt-disallowed URLs count as excluded.
        robots_disallowed: URLs not fetched because robots.txt disallows them.
        bytes: decoded body bytes of all records.
        elapsed_s: seconds of crawling (summed over resumed runs).
    """

    records: int
    ok: int
    by_status: dict[str, int]
    by_error: dict[str, int]
    by_decision: dict[str, int]
    by_host: dict[str, dict[str, int]]
    by_depth: dict[str, int]
    by_verdict: dict[str, int]
    robots_disallowed: int
    bytes: int
    elapsed_s: float

    @property
    def pages_per_s(self) -> float:
        """Records per second of crawling (0.0 before any time has passed)."""
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def errors(self) -> int:
        """Records that ended with a transport error (no HTTP response); a decision
        recorded as an error (``rejected_type``, :mod:`skitter.typefocus`) is not one."""
        return sum(n for k, n in self.by_error.items() if k not in NOT_ERRORS)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``totals`` part of report.json)."""
        return {
            "records": self.records,
            "ok": self.ok,
            "errors": self.errors,
            "bytes": self.bytes,
            "elapsed_s": round(self.elapsed_s, 3),
            "pages_per_s": round(self.pages_per_s, 2),
            "robots_disallowed": self.robots_disallowed,
            "by_status": dict(sorted(self.by_status.items())),
            "by_error": dict(sorted(self.by_error.items())),
            "by_decision": dict(sorted(self.by_decision.items())),
            "by_verdict": dict(sorted(self.by_verdict.items())),
            "by_depth": dict(sorted(self.by_depth.items(), key=lambda kv: int(kv[0]))),
            "by_host": dict(sorted(self.by_host.items())),
        }


@dataclass(slots=True)
class Stats:
    """Mutable counters owned by one crawler process."""

    records: int = 0
    ok: int = 0
    bytes: int = 0
    robots_disallowed: int = 0
    elapsed_before_s: float = 0.0
    by_status: Counter[str] = field(default_factory=Counter)
    by_error: Counter[str] = field(default_factory=Counter)
    by_decision: Counter[str] = field(default_factory=Counter)
    by_depth: Counter[str] = field(default_factory=Counter)
    by_verdict: Counter[str] = field(default_factory=Counter)
    by_host: dict[str, Counter[str]] = field(default_factory=dict)
    #: file-type focus counts (:class:`skitter.typefocus.TypeFocusPort`)
    by_focus: Counter[str] = field(default_factory=Counter)

    def count_record(
        self,
        host: str,
        depth: int,
        status: int | None,
        error: str | None,
        nbytes: int,
        verdict: str | None = None,
    ) -> None:
        """Count one pages.jsonl record (``verdict``: see :attr:`StatsSnapshot.by_verdict`)."""
        self.records += 1
        if verdict is not None:
            self.by_verdict[verdict] += 1
        self.bytes += nbytes
        self.by_depth[str(depth)] += 1
        h = self.by_host.get(host)
        if h is None:
            h = self.by_host[host] = Counter()
        h["records"] += 1
        h["bytes"] += nbytes
        if status is not None:
            self.by_status[str(status)] += 1
            if 200 <= status < 300 and error is None:
                self.ok += 1
                h["ok"] += 1
        if error is not None:
            self.by_error[error] += 1
            if error not in NOT_ERRORS:
                h["errors"] += 1

    def count_decisions(self, decisions: Counter[str]) -> None:
        """Add a page's links.tsv decision counts."""
        self.by_decision.update(decisions)

    def snapshot(self, elapsed_s: float) -> StatsSnapshot:
        """Freeze the counters; ``elapsed_s`` is this run's crawling time in seconds."""
        return StatsSnapshot(
            records=self.records,
            ok=self.ok,
            by_status=dict(self.by_status),
            by_error=dict(self.by_error),
            by_decision=dict(self.by_decision),
            by_host={k: dict(v) for k, v in self.by_host.items()},
            by_depth=dict(self.by_depth),
            by_verdict=dict(self.by_verdict),
            robots_disallowed=self.robots_disallowed,
            bytes=self.bytes,
            elapsed_s=self.elapsed_before_s + elapsed_s,
        )

    def to_state(self, elapsed_s: float) -> dict[str, Any]:
        """Serialisable form for the checkpoint (restored with :meth:`from_state`)."""
        return {
            "records": self.records,
            "ok": self.ok,
            "bytes": self.bytes,
            "robots_disallowed": self.robots_disallowed,
            "elapsed_s": self.elapsed_before_s + elapsed_s,
            "by_status": dict(self.by_status),
            "by_error": dict(self.by_error),
            "by_decision": dict(self.by_decision),
            "by_depth": dict(self.by_depth),
            "by_verdict": dict(self.by_verdict),
            "by_host": {k: dict(v) for k, v in self.by_host.items()},
            "by_focus": dict(self.by_focus),
        }

    def merge(self, other: Stats) -> None:
        """Add ``other``'s counters to these (one crawl's processes into its totals); the
        elapsed time is the longer of the two (the processes run side by side)."""
        self.records += other.records
        self.ok += other.ok
        self.bytes += other.bytes
        self.robots_disallowed += other.robots_disallowed
        self.elapsed_before_s = max(self.elapsed_before_s, other.elapsed_before_s)
        self.by_status.update(other.by_status)
        self.by_error.update(other.by_error)
        self.by_decision.update(other.by_decision)
        self.by_depth.update(other.by_depth)
        self.by_verdict.update(other.by_verdict)
        self.by_focus.update(other.by_focus)
        for host, counts in other.by_host.items():
            self.by_host.setdefault(host, Counter()).update(counts)

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> Stats:
        """Rebuild counters from :meth:`to_state` output."""
        return cls(
            records=int(data.get("records", 0)),
            ok=int(data.get("ok", 0)),
            bytes=int(data.get("bytes", 0)),
            robots_disallowed=int(data.get("robots_disallowed", 0)),
            elapsed_before_s=float(data.get("elapsed_s", 0.0)),
            by_status=Counter(data.get("by_status", {})),
            by_error=Counter(data.get("by_error", {})),
            by_decision=Counter(data.get("by_decision", {})),
            by_depth=Counter(data.get("by_depth", {})),
            by_verdict=Counter(data.get("by_verdict", {})),
            by_host={k: Counter(v) for k, v in data.get("by_host", {}).items()},
            by_focus=Counter(data.get("by_focus", {})),
        )
