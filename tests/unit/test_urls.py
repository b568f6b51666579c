"""Tests for skitter.urls: joining, canonical form, keys and hosts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skitter.urls import (
    canonicalize,
    canonicalize_with_host,
    fingerprint,
    host_key,
    hostname,
    is_http,
    join,
    normalize_host,
    origin,
    registered_domain,
    split_fragment,
)

POST = "http://www.example.test/blog/post.html"
ROOT = "http://www.example.test/"

# ----------------------------------------------------------------------------------------
# join
# ----------------------------------------------------------------------------------------

# C05: whitespace, backslashes and spaces in hrefs.
JOIN_CASES = [
    (POST, "\n      /feeds/atom.xml\n    ", "http://www.example.test/feeds/atom.xml"),
    (POST, "/docs/getting-\nstarted.html", "http://www.example.test/docs/getting-started.html"),
    (POST, "/files/annual report.pdf", "http://www.example.test/files/annual%20report.pdf"),
    (POST, "..\\img\\logo.png", "http://www.example.test/img/logo.png"),
    (POST, "http:\\\\www.example.test\\about", "http://www.example.test/about"),
    (POST, "\t  https://other.example.test/x  ", "https://other.example.test/x"),
    # more WHATWG behaviour
    (POST, "other.html", "http://www.example.test/blog/other.html"),
    (POST, "?q=1", "http://www.example.test/blog/post.html?q=1"),
    (POST, "#top", "http://www.example.test/blog/post.html#top"),
    (POST, "#", "http://www.example.test/blog/post.html#"),
    (POST, "", "http://www.example.test/blog/post.html"),
    (POST, "//cdn.example.test/a.js", "http://cdn.example.test/a.js"),
    (POST, "\x00\x1f /a\x1f\x00 ", "http://www.example.test/a"),
    (POST, "/a\tb\rc\nd", "http://www.example.test/abcd"),
    (POST, "/caf\u00e9?q=\u00e9#\u00e9", "http://www.example.test/caf%C3%A9?q=%C3%A9#%C3%A9"),
    (POST, "http://EXAMPLE.test:80/", "http://example.test/"),
    (POST, "https://xn--n3h.test/", "https://xn--n3h.test/"),
    (POST, "http://\u2603.test/", "http://xn--n3h.test/"),
    (POST, "/x\ud800y", "http://www.example.test/x%EF%BF%BDy"),  # lone surrogate -> U+FFFD
    ("https://h.test/a/b", "mailto:a@b.test", "mailto:a@b.test"),
    ("https://h.test/a/b", "javascript:void(0)", "javascript:void(0)"),
    ("https://h.test/a/b", "http://", None),
    ("https://h.test/a/b", "http://a b.test/", None),
    ("https://h.test/a/b", "http://[::1/", None),
    ("not a url", "/x", None),
    ("not a url", "http://ok.test/x", None),  # invalid base fails (WHATWG URL constructor)
]


@pytest.mark.parametrize(("base", "href", "expected"), JOIN_CASES)
def test_join(base: str, href: str, expected: str | None) -> None:
    assert join(base, href) == expected


# C11: legacy encodings apply to the query only (path always UTF-8).
ENCODING_CASES = [
    (
        "cp1251",
        "/поиск?q=Привет",
        "http://www.example.test/%D0%BF%D0%BE%D0%B8%D1%81%D0%BA?q=%CF%F0%E8%E2%E5%F2",
    ),
    (
        "windows-1251",
        "/поиск?q=Привет",
        "http://www.example.test/%D0%BF%D0%BE%D0%B8%D1%81%D0%BA?q=%CF%F0%E8%E2%E5%F2",
    ),
    ("utf-8", "/поиск?q=Привет", join(ROOT, "/поиск?q=Привет")),
    # unencodable characters become a percent-encoded HTML NCR
    ("cp1251", "/s?q=中", "http://www.example.test/s?q=%26%2320013%3B"),
    ("latin-1", "/s?q=\u00fc\u20ac", "http://www.example.test/s?q=%FC%80"),  # WHATWG: cp1252
    ("windows-1252", "/s?q=caf\u00e9", "http://www.example.test/s?q=caf%E9"),
    ("gbk", "/s?q=中文", "http://www.example.test/s?q=%D6%D0%CE%C4"),
    # an ASCII trail byte outside the query percent-encode set stays raw, as in browsers
    ("shift_jis", "/s?q=日本", "http://www.example.test/s?q=%93%FA%96{"),
    # the fragment and the path stay UTF-8
    ("cp1251", "/я?я#я", "http://www.example.test/%D1%8F?%FF#%D1%8F"),
    ("cp1251", "/я#?я", "http://www.example.test/%D1%8F#?%D1%8F"),
    # ASCII in the query is untouched; existing escapes are kept
    ("cp1251", "/s?a=%41&b=я c", "http://www.example.test/s?a=%41&b=%FF%20c"),
    # ws/wss are not "special" enough: always UTF-8
    ("cp1251", "ws://h.test/?я", "ws://h.test/?%D1%8F"),
    # unknown encodings count as UTF-8
    ("no-such-codec", "/s?q=я", "http://www.example.test/s?q=%D1%8F"),
    ("base64", "/s?q=я", "http://www.example.test/s?q=%D1%8F"),
    ("rot13", "/s?q=я", "http://www.example.test/s?q=%D1%8F"),
    ("utf-16", "/s?q=я", "http://www.example.test/s?q=%D1%8F"),
]


@pytest.mark.parametrize(("encoding", "href", "expected"), ENCODING_CASES)
def test_join_query_encoding(encoding: str, href: str, expected: str | None) -> None:
    assert join(ROOT, href, encoding) == expected


def test_join_legacy_query_then_canonical() -> None:
    joined = join(ROOT, "/s?q=日本", "shift_jis")
    assert canonicalize(joined or "") == "http://www.example.test/s?q=%93%FA%96%7B"


# C07: non-http links.
NON_HTTP = [
    "mailto:someone@example.test",
    "MAILTO:SOMEONE@EXAMPLE.TEST",
    "tel:+1-555-0100",
    "data:text/plain,hello",
    "javascript:alert(1)",
    " javascript:void(0)",
    "ftp://ftp.example.test/pub/file.txt",
]


@pytest.mark.parametrize("href", NON_HTTP)
def test_non_http_links(href: str) -> None:
    joined = join(POST, href)
    assert joined is not None
    assert not joined.startswith("http")
    scheme = href.strip().split(":", 1)[0].lower()
    assert f"/{scheme}:" not in joined.lower()
    assert canonicalize(joined) is None
    assert not is_http(joined)


@pytest.mark.parametrize("href", ["#top", "#", ""])
def test_fragment_only_links_are_the_page(href: str) -> None:
    joined = join(POST, href)
    assert joined is not None
    assert canonicalize(joined) == canonicalize(POST) == POST


# ----------------------------------------------------------------------------------------
# canonicalize
# ----------------------------------------------------------------------------------------

C25_SAME = [
    "/a/c",
    "/a/./c",
    "/a/b/../c",
    "http://WWW.EXAMPLE.TEST:80/a/c",
    "//www.example.test/a/c",
    "/a/c#section-2",
    "/a/%63",
    "/../../a/c",
]
C25_OTHERS = ["/Product/ABC", "/product/abc", "/s?b=2&a=1", "/s?a=1&b=2", "/x", "/x/"]


@pytest.mark.parametrize("href", C25_SAME)
def test_c25_equivalent(href: str) -> None:
    assert canonicalize(join(ROOT, href) or "") == "http://www.example.test/a/c"


def test_c25_distinct() -> None:
    canon = {canonicalize(join(ROOT, h) or "") for h in C25_SAME + C25_OTHERS}
    assert None not in canon
    assert len(canon) == 7
    assert canonicalize(ROOT + "Product/ABC") != canonicalize(ROOT + "product/abc")
    assert canonicalize(ROOT + "s?b=2&a=1") == "http://www.example.test/s?b=2&a=1"
    assert canonicalize(ROOT + "x") != canonicalize(ROOT + "x/")


CANON_CASES = [
    # case, default ports, empty path, fragments
    ("HTTP://WWW.Example.TEST", "http://www.example.test/"),
    ("http://a.test:80/", "http://a.test/"),
    ("https://a.test:443/x", "https://a.test/x"),
    ("http://a.test:443/x", "http://a.test:443/x"),
    ("https://a.test:80/x", "https://a.test:80/x"),
    ("http://a.test:8080", "http://a.test:8080/"),
    ("http://a.test/x#frag", "http://a.test/x"),
    ("http://a.test/x?#frag", "http://a.test/x"),
    ("http://a.test/x?", "http://a.test/x"),
    # IDNA, IPs
    ("http://\u2603.test/", "http://xn--n3h.test/"),
    ("http://B\u00dcCHER.test/", "http://xn--bcher-kva.test/"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://[0:0::1]:8080/", "http://[::1]:8080/"),
    # dot segments
    ("http://a.test/a/b/../../../c", "http://a.test/c"),
    ("http://a.test/a/%2e%2E/c", "http://a.test/c"),
    ("http://a.test/a/./b/.", "http://a.test/a/b/"),
    # percent-encoding normalisation
    ("http://a.test/a/%63", "http://a.test/a/c"),
    ("http://a.test/%7e%41%5a%30%2D%2e%5F", "http://a.test/~AZ0-._"),
    ("http://a.test/%2f%3f%26%3d%23%25%3b", "http://a.test/%2F%3F%26%3D%23%25%3B"),
    ("http://a.test/?q=%7e%2f%e9", "http://a.test/?q=~%2F%E9"),
    ("http://a.test/%zz%", "http://a.test/%25zz%25"),
    ("http://a.test/%a%41?%%7e", "http://a.test/%25aA?%25~"),
    ("http://a.test/a b\u00e9", "http://a.test/a%20b%C3%A9"),
    ("http://a.test/[x]|y?q=[x]|{}^`\\", "http://a.test/%5Bx%5D%7Cy?q=%5Bx%5D%7C%7B%7D%5E%60%5C"),
    ("http://a.test/?q='\"<>", "http://a.test/?q=%27%22%3C%3E"),
    # query order, bare keys, case kept
    ("http://a.test/s?b=2&a=1", "http://a.test/s?b=2&a=1"),
    ("http://a.test/s?a&b=", "http://a.test/s?a&b="),
    ("http://a.test/S?Q=X", "http://a.test/S?Q=X"),
    ("http://a.test/s?a=1&&b=2", "http://a.test/s?a=1&&b=2"),
    # C23: session ids
    (
        "http://cal.example.test/list;jsessionid=0123456789abcdef0123456789abcdef.node7?page=2",
        "http://cal.example.test/list?page=2",
    ),
    (
        "http://cal.example.test/item?PHPSESSID=0123456789abcdef0123456789abcdef&id=7&sort=asc",
        "http://cal.example.test/item?id=7&sort=asc",
    ),
    ("http://a.test/x;JSESSIONID=AB12", "http://a.test/x"),
    ("http://a.test/x;phpsessid=ab12;v=2/y", "http://a.test/x;v=2/y"),
    ("http://a.test/x;jsessionid=1?sid=2", "http://a.test/x"),
    ("http://a.test/x?jsessionid=1&a=1", "http://a.test/x?a=1"),
    ("http://a.test/x?a=1&ASPSESSIONIDQSCTRDAB=X", "http://a.test/x?a=1"),
    ("http://a.test/x?ASP.NET_SessionId=x&b=2", "http://a.test/x?b=2"),
    ("http://a.test/x?sessionid=1&session_id=2&SID=3", "http://a.test/x"),
    ("http://a.test/x?CFID=1&CFTOKEN=2&cfide=3", "http://a.test/x?cfide=3"),
    ("http://a.test/x?PHPSESS%49D=1&k=v", "http://a.test/x?k=v"),
    ("http://a.test/x?sidebar=1&xsid=2&sid", "http://a.test/x?sidebar=1&xsid=2&sid"),
    ("http://a.test/a/.;jsessionid=1/b", "http://a.test/a/b"),
    # userinfo kept
    ("http://u:p@A.test/", "http://u:p@a.test/"),
    # not http(s) / unparseable
    ("ftp://a.test/", None),
    ("mailto:a@b.test", None),
    ("file:///etc/passwd", None),
    ("ws://a.test/", None),
    ("/relative/path", None),
    ("", None),
    ("http://", None),
    ("http://a b/", None),
]


@pytest.mark.parametrize(("url", "expected"), CANON_CASES)
def test_canonicalize(url: str, expected: str | None) -> None:
    got = canonicalize(url)
    assert got == expected
    if got is not None:
        assert canonicalize(got) == got


def test_canonicalize_with_host() -> None:
    assert canonicalize_with_host("HTTP://u@A.test:80/x#y") == ("http://u@a.test/x", "a.test")
    assert canonicalize_with_host("https://a.test:8443") == ("https://a.test:8443/", "a.test:8443")
    assert canonicalize_with_host("mailto:x@y.test") is None


# ----------------------------------------------------------------------------------------
# keys and hosts
# ----------------------------------------------------------------------------------------


def test_split_fragment() -> None:
    assert split_fragment("http://a.test/x?q#frag#more") == ("http://a.test/x?q", "frag#more")
    assert split_fragment("http://a.test/x#") == ("http://a.test/x", "")
    assert split_fragment("http://a.test/x") == ("http://a.test/x", "")


def test_fingerprint_stable() -> None:
    fp = fingerprint("http://www.example.test/")
    assert fp == 2695780232116742602
    assert fingerprint("http://www.example.test/a/c") == -4830994294048497967
    assert fingerprint("http://www.example.test/") == fp
    assert fingerprint("http://www.example.test/x") != fp


@given(st.text(max_size=200))
@settings(max_examples=300, deadline=None)
def test_fingerprint_range(s: str) -> None:
    fp = fingerprint(s)
    assert -(2**63) <= fp < 2**63


HOST_CASES = [
    # url, host_key, origin, hostname
    ("http://A.test:80/x", "a.test", "http://a.test", "a.test"),
    ("https://a.test:443/x", "a.test", "https://a.test", "a.test"),
    ("https://A.test/", "a.test", "https://a.test", "a.test"),
    ("http://a.test:8080/", "a.test:8080", "http://a.test:8080", "a.test"),
    ("http://a.test:443/", "a.test:443", "http://a.test:443", "a.test"),
    ("http://user:pw@a.test:81/", "a.test:81", "http://a.test:81", "a.test"),
    ("http://[::1]:8080/", "[::1]:8080", "http://[::1]:8080", "[::1]"),
    ("http://127.0.0.1/", "127.0.0.1", "http://127.0.0.1", "127.0.0.1"),
    ("http://\u2603.test/", "xn--n3h.test", "http://xn--n3h.test", "xn--n3h.test"),
]


@pytest.mark.parametrize(("url", "key", "org", "name"), HOST_CASES)
def test_hosts(url: str, key: str, org: str, name: str) -> None:
    assert host_key(url) == key
    assert origin(url) == org
    assert hostname(url) == name


@pytest.mark.parametrize("url", ["", "/x", "mailto:a@b.test", "http://", "not a url"])
def test_hosts_invalid(url: str) -> None:
    with pytest.raises(ValueError):
        host_key(url)
    with pytest.raises(ValueError):
        origin(url)
    with pytest.raises(ValueError):
        hostname(url)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.test/", True),
        ("HTTPS://a.test", True),
        ("ftp://a.test/", False),
        ("mailto:a@b.test", False),
        ("/x", False),
        ("", False),
    ],
)
def test_is_http(url: str, expected: bool) -> None:
    assert is_http(url) is expected


REGISTERED = [
    ("www.example.test", "example.test"),
    ("a.example.test", "example.test"),
    ("example.test", "example.test"),
    ("a.b.co.uk", "b.co.uk"),
    ("WWW.Example.COM", "example.com"),
    ("example.com.", "example.com"),
    ("foo.bar.example.org", "example.org"),
    ("alice.github.io", "alice.github.io"),  # PSL private section
    ("www.example.xn--p1ai", "example.xn--p1ai"),
    ("a.b.c.kawasaki.jp", "b.c.kawasaki.jp"),  # wildcard rule *.kawasaki.jp
    ("city.kawasaki.jp", "city.kawasaki.jp"),  # exception rule !city.kawasaki.jp
    ("co.uk", "co.uk"),
    ("127.0.0.1", "127.0.0.1"),
    ("[::1]", "[::1]"),
    ("localhost", "localhost"),
    ("", ""),
]


@pytest.mark.parametrize(("host", "expected"), REGISTERED)
def test_registered_domain(host: str, expected: str) -> None:
    assert registered_domain(host) == expected


def test_registered_domain_offline_and_no_cache(tmp_path: Path) -> None:
    """The PSL comes from tldextract's bundled snapshot: no network, nothing written to $HOME."""
    code = textwrap.dedent(
        """
        import socket
        def _no_net(*a, **k):
            raise AssertionError("network access attempted")
        socket.socket.connect = _no_net
        socket.create_connection = _no_net
        socket.getaddrinfo = _no_net
        from skitter.urls import registered_domain
        assert registered_domain("www.example.co.uk") == "example.co.uk"
        assert registered_domain("www.example.test") == "example.test"
        print("ok")
        """
    )
    env = dict(os.environ)
    env.update(
        HOME=str(tmp_path),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        TLDEXTRACT_CACHE=str(tmp_path / "tld"),
    )
    env.pop("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", None)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------
