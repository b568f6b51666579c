"""links.tsv.zst (skitter.export.linkfile): frames per checkpoint, the one reader, the repair of
a torn last frame, the cut of a page without a record."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import zstandard

from skitter.errors import StateError
from skitter.export.linkfile import (
    ZstdLinksWriter,
    complete_end,
    cut_tail,
    frame_ends,
    iter_lines,
    links_file,
    open_links,
)
from skitter.export.links import HEADER, read_rows

#: a frame header without checksum or content size, window 2 MiB (RFC 8878 §3.1.1.1)
FRAME_HEAD = b"\x28\xb5\x2f\xfd\x00\x58"


def raw_block(data: bytes, last: bool = False) -> bytes:
    """A raw block (RFC 8878 §3.1.1.2): needs no compression context."""
    return ((len(data) << 3) | int(last)).to_bytes(3, "little") + data


def page(n: int, rows: int = 40) -> str:
    return "".join(
        f"http://a.test/{n}\thttp://a.test/{n}/{j}\t\tlink {j}\ta\t0\tqueued\n" for j in range(rows)
    )


def text(path: Path) -> str:
    with open_links(path) as f:
        return bytes(f.read()).decode()


def test_frames_per_checkpoint_and_reader(tmp_path: Path) -> None:
    p = tmp_path / "links.tsv.zst"
    w = ZstdLinksWriter(p)
    w.write_text(page(1))
    w.write_text(page(2))
    cp = w.offset()  # a checkpoint ends the frame
    w.write_text(page(3))
    w.close()
    ends, size = frame_ends(p)
    assert len(ends) == 3 and ends[1] == cp and ends[-1] == size  # header, 2 pages, 1 page
    want = HEADER + "\n" + page(1) + page(2) + page(3)
    assert text(p) == want
    assert (
        zstandard.ZstdDecompressor().decompressobj().decompress(p.read_bytes()[: ends[0]])
        == (HEADER + "\n").encode()
    )
    assert [u for u, _ in iter_lines(p, cp)] == [cp] * 40
    assert [r.source for r in read_rows(p)] == ["http://a.test/1"] * 40 + [
        "http://a.test/2"
    ] * 40 + ["http://a.test/3"] * 40
    assert links_file(tmp_path) == p and complete_end(p) == size
    with open_links(tmp_path, "rt") as f:
        assert f.readline() == HEADER + "\n"
    # a writer opened again appends frames after the old ones
    with ZstdLinksWriter(p) as w2:
        w2.write_text(page(4))
    assert text(p) == want + page(4)


def test_repair_keeps_the_whole_blocks_of_an_open_frame(tmp_path: Path) -> None:
    p = tmp_path / "links.tsv.zst"
    w = ZstdLinksWriter(p)
    w.write_text(page(1))
    cp = w.offset()
    w.write_text(page(2))
    w.write_text(page(3))  # the kill: the frame is never ended, its last block cut short
    os.truncate(p, os.path.getsize(p) - 5)
    assert text(p).endswith(page(2))  # a reader just stops at the torn end
    assert ZstdLinksWriter.repair(p) > 0
    ends, size = frame_ends(p)
    assert ends[-1] == size and ends[-2] == cp
    assert text(p) == HEADER + "\n" + page(1) + page(2)
    assert ZstdLinksWriter.repair(p) == 0  # whole now


def test_repair_cuts_a_torn_new_frame_and_garbage_after_an_open_one(tmp_path: Path) -> None:
    p = tmp_path / "links.tsv.zst"
    with ZstdLinksWriter(p) as w:
        w.write_text(page(1))
    whole = p.read_bytes()
    half = zstandard.ZstdCompressor().compress(page(2).encode())
    p.write_bytes(whole + half[: len(half) // 2])
    ZstdLinksWriter.repair(p)
    assert p.read_bytes() == whole
    # an open frame: one whole raw block, then one cut short
    p.write_bytes(
        whole + FRAME_HEAD + raw_block(page(2).encode()) + raw_block(page(3).encode())[:50]
    )
    ZstdLinksWriter.repair(p)
    assert text(p) == HEADER + "\n" + page(1) + page(2)
    assert frame_ends(p)[0][-1] == os.path.getsize(p)


def test_cut_tail_rewrites_the_kept_lines_of_the_frame(tmp_path: Path) -> None:
    p = tmp_path / "links.tsv.zst"
    with ZstdLinksWriter(p) as w:
        cp = w.offset()
        w.write_text(page(1))
        w.write_text(page(2, rows=3))
    lines = list(iter_lines(p, cp))
    cut_tail(p, lines, 40)  # page 2 has no record
    assert text(p) == HEADER + "\n" + page(1)
    assert frame_ends(p)[0][-1] == os.path.getsize(p)
    plain = tmp_path / "links.tsv"
    plain.write_text(HEADER + "\n" + page(1) + page(2, rows=3))
    lines = list(iter_lines(plain))
    cut_tail(plain, lines, 41)
    assert plain.read_text() == HEADER + "\n" + page(1)


def test_not_a_links_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "links.tsv.zst"
    p.write_bytes(zstandard.ZstdCompressor().compress(b"hello\n"))
    with pytest.raises(StateError, match=r"not a Skitter links\.tsv\.zst"):
        ZstdLinksWriter(p)


def test_the_live_status_follows_links_tsv_zst(tmp_path: Path) -> None:
    from skitter.status.journal import _Follower

    follower = _Follower(tmp_path / "links.tsv", skip_header=True)
    w = ZstdLinksWriter(tmp_path / "links.tsv.zst")
    w.write_text(page(1, rows=2))
    assert follower.new_lines() == []  # the open frame: not read before the checkpoint
    w.offset()
    w.write_text(page(2, rows=1))
    w.close()
    assert follower.new_lines() == [
        line.encode() for line in (page(1, 2) + page(2, 1)).splitlines()
    ]
    assert follower.new_lines() == []


_FULL_DISK = """
import resource, signal, sys
from skitter.export.linkfile import ZstdLinksWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
w = ZstdLinksWriter(sys.argv[1])
w.write_text(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (w.offset() + 100, resource.RLIM_INFINITY))
written = 1
try:
    for n in range(2, 100):  # an open frame, then a page that does not fit
        w.write_text(sys.argv[2].replace("/1", f"/{n}"))
        written = n
