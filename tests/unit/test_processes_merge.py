"""The coordinator's merge of the shards' journals (:class:`skitter.shard_merge.Merger`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from skitter.errors import StateError
from skitter.export.links import HEADER
from skitter.report.data import merged_decisions
from skitter.shard_merge import MERGE_FILE
from skitter.shard_merge import Merger as _Merger
from skitter.sharding import shard_dir
from skitter.state import atomic_write_json

HEAD = (HEADER + "\n").encode()


def shard(out: Path, k: int, pages: bytes, links: bytes, pages_cp: int, links_cp: int) -> None:
    """Shard ``k``'s journals and a checkpoint covering their first bytes."""
    d = shard_dir(out, k)
    d.mkdir(parents=True, exist_ok=True)
    (d / "pages.jsonl").write_bytes(pages)
    (d / "links.tsv").write_bytes(HEAD + links)
    cp = {"pages_offset": pages_cp, "links_offset": len(HEAD) + links_cp}
    atomic_write_json(d / "checkpoint.json", cp)


def rec(url: str) -> bytes:
    return json.dumps({"url": url}).encode() + b"\n"


def row(src: str, dst: str) -> bytes:
    return f"{src}\t{dst}\t\t\ta\t0\tqueued\n".encode()


def test_merge_copies_up_to_each_checkpoint_once_and_survives_a_crash(tmp_path: Path) -> None:
    p0 = rec("http://a/1") + rec("http://a/2")
    p1 = rec("http://b/1")
    l0 = row("http://a/1", "http://a/2")
    shard(tmp_path, 0, p0 + rec("http://a/3"), l0 + row("http://a/3", "x"), len(p0), len(l0))
    shard(tmp_path, 1, p1, b"", len(p1), 0)
    m = _Merger(tmp_path, 2, resume=False)
    assert m.step() == len(p0) + len(p1) + len(l0)
    assert m.step() == 0  # nothing new checkpointed: nothing copied again
    m.close()
    assert (tmp_path / "pages.jsonl").read_bytes() == p0 + p1
    assert (tmp_path / "links.tsv").read_bytes() == HEAD + l0
    state = json.loads((tmp_path / MERGE_FILE).read_text())
    assert state["pages"] == len(p0 + p1)
    assert state["shards"] == [
        {"pages": len(p0), "links": len(HEAD + l0)},
        {"pages": len(p1), "links": 0},
    ]
    # a crash after bytes were copied but before merge.json said so: cut, copied again
    with open(tmp_path / "pages.jsonl", "ab") as fh:
        fh.write(rec("http://a/3")[:7])
    shard(tmp_path, 0, p0 + rec("http://a/3"), l0, len(p0 + rec("http://a/3")), len(l0))
    m = _Merger(tmp_path, 2, resume=True)
    assert m.step() == len(rec("http://a/3"))
    m.close()
    assert (tmp_path / "pages.jsonl").read_bytes() == p0 + p1 + rec("http://a/3")
    assert (tmp_path / "links.tsv").read_bytes() == HEAD + l0  # one header


def test_merge_state_for_another_number_of_processes_is_refused(tmp_path: Path) -> None:
    _Merger(tmp_path, 2, resume=False).close()
    with pytest.raises(StateError, match="does not describe 3 processes"):
        _Merger(tmp_path, 3, resume=True)


def test_merged_file_shorter_than_merge_state_is_refused(tmp_path: Path) -> None:
    shard(tmp_path, 0, rec("http://a/1"), b"", len(rec("http://a/1")), 0)
    m = _Merger(tmp_path, 1, resume=False)
    m.step()
    m.close()
    (tmp_path / "pages.jsonl").write_bytes(b"")
    with pytest.raises(StateError, match=r"shorter than merge\.json"):
        _Merger(tmp_path, 1, resume=True)


def test_merge_keeps_the_decision_counts_of_the_rows_it_copied(tmp_path: Path) -> None:
    """Each shard checkpoint's counters cover its rows up to its offset: merge.json sums them
    for the merged file (while each copied row's counts are known), read back only while the
    merged file is as long as merge.json says."""
    seen = row("http://a/1", "http://a/3").replace(b"queued", b"seen")
    l0 = row("http://a/1", "http://a/2") + seen
    l1 = row("http://b/1", "http://b/2")
    for k, links, counts in ((0, l0, {"queued": 1, "seen": 1}), (1, l1, {"queued": 1})):
        shard(tmp_path, k, b"", links, 0, len(links))
        cp_path = shard_dir(tmp_path, k) / "checkpoint.json"
        cp = json.loads(cp_path.read_text())
        atomic_write_json(cp_path, {**cp, "stats": {"by_decision": counts}})
    m = _Merger(tmp_path, 2, resume=False)
    m.step()
    m.close()
    links = tmp_path / "links.tsv"
    assert merged_decisions(tmp_path, links) == Counter({b"queued": 2, b"seen": 1})
    state = json.loads((tmp_path / MERGE_FILE).read_text())
    assert state["by_decision"] == {"queued": 2, "seen": 1}
    # resumed: the counts carry on; a shard's new rows without counters: none known
    m = _Merger(tmp_path, 2, resume=True)
    assert merged_decisions(tmp_path, links) == Counter({b"queued": 2, b"seen": 1})
    shard(tmp_path, 1, b"", l1 + row("http://b/2", "x"), 0, len(l1 + row("http://b/2", "x")))
    m.step()
    m.close()
    assert merged_decisions(tmp_path, links) is None
    assert "by_decision" not in json.loads((tmp_path / MERGE_FILE).read_text())
    # a merged file longer than merge.json says (rows appended since): not trusted
    state["links"] -= 1
    atomic_write_json(tmp_path / MERGE_FILE, state)
    assert merged_decisions(tmp_path, links) is None
    (tmp_path / MERGE_FILE).unlink()
    assert merged_decisions(tmp_path, links) is None
