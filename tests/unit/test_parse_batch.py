"""skitter.parse_batch: pages parsed in batches, each caller getting its own page."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from skitter.models import Page
from skitter.parse_batch import BATCH_PAGE_MAX_BYTES, ParseBatch


class Recorder:
    """A parser that records the bodies it parsed, in order, and the batch they were in."""

    def __init__(self) -> None:
        self.parsed: list[bytes] = []

    def __call__(self, body: bytes, url: str, ct: str | None, xr: Sequence[str]) -> Page:
        if body == b"boom":
            raise ValueError(f"cannot parse {url}")
        self.parsed.append(body)
        return Page(links=[], base_url=url, encoding="utf-8", title=body.decode())


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_pages_of_one_turn_are_one_batch_in_order() -> None:
    rec = Recorder()
    batch = ParseBatch(rec)

    async def main() -> list[str]:
        pages = await asyncio.gather(
            *(batch.parse(f"p{i}".encode(), f"http://a.test/{i}", None, ()) for i in range(5))
        )
        return [p.title for p in pages]

    assert asyncio.run(main()) == ["p0", "p1", "p2", "p3", "p4"]
    assert rec.parsed == [b"p0", b"p1", b"p2", b"p3", b"p4"]
    assert (batch.batches, batch.pages) == (1, 5)


def test_a_batch_waits_while_requests_are_fetched_until_it_is_full() -> None:
    rec = Recorder()
    batch = ParseBatch(rec, max_pages=3, max_wait_s=3600.0)

    async def main() -> None:
        first = [asyncio.create_task(batch.parse(b"a", "http://a.test/a", None, ()))]
        first.append(asyncio.create_task(batch.parse(b"b", "http://a.test/b", None, ())))
        await _turns(10)
        assert rec.parsed == []  # requests are still being fetched: the batch waits
        assert len(batch) == 2
        page = await batch.parse(b"c", "http://a.test/c", None, ())  # the third fills it
        assert page.title == "c"
        assert [p.title for p in await asyncio.gather(*first)] == ["a", "b"]

    asyncio.run(main())
    assert rec.parsed == [b"a", b"b", b"c"]
    assert (batch.batches, batch.pages) == (1, 3)


def test_a_batch_goes_at_its_byte_bound() -> None:
    rec = Recorder()
    batch = ParseBatch(rec, max_bytes=10, max_wait_s=3600.0)

    async def main() -> None:
        t = asyncio.create_task(batch.parse(b"x" * 6, "http://a.test/1", None, ()))
        await _turns(5)
        assert rec.parsed == []
        await batch.parse(b"y" * 4, "http://a.test/2", None, ())  # 10 bytes: full
        await t

    asyncio.run(main())
    assert rec.parsed == [b"x" * 6, b"y" * 4]


def test_a_batch_goes_after_its_wait_bound_alone() -> None:
    rec = Recorder()
    batch = ParseBatch(rec, max_wait_s=0.001)

    async def main() -> str:
        return (await batch.parse(b"only", "http://a.test/", None, ())).title

    assert asyncio.run(main()) == "only"


def test_drain_parses_the_waiting_pages_at_the_next_turn() -> None:
    rec = Recorder()
    batch = ParseBatch(rec, max_wait_s=3600.0)

    async def main() -> None:
        held = asyncio.create_task(batch.parse(b"a", "http://a.test/a", None, ()))
        await _turns(5)
        assert rec.parsed == []
        joined = asyncio.create_task(batch.parse(b"b", "http://a.test/b", None, ()))
        batch.drain()  # the crawl loop: nothing is being fetched
        batch.drain()  # (again: still one flush)
        assert [p.title for p in await asyncio.gather(held, joined)] == ["a", "b"]
        batch.drain()  # nothing waiting: nothing to do

    asyncio.run(main())
    assert (batch.batches, rec.parsed) == (1, [b"a", b"b"])


def test_a_page_error_goes_to_its_caller_only() -> None:
    rec = Recorder()
    batch = ParseBatch(rec)

    async def main() -> list[object]:
        return await asyncio.gather(
            batch.parse(b"ok1", "http://a.test/1", None, ()),
            batch.parse(b"boom", "http://a.test/2", None, ()),
            batch.parse(b"ok3", "http://a.test/3", None, ()),
            return_exceptions=True,
        )

    got = asyncio.run(main())
    assert isinstance(got[0], Page) and got[0].title == "ok1"
    assert isinstance(got[1], ValueError) and str(got[1]) == "cannot parse http://a.test/2"
    assert isinstance(got[2], Page) and got[2].title == "ok3"


def test_a_cancelled_caller_is_not_parsed() -> None:
    rec = Recorder()
    batch = ParseBatch(rec, max_pages=3, max_wait_s=3600.0)

    async def main() -> None:
        gone = asyncio.create_task(batch.parse(b"gone", "http://a.test/g", None, ()))
        kept = asyncio.create_task(batch.parse(b"kept", "http://a.test/k", None, ()))
        await _turns(2)
        gone.cancel()
        await _turns(2)
        await batch.parse(b"last", "http://a.test/l", None, ())
        assert (await kept).title == "kept"
        assert gone.cancelled()

    asyncio.run(main())
    assert rec.parsed == [b"kept", b"last"]


def test_large_pages_are_parsed_at_once_and_counted_after() -> None:
    rec = Recorder()
    sizes: list[int] = []
    batch = ParseBatch(rec, max_wait_s=3600.0, after=sizes.append)
    big = b"<p>" + b"x" * BATCH_PAGE_MAX_BYTES

    async def main() -> None:
        small = asyncio.create_task(batch.parse(b"small", "http://a.test/s", None, ()))
        await _turns(2)
        await batch.parse(big, "http://a.test/big", None, ())  # not held behind "small"
        assert rec.parsed == [big] and len(batch) == 1
        batch.flush()
        assert (await small).title == "small"

    asyncio.run(main())
    assert sizes == [len(big), 5]


def test_close_cancels_the_waiting_callers() -> None:
    rec = Recorder()
    batch = ParseBatch(rec, max_wait_s=3600.0)

    async def main() -> None:
        t = asyncio.create_task(batch.parse(b"a", "http://a.test/", None, ()))
        await _turns(2)
        batch.close()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert len(batch) == 0

    asyncio.run(main())
    assert rec.parsed == []