except OSError as exc:
    print(written, exc.strerror)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
w.write_text(sys.argv[2].replace("/1", "/999"))
w.close()
"""


def test_a_failed_write_ends_the_frame_as_it_is_on_disk(tmp_path: Path) -> None:
    """Disk full (injected: RLIMIT_FSIZE) mid-frame: the pages written stay readable, the
    failed one is absent, and the next write (room again) starts a good frame."""
    import subprocess
    import sys

    p = tmp_path / "links.tsv.zst"
    proc = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(p), page(1, rows=3)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    written, why = proc.stdout.split(" ", 1)
    assert int(written) >= 2 and why.strip() == "File too large"
    pages = [page(1, rows=3).replace("/1", f"/{n}") for n in [*range(1, int(written) + 1), 999]]
    assert text(p) == HEADER + "\n" + "".join(pages)
    assert frame_ends(p)[0][-1] == os.path.getsize(p)


def test_a_repair_killed_half_way_is_finished_by_the_next(tmp_path: Path) -> None:
    """The cut and the frame written back are recorded in links.tsv.zst.tail first: a kill
    after the cut (the kept rows not yet written back) loses nothing."""
    p = tmp_path / "links.tsv.zst"
    with ZstdLinksWriter(p) as w:
        w.write_text(page(1))
    whole = p.read_bytes()
    tail = Path(str(p) + ".tail")
    kept = zstandard.ZstdCompressor().compress(page(2).encode())
    tail.write_bytes(len(whole).to_bytes(8, "little") + kept)
    p.write_bytes(whole)  # the kill came after the cut (the torn frame gone)
    ZstdLinksWriter.repair(p)
    assert not tail.exists()
    assert text(p) == HEADER + "\n" + page(1) + page(2)


def _torn_tail(last_rows: bytes, source: str) -> bytes:
    """What the e2e kill test appends: a whole raw block of 50 rows of ``source`` (a page
    without a record), then a raw block cut short repeating the last real rows."""
    fake = f"{source}\thttp://never.example.test/y\t\t\ta\t0\tqueued\n" * 50
    return raw_block(fake.encode()) + raw_block(last_rows)[: len(last_rows) // 2]


def _resume(p: Path, cp: int, recorded_pages: list[int]) -> None:
    """Repair, then the resume's reconciliation of links.tsv.zst rows past ``cp``."""
    from types import SimpleNamespace

    from skitter.recovery import _reconcile_links
    from skitter.stats import Stats

    ZstdLinksWriter.repair(p)
    ctx: Any = SimpleNamespace(stats=Stats(), policy=SimpleNamespace(rejudges_links=False))
    _reconcile_links(ctx, p, cp, {f"http://a.test/{n}": 1 for n in recorded_pages})


