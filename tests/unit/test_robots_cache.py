"""Tests for skitter.robots_cache with an in-memory fetch function and a fake clock."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skitter.errors import ConnectError, FetchError, FetchTimeout
from skitter.models import Response
from skitter.robots_cache import RobotsCache, RobotsCheck, _origin_of, origin_of

TTL = 3600.0
RETRY = 60.0


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeFetch:
    """url → Response | exception; records every call; optional gate to hold fetches."""

    def __init__(self, routes: dict[str, Response | Exception] | None = None) -> None:
        self.routes: dict[str, Response | Exception] = dict(routes or {})
        self.calls: list[str] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, url: str) -> Response:
        self.calls.append(url)
        if self.gate is not None:
            await self.gate.wait()
        result = self.routes.get(url)
        if result is None:
            return Response(url=url, status=404, reason="Not Found")
        if isinstance(result, Exception):
            raise result
        return result


def ok(url: str, body: str, content_type: str = "text/plain") -> Response:
    return Response(
        url=url, status=200, headers=(("Content-Type", content_type),), body=body.encode()
    )


def redirect(url: str, location: str, status: int = 301) -> Response:
    return Response(url=url, status=status, headers=(("Location", location),))


def make(
    fetch: FakeFetch,
    clock: FakeClock | None = None,
    *,
    max_bytes: int = 500 * 1024,
    ignore: bool = False,
) -> RobotsCache:
    return RobotsCache(
        fetch,
        token="skitter",
        ttl_s=TTL,
        retry_s=RETRY,
        clock=clock or FakeClock(),
        max_bytes=max_bytes,
        ignore=ignore,
    )


DISALLOW_PRIVATE = "User-agent: *\nDisallow: /private/\nCrawl-delay: 3\n"


# --------------------------------------------------------------------------- basics


def test_origin_of() -> None:
    assert origin_of("HTTP://Example.TEST:80/a?b") == "http://example.test"
    assert origin_of("https://example.test:443/") == "https://example.test"
    assert origin_of("https://example.test:8443/x") == "https://example.test:8443"
    assert origin_of("http://user:pw@example.test/x") == "http://example.test"
    assert origin_of("http://[::1]:8080/x") == "http://[::1]:8080"
    assert origin_of("http://[::1]/x") == "http://[::1]"
    with pytest.raises(ValueError):
        origin_of("/relative")
    with pytest.raises(ValueError):
        origin_of("https:///x")  # (the cached path: no authority)


_PIECES = ["http://", "https://", "HTTP://", "a.test", "B.test", ":80", ":443", ":8080", ":",
           "u:p@", "@", "/", "?", "#", "x", "[::1]", "\\", "%2F", "\t"]  # fmt: skip


@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=7).map("".join))
@settings(max_examples=800, deadline=None)
def test_origin_of_by_prefix_is_that_of_the_whole_url(url: str) -> None:
    # the answer kept for a URL's prefix is the one urlsplit gives for the whole URL
    try:
        want: str | type[ValueError] = _origin_of(url)
    except ValueError:
        want = ValueError
    for _ in range(2):  # computed, then from the cache
        try:
            got: str | type[ValueError] = origin_of(url)
        except ValueError:
            got = ValueError
        assert got == want, url


async def test_2xx_parsed_and_fetch_gets_absolute_robots_url() -> None:
    fetch = FakeFetch({"https://a.example.test/robots.txt": ok("", DISALLOW_PRIVATE)})
    cache = make(fetch)
    assert await cache.check("https://a.example.test/private/x") == RobotsCheck(
        False, "disallowed", 3.0
    )
    assert await cache.check("https://a.example.test/public") == RobotsCheck(True, "allowed", 3.0)
    assert fetch.calls == ["https://a.example.test/robots.txt"]
    snap = cache.snapshot()["https://a.example.test"]
    assert snap["status"] == "ok"
    assert snap["http_status"] == 200
    assert snap["fetched_at"] == 1000.0
    assert snap["crawl_delay_s"] == 3.0
    assert snap["truncated"] is False
    assert (snap["allowed"], snap["disallowed"]) == (1, 1)


async def test_any_content_type_is_parsed() -> None:
    url = "http://h.example.test/robots.txt"
    fetch = FakeFetch({url: ok(url, "User-agent: *\nDisallow: /\n", "text/html")})
    assert not (await make(fetch).check("http://h.example.test/x")).allowed


async def test_single_flight_under_50_concurrent_checks() -> None:
    fetch = FakeFetch({"http://s.example.test/robots.txt": ok("", DISALLOW_PRIVATE)})
    fetch.gate = asyncio.Event()
    cache = make(fetch)

    def url(i: int) -> str:
        return f"http://s.example.test/{'private/' if i % 2 else ''}{i}"

    tasks = [asyncio.create_task(cache.check(url(0)))]
    while not fetch.calls:  # the first check's fetch is now in progress (held by the gate)
        await asyncio.sleep(0)
    tasks += [asyncio.create_task(cache.check(url(i))) for i in range(1, 50)]
    await asyncio.sleep(0)
    fetch.gate.set()
    results = await asyncio.gather(*tasks)
    assert fetch.calls == ["http://s.example.test/robots.txt"]
    assert sum(r.allowed for r in results) == 25
    snap = cache.snapshot()["http://s.example.test"]
    assert (snap["allowed"], snap["disallowed"]) == (25, 25)
    # Afterwards the cached entry answers without fetching.
    await cache.check(url(51))
    assert len(fetch.calls) == 1


async def test_cancelled_caller_does_not_cancel_shared_fetch() -> None:
    fetch = FakeFetch({"http://c.example.test/robots.txt": ok("", DISALLOW_PRIVATE)})
    fetch.gate = asyncio.Event()
    cache = make(fetch)
    first = asyncio.create_task(cache.check("http://c.example.test/private/1"))
    second = asyncio.create_task(cache.check("http://c.example.test/private/2"))
    await asyncio.sleep(0)
    first.cancel()
    fetch.gate.set()
    assert (await second).reason == "disallowed"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert len(fetch.calls) == 1


async def test_origins_are_separate() -> None:
    fetch = FakeFetch(
        {
            "http://a.example.test/robots.txt": ok("", "User-agent: *\nDisallow: /\n"),
            "http://a.example.test:8080/robots.txt": ok("", ""),
            "https://a.example.test/robots.txt": ok("", "User-agent: skitter\nDisallow: /s\n"),
        }
    )
    cache = make(fetch)
    assert not (await cache.check("http://a.example.test/x")).allowed
    assert (await cache.check("http://a.example.test:8080/x")).allowed
    assert (await cache.check("https://a.example.test/x")).allowed
    assert not (await cache.check("https://a.example.test/s")).allowed
    assert len(fetch.calls) == 3


# --------------------------------------------------------------------------- statuses


@pytest.mark.parametrize("status", [401, 403, 404, 410, 429])
async def test_4xx_allows_all(status: int) -> None:
    url = "http://f.example.test/robots.txt"
    fetch = FakeFetch({url: Response(url=url, status=status)})
    cache = make(fetch)
    assert await cache.check("http://f.example.test/anything") == RobotsCheck(True, "allowed", None)
    snap = cache.snapshot()["http://f.example.test"]
    assert snap["status"] == "4xx"
    assert snap["http_status"] == status


async def test_c02_503_disallows_then_refetched_after_retry_s() -> None:
    url = "http://a503.example.test/robots.txt"
    fetch = FakeFetch({url: Response(url=url, status=503)})
    clock = FakeClock()
    cache = make(fetch, clock)
    assert await cache.check("http://a503.example.test/page") == RobotsCheck(
        False, "unreachable", None
    )
    assert cache.snapshot()["http://a503.example.test"]["status"] == "5xx"
    # Within retry_s: still disallowed, no new fetch.
    clock.now += RETRY - 1
    assert (await cache.check("http://a503.example.test/page")).reason == "unreachable"
    assert len(fetch.calls) == 1
    # After retry_s the next check fetches again; now it is a 200.
    fetch.routes[url] = ok(url, "User-agent: *\nDisallow: /private/\n")
    clock.now += 2
    assert await cache.check("http://a503.example.test/page") == RobotsCheck(True, "allowed", None)
    assert len(fetch.calls) == 2
    snap = cache.snapshot()["http://a503.example.test"]
    assert snap["status"] == "ok"
    assert (snap["allowed"], snap["disallowed"]) == (1, 2)


@pytest.mark.parametrize(
    "exc",
    [
        FetchTimeout("read timed out"),
        ConnectError("refused", kind="connect"),
        ConnectError("no such host", kind="dns"),
        FetchError("bad framing"),
        TimeoutError("bare timeout"),
    ],
)
async def test_fetch_error_is_unreachable(exc: Exception) -> None:
    url = "http://down.example.test/robots.txt"
    fetch = FakeFetch({url: exc})
    clock = FakeClock()
    cache = make(fetch, clock)
    check = await cache.check("http://down.example.test/x")
    assert (check.allowed, check.reason, check.crawl_delay_s) == (False, "unreachable", None)
    # the fetch error's kind travels with the verdict (a dead name is "dns" for the page)
    assert check.error_kind == getattr(exc, "kind", type(exc).__name__)
    assert check.error is not None and check.error.startswith(f"{check.error_kind}: ")
    snap = cache.snapshot()["http://down.example.test"]
    assert snap["status"] == "unreachable"
    assert snap["http_status"] is None
    assert isinstance(snap["error"], str) and snap["error"]
    # No response at all: asked again after the --retries backoff (2 s, 4 s, 8 s...), not
    # after retry_s (the 5xx wait, 60 s here) and never after ttl_s (issue 9, fault 2).
    for n, backoff in enumerate((2.0, 4.0, 8.0), start=1):
        clock.now += backoff - 0.5
        await cache.check("http://down.example.test/x")
        assert len(fetch.calls) == n, backoff  # still within the backoff: no new fetch
        clock.now += 0.5
        await cache.check("http://down.example.test/x")
        assert len(fetch.calls) == n + 1, backoff
    # a success resets the schedule
    fetch.routes[url] = ok(url, "User-agent: *\nDisallow:\n")
    clock.now += 16.0
    assert (await cache.check("http://down.example.test/x")).allowed


async def test_robots_txt_itself_allowed_even_when_unreachable() -> None:
    fetch = FakeFetch({"http://d.example.test/robots.txt": ConnectError("x")})
    cache = make(fetch)
    assert (await cache.check("http://d.example.test/robots.txt")).allowed


async def test_ttl_expiry_refetches() -> None:
    url = "http://t.example.test/robots.txt"
    fetch = FakeFetch({url: ok(url, "User-agent: *\nDisallow: /old/\n")})
    clock = FakeClock()
    cache = make(fetch, clock)
    assert not (await cache.check("http://t.example.test/old/1")).allowed
    clock.now += TTL - 1
    fetch.routes[url] = ok(url, "User-agent: *\nDisallow: /new/\n")
    assert not (await cache.check("http://t.example.test/old/1")).allowed
    assert len(fetch.calls) == 1
    clock.now += 2
    assert (await cache.check("http://t.example.test/old/1")).allowed
    assert not (await cache.check("http://t.example.test/new/1")).allowed
    assert len(fetch.calls) == 2
    assert cache.snapshot()["http://t.example.test"]["fetched_at"] == 1000.0 + TTL + 1


# --------------------------------------------------------------------------- redirects


async def test_redirect_chain_applies_to_original_origin() -> None:
    fetch = FakeFetch(
        {
            "http://r.example.test/robots.txt": redirect("", "/config/robots-main.txt"),
            "http://r.example.test/config/robots-main.txt": redirect(
                "", "http://cdn.example.test/r/robots.txt", 302
            ),
            "http://cdn.example.test/r/robots.txt": ok("", "User-agent: *\nDisallow: /admin/\n"),
            "http://cdn.example.test/robots.txt": ok("", "User-agent: *\nDisallow: /\n"),
        }
    )
    cache = make(fetch)
    assert not (await cache.check("http://r.example.test/admin/x")).allowed
    assert (await cache.check("http://r.example.test/public")).allowed
    assert fetch.calls == [
        "http://r.example.test/robots.txt",
        "http://r.example.test/config/robots-main.txt",
        "http://cdn.example.test/r/robots.txt",
    ]
    snap = cache.snapshot()
    assert list(snap) == ["http://r.example.test"]  # nothing cached for the target origin
    assert snap["http://r.example.test"]["redirects"] == 2
    assert snap["http://r.example.test"]["final_url"] == "http://cdn.example.test/r/robots.txt"
    # cdn's own robots.txt is fetched and applied separately.
    assert not (await cache.check("http://cdn.example.test/x")).allowed
    assert fetch.calls[-1] == "http://cdn.example.test/robots.txt"


async def test_c18_redirect_to_html_homepage_allows_all_for_source_only() -> None:
    fetch = FakeFetch(
        {
            "http://m.example.test/robots.txt": redirect("", "http://n.example.test/"),
            "http://n.example.test/": ok(
                "", "<!doctype html><html><body><h1>Welcome</h1></body></html>", "text/html"
            ),
            "http://n.example.test/robots.txt": ok("", "User-agent: *\nDisallow: /\n"),
        }
    )
    cache = make(fetch)
    assert await cache.check("http://m.example.test/page") == RobotsCheck(True, "allowed", None)
    assert await cache.check("http://n.example.test/page") == RobotsCheck(False, "disallowed", None)
    assert fetch.calls == [
        "http://m.example.test/robots.txt",
        "http://n.example.test/",
        "http://n.example.test/robots.txt",
    ]
    snap = cache.snapshot()
    assert snap["http://m.example.test"]["status"] == "ok"
    assert snap["http://n.example.test"]["status"] == "ok"


async def test_five_redirects_followed() -> None:
    routes: dict[str, Response | Exception] = {
        f"http://five.example.test/r{i}": redirect("", f"/r{i + 1}") for i in range(1, 5)
    }
    routes["http://five.example.test/robots.txt"] = redirect("", "/r1")
    routes["http://five.example.test/r5"] = ok("", "User-agent: *\nDisallow: /\n")
    fetch = FakeFetch(routes)
    cache = make(fetch)
    assert not (await cache.check("http://five.example.test/x")).allowed
    assert len(fetch.calls) == 6
    assert cache.snapshot()["http://five.example.test"]["redirects"] == 5


async def test_six_consecutive_301s_allow_all() -> None:
    routes: dict[str, Response | Exception] = {
        f"http://six.example.test/r{i}": redirect("", f"/r{i + 1}") for i in range(1, 10)
    }
    routes["http://six.example.test/robots.txt"] = redirect("", "/r1")
    routes["http://six.example.test/r6"] = ok("", "User-agent: *\nDisallow: /\n")
    fetch = FakeFetch(routes)
    cache = make(fetch)
    assert await cache.check("http://six.example.test/x") == RobotsCheck(True, "allowed", None)
    assert len(fetch.calls) == 6  # robots.txt + r1..r5, each a 301; r6 is never asked for
    snap = cache.snapshot()["http://six.example.test"]
    assert snap["status"] == "redirect_limit"
    assert snap["http_status"] == 301


async def test_redirect_loop_hits_the_limit() -> None:
    fetch = FakeFetch(
        {
            "http://loop.example.test/robots.txt": redirect("", "/a"),
            "http://loop.example.test/a": redirect("", "/robots.txt"),
        }
    )
    cache = make(fetch)
    assert (await cache.check("http://loop.example.test/x")).allowed
    assert cache.snapshot()["http://loop.example.test"]["status"] == "redirect_limit"


async def test_redirect_without_location_allows_all() -> None:
    url = "http://nl.example.test/robots.txt"
    fetch = FakeFetch({url: Response(url=url, status=302)})
    cache = make(fetch)
    assert (await cache.check("http://nl.example.test/x")).allowed
    assert cache.snapshot()["http://nl.example.test"]["status"] == "redirect_invalid"


async def test_redirect_then_503_is_unreachable_for_the_source() -> None:
    fetch = FakeFetch(
        {
            "http://rs.example.test/robots.txt": redirect("", "http://t.example.test/robots.txt"),
            "http://t.example.test/robots.txt": Response(url="", status=503),
        }
    )
    cache = make(fetch)
    assert (await cache.check("http://rs.example.test/x")).reason == "unreachable"
    assert list(cache.snapshot()) == ["http://rs.example.test"]


# --------------------------------------------------------------------------- misc


async def test_ignore_never_fetches() -> None:
    fetch = FakeFetch({"http://i.example.test/robots.txt": ok("", "User-agent: *\nDisallow: /\n")})
    cache = make(fetch, ignore=True)
    assert await cache.check("http://i.example.test/x") == RobotsCheck(True, "allowed", None)
    entry = await cache.rules_for("http://i.example.test/x")
    assert entry.status == "ignored"
    assert fetch.calls == []
    assert cache.snapshot() == {}


async def test_truncated_flag_and_max_bytes() -> None:
    url = "http://big.example.test/robots.txt"
    body = "User-agent: *\nDisallow: /a/\n" + "# filler\n" * 200 + "Disallow: /b/\n"
    fetch = FakeFetch({url: ok(url, body)})
    cache = make(fetch, max_bytes=200)
    assert not (await cache.check("http://big.example.test/a/1")).allowed
    assert (await cache.check("http://big.example.test/b/1")).allowed
    assert cache.snapshot()["http://big.example.test"]["truncated"] is True


async def test_rules_for_returns_entry_and_crawl_delay() -> None:
    url = "http://e.example.test/robots.txt"
    fetch = FakeFetch(
        {url: ok(url, "User-agent: skitter\nCrawl-delay: 4\nSitemap: http://e.example.test/s.xml")}
    )
    cache = make(fetch)
    assert cache.crawl_delay("http://e.example.test/x") is None  # not fetched yet
    entry = await cache.rules_for("http://e.example.test/x")
    assert entry.origin == "http://e.example.test"
    assert entry.crawl_delay_s == 4.0
    assert entry.rules.sitemaps == ["http://e.example.test/s.xml"]
    assert cache.crawl_delay("http://e.example.test/y") == 4.0
    assert cache.snapshot()["http://e.example.test"]["sitemaps"] == ["http://e.example.test/s.xml"]


async def test_unexpected_exception_propagates_and_is_not_cached() -> None:
    url = "http://bug.example.test/robots.txt"
    fetch = FakeFetch({url: RuntimeError("bug")})
    cache = make(fetch)
    with pytest.raises(RuntimeError):
        await cache.check("http://bug.example.test/x")
    fetch.routes[url] = ok(url, "")
    assert (await cache.check("http://bug.example.test/x")).allowed
    assert len(fetch.calls) == 2
