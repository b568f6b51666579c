"""Host sharding: ownership, the hand-off files, the shared --max-pages budget, quiescence."""

from __future__ import annotations

import json
import multiprocessing
import os
import zlib
from pathlib import Path

import pytest

from skitter.models import Hop, Request
from skitter.processes import _quiescent, _Status, _Worker
from skitter.sharding import (
    Handoff,
    PageBudget,
    decode_request,
    encode_request,
    shard_dir,
    shard_of,
)


def test_shard_of_is_crc32_of_the_host_key() -> None:
    assert shard_of("a.test", 1) == 0
    assert shard_of("a.test", 2) == zlib.crc32(b"a.test") % 2
    assert shard_of("h0001.test:8080", 3) == zlib.crc32(b"h0001.test:8080") % 3
    # the same in every process and run (not Python's salted hash): a fixed value
    assert shard_of("example.com", 7) == 3  # crc32 0xB6FA4EB9
    owners = {shard_of(f"h{i:04d}.test", 2) for i in range(50)}
    assert owners == {0, 1}


def test_request_line_round_trip() -> None:
    req = Request(
        url="http://b.test/ü?x=1",
        depth=3,
        referer="http://a.test/",
        origin_url="http://a.test/r",
        redirects=(Hop("http://a.test/r", 301), Hop("http://c.test/s", 302)),
        priority=2,
        check_only=True,
    )
    line = encode_request(req)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_request(line) == req
    plain = Request(url="http://b.test/", depth=1, referer="http://a.test/")
    assert decode_request(encode_request(plain)) == plain
    assert decode_request(b"not json\n") is None
    assert decode_request(b"[1, 2]\n") is None


def test_handoff_delivers_whole_lines_once(tmp_path: Path) -> None:
    a = Handoff(tmp_path, 0, 2)
    b = Handoff(tmp_path, 1, 2)
    assert b.receive() == []  # nothing sent yet (the file does not exist)
    reqs = [Request(url=f"http://b.test/{i}", depth=1) for i in range(3)]
    a.send({1: reqs[:2]})
    a.send({1: reqs[2:]})
    assert a.sent()[1] == (shard_dir(tmp_path, 0) / "handoff" / "to-1.jsonl").stat().st_size
    assert b.receive() == reqs
    assert b.receive() == []
    assert b.read_offsets() == [a.sent()[1], 0]
    # a line being written (no newline yet) is not read until it is whole
    path = shard_dir(tmp_path, 0) / "handoff" / "to-1.jsonl"
    extra = encode_request(Request(url="http://b.test/late"))
    with open(path, "ab") as fh:
        fh.write(extra[:10])
    assert b.receive() == []
    with open(path, "ab") as fh:
        fh.write(extra[10:])
    assert [r.url for r in b.receive()] == ["http://b.test/late"]
    a.close()
    b.close()


def test_handoff_state_and_replay(tmp_path: Path) -> None:
    a = Handoff(tmp_path, 0, 2)
    b = Handoff(tmp_path, 1, 2)
    a.send({1: [Request(url="http://b.test/1"), Request(url="http://b.test/2")]})
    b.receive()
    state = b.to_state()
    a.send({1: [Request(url="http://b.test/3")]})
    b.close()
    # a resumed reader continues where its checkpoint says, and can replay what it read
    b2 = Handoff(tmp_path, 1, 2)
    b2.load_state(state)
    assert [r.url for r in b2.replay_admitted()] == ["http://b.test/1", "http://b.test/2"]
    # a URL the owner dropped (trap budgets) is not replayed into the budgets
    b2.note_dropped(["http://b.test/2"])
    assert [r.url for r in b2.replay_admitted()] == ["http://b.test/1"]
    assert [r.url for r in b2.receive()] == ["http://b.test/3"]
    b2.load_state({"consumed": {"0": -5, "x": 3, "7": 1}})  # bad entries are ignored
    assert b2.read_offsets()[0] == a.sent()[1]
    a.close()
    b2.close()


