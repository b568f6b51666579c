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
The label table (WHATWG Encoding §4.2) is in :mod:`skitter.encoding_labels`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

from skitter.encoding_labels import normalize_label as normalize_label

__all__ = ["decode_html", "normalize_label", "prescan"]

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
