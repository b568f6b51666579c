"""skitter.url_simple: string resolution of plain URLs gives exactly ada-url's (WHATWG) result."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skitter.url_join import _parse_href
from skitter.url_simple import is_serialized, resolve_simple

_HOSTS = ["a.test", "h0001.test", "A.test", "xn--a.test", "a.xn--b", "1.2.3.4", "a.0x1f",
          "a.1", "a-.b", "-a.b", "a..b", "a.b.", "localhost", "a_b.test", "a.B1"]  # fmt: skip
_PORTS = ["", ":80", ":443", ":8080", ":0", ":08", ":65535", ":65536", ":99999", ":", ":1"]
_PIECES = ["a", "B", "0", "/", ".", "..", "./", "../", "%2e", "%41", "?", "#", ":", "@", "'",
           "-", "_", "~", "!", "$", "&", "(", "*", "+", ",", ";", "=", " ", "\\", "é", "|",
           "[", "`", "{", '"', "<", "p.html", "x?y=1", "%"]  # fmt: skip

_SIMPLE = [p for p in _PIECES if p.isascii() and not set(p) & set("%' \\|[`{\"<")]
# half the strings of simple pieces only (the fast path), half of any
pieces = st.one_of(
    st.lists(st.sampled_from(_SIMPLE), max_size=8).map("".join),
    st.lists(st.sampled_from(_PIECES), max_size=8).map("".join),
)


def _serialized_base(scheme: str, host: str, port: str, path: str) -> str | None:
    href = _parse_href(f"{scheme}://{host}{port}/{path}")
    return href


@given(
    st.sampled_from(["http", "https"]),
    st.sampled_from(_HOSTS),
    st.sampled_from(_PORTS),
    pieces,
    st.sampled_from(["", "/", "../", "./", "a/", "/a/../", "?", "#"]),
    pieces,
)
@settings(max_examples=1500, deadline=None)
def test_resolve_simple_matches_the_whatwg_parser(
    scheme: str, host: str, port: str, base_path: str, lead: str, rest: str
) -> None:
    base = _serialized_base(scheme, host, port, base_path)
    if base is None:
        return
    href = (lead + rest).strip()
    if not href or href[0] in "?#" or href.startswith("//") or ":" in href.partition("/")[0]:
        return
    # the base forms join passes: origin + "/" for "/x", the folder for "x"
    authority_end = base.find("/", base.find("//") + 2)
    qf = [i for i in (base.find("?"), base.find("#")) if i >= 0]
    folder = base[: base.rfind("/", 0, min(qf) if qf else len(base)) + 1]
    ref_base = base[: authority_end + 1] if href.startswith("/") else folder
    got = resolve_simple(ref_base, href)
    if got is not None:
        assert got == _parse_href(href, base), (base, href)


@given(
    st.sampled_from(["http", "https", "HTTP", "ftp"]),
    st.sampled_from(_HOSTS[:2] * 6 + _HOSTS),
    st.sampled_from(_PORTS),
    pieces,
)
@settings(max_examples=1500, deadline=None)
def test_is_serialized_only_when_the_parser_gives_the_input_back(
    scheme: str, host: str, port: str, rest: str
) -> None:
    url = f"{scheme}://{host}{port}/{rest}"
    if is_serialized(url):
        assert _parse_href(url) == url


def test_plain_links_take_the_string_path() -> None:
    # the common shapes must be recognised, or the fast path never runs
    assert is_serialized("http://h0001.test:8080/shop/p00003.html?ref=a&b=1#s2")
    assert is_serialized("https://www.example.com/")
    assert (
        resolve_simple("http://h.test/a/b/", "../news/p.html#s9")
        == "http://h.test/a/news/p.html#s9"
    )
    assert resolve_simple("http://h.test/", "/x/./y/..?q=1") == "http://h.test/x/?q=1"
    assert resolve_simple("http://h.test/a/", "..") == "http://h.test/"
    assert resolve_simple("http://h.test/a/", "../../..") == "http://h.test/"
    # leading "../" climb the folder one segment each, never past the root
    assert resolve_simple("http://h.test/a/b/c/", "../../x/../y.html") == "http://h.test/a/y.html"
    assert resolve_simple("http://h.test:8080/a/", "../../../x?q#f") == "http://h.test:8080/x?q#f"
    assert resolve_simple("http://h.test/a/b/", "../..x/./y") == "http://h.test/a/..x/y"


def test_what_is_not_simple_is_left_to_the_parser() -> None:
    assert not is_serialized("http://h.test:80/")  # default port dropped
    assert not is_serialized("http://H.test/")  # host lower-cased
    assert not is_serialized("http://h.test")  # "/" added
    assert not is_serialized("http://h.test/a/../b")  # dot segment removed
    assert not is_serialized("http://1.2.3.4/")  # IPv4 (kept, but not recognised)
    assert not is_serialized("http://a.xn--b/")  # Punycode checked by the parser
    assert not is_serialized("http://h.test:080/")  # leading zero dropped
    assert resolve_simple("http://h.test/", "/a%2e/") is None
    assert resolve_simple("http://h.test/", "/a b") is None
    assert resolve_simple("http://h.test/", "/a?it's") is None


_QUERIES = ["", "?", "?a=1", "?sid=2", "?a=1&PHPSESSID=x", "?jsessionid", "?x=sid=1", "?a&b="]
_FRAGMENTS = ["", "#", "#s2", "#a?b"]
_PATHS = ["/", "/a/b.html", "/a;jsessionid=1/b", "/a;x=1", "/.;sid=2/x", "/a/./b", "/A%2e"]
#: scheme, host, port, path, query of a generated URL
_URL_PARTS = (
    st.sampled_from(["http", "https"]),
    st.sampled_from(_HOSTS[:2] * 6 + _HOSTS),
    st.sampled_from(_PORTS),
    st.sampled_from(_PATHS),
    st.sampled_from(_QUERIES),
)


@given(*_URL_PARTS, st.sampled_from(_FRAGMENTS))
@settings(max_examples=1000, deadline=None)
def test_canonical_of_a_plain_url_is_the_parsed_one(
    scheme: str, host: str, port: str, path: str, query: str, fragment: str
) -> None:
    from skitter.urls import _canonicalize_parsed, canonicalize_with_host

    url = f"{scheme}://{host}{port}{path}{query}{fragment}"
    assert canonicalize_with_host(url) == _canonicalize_parsed(url), url


@given(*_URL_PARTS)
@settings(max_examples=500, deadline=None)
def test_host_key_and_origin_of_a_plain_url_are_the_parsed_ones(
    scheme: str, host: str, port: str, path: str, query: str
) -> None:
    from skitter import urls

    url = f"{scheme}://{host}{port}{path}{query}"
    parsed = urls._parse(url)
    if parsed is None or not urls._strip_host_dots(str(parsed.host)).strip(":"):
        return
    want = str(parsed.protocol)[:-1], urls._strip_host_dots(str(parsed.host))
    assert urls._host_of(url) == want, url


def test_join_caches_plain_resolutions_per_base_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """join's memos of plain references: by the base's directory (or prefix), then by href,
    so pages of one folder share them; the same results as the parser, bounded (all memos
    together)."""
    import skitter.url_join as uj

    def entries() -> int:
        return sum(len(m) for m in uj._MEMOS.values())

    def forget() -> None:
        uj._MEMOS.clear()
        monkeypatch.setattr(uj, "_entries", 0)

    monkeypatch.setattr(uj, "RESOLVED_CACHE_ENTRIES", 3)
    forget()
    cases = [
        ("http://h.test/a/b/page.html?q", "../x.html#f"),
        ("http://h.test/a/b/other.html", "../x.html#f"),  # same directory: a cache hit
        ("http://h.test/a/c/page.html", "../x.html#f"),
        ("http://h.test:8080/a/b/", "/root?x=1"),
        ("http://h.test:8080/z/", "/root?x=1"),  # same prefix: a hit
        ("http://h.test/a/b/", "./y/../z"),
        ("https://h.test/", "w%20x"),  # not plain: the parser, not cached
        ("https://h.test/", "http://o.test/p"),  # its own serialisation: remembered
    ]
    for _ in range(2):
        for base, href in cases:
            assert uj.join(base, href) == _parse_href(href, base), (base, href)
            assert uj.Joiner(base).join(href) == _parse_href(href, base), (base, href)
            assert entries() <= 3
            assert uj._entries == entries()
    assert all("w%20x" not in m for m in uj._MEMOS.values())
    forget()
    assert uj.join(*cases[0]) == "http://h.test/a/x.html#f"
    assert uj._MEMOS == {"http://h.test/a/b/": {"../x.html#f": "http://h.test/a/x.html#f"}}
    assert uj.join(*cases[3]) == "http://h.test:8080/root?x=1"
    assert uj._MEMOS["http://h.test:8080"] == {"/root?x=1": "http://h.test:8080/root?x=1"}
    assert uj.join(*cases[7]) == "http://o.test/p"
    assert uj._MEMOS[""] == {"http://o.test/p": "http://o.test/p"}


_BASES = [
    "http://h.test/a/b/page.html?q#f",
    "http://h.test:8080/",
    "https://h.test/a/",
    "http://user:pw@h.test/x/y",  # not a plain prefix: join parses every href
    "http://h.test/a/./b\\c",  # not its own serialisation: no directory memo
    "file:///tmp/x.html",
    "not a url",
]
_HREF_PIECES = ["/", "//", "/\\", "\\", "a", "x.html", "..", ".", "?q=1", "#f", " ", "\t",
                "\n", "http://o.test/p", "http:x", "https://O.test:443/", "é", "%41", ":",
                "mailto:a@b", "HTTP://o.test/", "https://o.test/a b"]  # fmt: skip


@given(
    st.lists(
        st.tuples(
            st.sampled_from(_BASES),
            st.lists(st.sampled_from(_HREF_PIECES), max_size=5).map("".join),
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(min_value=1, max_value=8),
)
@settings(max_examples=400, deadline=None)
def test_joiner_is_join(pairs: list[tuple[str, str]], limit: int) -> None:
    """A Joiner gives the parser's result for every href, whatever its memos hold (hrefs with
    spaces and tabs to clean, "//" and "/\\" hrefs, absolute, relative, odd bases), also
    while small memos are emptied again and again."""
    import skitter.url_join as uj

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(uj, "RESOLVED_CACHE_ENTRIES", limit)
        for base, href in pairs:
            joiner = uj.Joiner(base, "utf-8")
            expected = uj._join(base, uj._clean_input(href), "utf-8")  # parsed, no memo
            assert joiner.join(href) == expected, (base, href)
            assert joiner.join(href) == uj.join(base, href) == expected