# properties
# ----------------------------------------------------------------------------------------

_seg_chars = st.sampled_from(
    [
        *"aZ09-._~!$&'()*+,;=:@%/?#[]{}|^`\\ \"<>\t\n",
        *["%2e", "%2E", "%2f", "%7e", "%41", "%zz", "%", "..", ".", "é", "☃", "\x00", "\x7f"],
    ]
)
_segment = st.lists(_seg_chars, max_size=6).map("".join)
_path = st.lists(
    st.one_of(
        _segment,
        st.sampled_from(["", ".", "..", "%2e%2e", ".;jsessionid=1", "x;jsessionid=AB.node7"]),
    ),
    max_size=5,
).map(lambda segs: "/" + "/".join(segs))
_param = st.one_of(
    st.tuples(
        st.sampled_from(["a", "B", "sid", "PHPSESSID", "jsessionid", "x", "%7e", "ASPSESSIONIDX"]),
        st.one_of(st.none(), _segment),
    ).map(lambda kv: kv[0] if kv[1] is None else f"{kv[0]}={kv[1]}"),
    _segment,
)
_query = st.one_of(st.none(), st.lists(_param, max_size=4).map("&".join))
_host = st.sampled_from(
    [
        "a.test",
        "WWW.Example.TEST",
        "\u2603.test",
        "xn--n3h.test",
        "127.0.0.1",
        "0x7f.1",
        "[::1]",
        "b\u00fccher.test",
        "a..b",
        "",
        "h%41.test",
    ]
)
_port = st.sampled_from(["", ":80", ":443", ":8080", ":", ":0", ":65536"])
_scheme = st.sampled_from(["http", "HTTPS", "https", "ftp", "mailto", "ws", "hTTp"])
_userinfo = st.sampled_from(["", "u@", "u:p@", ":@", "a%40b@"])
_fragment = st.one_of(st.none(), _segment)