@pytest.mark.parametrize("kill_before_record", [False, True])
def test_kill_in_an_open_frame_then_a_torn_tail_gives_each_row_once(
    tmp_path: Path, kill_before_record: bool
) -> None:
    """The state of the e2e kill test, built exactly: a checkpoint, an open frame of pages 2
    and 3 (the kill came before page 3's record, or after it), then a torn tail. Repair and
    resume leave each row of a recorded page once (the half block repeating them is cut),
    and no row of a page without a record (it is crawled again)."""
    p = tmp_path / "links.tsv.zst"
    w = ZstdLinksWriter(p)
    w.write_text(page(1))
    cp = w.offset()
    w.write_text(page(2))
    w.write_text(page(3, rows=30))
    w._file.close()  # the kill: the frame stays open (nothing ends it)
    recorded = [1, 2] if kill_before_record else [1, 2, 3]
    # only the last page can lack a record: the injected rows are then more of its rows
    source = "http://a.test/3" if kill_before_record else "http://never.example.test/x"
    last_rows = "".join((page(2) + page(3, rows=30)).splitlines(keepends=True)[-50:])
    with open(p, "ab") as f:
        f.write(_torn_tail(last_rows.encode(), source))
    _resume(p, cp, recorded)
    want = HEADER + "\n" + "".join(page(n, rows=30 if n == 3 else 40) for n in recorded)
    assert text(p) == want
    assert frame_ends(p)[0][-1] == os.path.getsize(p)


def test_kill_after_a_whole_frame_then_a_torn_new_frame(tmp_path: Path) -> None:
    """A kill just after a checkpoint (every frame whole), then a torn new frame: its whole
    block of rows without a record is cut by the resume, its half block by the repair."""
    p = tmp_path / "links.tsv.zst"
    with ZstdLinksWriter(p) as w:
        w.write_text(page(1))
        w.write_text(page(2))
        cp = w.offset()
    last_rows = "".join(page(2).splitlines(keepends=True)[-50:]).encode()
    with open(p, "ab") as f:
        f.write(FRAME_HEAD + _torn_tail(last_rows, "http://never.example.test/x"))
    _resume(p, cp, [1, 2])
    assert text(p) == HEADER + "\n" + page(1) + page(2)
    assert frame_ends(p)[0][-1] == os.path.getsize(p)


def test_the_merged_links_tsv_zst_is_cut_back_to_merge_json_on_resume(tmp_path: Path) -> None:
    """--processes N: OUT/links.tsv.zst is the merger's copy of the shards' checkpointed
    frames; bytes past merge.json (a kill mid-copy, or a torn frame) are dropped on resume
    and copied again, so each row is there once."""
    import json

    from skitter.shard_merge import Merger
    from skitter.sharding import shard_dir
    from skitter.state import CHECKPOINT_FILE

    sdir = shard_dir(tmp_path, 0)
    sdir.mkdir(parents=True)
    with ZstdLinksWriter(sdir / "links.tsv.zst") as w:
        w.write_text(page(1))
        w.write_text(page(2))
        cp = w.offset()
    (sdir / CHECKPOINT_FILE).write_text(json.dumps({"links_offset": cp, "pages_offset": 0}))
    m = Merger(tmp_path, 1, resume=False, links_compress="zstd")
    m.step()
    m.close()
    out = tmp_path / "links.tsv.zst"
    last_rows = "".join(page(2).splitlines(keepends=True)[-50:]).encode()
    with open(out, "ab") as f:
        f.write(FRAME_HEAD + _torn_tail(last_rows, "http://never.example.test/x"))
    m = Merger(tmp_path, 1, resume=True, links_compress="zstd")
    assert m.step() == 0
    m.close()
    assert text(out) == HEADER + "\n" + page(1) + page(2)
    assert frame_ends(out)[0][-1] == os.path.getsize(out)
