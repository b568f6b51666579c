"""Decoding HTML bytes to text the way a browser does.

The encoding is chosen per the HTML Standard §13.2.3 ("Determining the character encoding")
with the labels of the WHATWG Encoding Standard §4.2 ("Names and labels"):

1. a byte order mark (UTF-8, UTF-16LE, UTF-16BE), which is removed from the text;
2. the ``charset`` parameter of the Content-Type header;
3. the HTML prescan of the first 1024 bytes (``<meta charset>`` and
   ``<meta http-equiv=Content-Type content="...; charset=...">``);
4. UTF-8, if the whole body is valid UTF-8 (also pure ASCII);
5. a frequency-analysis detector (resiliparse / uchardet; charset-normalizer if absent);
6. windows-1252.

Decoding always uses ``errors="replace"``: no function here raises for any input bytes.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

__all__ = ["decode_html", "normalize_label", "prescan"]

# WHATWG Encoding Standard §4.2: encoding name -> labels.  Values of ``_CODECS`` are the
# Python codecs that decode each encoding (closest match where Python differs).
_LABELS: dict[str, tuple[str, ...]] = {
    "UTF-8": (
        "unicode-1-1-utf-8",
        "unicode11utf8",
        "unicode20utf8",
        "utf-8",
        "utf8",
        "x-unicode20utf8",
    ),
    "IBM866": ("866", "cp866", "csibm866", "ibm866"),
    "ISO-8859-2": (
        "csisolatin2",
        "iso-8859-2",
        "iso-ir-101",
        "iso8859-2",
        "iso88592",
        "iso_8859-2",
        "iso_8859-2:1987",
        "l2",
        "latin2",
    ),
    "ISO-8859-3": (
        "csisolatin3",
        "iso-8859-3",
        "iso-ir-109",
        "iso8859-3",
        "iso88593",
        "iso_8859-3",
        "iso_8859-3:1988",
        "l3",
        "latin3",
    ),
    "ISO-8859-4": (
        "csisolatin4",
        "iso-8859-4",
        "iso-ir-110",
        "iso8859-4",
        "iso88594",
        "iso_8859-4",
        "iso_8859-4:1988",
        "l4",
        "latin4",
    ),
    "ISO-8859-5": (
        "csisolatincyrillic",
        "cyrillic",
        "iso-8859-5",
        "iso-ir-144",
        "iso8859-5",
        "iso88595",
        "iso_8859-5",
        "iso_8859-5:1988",
    ),
    "ISO-8859-6": (
        "arabic",
        "asmo-708",
        "csiso88596e",
        "csiso88596i",
        "csisolatinarabic",
        "ecma-114",
        "iso-8859-6",
        "iso-8859-6-e",
        "iso-8859-6-i",
        "iso-ir-127",
        "iso8859-6",
        "iso88596",
        "iso_8859-6",
        "iso_8859-6:1987",
    ),
    "ISO-8859-7": (
        "csisolatingreek",
        "ecma-118",
        "elot_928",
        "greek",
        "greek8",
        "iso-8859-7",
        "iso-ir-126",
        "iso8859-7",
        "iso88597",
        "iso_8859-7",
        "iso_8859-7:1987",
        "sun_eu_greek",
    ),
    "ISO-8859-8": (
        "csiso88598e",
        "csisolatinhebrew",
        "hebrew",
        "iso-8859-8",
        "iso-8859-8-e",
        "iso-ir-138",
        "iso8859-8",
        "iso88598",
        "iso_8859-8",
        "iso_8859-8:1988",
        "visual",
    ),
    "ISO-8859-8-I": ("csiso88598i", "iso-8859-8-i", "logical"),
    "ISO-8859-10": (
        "csisolatin6",
        "iso-8859-10",
        "iso-ir-157",
        "iso8859-10",
        "iso885910",
        "l6",
        "latin6",
    ),
    "ISO-8859-13": ("iso-8859-13", "iso8859-13", "iso885913"),
    "ISO-8859-14": ("iso-8859-14", "iso8859-14", "iso885914"),
    "ISO-8859-15": ("csisolatin9", "iso-8859-15", "iso8859-15", "iso885915", "iso_8859-15", "l9"),
    "ISO-8859-16": ("iso-8859-16",),
    "KOI8-R": ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r"),
    "KOI8-U": ("koi8-ru", "koi8-u"),
    "macintosh": ("csmacintosh", "mac", "macintosh", "x-mac-roman"),
    "windows-874": ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620", "windows-874"),
    "windows-1250": ("cp1250", "windows-1250", "x-cp1250"),
    "windows-1251": ("cp1251", "windows-1251", "x-cp1251"),
    "windows-1252": (
        "ansi_x3.4-1968",
        "ascii",
        "cp1252",
        "cp819",
        "csisolatin1",
        "ibm819",
        "iso-8859-1",
        "iso-ir-100",
        "iso8859-1",
        "iso88591",
        "iso_8859-1",
        "iso_8859-1:1987",
        "l1",
        "latin1",
        "us-ascii",
        "windows-1252",
        "x-cp1252",
    ),
    "windows-1253": ("cp1253", "windows-1253", "x-cp1253"),
    "windows-1254": (
        "cp1254",
        "csisolatin5",
        "iso-8859-9",
        "iso-ir-148",
        "iso8859-9",
        "iso88599",
        "iso_8859-9",
        "iso_8859-9:1989",
        "l5",
        "latin5",
        "windows-1254",
        "x-cp1254",
    ),
    "windows-1255": ("cp1255", "windows-1255", "x-cp1255"),
    "windows-1256": ("cp1256", "windows-1256", "x-cp1256"),
    "windows-1257": ("cp1257", "windows-1257", "x-cp1257"),
    "windows-1258": ("cp1258", "windows-1258", "x-cp1258"),
    "x-mac-cyrillic": ("x-mac-cyrillic", "x-mac-ukrainian"),
    "GBK": (
        "chinese",
        "csgb2312",
        "csiso58gb231280",
        "gb2312",
        "gb_2312",
        "gb_2312-80",
        "gbk",
        "iso-ir-58",
        "x-gbk",
    ),
    "gb18030": ("gb18030",),
    "Big5": ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    "EUC-JP": ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"),
    "ISO-2022-JP": ("csiso2022jp", "iso-2022-jp"),
    "Shift_JIS": (
        "csshiftjis",
        "ms932",
        "ms_kanji",
        "shift-jis",
        "shift_jis",
        "sjis",
        "windows-31j",
        "x-sjis",
    ),
    "EUC-KR": (
        "cseuckr",
        "csksc56011987",
        "euc-kr",
        "iso-ir-149",
        "korean",
        "ks_c_5601-1987",
        "ks_c_5601-1989",
        "ksc5601",
        "ksc_5601",
        "windows-949",
    ),
    "UTF-16BE": ("unicodefffe", "utf-16be"),
    "UTF-16LE": (
        "csunicode",
        "iso-10646-ucs-2",
        "ucs-2",
        "unicode",
        "unicodefeff",
        "utf-16",
        "utf-16le",
    ),
    # x-user-defined has no Python codec; its ASCII half matches windows-1252 (see below).
    "x-user-defined": ("x-user-defined",),
    # The "replacement" encoding (labels csiso2022kr, hz-gb-2312, iso-2022-cn,
    # iso-2022-cn-ext, iso-2022-kr, replacement) is deliberately absent: a browser would
    # show one U+FFFD; a crawler is better served by treating the label as unknown.
}

_CODECS: dict[str, str] = {
    "UTF-8": "utf-8",
    "IBM866": "cp866",
    "ISO-8859-2": "iso8859_2",
    "ISO-8859-3": "iso8859_3",
    "ISO-8859-4": "iso8859_4",
    "ISO-8859-5": "iso8859_5",
    "ISO-8859-6": "iso8859_6",
    "ISO-8859-7": "iso8859_7",
    "ISO-8859-8": "iso8859_8",
    "ISO-8859-8-I": "iso8859_8",
    "ISO-8859-10": "iso8859_10",
    "ISO-8859-13": "iso8859_13",
    "ISO-8859-14": "iso8859_14",
    "ISO-8859-15": "iso8859_15",
    "ISO-8859-16": "iso8859_16",
    "KOI8-R": "koi8_r",
    "KOI8-U": "koi8_u",
    "macintosh": "mac_roman",
    "windows-874": "cp874",
    "windows-1250": "cp1250",
    "windows-1251": "cp1251",
    "windows-1252": "cp1252",
    "windows-1253": "cp1253",
    "windows-1254": "cp1254",
    "windows-1255": "cp1255",
    "windows-1256": "cp1256",
    "windows-1257": "cp1257",
    "windows-1258": "cp1258",
    "x-mac-cyrillic": "mac_cyrillic",
    # WHATWG's GBK decoder is its gb18030 decoder.
    "GBK": "gb18030",
    "gb18030": "gb18030",
    "Big5": "big5hkscs",
    "EUC-JP": "euc_jp",
    "ISO-2022-JP": "iso2022_jp",
    # WHATWG Shift_JIS is Microsoft's code page 932 (NEC/IBM extensions, 0x5C = backslash).
    "Shift_JIS": "cp932",
    # WHATWG EUC-KR is windows-949 (unified Hangul code).
    "EUC-KR": "cp949",
    "UTF-16BE": "utf-16-be",
    "UTF-16LE": "utf-16-le",
    "x-user-defined": "cp1252",
}

#: label (lower-case) -> canonical Python codec name (``codecs.lookup(...).name``).
_LABEL_TO_CODEC: dict[str, str] = {
    label: codecs.lookup(_CODECS[name]).name for name, labels in _LABELS.items() for label in labels
}

_UTF8 = "utf-8"
_CP1252 = codecs.lookup("cp1252").name
_UTF16 = frozenset({codecs.lookup("utf-16-le").name, codecs.lookup("utf-16-be").name})

# Names detectors emit that are not WHATWG labels, mapped to a WHATWG label.
_DETECTOR_ALIASES: dict[str, str] = {
    "cp949": "euc-kr",
    "uhc": "euc-kr",
    "mac-cyrillic": "x-mac-cyrillic",
    "maccyrillic": "x-mac-cyrillic",
    "mac_cyrillic": "x-mac-cyrillic",
    "cp932": "shift_jis",
    "euc_jp": "euc-jp",
    "euc_kr": "euc-kr",
    "shift_jis_2004": "shift_jis",
    "euc_jis_2004": "euc-jp",
    "big5hkscs": "big5",
    "mac_roman": "macintosh",
    "mac-roman": "macintosh",
    "latin_1": "latin1",
    "latin-1": "latin1",
}

_ASCII_WS = "\t\n\f\r "
_ASCII_WS_BYTES = b"\t\n\f\r "
_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_PRESCAN_LIMIT = 1024
_DETECT_MAX_BYTES = 65536

_CT_CHARSET_RE = re.compile(r';[ \t]*charset[ \t]*=[ \t]*("[^"]*"?|[^;]*)', re.IGNORECASE)


def normalize_label(label: str) -> str | None:
    """Map an encoding label to the Python codec that decodes it, or None if unknown.

    Follows the WHATWG Encoding Standard §4.2 "get an encoding": the label is stripped of
    leading/trailing ASCII whitespace and matched ASCII case-insensitively against the
    standard's label table; the encoding found is then mapped to the closest Python codec,
    returned as its canonical name (``codecs.lookup(c).name``), e.g.::

        "latin1", "ISO-8859-1", "us-ascii" -> "cp1252"
        "gb2312", "GBK"                    -> "gb18030"
        "shift_jis", "x-sjis"              -> "cp932"
        "windows-1251"                     -> "cp1251"
        "utf-16"                           -> "utf-16-le"

    Deviations: labels of the WHATWG "replacement" encoding (iso-2022-kr, hz-gb-2312, ...)
    return None (treated as unknown, so the caller moves on to the next step);
    "x-user-defined" maps to cp1252 (identical for ASCII bytes).

    Args:
        label: an encoding label as found in a header, a meta element or from a detector.

    Returns:
        Canonical Python codec name, or None for an unknown label. Never raises.
    """
    return _LABEL_TO_CODEC.get(label.strip(_ASCII_WS).lower())


def _content_type_charset(content_type: str | None) -> str | None:
    """The codec named by the Content-Type ``charset`` parameter (first one), or None."""
    if not content_type or ";" not in content_type:
        return None
    m = _CT_CHARSET_RE.search(content_type)
    if m is None:
        return None
    value = m.group(1).strip(_ASCII_WS)
    if value.startswith('"'):
        value = value[1:].rstrip('"')
    return normalize_label(value)


def _label_from_bytes(raw: bytes) -> str | None:
    return normalize_label(raw.decode("latin-1"))


def _charset_from_meta_content(content: bytes) -> str | None:
    """HTML Standard §2.5.5 "algorithm for extracting a character encoding from a meta element".

    ``content`` is already lower-cased by the prescan.
    """
    pos = 0
    n = len(content)
    while True:
        i = content.find(b"charset", pos)
        if i < 0:
            return None
        pos = i + 7
        while pos < n and content[pos] in _ASCII_WS_BYTES:
            pos += 1
        if pos >= n or content[pos] != 0x3D:  # "="
            continue
        pos += 1
        while pos < n and content[pos] in _ASCII_WS_BYTES:
            pos += 1
        if pos >= n:
            return None
        c = content[pos]
        if c in (0x22, 0x27):  # " or '
            end = content.find(bytes((c,)), pos + 1)
            if end < 0:
                return None
            return _label_from_bytes(content[pos + 1 : end])
        end = pos
        while end < n and content[end] not in b"\t\n\f\r ;":
            end += 1
        return _label_from_bytes(content[pos:end])


def _get_attribute(buf: bytes, pos: int) -> tuple[bytes, bytes, int]:
    """HTML Standard §13.2.3.2 "get an attribute".

    Returns (name, value, new position). An empty name means no attribute was found:
    the position is then that of the ">" ending the tag, or -1 if the input ran out.
    """
    n = len(buf)
    while pos < n and buf[pos] in b"\t\n\f\r /":
        pos += 1
    if pos >= n:
        return b"", b"", -1
    if buf[pos] == 0x3E:  # ">"
        return b"", b"", pos
    name_start = pos
    # Attribute name: "=" only ends it when the name is non-empty.
    if buf[pos] == 0x3D:
        pos += 1
    while pos < n and buf[pos] not in b"\t\n\f\r /=>":
        pos += 1
    if pos >= n:
        return b"", b"", -1
    name = buf[name_start:pos].translate(_LOWER)
    if buf[pos] in b"/>":
        return name, b"", pos
    while pos < n and buf[pos] in _ASCII_WS_BYTES:
        pos += 1
    if pos >= n:
        return b"", b"", -1
    if buf[pos] != 0x3D:
        return name, b"", pos
    pos += 1
    while pos < n and buf[pos] in _ASCII_WS_BYTES:
        pos += 1
    if pos >= n:
        return b"", b"", -1
    c = buf[pos]
    if c in (0x22, 0x27):
        end = buf.find(bytes((c,)), pos + 1)
        if end < 0:
            return b"", b"", -1
        return name, buf[pos + 1 : end].translate(_LOWER), end + 1
    if c == 0x3E:
        return name, b"", pos
    start = pos
    while pos < n and buf[pos] not in b"\t\n\f\r >":
        pos += 1
    if pos >= n:
        return b"", b"", -1
    return name, buf[start:pos].translate(_LOWER), pos


_PRESCAN_TOKEN_RE = re.compile(rb"<(?:!--|meta[\t\n\f\r /]|/?[A-Za-z]|[!/?])", re.IGNORECASE)


def prescan(head: bytes) -> str | None:
    """Find the encoding declared by a ``<meta>`` element in the first 1024 bytes.

    Implements the HTML Standard §13.2.3.2 "prescan a byte stream to determine its encoding"
    (comments, other tags and their attributes are skipped exactly as the algorithm says,
    so a declaration inside a comment or an attribute value is not seen). A declared
    UTF-16 encoding means UTF-8 and x-user-defined means windows-1252, per the standard.

    Args:
        head: the start of the body; only the first 1024 bytes are examined.

    Returns:
        Canonical Python codec name (see :func:`normalize_label`), or None if no usable
        declaration is found. Never raises.
    """
    buf = head[:_PRESCAN_LIMIT]
    if b"<" not in buf or b"meta" not in buf.translate(_LOWER):
        return None
    n = len(buf)
    pos = 0
    while pos < n:
        m = _PRESCAN_TOKEN_RE.search(buf, pos)
        if m is None:
            return None
        tok = m.group(0)
        pos = m.start()
        if tok == b"<!--":
            end = buf.find(b"-->", pos + 2)
            if end < 0:
                return None
            pos = end + 3
            continue
        if len(tok) == 6:  # "<meta" + separator
            pos += 5
            seen: set[bytes] = set()
            got_pragma = False
            need_pragma: bool | None = None
            charset: str | None = None
            charset_set = False
            while True:
                name, value, pos = _get_attribute(buf, pos)
                if not name:
                    break
                if name in seen:
                    continue
                seen.add(name)
                if name == b"http-equiv":
                    if value == b"content-type":
                        got_pragma = True
                elif name == b"content":
                    if not charset_set:
                        found = _charset_from_meta_content(value)
                        if found is not None:
                            charset, charset_set, need_pragma = found, True, True
                elif name == b"charset":
                    charset, charset_set, need_pragma = _label_from_bytes(value), True, False
            if pos < 0:
                return None
            if need_pragma is None or (need_pragma and not got_pragma) or charset is None:
                pos += 1
                continue
            if charset in _UTF16:
                return _UTF8
            return charset
        if tok[-1:].isalpha():
            # A start or end tag: skip its name, then its attributes.
            while pos < n and buf[pos] not in b"\t\n\f\r >":
                pos += 1
            while True:
                name, _, pos = _get_attribute(buf, pos)
                if not name:
                    break
            if pos < 0:
                return None
            pos += 1
            continue
        # "<!", "</", "<?": skip to the next ">".
        end = buf.find(b">", pos + 1)
        if end < 0:
            return None
        pos = end + 1
    return None


def _detector() -> Callable[[bytes], str | None]:
    """The statistical detector: resiliparse (uchardet) if installed, else charset-normalizer."""
    try:
        from resiliparse.parse.encoding import detect_encoding
    except ImportError:  # pragma: no cover - resiliparse is installed in the dev venv
        import charset_normalizer

        def detect_cn(data: bytes) -> str | None:
            best = charset_normalizer.from_bytes(data[:_DETECT_MAX_BYTES]).best()
            return None if best is None else str(best.encoding)

        return detect_cn

    def detect_rp(data: bytes) -> str | None:
        return detect_encoding(data, max_len=_DETECT_MAX_BYTES, html5_compatible=False)

    return detect_rp


_detect = _detector()


def _detected_codec(body: bytes) -> str | None:
    try:
        raw = _detect(body)
    except Exception:  # a detector must never make decoding fail
        return None
    if not raw:
        return None
    low = raw.strip().lower()
    codec = normalize_label(_DETECTOR_ALIASES.get(low, low))
    if codec is None:
        codec = normalize_label(_DETECTOR_ALIASES.get(low.replace("_", "-"), low.replace("_", "-")))
    # Without a BOM, UTF-16 guesses are not trusted (the standard's detectors must not
    # return ASCII-incompatible encodings); UTF-8 was already ruled out.
    if codec is None or codec in _UTF16 or codec == _UTF8:
        return None
    return codec


def _as_utf8(body: bytes) -> str | None:
    """``body`` decoded if it is valid UTF-8, else None.

    A multi-byte sequence cut off at the very end (a body truncated at a size cap) is
    allowed when the rest already holds multi-byte UTF-8, so is evidently UTF-8.
    """
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as e:
        if (
            e.reason == "unexpected end of data"
            and e.end == len(body)
            and not body[: e.start].isascii()
        ):
            return body.decode("utf-8", "replace")
        return None


def decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    """Decode an HTML body to text, choosing the encoding as a browser would.

    Order (HTML Standard §13.2.3.1 "determining the character encoding", labels per the
    WHATWG Encoding Standard): BOM (removed from the text) > ``charset`` parameter of
    ``content_type`` > ``<meta>`` prescan of the first 1024 bytes (:func:`prescan`) >
    UTF-8 if the bytes are valid UTF-8 (a multi-byte sequence cut off at the very end is
    tolerated) > statistical detector (resiliparse/uchardet) > windows-1252. Unknown labels
    are ignored (the next step decides). Pure-ASCII/UTF-8 bodies never reach the detector.

    Args:
        body: the (content-decoded) response body, any bytes.
        content_type: the raw Content-Type header value (e.g. "text/html; charset=utf-8"),
            or None.

    Returns:
        (text, codec): the decoded text (invalid sequences become U+FFFD) and the canonical
        Python codec name used, e.g. "utf-8", "cp1252", "cp1251", "gb18030", "cp932".
        Never raises.
    """
    # 1. BOM sniffing (WHATWG Encoding §6 "decode").
    if body[:3] == codecs.BOM_UTF8:
        return body[3:].decode("utf-8", "replace"), _UTF8
    if body[:2] == codecs.BOM_UTF16_LE:
        return body[2:].decode("utf-16-le", "replace"), "utf-16-le"
    if body[:2] == codecs.BOM_UTF16_BE:
        return body[2:].decode("utf-16-be", "replace"), "utf-16-be"
    # 2. Transport-layer declaration.
    codec = _content_type_charset(content_type)
    # 3. <meta> prescan.
    if codec is None:
        codec = prescan(body)
    if codec is not None:
        return body.decode(codec, "replace"), codec
    # 4. UTF-8 (includes pure ASCII).
    text = _as_utf8(body)
    if text is not None:
        return text, _UTF8
    # 5. Detector, 6. windows-1252.
    codec = _detected_codec(body) or _CP1252
    return body.decode(codec, "replace"), codec