@st.composite
def url_ish(draw: st.DrawFn) -> str:
    url = f"{draw(_scheme)}://{draw(_userinfo)}{draw(_host)}{draw(_port)}{draw(_path)}"
    q = draw(_query)
    if q is not None:
        url += "?" + q
    f = draw(_fragment)
    if f is not None:
        url += "#" + f
    return url


def _check_canonical(url: str) -> None:
    c = canonicalize(url)
    if c is None:
        return
    assert c.isascii()
    assert c.startswith(("http://", "https://"))
    assert "#" not in c
    assert canonicalize(c) == c, (url, c)
    assert canonicalize_with_host(c) == (c, host_key(c))


@given(url_ish())
@settings(max_examples=300, deadline=None)
def test_canonicalize_idempotent_urlish(url: str) -> None:
    _check_canonical(url)


@given(st.text(max_size=100))
@settings(max_examples=300, deadline=None)
def test_canonicalize_random_text(s: str) -> None:
    _check_canonical(s)
    _check_canonical("http://a.test/" + s)
    _check_canonical("http://a.test/?" + s)


@given(
    st.one_of(url_ish(), st.text(max_size=60)),
    st.sampled_from(["utf-8", "cp1251", "shift_jis", "gbk", "latin-1", "iso-2022-jp", "bogus"]),
)
@settings(max_examples=300, deadline=None)
def test_join_never_raises(href: str, encoding: str) -> None:
    got = join(POST, href, encoding)
    if got is not None:
        _check_canonical(got)
        assert "\t" not in got and "\n" not in got