def test_reopened_outbox_cuts_a_partial_line(tmp_path: Path) -> None:
    a = Handoff(tmp_path, 0, 2)
    a.send({1: [Request(url="http://b.test/1")]})
    whole = a.sent()[1]
    a.close()
    path = shard_dir(tmp_path, 0) / "handoff" / "to-1.jsonl"
    with open(path, "ab") as fh:
        fh.write(b'["http://b.test/torn", 1')  # a write cut by kill -9
    a2 = Handoff(tmp_path, 0, 2)
    assert path.stat().st_size == whole
    a2.send({1: [Request(url="http://b.test/2")]})
    b = Handoff(tmp_path, 1, 2)
    assert [r.url for r in b.receive()] == ["http://b.test/1", "http://b.test/2"]
    a2.close()
    b.close()


def test_handoff_rejects_a_bad_index(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Handoff(tmp_path, 2, 2)


def test_page_budget_is_shared_exactly() -> None:
    ctx = multiprocessing.get_context("fork")
    budget = PageBudget(ctx, 2, 3)
    budget.bind(0)
    assert budget.reserve(ok=0, inflight=0)  # process 0: 1 in flight
    budget.bind(1)
    assert budget.reserve(ok=0, inflight=0)  # process 1: 1 in flight (total 2)
    assert budget.reserve(ok=0, inflight=1)  # total 3
    assert not budget.reserve(ok=0, inflight=2)  # full
    budget.publish(ok=0, inflight=0)  # process 1's requests failed: room again
    assert budget.reserve(ok=0, inflight=0)
    budget.bind(0)
    budget.publish(ok=1, inflight=0)
    assert budget.total_ok() == 1


def test_page_budget_across_real_processes() -> None:
    ctx = multiprocessing.get_context("fork")
    budget = PageBudget(ctx, 4, 10)

    def grab(i: int) -> None:
        budget.bind(i)
        got = 0
        while budget.reserve(ok=got, inflight=0):
            got += 1
            budget.publish(ok=got, inflight=0)
        os._exit(0)

    procs = [ctx.Process(target=grab, args=(i,)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert budget.total_ok() == 10


def _w(i: int, status: tuple[object, ...] | None) -> _Worker:
    st = _Status(*status) if status is not None else None  # type: ignore[arg-type]
    return _Worker(i, None, None, status=st)  # type: ignore[arg-type]


def test_quiescent_needs_every_process_idle_and_every_byte_read() -> None:
    idle0 = ("status", 5, True, [0, 100], [0, 40], {})
    idle1 = ("status", 9, True, [40, 0], [100, 0], {})
    q = _quiescent([_w(0, idle0), _w(1, idle1)])
    assert q is not None and q[0] == (5, 9)
    busy1 = ("status", 9, False, [40, 0], [100, 0], {})
    assert _quiescent([_w(0, idle0), _w(1, busy1)]) is None
    unread = ("status", 9, True, [40, 0], [60, 0], {})  # 40 bytes from 0 not read yet
    assert _quiescent([_w(0, idle0), _w(1, unread)]) is None
    assert _quiescent([_w(0, idle0), _w(1, None)]) is None


@pytest.mark.parametrize(
    "raw",
    [
        "http://A.Test/x",
        "https://a.test:443/",
        "http://a.test:8080/p?q=1#f",
        "http://user:pw@a.test:81/x",
        "http://[::1]:8080/",
        "http://[2001:DB8::1]/a",
        "http://bücher.example/",
        "http://192.168.0.1:80/",
        "http://a.test",
        "http://a.test?x=1",
    ],
)
def test_shard_of_url_equals_shard_of_host_key(raw: str) -> None:
    from skitter.sharding import shard_of_url
    from skitter.urls import canonicalize, host_key

    url = canonicalize(raw)
    assert url is not None
    for n in (2, 3, 5, 7):
        assert shard_of_url(url, n) == shard_of(host_key(url), n), (url, n)


def test_worker_settings_share_the_concurrency_exactly(tmp_path: Path) -> None:
    from dataclasses import replace

    from skitter.processes import _worker_settings
    from skitter.settings import CrawlSettings

    base = CrawlSettings(out_dir=str(tmp_path))
    for total, n, shares in ((10, 3, [4, 3, 3]), (4, 3, [2, 1, 1]), (128, 2, [64, 64])):
        s = replace(base, politeness=replace(base.politeness, concurrency=total))
        got = [_worker_settings(s, k, n).politeness.concurrency for k in range(n)]
        assert got == shares
        assert _worker_settings(s, 0, n).out_dir == str(shard_dir(tmp_path, 0))


def test_max_depth_crawls_default_to_one_process(capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import replace

    from skitter.cli.crawl import _choose_processes
    from skitter.processes import default_processes
    from skitter.settings import CrawlSettings

    plain = CrawlSettings(out_dir="x")
    deep = replace(plain, scope=replace(plain.scope, max_depth=2))
    assert _choose_processes(plain, None).processes == default_processes()
    assert _choose_processes(deep, None).processes == 1  # exact BFS hop counts
    assert _choose_processes(replace(deep, processes=2), 2).processes == 2
    assert "--max-depth may keep out" in capsys.readouterr().err


def test_a_memory_frontier_crawl_is_not_resumed(tmp_path: Path) -> None:
    from skitter.errors import StateError
    from skitter.processes import run_processes
    from skitter.settings import CrawlSettings

    s = CrawlSettings(out_dir=str(tmp_path), frontier="memory", processes=2, resume=True)
    with pytest.raises(StateError, match="cannot resume"):
        run_processes(s)


def test_a_process_folder_is_not_resumed_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `crawl --resume --out OUT/shards/0` once ran the shard as a whole one-process crawl (every
    # host, into the shard), and OUT's next resume merged those pages again: URLs twice
    from dataclasses import replace

    from skitter.cli import main
    from skitter.errors import StateError
    from skitter.settings import CrawlSettings
    from skitter.state import load_state, save_state

    out = tmp_path / "crawl"
    whole = CrawlSettings(out_dir=str(out), seeds=("http://a.test/",), processes=2)
    out.mkdir()
    save_state(out, whole)
    shard = shard_dir(out, 0)
    shard.mkdir(parents=True)
    save_state(shard, replace(whole, out_dir=str(shard), processes=1))
    assert load_state(out).processes == 2  # the crawl folder itself resumes
    with pytest.raises(StateError, match=f"process 0 of the crawl in {out}: give that folder"):
        load_state(shard)
    before = sorted(shard.iterdir())
    assert main(["crawl", "--resume", "--out", str(shard)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"skitter: error: {shard} is the folder of process 0 of the crawl in {out}: "
                   "give that folder instead"]  # fmt: skip
    assert sorted(shard.iterdir()) == before  # nothing written into the shard
    # a folder that merely is named shards/K, with no crawl above it, is a crawl of its own
    lone = tmp_path / "x" / "shards" / "3"
    lone.mkdir(parents=True)
    save_state(lone, replace(whole, out_dir=str(lone), processes=1))
    assert load_state(lone).processes == 1


def test_hand_off_line_carries_the_redirect_meta() -> None:
    from skitter.sharding import decode_line

    req = Request(url="http://b.test/x", origin_url="http://a.test/r",
                  redirects=(Hop("http://a.test/r", 302),))  # fmt: skip
    meta = {"content_type": "text/html", "bytes": 10, "sha1": "ab", "attempts": 1}
    assert decode_line(encode_request(req, meta)) == (req, meta)
    assert decode_line(encode_request(req)) == (req, None)
    # compact UTF-8 JSON, as json writes it; a lone surrogate escaped, and read back
    odd = Request(url="http://b.test/é", referer="http://a.test/\udc80")
    line = encode_request(odd)
    assert (
        line
        == json.dumps([odd.url, 0, odd.referer, None, 0, False, []], separators=(",", ":")).encode()
        + b"\n"
    )
    assert decode_line(line) == (odd, None)
    plain = Request(url="http://b.test/é", referer="http://a.test/")
    assert (
        encode_request(plain)
        == json.dumps(
            [plain.url, 0, plain.referer, None, 0, False, []],
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        + b"\n"
    )
    assert decode_line(b'["http://b.test/", 0, null, null, 0, false, [], "junk"]\n') == (
        Request(url="http://b.test/"),
        None,
    )
