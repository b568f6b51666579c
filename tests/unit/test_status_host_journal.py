"""skitter.status.host_journal: a --processes crawler process's host-state journal, and the
coordinator's JournalSource reading it (delay cause, backoff, robots; a partial last line
from a crash skipped; only changes written)."""

from __future__ import annotations

import time
from pathlib import Path

from skitter.status.host_journal import HOST_JOURNAL, HostJournal
from skitter.status.journal import JournalSource


def test_journal_lines_feed_the_host_table(tmp_path: Path) -> None:
    shard = tmp_path / "shards" / "0"
    shard.mkdir(parents=True)
    j = HostJournal(shard, delay_s=1.0)
    now = time.time()
    j.on_robots("a.test", "allowed", None)
    j.on_schedule("a.test", now + 1.0, False)  # the --delay gap, as before: no line
    j.on_schedule("a.test", now + 1.0, False)
    j.on_schedule("b.test", now + 40.0, True)  # a retry: backoff until now + 40
    j.on_robots("c.test", "unreachable", None)
    lines = (shard / HOST_JOURNAL).read_text().splitlines()
    assert len(lines) == 3  # a robots, b backoff, c robots
    with open(shard / HOST_JOURNAL, "a") as f:
        f.write('{"h":"d.test","d":')  # a crash in the middle of a line
    src = JournalSource(tmp_path, delay_s=1.0)
    rows = {r.host: r for r in src.hosts()}
    assert set(rows) == {"a.test", "b.test", "c.test"}
    assert (rows["a.test"].robots, rows["a.test"].delay_cause) == ("ok", "delay")
    assert rows["a.test"].backoff_until is None
    b = rows["b.test"]
    assert b.delay_cause == "backoff" and b.backoff_until is not None
    assert abs(b.backoff_until - (now + 40.0)) < 0.01
    assert rows["c.test"].robots == "unreachable"
    assert src.totals_now().hosts_in_backoff == 1
    # resumed after the crash, the backoff ends: the plain gap again (the partial line
    # is ended first, so the new line is whole)
    j2 = HostJournal(shard, delay_s=1.0)
    j2.on_schedule("b.test", time.time() + 1.0, False)
    rows = {r.host: r for r in src.hosts()}
    assert rows["b.test"].delay_cause == "delay" and rows["b.test"].backoff_until is None
    assert src.totals_now().hosts_in_backoff == 0
