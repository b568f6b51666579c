"""Encoding labels: the WHATWG Encoding Standard §4.2 label table and the Python codec of each.

Owns :func:`normalize_label` ("get an encoding", mapped to the closest Python codec), used by
the charset steps of :mod:`skitter.charset` (Content-Type parameter, HTML prescan, detector
output).
"""

from __future__ import annotations

import codecs

__all__ = ["normalize_label"]

_ASCII_WS = "\t\n\f\r "


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
