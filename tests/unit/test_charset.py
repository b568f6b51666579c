"""Tests for skitter.charset: WHATWG labels, BOM/header/prescan/UTF-8/detector order."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skitter import charset
from skitter.charset import decode_html, normalize_label, prescan

RU = "Привет"


# --------------------------------------------------------------------------------------
# normalize_label (WHATWG Encoding Standard §4.2)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("utf-8", "utf-8"),
        ("UTF8", "utf-8"),
        ("unicode-1-1-utf-8", "utf-8"),
        ("latin1", "cp1252"),
        ("ISO-8859-1", "cp1252"),
        ("iso_8859-1:1987", "cp1252"),
        ("us-ascii", "cp1252"),
        ("ascii", "cp1252"),
        ("windows-1252", "cp1252"),
        ("windows-1251", "cp1251"),
        ("cp1251", "cp1251"),
        ("x-cp1251", "cp1251"),
        ("iso-8859-9", "cp1254"),
        ("tis-620", "cp874"),
        ("gb2312", "gb18030"),
        ("GBK", "gb18030"),
        ("gb18030", "gb18030"),
        ("shift_jis", "cp932"),
        ("x-sjis", "cp932"),
        ("windows-31j", "cp932"),
        ("euc-jp", "euc_jp"),
        ("iso-2022-jp", "iso2022_jp"),
        ("euc-kr", "cp949"),
        ("ks_c_5601-1987", "cp949"),
        ("big5", "big5hkscs"),
        ("koi8-r", "koi8-r"),
        ("koi8-u", "koi8-u"),
        ("iso-8859-2", "iso8859-2"),
        ("iso-8859-8-i", "iso8859-8"),
        ("x-mac-cyrillic", "mac-cyrillic"),
        ("utf-16", "utf-16-le"),
        ("utf-16be", "utf-16-be"),
        ("x-user-defined", "cp1252"),
        ("  \t latin1 \n", "cp1252"),
    ],
)
def test_normalize_label_whatwg(label: str, codec: str) -> None:
    assert normalize_label(label) == codec
    codecs.lookup(codec)  # a real Python codec


@pytest.mark.parametrize(
    "label",
    [
        "",
        "bogus",
        "utf-7",
        "utf-32",
        "latin-1 ",
        "base64",
        "rot13",
        "iso-2022-kr",
        "hz-gb-2312",
        "replacement",
        "windows-1252;",
        "utf 8",
    ],
)
def test_normalize_label_unknown(label: str) -> None:
    # WHATWG knows "latin1" but not "latin-1"; "utf-7"/"utf-32" are not web encodings.
    assert normalize_label(label) is None


# --------------------------------------------------------------------------------------
# prescan (HTML Standard §13.2.3.2)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "codec"),
    [
        (b'<meta charset="windows-1251">', "cp1251"),
        (b"<META CHARSET=KOI8-R>", "koi8-r"),
        (b"<meta charset='  shift_jis  '>", "cp932"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">', "cp1251"),
        (b"<meta content='text/html;charset=\"gb2312\"' http-equiv=content-type>", "gb18030"),
        (b"<meta http-equiv=Content-Type content='text/html; charset = euc-jp'>", "euc_jp"),
        # utf-16 in a meta means utf-8 (the bytes parsed as ASCII already).
        (b'<meta charset="utf-16">', "utf-8"),
        (b'<meta charset="UTF-16BE">', "utf-8"),
        (b'<meta charset="x-user-defined">', "cp1252"),
        # comments and attribute values are skipped.
        (b"<!-- <meta charset=cp1251> --><meta charset=iso-8859-2>", "iso8859-2"),
        (b"<!--><meta charset=cp1251>", "cp1251"),
        (b'<div title="<meta charset=cp1251>"><meta charset=koi8-u>', "koi8-u"),
        (b'<?xml version="1.0"?><!DOCTYPE html><html><head><meta charset=cp1250>', "cp1250"),
        # an unknown charset makes that meta useless; the next one counts.
        (b"<meta charset=bogus><meta charset=cp1253>", "cp1253"),
        # first duplicate attribute wins.
        (b"<meta charset=cp1251 charset=koi8-r>", "cp1251"),
    ],
)
def test_prescan_finds(head: bytes, codec: str) -> None:
    assert prescan(head) == codec


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"<html><head><title>x</title></head>",
        # content without http-equiv=content-type: need pragma not satisfied.
        b'<meta content="text/html; charset=windows-1251">',
        b'<meta http-equiv="refresh" content="0; charset=windows-1251">',
        b"<!-- <meta charset=cp1251> -->",
        b"<meta charset=cp1251",  # cut off
        b'<meta charset="cp1251>',  # unterminated quote
        b"<metacharset=cp1251>",
        b'<meta name="description" content="charset=cp1251">',
    ],
)
def test_prescan_finds_nothing(head: bytes) -> None:
    assert prescan(head) is None


def test_prescan_only_first_1024_bytes() -> None:
    late = b"<!doctype html>" + b" " * 1100 + b"<meta charset=cp1251>"
    assert prescan(late) is None
    early = b"<!doctype html>" + b" " * 900 + b"<meta charset=cp1251>"
    assert prescan(early) == "cp1251"


# --------------------------------------------------------------------------------------
# decode_html: order of the steps
# --------------------------------------------------------------------------------------


def test_bom_wins_over_header_and_is_removed() -> None:
    body = codecs.BOM_UTF8 + f"<title>{RU}</title>".encode()
    text, codec = decode_html(body, "text/html; charset=windows-1251")
    assert (text, codec) == (f"<title>{RU}</title>", "utf-8")
    assert "\ufeff" not in text


@pytest.mark.parametrize(
    ("bom", "codec"), [(codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")]
)
def test_utf16_bom(bom: bytes, codec: str) -> None:
    body = bom + f"<meta charset=cp1251><p>{RU}</p>".encode(codec)
    assert decode_html(body, "text/html; charset=iso-8859-1") == (
        f"<meta charset=cp1251><p>{RU}</p>",
        codec,
    )


def test_header_charset_wins_over_meta() -> None:
    body = f'<meta charset="windows-1251"><title>{RU}</title>'.encode()
    assert decode_html(body, "text/html; charset=utf-8") == (body.decode(), "utf-8")


@pytest.mark.parametrize(
    "ct",
    [
        "text/html; charset=windows-1251",
        "text/html;charset=WINDOWS-1251",
        'text/html; charset="windows-1251"',
        "text/html; foo=bar; charset=cp1251; q=1",
        "text/html ; Charset = windows-1251 ",
    ],
)
def test_header_charset_forms(ct: str) -> None:
    assert decode_html(RU.encode("cp1251"), ct) == (RU, "cp1251")


def test_unknown_header_label_falls_through_to_meta() -> None:
    body = f"<meta charset=windows-1251><b>{RU}</b>".encode("cp1251")
    assert decode_html(body, "text/html; charset=x-bogus")[1] == "cp1251"
    # and without a meta: valid UTF-8 -> utf-8
    assert decode_html(RU.encode(), "text/html; charset=x-bogus") == (RU, "utf-8")


def test_meta_http_equiv_when_header_has_no_charset() -> None:
    body = (
        '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251"><title>'
        + RU
        + "</title>"
    ).encode("cp1251")
    text, codec = decode_html(body, "text/html")
    assert codec == "cp1251"
    assert f"<title>{RU}</title>" in text


def test_meta_declaring_ascii_means_windows_1252() -> None:
    body = b'<meta charset="us-ascii"><p>caf\xe9 \x80</p>'
    assert decode_html(body, None) == ('<meta charset="us-ascii"><p>café €</p>', "cp1252")


def test_valid_utf8_without_declaration() -> None:
    assert decode_html(f"<title>{RU}</title>".encode(), None) == (f"<title>{RU}</title>", "utf-8")
    assert decode_html(b"<p>plain ascii</p>", None) == ("<p>plain ascii</p>", "utf-8")
    assert decode_html(b"", None) == ("", "utf-8")


def test_truncated_utf8_tail_still_utf8() -> None:
    body = ("x" * 100 + RU).encode()[:-1]  # last character cut in half
    text, codec = decode_html(body, None)
    assert codec == "utf-8"
    assert text == "x" * 100 + RU[:-1] + "\ufffd"


def test_detector_not_run_for_utf8_or_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(data: bytes) -> str | None:
        raise AssertionError("detector must not run")

    monkeypatch.setattr(charset, "_detect", boom)
    decode_html(f"<p>{RU}</p>".encode(), None)
    decode_html(b"<p>ascii</p>", "text/html")
    decode_html(RU.encode("cp1251"), "text/html; charset=cp1251")
    decode_html(b"<meta charset=cp1251>" + RU.encode("cp1251"), None)


def test_detector_failure_falls_back_to_windows_1252(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(data: bytes) -> str | None:
        raise RuntimeError("detector crashed")

    monkeypatch.setattr(charset, "_detect", broken)
    assert decode_html(b"caf\xe9", None) == ("café", "cp1252")
    monkeypatch.setattr(charset, "_detect", lambda data: None)
    assert decode_html(b"caf\xe9", None) == ("café", "cp1252")
    # a UTF-16 guess without a BOM is not trusted
    monkeypatch.setattr(charset, "_detect", lambda data: "UTF-16LE")
    assert decode_html(b"caf\xe9", None) == ("café", "cp1252")
    monkeypatch.setattr(charset, "_detect", lambda data: "made-up")
    assert decode_html(b"caf\xe9", None) == ("café", "cp1252")


# --------------------------------------------------------------------------------------
# Undeclared legacy encodings: what a browser shows (detector, long enough text)
# --------------------------------------------------------------------------------------

JA = (
    "<html><head><title>日本語のページ</title></head><body><p>これは日本語で書かれたテスト"
    "ページです。東京は日本の首都です。私たちはウェブクローラーを作っています。</p>"
    "<a href='/x'>リンク</a></body></html>"
)
ZH = (
    "<html><head><title>中文网页</title></head><body><p>这是一个用中文写的测试页面。"
    "北京是中国的首都。我们正在编写一个网络爬虫程序。</p><a href='/x'>链接</a></body></html>"
)
ZH_HANT = (
    "<html><head><title>中文網頁</title></head><body><p>這是一個用中文寫的測試頁面。"
    "台北是一個美麗的城市。我們正在編寫一個網路爬蟲程式。</p></body></html>"
)
FR = (
    "<html><head><title>Café crème</title></head><body><p>Le café est très bon à Paris. "
    "Où est la bibliothèque? Ça va très bien, merci. Les élèves étudient le français à "
    "l'école.</p></body></html>"
)
DE = (
    "<html><body><p>Grüße aus München! Die Straße ist schön. Der Bär läuft über die "
    "Brücke, während die Kätzchen spielen.</p></body></html>"
)
RU_PAGE = (
    f"<html><head><title>{RU}</title></head><body><p>Это тестовая страница на русском "
    "языке. Москва является столицей России. Мы пишем поискового робота.</p></body></html>"
)
KO = (
    "<html><body><p>안녕하세요. 이것은 한국어로 작성된 테스트 페이지입니다. "
    "서울은 한국의 수도입니다.</p></body></html>"
)


@pytest.mark.parametrize(
    ("page", "encoding", "expected_codec"),
    [
        (JA, "shift_jis", "cp932"),
        (JA, "euc_jp", "euc_jp"),
        (ZH, "gbk", "gb18030"),
        (ZH_HANT, "big5", "big5hkscs"),
        (FR, "latin-1", "cp1252"),
        (FR + "€", "cp1252", "cp1252"),
        (DE, "latin-1", "cp1252"),
        (RU_PAGE, "cp1251", "cp1251"),
        (RU_PAGE, "koi8_r", "koi8-r"),
        (KO, "euc_kr", "cp949"),
    ],
)
def test_undeclared_legacy_encodings_detected(
    page: str, encoding: str, expected_codec: str
) -> None:
    text, codec = decode_html(page.encode(encoding), "text/html")
    assert text == page
    assert codec == expected_codec


# --------------------------------------------------------------------------------------
# Never raises
# --------------------------------------------------------------------------------------

_CTS = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.sampled_from(
        [
            "text/html",
            "text/html; charset=",
            'text/html; charset="',
            "text/html; charset=utf-16",
            "text/html; charset=iso-2022-jp",
            "text/html; charset=utf-8",
            "text/html; charset=x-user-defined",
            ";charset=big5",
        ]
    ),
)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=3000), content_type=_CTS)
def test_decode_never_raises(body: bytes, content_type: str | None) -> None:
    text, codec = decode_html(body, content_type)
    assert isinstance(text, str)
    codecs.lookup(codec)
    text.encode("utf-8")  # no lone surrogates


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.sampled_from(
        [
            b"",
            b"<meta charset=",
            b"<meta http-equiv=content-type content=",
            b"<!--",
            b"<meta ",
            b"<a b='",
        ]
    ),
    body=st.binary(max_size=1200),
)
def test_prescan_never_raises(prefix: bytes, body: bytes) -> None:
    result = prescan(prefix + body)
    assert result is None or codecs.lookup(result)
