"""A status source read from a crawl's output files as they grow.

A ``--processes N`` crawl merges its processes' records into the one ``OUT/pages.jsonl`` and
``OUT/links.tsv`` as it goes; :class:`JournalSource` follows those two files (from where it last
stopped, whole lines only) and feeds a :class:`~skitter.status.source.LiveState`, so the page and
the metrics cover every process. The frontier figures (queued, in flight, hosts) come from the
coordinator's summed status (:meth:`JournalSource.update`); each host's delay, backoff and
robots.txt state from the processes' ``shards/*/status-hosts.jsonl``
(:mod:`skitter.status.host_journal`). Also usable on a crawl running in
another program, or a finished one.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from skitter.export.linkfile import lines_since
from skitter.sharding import SHARDS_DIR
from skitter.status.host_journal import HOST_JOURNAL
from skitter.status.source import HostRow, LiveState, Totals

__all__ = ["JournalSource", "host_of"]


def host_of(url: str) -> str:
    """The host (with a non-default port, as written) of an absolute URL, lower-cased."""
    rest = url.split("://", 1)[-1]
    for sep in "/?#":
        rest = rest.split(sep, 1)[0]
    return rest.rsplit("@", 1)[-1].lower()


class _Follower:
    """Reads the complete lines appended to a file since the last call."""

    def __init__(self, path: Path, skip_header: bool = False) -> None:
        self.path = path
        self.offset = 0
        self.skip_header = skip_header

    def new_lines(self) -> list[bytes]:
        zst = self.path.with_name(self.path.name + ".zst")
        if self.path.name == "links.tsv" and zst.exists():  # --links-compress zstd
            try:
                lines, self.offset = lines_since(zst, self.offset)
            except OSError:
                return []
            if self.skip_header and lines:
                self.skip_header = False
                lines = lines[1:]
            return [line.rstrip(b"\n") for line in lines]
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        lines = data[: end + 1].splitlines()
        if self.skip_header and lines:
            self.skip_header = False
            lines = lines[1:]
        return lines


class JournalSource:
    """A :class:`~skitter.status.source.StatusSource` following ``OUT/pages.jsonl`` and
    ``OUT/links.tsv``; thread-safe (the coordinator of ``--processes`` calls :meth:`update`
    from its thread while the server reads from its own).

    Args:
        out_dir: the crawl's output folder.
        delay_s: the --delay gap (a host's default delay), seconds.
        target: records the crawl ends at, when known.
    """

    def __init__(self, out_dir: str | Path, *, delay_s: float = 0.0, target: int | None = None):
        out = Path(out_dir)
        self._pages = _Follower(out / "pages.jsonl")
        self._links = _Follower(out / "links.tsv", skip_header=True)
        self._out = out
        self._host_journals: dict[Path, _Follower] = {}
        self._counts = (0, 0, 0)
        self._lock = threading.Lock()
        self.live = LiveState(delay_s=delay_s, target=target)

    def update(self, status: Mapping[str, int]) -> None:
        """The coordinator's summed counters (``inflight``, ``hosts``, ``queued`` when known)."""
        self._counts = (
            int(status.get("queued", 0)),
            int(status.get("inflight", 0)),
            int(status.get("hosts", 0)),
        )

    def finish(self, state: str = "finished") -> None:
        """The crawl ended."""
        with self._lock:
            self.live.finish(state)

    def catch_up(self) -> None:
        """Read what was appended to the two files since the last call."""
        with self._lock:
            self._catch_up()

    def _catch_up(self) -> None:
        for line in self._pages.new_lines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict):
                continue
            status = row.get("status")
            self.live.record(
                host_of(str(row.get("final_url") or row.get("url") or "")),
                status if isinstance(status, int) else None,
                row.get("error") or None,
                row.get("content_type") or None,
                int(row.get("bytes") or 0),
                float(row.get("elapsed_s") or 0.0),
                int(row.get("attempts") or 1),
            )
        decisions: Counter[str] = Counter()
        for line in self._links.new_lines():
            fields = line.rsplit(b"\t", 1)
            if len(fields) == 2:
                decisions[fields[1].decode("utf-8", "replace")] += 1
        self.live.links(decisions)
        self._catch_up_hosts()

    def _catch_up_hosts(self) -> None:
        """Apply the crawler processes' host-state journals
        (:mod:`skitter.status.host_journal`): delay and its cause, backoff, robots state."""
        for path in sorted(self._out.glob(f"{SHARDS_DIR}/*/{HOST_JOURNAL}")):
            follower = self._host_journals.setdefault(path, _Follower(path))
            for line in follower.new_lines():
                try:
                    row = json.loads(line)
                    host, until = str(row["h"]), row.get("u")
                    self.live.wait(
                        host,
                        float(row["d"]),
                        str(row["c"]),
                        float(until) if until is not None else None,
                    )
                    if row.get("r"):
                        self.live._host(host).robots = str(row["r"])
                except (ValueError, KeyError, TypeError):
                    continue

    def totals_now(self) -> Totals:
        """The headline figures now (synchronous: the coordinator's display calls it)."""
        with self._lock:
            self._catch_up()
            return self.live.totals_now(self._counts)

    async def totals(self) -> Totals:
        """See :meth:`~skitter.status.source.StatusSource.totals`."""
        return self.totals_now()

    def hosts(self) -> Sequence[HostRow]:
        """See :meth:`~skitter.status.source.StatusSource.hosts`."""
        with self._lock:
            self._catch_up()
            return list(self.live.hosts())

    async def metrics_text(self) -> str:
        """See :meth:`~skitter.status.source.StatusSource.metrics_text`."""
        with self._lock:
            self._catch_up()
            t = self.live.totals_now(self._counts)
            self.live.metrics.set_frontier(t.queued, t.in_flight, t.hosts, t.hosts_in_backoff)
            return self.live.metrics.text()
