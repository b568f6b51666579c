"""Tests for skitter.rules: scope and per-link decisions."""

from __future__ import annotations

import pytest

from skitter.errors import ConfigError
from skitter.rules import Decision, ScopeRule
from skitter.settings import ScopeSettings

SEED = "http://www.example.test/"


def rule(*seeds: str, **kw: object) -> ScopeRule:
    return ScopeRule(ScopeSettings(**kw), seeds or (SEED,))  # type: ignore[arg-type]


def decide(
    r: ScopeRule,
    url: str | None,
    *,
    depth: int = 1,
    nofollow: bool = False,
    index: int = 0,
    is_seed_page: bool = False,
) -> tuple[Decision, str | None]:
    return r.decide(url, depth=depth, nofollow=nofollow, index=index, is_seed_page=is_seed_page)


def test_decision_values() -> None:
    assert [d.value for d in Decision] == [
        "queued",
        "seen",
        "scope",
        "nofollow",
        "depth",
        "scheme",
        "url_length",
        "limit",
        "trap",  # given by skitter.traps.TrapGuard, never by ScopeRule.decide
        "duplicate",  # a duplicate page's links (skitter.duplicates), never by decide
        "type",  # given by the file-type focus (skitter.typefocus)
    ]
    assert isinstance(Decision.QUEUED, str)
    assert Decision("url_length") is Decision.URL_LENGTH
    assert f"{Decision.QUEUED}" == "queued"


# ----------------------------------------------------------------------------------------
# scope
# ----------------------------------------------------------------------------------------

SCOPE_TABLE = [
    # scope, url, in scope?
    ("host", "http://www.example.test/a", True),
    ("host", "https://www.example.test/a", True),  # same host key on default ports
    ("host", "http://www.example.test:8080/a", False),
    ("host", "http://a.example.test/a", False),
    ("host", "http://other.test/", False),
    ("domain", "http://www.example.test/a", True),
    ("domain", "http://a.example.test/a", True),
    ("domain", "https://deep.a.example.test:8443/a", True),
    ("domain", "http://example.test/", True),
    ("domain", "http://example2.test/", False),
    ("domain", "http://www.example.org/", False),
    ("any", "http://anything.test/", True),
    ("any", "https://127.0.0.1:9/", True),
]


@pytest.mark.parametrize(("scope", "url", "expected"), SCOPE_TABLE)
def test_in_scope(scope: str, url: str, expected: bool) -> None:
    assert rule(scope=scope).in_scope(url) is expected


def test_in_scope_unparseable() -> None:
    assert rule(scope="any").in_scope("not a url") is False


def test_domain_scope_psl() -> None:
    r = rule("http://www.shop.co.uk/", scope="domain")
    assert r.in_scope("http://cdn.shop.co.uk/x")
    assert not r.in_scope("http://other.co.uk/x")
    r = rule("http://alice.github.io/", scope="domain")
    assert not r.in_scope("http://bob.github.io/")  # PSL private section


def test_host_scope_port_seed() -> None:
    r = rule("http://127.0.0.1:8080/")
    assert r.in_scope("http://127.0.0.1:8080/x")
    assert not r.in_scope("http://127.0.0.1/x")


def test_add_seed_extends_scope() -> None:
    r = rule()
    assert not r.in_scope("http://other.test/x")
    r.add_seed("http://other.test/")
    assert r.in_scope("http://other.test/x")
    with pytest.raises(ConfigError):
        r.add_seed("not a url")


INCLUDE_EXCLUDE = [
    # include, exclude, url, in scope?
    ((r"/blog/",), (), "http://www.example.test/blog/x", True),
    ((r"/blog/",), (), "http://www.example.test/shop/x", False),
    ((r"/blog/", r"/news/"), (), "http://www.example.test/news/1", True),
    ((), (r"\.pdf$",), "http://www.example.test/a.pdf", False),
    ((), (r"\.pdf$",), "http://www.example.test/a.pdf?x=1", True),
    ((r"/blog/",), (r"/blog/private",), "http://www.example.test/blog/private/1", False),
    ((r"/blog/",), (r"/blog/private",), "http://www.example.test/blog/public/1", True),
    ((r"(?i)/BLOG/",), (), "http://www.example.test/blog/x", True),
    ((r"\?page=\d+$",), (), "http://www.example.test/list?page=2", True),
]


@pytest.mark.parametrize(("include", "exclude", "url", "expected"), INCLUDE_EXCLUDE)
def test_include_exclude(
    include: tuple[str, ...], exclude: tuple[str, ...], url: str, expected: bool
) -> None:
    assert rule(include=include, exclude=exclude).in_scope(url) is expected


