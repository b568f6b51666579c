"""Fuzz: random bytes and strings into every parser of untrusted input.

What a server controls -- HTML bodies, robots.txt, header values (Location, Retry-After,
Content-Type, Content-Encoding, X-Robots-Tag, refresh), URLs -- goes through the parsers and
the canonicaliser here. Properties: nothing raises (except the documented errors of the
content decoder), and canonicalisation is idempotent. Bounded: a few hundred examples per
test, no deadline (the first examples pay for imports and parser start-up).
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skitter.charset import decode_html, normalize_label, prescan
from skitter.errors import BodyTooLarge, ProtocolError
from skitter.fetch.decode import ContentDecoder, parse_content_encoding
from skitter.links import extract, parse_refresh, parse_robots_directives
from skitter.models import Response
from skitter.politeness import parse_retry_after
from skitter.redirects import location_target
from skitter.robots import RobotsRules, agent_key, product_token
from skitter.settings import ScopeSettings
from skitter.traps import TrapGuard
from skitter.urls import (
    canonicalize,
    canonicalize_with_host,
    host_key,
    is_http,
    join,
    split_fragment,
)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BASES = st.sampled_from(
    [
        "http://www.example.test/dir/page.html?q=1",
        "https://a.example.test:8443/",
        "http://[::1]:8080/x/",
        "http://127.0.0.1/",
    ]
)

#: Text biased towards URL syntax, so the interesting branches are reached.
_URL_ALPHABET = string.ascii_letters + string.digits + "/?#&=;:@%.-_~+!$'()*,[]\\ \t\n\x00é€😀"
url_text = st.one_of(
    st.text(alphabet=_URL_ALPHABET, max_size=80),
    st.text(max_size=60),
    st.builds(
        lambda scheme, host, path: f"{scheme}{host}{path}",
        st.sampled_from(["http://", "HTTPS://", "http:\\\\", "//", "ftp://", "", "http:"]),
        st.text(alphabet=string.ascii_letters + string.digits + ".-:[]%@", max_size=20),
        st.text(alphabet=_URL_ALPHABET, max_size=40),
    ),
)

#: Bytes biased towards HTML syntax.
_HTML_PIECES = st.sampled_from(
    [
        b"<a href='",
        b'<a href="',
        b"<base href=",
        b"<meta http-equiv=refresh content='0;url=",
        b'<meta charset="',
        b"<!--",
        b"-->",
        b"<noscript>",
        b"<template>",
        b"</",
        b">",
        b'"',
        b"\xef\xbb\xbf",
        b"\xff\xfe",
        b"<iframe src=",
        b"<svg><a xlink:href=",
        b"<link rel=canonical href=",
        b"<title>",
        b"windows-1251",
        b"utf-16",
    ]
)
html_bytes = st.one_of(
    st.binary(max_size=2000),
    st.lists(st.one_of(_HTML_PIECES, st.binary(max_size=12)), max_size=60).map(b"".join),
)
header_value = st.one_of(
    st.text(max_size=60), st.binary(max_size=60).map(lambda b: b.decode("latin-1"))
)


@FUZZ
@given(body=html_bytes, base=BASES, content_type=st.one_of(st.none(), header_value))
def test_extract_never_raises(body: bytes, base: str, content_type: str | None) -> None:
    page = extract(body, base, content_type, ["noindex, nofollow", "bot: none"])
    for link in page.links:
        if link.url is not None:
            c = canonicalize(link.url)
            assert c is None or canonicalize(c) == c


@FUZZ
@given(body=html_bytes, content_type=st.one_of(st.none(), header_value))
def test_charset_never_raises(body: bytes, content_type: str | None) -> None:
    text, encoding = decode_html(body, content_type)
    assert isinstance(text, str) and encoding
    prescan(body[:1024])
    if content_type is not None:
        normalize_label(content_type)


@FUZZ
@given(
    body=st.one_of(
        st.binary(max_size=1500),
        st.lists(
            st.sampled_from(
                [
                    b"User-agent: *\n",
                    b"User-agent: testcrawler\n",
                    b"Disallow: /",
                    b"Allow: /",
                    b"*",
                    b"$",
                    b"%",
                    b"\r",
                    b"\n",
                    b"#",
                    b"\xef\xbb\xbf",
                    b"\xfc",
                    b"Crawl-delay: ",
                    b"Sitemap: ",
                    b"\x00",
                ]
            ),
            max_size=60,
        ).map(b"".join),
    ),
    url=url_text,
    ua=header_value,
)
def test_robots_never_raises(body: bytes, url: str, ua: str) -> None:
    rules = RobotsRules.parse(body, max_bytes=1000)
    token = product_token(ua)
    agent_key(ua)
    assert isinstance(rules.allowed(url, token), bool)
    assert isinstance(rules.allowed("http://h.test/" + url, "testcrawler"), bool)
    rules.crawl_delay(token)
    assert isinstance(rules.sitemaps, list)


@FUZZ
@given(base=BASES, location=header_value, retry_after=header_value, now=st.floats(0, 4e9))
def test_header_parsers_never_raise(base: str, location: str, retry_after: str, now: float) -> None:
    target = location_target(base, location)
    if target is not None:
        c = canonicalize(target)
        assert c is None or canonicalize(c) == c
    wait = parse_retry_after(retry_after, now)
    assert wait is None or wait >= 0.0
    parse_refresh(location)
    parse_robots_directives([location, retry_after], ["testcrawler"])
    parse_content_encoding([location, retry_after])
    r = Response(url=base, status=200, headers=(("Content-Type", location),))
    ct = r.content_type
    assert ct is None or ct == ct.strip().lower()


@FUZZ
@given(
    codings=st.lists(
        st.sampled_from(["gzip", "x-gzip", "deflate", "br", "zstd", "identity", "bogus", ""]),
        max_size=3,
    ),
    chunks=st.lists(
        st.one_of(
            st.binary(max_size=200),
            st.sampled_from([b"\x1f\x8b\x08\x00", b"\x78\x9c", b"\x28\xb5\x2f\xfd", b"\x0b"]),
        ),
        max_size=6,
    ),
)
def test_content_decoder_raises_only_its_documented_errors(
    codings: list[str], chunks: list[bytes]
) -> None:
    dec = ContentDecoder(codings, max_bytes=4096)
    try:
        for chunk in chunks:
            dec.feed(chunk)
        out = dec.finish()
    except (BodyTooLarge, ProtocolError):
        return
    assert len(out) <= 4096


@FUZZ
@given(url=url_text, base=BASES)
def test_urls_never_raise_and_canonical_form_is_idempotent(url: str, base: str) -> None:
    for candidate in (url, join(base, url), join(base, url, "cp1251"), join(base, url, "gbk")):
        if candidate is None:
            continue
        c = canonicalize(candidate)
        is_http(candidate)
        split_fragment(candidate)
        if c is None:
            assert canonicalize_with_host(candidate) is None
            continue
        assert canonicalize(c) == c
        assert c.isascii() and "#" not in c
        res = canonicalize_with_host(candidate)
        assert res is not None and res[0] == c and res[1] == host_key(c)
        TrapGuard(ScopeSettings(max_pages_per_host=3)).admit(c)  # must not raise either
