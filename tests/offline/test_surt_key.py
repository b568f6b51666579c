"""surt_key: the same SURT text as the surt package, on plain URLs (its fast path) and others."""

from __future__ import annotations

import itertools
import random

import surt

from skitter.offline.surt_key import _plain_key, surt_key

HOSTS = [
    "example.test",
    "Example.TEST",
    "www.example.test",
    "www2.example.test",
    "wwwx.example.test",
    "www.test",
    "a-b.c-d.example",
    "localhost",
    "h0001.test",
    "1.2.3.x4",
    "x.123",
    "127.0.0.1",
    "xn--bcher-kva.example",
]
PORTS = ["", ":80", ":443", ":8080", ":0", ":080", ":65535", ":65536", ":99999"]
PATHS = [
    "",
    "/",
    "/a",
    "/A/B.html",
    "/a/",
    "/a//b",
    "/a/./b",
    "/a/../b",
    "/..",
    "/a/.",
    "/a/..",
    "/~u/x-y_z.HTM",
    "/a%20b",
    "/%7Eu",
    "/a;jsessionid=1",
    "/(S(abcdefghijklmnopqrstuvwx))/x.aspx",
    "/a b",
    "/é",
]
QUERIES = [
    "",
    "?",
    "?a=1",
    "?b=2&a=1",
    "?B=2&a=1",
    "?a",
    "?a&a=",
    "?&",
    "?=",
    "?z=1&z",
    "?sid=0123456789abcdef0123456789abcdef",
    "?x=1&jsessionid=0123456789ABCDEF0123456789ABCDEF",
    "?cfid=1&cftoken=2",
    "?q=a%26b",
    "?q=a+b",
]
FRAGMENTS = ["", "#top"]


def _check(url: str) -> bool:
    """``surt_key(url)`` is what the read-back index computes; True if the fast path did it."""
    try:
        expected = surt.surt(url)
    except Exception:
        expected = url
    assert surt_key(url) == expected, url
    return _plain_key(url) is not None


def test_same_key_as_surt_on_many_combinations() -> None:
    """Every path and query with every host (ports in turn), every host with every port."""
    fast = 0
    ports = itertools.cycle(PORTS)
    for (path, query), host, scheme in itertools.product(
        itertools.product(PATHS, QUERIES), HOSTS, ["http", "https"]
    ):
        fast += _check(f"{scheme}://{host}{next(ports)}{path}{query}")
    for scheme, host, port, frag in itertools.product(
        ["http", "https", "HTTP", "ftp"], HOSTS, PORTS, FRAGMENTS
    ):
        fast += _check(f"{scheme}://{host}{port}/a/b.html?x=1{frag}")
    assert fast > 500  # the fast path took the plain ones


def test_same_key_as_surt_on_random_urls() -> None:
    rnd = random.Random(16)
    alphabet = "aZ09-._~/=&?#:%;()+ "
    fast = 0
    for _ in range(3000):
        host = rnd.choice(HOSTS[:9])
        tail = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 20)))
        fast += _check(f"http://{host}/{tail}")
    assert fast > 100


def test_keys_of_plain_urls() -> None:
    assert surt_key("http://www.Example.test:8080/A/b/?q=1&a=2") == "test,example:8080)/a/b?a=2&q=1"
    assert surt_key("https://example.test:443") == "test,example)/"
    assert (
        surt_key("http://h0001.test:8080/docs/p00001.html") == "test,h0001:8080)/docs/p00001.html"
    )
    assert surt_key("mailto:someone@example.test") == surt.surt("mailto:someone@example.test")
