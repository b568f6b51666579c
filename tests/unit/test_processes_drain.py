"""The coordinator's side of a crawler process (skitter.processes): its pipe, the write-back
of its files; and the crawler's idle status (skitter.shard_peers)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from skitter.processes import _drain, _Worker, _write_back
from skitter.shard_peers import ShardPeers, _ShardState


def test_drain_reads_every_message_then_marks_a_closed_pipe() -> None:
    """Messages before the hang-up are read; the hang-up marks the worker, so the coordinator
    waits on its sentinel alone (a closed pipe is always 'ready': waiting on it would spin)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=True)
    w = _Worker(0, ctx.Process(target=print), parent)
    child.send(("status", 1, True, [0, 0], [0, 0], {"records": 3}))
    child.send(("done", {"stop_reason": "done", "finished": True}))
    _drain(w)
    assert w.status is not None and w.status.counters == {"records": 3}
    assert w.result == {"stop_reason": "done", "finished": True} and not w.hung_up
    child.close()
    _drain(w)
    assert w.hung_up
    parent.close()


def test_write_back_leaves_the_files_as_they_are(tmp_path: Path) -> None:
    """The coordinator's write-back of the crawlers' journals and WARC files changes no byte,
    and a file that is missing (a shard not started, a WARC rotated away) is skipped."""
    for k in range(2):
        (tmp_path / "shards" / str(k)).mkdir(parents=True)
    (tmp_path / "shards/0/pages.jsonl").write_bytes(b'{"url": "http://a.test/"}\n')
    (tmp_path / "shards/0/links.tsv").write_bytes(b"source\ttarget\n")
    (tmp_path / "skitter-p0-20240101000000-00000.warc.gz").write_bytes(b"\x1f\x8b" * 100)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    _write_back(tmp_path, 2)  # shard 1 has no journal yet
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


async def test_idle_status_goes_out_when_the_process_turns_idle() -> None:
    """The crawl loop finding the process idle wakes the hand-off task (its status goes to
    the coordinator at once, not after its next sleep): once per turn to idle."""
    peers = ShardPeers.__new__(ShardPeers)
    peers._sh = _ShardState(handoff=None, consumed_done=[])  # type: ignore[arg-type]
    sh = peers.state
    assert not peers.dry(sh.gen, {"a request in flight"}) and not sh.went_idle.is_set()
    assert not peers.dry(sh.gen, ()) and sh.idle and sh.went_idle.is_set()
    sh.went_idle.clear()
    assert not peers.dry(sh.gen, ()) and not sh.went_idle.is_set()  # idle already
    sh.finish = True
    assert peers.dry(sh.gen, ())