# ----------------------------------------------------------------------------------------
# join: the cross-page cache of base-independent results (CPU work, issue 4)
# ----------------------------------------------------------------------------------------

_JOIN_BASES = [
    "http://a.test/x/y?q#f",
    "https://a.test:8443/",
    "http://a.test:80/p",
    "http://user:pw@a.test/x",
    "http://a.test:99999/x",  # invalid port: every join fails
    "http:///a.test/x",  # valid (host a.test), but its prefix alone is not
    "http://A.TEST/x",
    "http://[::1]/x",
    "http://a.test?q/x",
    "http://a.test#x/y",
    "mailto:x",
    "not a url",
    "http://a.test/\ud800",
    # relative paths are cached by the base's directory: bases that share one, or seem to
    "http://a.test/x/y/",
    "http://a.test/x/y/z.html?q=/w#f/g",
    "http://a.test/x/./y\\z?q/w",
    "http://a.test/x/%2e%2e/y/z",
    "http://a.test/a;p/b;q/c",
    "https://a.test:8443/d/e/f?x=/y#z/",
]
_HREF_PIECES = [
    "/", "//", "\\", "\t", "\n", " ", "a", ".", "..", "%2e", "?", "#", "é", "\ud800", "x:y",
    "http:", "//b.test", "http://", "https://", "HTTP://", "/./", "/../", "%", "@", ":80",
    "[", "'", '"', "<", "|", "\x00", "ß",
]  # fmt: skip