def test_patterns_see_the_canonical_url() -> None:
    r = rule(exclude=(r"jsessionid", r"#"))
    assert decide(r, "http://WWW.example.test/a;jsessionid=1#x") == (
        Decision.QUEUED,
        "http://www.example.test/a",
    )


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"include": ("(unclosed",)}, "include"),
        ({"exclude": ("[z-a]",)}, "exclude"),
        ({"include": ("ok", "*bad")}, "include"),
        ({"scope": "planet"}, "scope"),
    ],
)
def test_config_errors(kw: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as exc_info:
        rule(**kw)
    msg = str(exc_info.value)
    assert fragment in msg
    assert "\n" not in msg


def test_invalid_seed_is_config_error() -> None:
    with pytest.raises(ConfigError):
        ScopeRule(ScopeSettings(), ["mailto:x@y.test"])


# ----------------------------------------------------------------------------------------
# decide: every path, and the order of checks
# ----------------------------------------------------------------------------------------


def test_queued() -> None:
    assert decide(rule(), "http://WWW.EXAMPLE.TEST:80/a/./b#frag") == (
        Decision.QUEUED,
        "http://www.example.test/a/b",
    )


@pytest.mark.parametrize(
    "url",
    [None, "mailto:a@b.test", "javascript:void(0)", "ftp://www.example.test/", "/relative", ""],
)
def test_scheme(url: str | None) -> None:
    assert decide(rule(), url) == (Decision.SCHEME, None)


def test_url_length() -> None:
    r = rule(max_url_length=40)
    ok = "http://www.example.test/" + "a" * 16  # exactly 40 characters
    assert decide(r, ok) == (Decision.QUEUED, ok)
    long = ok + "b"
    assert decide(r, long) == (Decision.URL_LENGTH, long)
    # length is measured on the canonical URL (fragment and session ids removed)
    assert decide(r, ok + "#" + "x" * 100)[0] is Decision.QUEUED


def test_limit_per_page() -> None:
    r = rule(max_links_per_page=3)
    assert decide(r, SEED + "x", index=2)[0] is Decision.QUEUED
    assert decide(r, SEED + "x", index=3) == (Decision.LIMIT, SEED + "x")
    # seed pages use the same cap when max_seed_links is unset
    assert decide(r, SEED + "x", index=3, is_seed_page=True)[0] is Decision.LIMIT


def test_limit_seed_pages() -> None:
    r = rule(max_links_per_page=2, max_seed_links=5)
    assert decide(r, SEED + "x", index=4, is_seed_page=True)[0] is Decision.QUEUED
    assert decide(r, SEED + "x", index=5, is_seed_page=True)[0] is Decision.LIMIT
    assert decide(r, SEED + "x", index=2, is_seed_page=False)[0] is Decision.LIMIT
    r = rule(max_seed_links=1)  # no cap for other pages
    assert decide(r, SEED + "x", index=1, is_seed_page=True)[0] is Decision.LIMIT
    assert decide(r, SEED + "x", index=10_000, is_seed_page=False)[0] is Decision.QUEUED


def test_scope_decision() -> None:
    assert decide(rule(), "http://other.test/x") == (Decision.SCOPE, "http://other.test/x")
    r = rule(exclude=(r"/private/",))
    assert decide(r, SEED + "private/1")[0] is Decision.SCOPE


def test_nofollow() -> None:
    assert decide(rule(), SEED + "x", nofollow=True) == (Decision.NOFOLLOW, SEED + "x")
    assert decide(rule(follow_nofollow=True), SEED + "x", nofollow=True)[0] is Decision.QUEUED


def test_depth() -> None:
    r = rule(max_depth=2)
    assert decide(r, SEED + "x", depth=2)[0] is Decision.QUEUED
    assert decide(r, SEED + "x", depth=3) == (Decision.DEPTH, SEED + "x")
    r = rule(max_depth=0)
    assert decide(r, SEED + "x", depth=1)[0] is Decision.DEPTH
    assert decide(rule(), SEED + "x", depth=10_000)[0] is Decision.QUEUED


ORDER_TABLE = [
    # each row fails several checks; the first in the documented order wins
    ({"max_url_length": 10, "max_links_per_page": 0}, "mailto:x@y.test", {}, Decision.SCHEME),
    ({"max_url_length": 10, "max_links_per_page": 0}, SEED + "x", {}, Decision.URL_LENGTH),
    ({"max_links_per_page": 0}, "http://other.test/", {}, Decision.LIMIT),
    ({"max_depth": 0}, "http://other.test/", {"nofollow": True}, Decision.SCOPE),
    ({"max_depth": 0}, SEED + "x", {"nofollow": True}, Decision.NOFOLLOW),
    ({"max_depth": 0}, SEED + "x", {}, Decision.DEPTH),
]


@pytest.mark.parametrize(("kw", "url", "call", "expected"), ORDER_TABLE)
def test_decision_order(
    kw: dict[str, object], url: str, call: dict[str, bool], expected: Decision
) -> None:
    assert decide(rule(**kw), url, **call)[0] is expected


def test_decide_domain_scope_test_hosts() -> None:
    r = rule(scope="domain")
    assert decide(r, "http://a.example.test/p")[0] is Decision.QUEUED
    assert decide(r, "https://b.a.example.test:444/p")[0] is Decision.QUEUED
    assert decide(r, "http://example.other/p")[0] is Decision.SCOPE


@pytest.mark.parametrize(
    "kw,seed_page",
    [
        ({}, False),
        ({"max_links_per_page": 3}, False),
        ({"max_links_per_page": 5, "max_seed_links": 2}, True),
        ({"max_depth": 1, "exclude": ["/x"]}, False),
    ],
)
def test_decide_page_gives_decide_per_link(kw: dict[str, object], seed_page: bool) -> None:
    # repeated links are judged once, but the per-page cap still counts positions
    links = [
        ("http://a.test/p", False),
        ("http://a.test/p", False),
        ("http://a.test/p", True),
        ("http://other.test/", False),
        (None, False),
        ("http://a.test/x", False),
        ("http://a.test/p#f", False),
        ("http://a.test/p", False),
        ("mailto:a@b.test", False),
    ]
    r = rule("http://a.test/", **kw)
    want = [
        r.decide(u, depth=1, nofollow=nf, index=i, is_seed_page=seed_page)
        for i, (u, nf) in enumerate(links)
    ]
    assert r.decide_page(links, depth=1, is_seed_page=seed_page) == want
    assert (Decision.LIMIT in {d for d, _ in want}) == ("max_links_per_page" in kw)
    assert Decision.QUEUED in {d for d, _ in want}
