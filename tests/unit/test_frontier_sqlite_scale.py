"""SqliteFrontier storage layout: merges of the new tiers (queue_new, seen levels), exact
URL-seen despite Bloom false positives, and refusing files of the older format."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skitter.frontier.host_cache as host_cache_mod
import skitter.frontier.seen as seen_mod
import skitter.frontier.sqlite as sqlite_mod
from skitter.errors import FrontierError, StateError
from skitter.frontier import FrontierCounts, SqliteFrontier
from skitter.models import Hop, Request
from tests.unit.test_frontier_sqlite import _op, check_matches_memory_model, drain, u

_V1_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE hosts(id INTEGER PRIMARY KEY, host TEXT NOT NULL UNIQUE, not_before REAL NOT NULL);
CREATE TABLE urls(fp INTEGER PRIMARY KEY, url TEXT NOT NULL, host INTEGER NOT NULL,
    depth INTEGER NOT NULL, priority INTEGER NOT NULL, state INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, data TEXT, last_status INTEGER, etag TEXT,
    last_modified TEXT, seq INTEGER NOT NULL);
CREATE INDEX urls_pending ON urls(host, priority, depth, seq) WHERE state = 0;
INSERT INTO meta VALUES ('schema', 1);
INSERT INTO hosts VALUES (1, 'https://a.test', 0);
INSERT INTO urls(fp, url, host, depth, priority, state, seq)
    VALUES (7, 'https://a.test/', 1, 0, 0, 0, 1);
"""


def test_file_of_the_older_format_is_refused_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite"
    with closing(sqlite3.connect(path)) as db:
        db.executescript(_V1_SCHEMA)
    with pytest.raises(StateError) as info:
        SqliteFrontier(str(path))
    msg = str(info.value)
    assert "\n" not in msg
    assert "older Skitter" in msg and "start a new crawl" in msg
    with closing(sqlite3.connect(path)) as db:  # left untouched, and not locked
        assert db.execute("SELECT count(*) FROM urls").fetchone() == (1,)


def test_file_of_another_program_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE t(x)")
        db.commit()
    with pytest.raises(FrontierError, match="not a Skitter frontier"):
        SqliteFrontier(str(path))


async def test_bloom_false_positive_never_drops_a_new_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every Bloom answer is "maybe seen" and nothing is recent: the exact table decides.
    monkeypatch.setattr(seen_mod, "_HOT_MAX", 2)
    monkeypatch.setattr(seen_mod._Seen, "maybe", lambda self, fp: True)
    f = SqliteFrontier(str(tmp_path / "f.db"))
    first = [Request(u(f"h{i % 7}.test", str(i))) for i in range(300)]
    assert (await f.add(first)).added == 300
    fresh = [Request(u(f"h{i % 7}.test", f"new{i}")) for i in range(700)]
    res = await f.add(first[::3] + fresh)
    assert (res.added, res.duplicates) == (700, 100)
    assert res.added_urls == {r.url for r in fresh}
    await f.aclose()


async def test_merges_keep_every_url_seen_and_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_mod, "_NEW_MAX", 16)
    monkeypatch.setattr(sqlite_mod, "_LEVEL_RATIO", 2)
    monkeypatch.setattr(seen_mod, "_HOT_MAX", 4)
    path = str(tmp_path / "f.db")
    f = SqliteFrontier(path, batch_size=7)
    reqs = [
        Request(u(f"h{i % 5}.test", str(i)), depth=i % 3, referer=u("r.test"), priority=i % 2 - 1)
        for i in range(1000)
    ]
    for i in range(0, 1000, 10):
        assert (await f.add(reqs[i : i + 10])).added == 10
    assert f._level_rows[-1] > 0  # the data went down to the last level
    assert f._merged_seq > 0
    assert (await f.add(reqs)).duplicates == 1000
    half = []
    for _ in range(400):
        lease = await f.lease(0)
        assert lease is not None
        half.append(lease.request)
        await f.ack(lease, not_before=0, status=200)
    await f.mark_done([r.url for r in reqs[::9]])
    await f.aclose()

    g = SqliteFrontier(path)
    assert (await g.add(reqs)).duplicates == 1000
    rest = [x.request for x in await drain(g)]
    assert sorted(r.url for r in half + rest) == sorted(
        {r.url for r in reqs} - ({r.url for r in reqs[::9]} - {r.url for r in half})
    )
    assert set(half + rest) <= set(reqs)  # every field round-trips
    counts = await g.counts()
    assert (counts.pending, counts.leased, counts.done) == (0, 0, 1000)
    await g.aclose()
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT count(*) FROM seen").fetchone() == (1000,)
        assert db.execute("SELECT count(*) FROM urls WHERE state = 2").fetchone() == (1000,)


async def test_forced_entry_done_then_forced_again_after_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_mod, "_NEW_MAX", 2)
    path = str(tmp_path / "f.db")
    f = SqliteFrontier(path)
    x, o = u("a.test", "x"), u("a.test", "o")
    cont = Request(x, origin_url=o, redirects=(Hop(o, 302),))
    await f.add([Request(x), Request(u("a.test", "y")), Request(u("a.test", "z"))])
    assert f._merged_seq == 3  # merged into queue
    assert (await f.add([cont], force=True)).added == 1
    assert (await f.add([cont], force=True)).added == 0  # already pending
    got = [lease.request for lease in await drain(f)]
    assert [r.url for r in got] == [x, u("a.test", "y"), u("a.test", "z"), x]
    assert got[-1] == cont
    assert (await f.add([cont], force=True)).added == 1  # done: enqueued again
    assert await f.counts() == FrontierCounts(pending=1, leased=0, done=3, hosts=1)
    await f.aclose()
    g = SqliteFrontier(path)
    assert await g.counts() == FrontierCounts(pending=1, leased=0, done=3, hosts=1)
    assert [lease.request for lease in await drain(g)] == [cont]
    await g.aclose()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_op, max_size=60))
def test_sqlite_with_constant_merging_matches_memory_model(ops: list[tuple[Any, ...]]) -> None:
    saved = (
        host_cache_mod._CHUNK,
        host_cache_mod._CACHE_MAX,
        seen_mod._HOT_MAX,
        sqlite_mod._NEW_MAX,
        sqlite_mod._LEVEL_RATIO,
    )
    (
        host_cache_mod._CHUNK,
        host_cache_mod._CACHE_MAX,
        seen_mod._HOT_MAX,
        sqlite_mod._NEW_MAX,
        sqlite_mod._LEVEL_RATIO,
    ) = (1, 2, 3, 2, 2)
    try:
        check_matches_memory_model(ops)
    finally:
        (
            host_cache_mod._CHUNK,
            host_cache_mod._CACHE_MAX,
            seen_mod._HOT_MAX,
            sqlite_mod._NEW_MAX,
            sqlite_mod._LEVEL_RATIO,
        ) = saved