def _join_uncached(base: str, href: str, encoding: str) -> str | None:
    from skitter import urls

    return urls._join(base, urls._clean_input(href), encoding)


@given(
    st.sampled_from(_JOIN_BASES),
    st.lists(st.sampled_from(_HREF_PIECES), max_size=6).map("".join),
    st.sampled_from(["", "/", "http://", "https://b.test", "../", "./", "p/", "p?", "http:"]),
    st.sampled_from(["utf-8", "cp1251", "shift_jis", "latin-1"]),
)
@settings(max_examples=2000, deadline=None)
def test_join_cache_gives_the_uncached_result(
    base: str, href: str, lead: str, encoding: str
) -> None:
    href = lead + href
    assert join(base, href, encoding) == _join_uncached(base, href, encoding)
    assert join(base, href, encoding) == _join_uncached(base, href, encoding)  # cached now


def test_relative_paths_are_cached_by_the_base_directory() -> None:
    from skitter import url_join

    assert url_join._base_dir("http://a.test/x/y/z.html?q=/w#f/g") == "http://a.test/x/y/"
    assert url_join._base_dir("http://a.test/?q/x") == "http://a.test/"
    assert url_join._base_dir("http://a.test/x/./y\\z") is None  # not as WHATWG writes it
    assert url_join._base_dir("http://user:pw@a.test/x/y") is None  # not a plain prefix
    base1, base2 = "http://a.test/x/y/one.html?a=1", "http://a.test/x/y/two.html#top"
    assert join(base1, "../p.html?q") == join(base2, "../p.html?q") == "http://a.test/x/p.html?q"
    # a query or fragment alone keeps the rest of the base: never from the directory cache
    assert join(base1, "?b=2") == "http://a.test/x/y/one.html?b=2"
    assert join(base2, "?b=2") == "http://a.test/x/y/two.html?b=2"
    assert join(base1, "#s") == "http://a.test/x/y/one.html?a=1#s"
    assert join(base2, "") == "http://a.test/x/y/two.html"
    assert join(base1, "http:") == "http://a.test/x/y/one.html?a=1"  # same scheme: relative


def test_join_cache_keeps_base_validity() -> None:
    # an absolute href does not use the base, but an invalid base still fails the join
    assert join("http://a.test:99999/x", "http://b.test/") is None
    assert join("not a url", "http://b.test/") is None
    assert join("http:///a.test/x", "/y") == "http://a.test/y"
    assert join("http://user:pw@a.test/x", "/y") == "http://user:pw@a.test/y"
    assert join("http://a.test/x/y", "/p?q=é#f") == "http://a.test/p?q=%C3%A9#f"
    assert join("http://a.test/x/y", "/p?q=é", "latin-1") == "http://a.test/p?q=%E9"
    assert join("https://a.test/", "/p") == "https://a.test/p"
    assert join("http://b.test/", "/p") == "http://b.test/p"  # not a.test's cached result


@pytest.mark.parametrize(
    ("spelling", "host"),
    [
        ("WWW.Example.TEST", "www.example.test"),
        ("www.example.test.", "www.example.test"),
        ("www.example.test..", "www.example.test"),
        ("ｗｗｗ．ｅｘａｍｐｌｅ．ｔｅｓｔ", "www.example.test"),
        ("BÜCHER.example.test", "xn--bcher-kva.example.test"),
        ("xn--bcher-kva.example.test.", "xn--bcher-kva.example.test"),
        ("faß.test", "xn--fa-hia.test"),
        ("0x7f.1", "127.0.0.1"),
        ("::1", "[::1]"),
        ("[::1]", "[::1]"),
    ],
)
def test_normalize_host_spellings(spelling: str, host: str) -> None:
    assert normalize_host(spelling) == host


@pytest.mark.parametrize("bad", ["", ".", "a b", "a.test:80", "a/b", "u@a.test"])
def test_normalize_host_refuses(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid host"):
        normalize_host(bad)


@pytest.mark.parametrize(
    "url",
    [
        "http://WWW.Example.TEST./a",
        "http://www.example.test../a",
        "http://ｗｗｗ．ｅｘａｍｐｌｅ．ｔｅｓｔ/a",
        "http://www.example.test.:80/a",
    ],
)
def test_one_host_many_spellings_one_canonical_url(url: str) -> None:
    assert canonicalize_with_host(url) == ("http://www.example.test/a", "www.example.test")
    assert host_key(url) == "www.example.test"
    assert origin(url) == "http://www.example.test"
    assert hostname(url) == "www.example.test"
