"""robots.txt parsing and matching (RFC 9309), a thin wrapper around protego.

Pure: no I/O. :class:`RobotsRules` turns the bytes of a robots.txt into an object that
answers "may product token T fetch URL U?" (:meth:`RobotsRules.allowed`), plus the
Crawl-delay of T's group and the Sitemap lines.

protego does the line parsing, the percent-encoding normalisation and the rule matching
(``*`` wildcard, ``$`` anchor, longest match wins, a tie goes to Allow; RFC 9309 §2.2.2,
§2.2.3). This module fixes what protego gets wrong about *which group applies*
(RFC 9309 §2.2.1) and about the raw bytes:

* ``User-agent: mybot/1.2`` or ``User-agent: Foo Bar`` name the product token ``mybot``
  / ``foo`` (the leading ``[A-Za-z_-]`` run, as google/robotstxt does); protego keeps the
  whole value and then never matches the token ``mybot``.
* A group matches a product token only when the names are equal (case-insensitively);
  protego also matches a group name that is a prefix or substring of the token (a group
  ``foo`` would capture the crawler ``foobar``).
* The file is decoded as UTF-8; invalid bytes (a Latin-1 ``\\xFC``) are kept as their
  ``%XX`` escape rather than dropped or turned into U+FFFD, a UTF-8 byte order mark
  (also a partial one, as google/robotstxt allows) is skipped, only the first
  ``max_bytes`` (500 KiB, RFC 9309 §2.5) are parsed, and only CR, LF and CRLF end lines
  (RFC 9309 §2.2; Python's ``str.splitlines`` would also split on U+2028, ``\\x0c``...).

How: the wrapper rewrites every user-agent line to its normalised product token, and for
a queried token builds a protego parser in which the groups of *other* named agents are
renamed to a name that cannot match, so protego only ever sees the groups RFC 9309 says
apply (the token's own groups, else the ``*`` groups). One protego parser is built per
distinct group choice and reused.

Speed: protego's ``can_fetch`` walks every rule of the group in Python for each URL
(about 100k checks/s for a 10-rule file, 12k/s for 300 rules). :meth:`RobotsRules.allowed`
instead indexes the rules protego parsed by their literal prefix (text before the first
``*``) and tests only the rules whose prefix the URL starts with, wildcard ones with one
compiled regex per prefix; URLs are normalised exactly as protego does (a ``translate``
for plain ASCII ones, protego's own function otherwise). The results are identical to
protego's apart from the "$" fix below (differential tests with hypothesis). This reads
protego internals (``_get_matching_rule_set``, ``_rules``, ``_URLPattern._pattern``,
``protego._utils._quote_path``) and falls back to ``can_fetch`` if they change.

One matching deviation of protego is fixed there too: for every rule containing ``$``
protego adds a twin with a literal ``%24``, so ``Disallow: /*.pdf$`` also blocked
``/a.pdf$`` and ``Allow: /$`` allowed ``/$anything``; the twins are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from protego import Protego

try:  # protego's own URL normaliser, so the fast path sees URLs exactly as protego does
    from protego._utils import _quote_path
except ImportError:  # pragma: no cover - protego reorganised; allowed() falls back
    _quote_path = None  # type: ignore[assignment]

__all__ = [
    "MAX_ROBOTS_BYTES",
    "RobotsRules",
    "agent_key",
    "is_valid_product_token",
    "product_token",
]

#: Bytes of a robots.txt that are parsed; the rest is ignored (RFC 9309 §2.5: at least 500 KiB).
MAX_ROBOTS_BYTES = 500 * 1024

_BOM = b"\xef\xbb\xbf"

# RFC 9309 §2.2: NL = %x0D / %x0A / %x0D.0A
_NL = re.compile(r"\r\n|\r|\n")

# Characters str.splitlines() (used by protego) treats as line ends but RFC 9309 does not:
# escape them so that protego sees exactly the lines we see.
_EXTRA_LINE_BREAKS = {
    ord(c): "".join(f"%{b:02X}" for b in c.encode("utf-8"))
    for c in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
}

_SURROGATE = re.compile("[\udc80-\udcff]")

# "user-agent", "useragent", "user agent" (case-insensitive, protego accepts all three),
# then a colon or whitespace, then the value.
_AGENT_LINE = re.compile(r"(?:user-agent|useragent|user agent)(?:\s*:\s*|\s+)(.*)", re.I | re.S)
_AGENT_LINE_NO_VALUE = re.compile(r"(?:user-agent|useragent|user agent)\s*:?", re.I)

_IDENTIFIER = re.compile(r"[A-Za-z_-]+")

# Group name given to agents that must not match the queried token; it contains no
# identifier character, so it never occurs inside a normalised token.
_NO_MATCH = "~"

_STAR = "*"


_COMPATIBLE = re.compile(r"\(([^()]*;)?\s*compatible\s*;\s*([A-Za-z_-]+)", re.I)


def product_token(user_agent: str) -> str:
    """The robots.txt product token of a User-Agent header value.

    The first whitespace-separated word, cut at the first "/", lower-cased:
    ``"Skitter/0.1 (+https://...)"`` → ``"skitter"``. A browser-style User-Agent that
    names the crawler in a ``compatible;`` comment, the convention of Googlebot, Bingbot
    and most crawlers, yields that name instead: ``"Mozilla/5.0 (compatible;
    TestCrawler/1.0; +https://...)"`` → ``"testcrawler"`` (RFC 9309 §2.2.1: the product
    token SHOULD be a substring of the User-Agent; robots.txt files name that crawler
    token, never "mozilla"). Returns "" for an empty string.
    """
    words = user_agent.split()
    if not words:
        return ""
    first = words[0].split("/", 1)[0].lower()
    if first == "mozilla":
        m = _COMPATIBLE.search(user_agent)
        if m is not None:
            return m.group(2).lower()
    return first


def agent_key(value: str) -> str:
    """Normalise a user-agent value (a robots.txt line's or a crawler's) for matching.

    ``"*"`` (alone or followed by whitespace) stays ``"*"``; otherwise the leading run of
    ``[A-Za-z_-]`` characters (RFC 9309 §2.2.1 identifier), lower-cased, so that
    ``"MyBot/1.2"`` and ``"mybot extra"`` both give ``"mybot"``. "" when there is none.
    """
    value = value.strip()
    if value == _STAR or (value.startswith(_STAR) and value[1:2].isspace()):
        return _STAR
    m = _IDENTIFIER.match(value)
    return m.group(0).lower() if m else ""


def is_valid_product_token(token: str) -> bool:
    """True if ``token`` is a valid RFC 9309 §2.2.1 product token: 1+ of ``[A-Za-z_-]``."""
    return bool(token) and _IDENTIFIER.fullmatch(token) is not None


def _decode(body: bytes) -> str:
    """UTF-8 decode, invalid bytes kept as ``%XX`` (so they still match the same escapes)."""
    text = body.decode("utf-8", "surrogateescape")
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(lambda m: f"%{ord(m.group(0)) - 0xDC00:02X}", text)
    return text


def _strip_bom(body: bytes) -> bytes:
    """Drop a leading UTF-8 byte order mark, also a partial one (google/robotstxt does)."""
    for n in (3, 2, 1):
        if body[:n] == _BOM[:n]:
            if n < 3 and len(body) > n and 0x80 <= body[n] <= 0xBF:
                # The start of a real 3-byte character (U+Exxx), not a partial BOM.
                return body
            return body[n:]
    return body


# URLs whose path and query are printable ASCII without "%" or "#": protego's
# normalisation (decode escapes, then quote with "/" and "=" kept) reduces to escaping
# each reserved character, which a str.translate does in one pass. The authority is
# skipped; a path starting with "//" is left to protego (urlsplit reads an authority).
_SIMPLE_URL = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*)?(/(?!/)[\x21\x22\x24\x26-\x7e]*)")
_QUOTE_TABLE = {
    c: f"%{c:02X}" for c in range(0x21, 0x7F) if not (chr(c).isalnum() or chr(c) in "_.-~/=")
}


def _normalise_url(url: str) -> str:
    """Path and query of ``url`` normalised exactly as protego's ``_quote_path`` does."""
    m = _SIMPLE_URL.fullmatch(url)
    if m is not None:
        return m.group(1).translate(_QUOTE_TABLE)
    return str(_quote_path(url))


def _rest_regex(pattern: str, prefix_len: int) -> str:
    """Regex for what a protego pattern requires after its literal prefix.

    ``pattern`` is protego-normalised; its first ``prefix_len`` characters (everything
    before the first ``*``) are already known to match. Semantics of
    ``protego._urlpattern._URLPattern.match``: a trailing ``$`` anchors the end, each
    ``*`` is any run of characters, found leftmost (atomic groups keep it linear, like
    protego's ``str.find`` scan: no catastrophic backtracking on "/a*a*a*a*b").
    """
    anchored = pattern.endswith("$")
    if anchored:
        pattern = pattern[:-1]
    if "*" not in pattern:
        return r"\Z" if anchored else ""
    # parts[0] == "": the pattern continues with "*" right after the prefix.
    parts = re.sub(r"\*+", "*", pattern[prefix_len:]).split("*")
    out = [f"(?>.*?{re.escape(part)})" for part in parts[1:-1]]
    last = parts[-1]
    if anchored:
        out.append(f".*?{re.escape(last)}" + r"\Z")
    elif last:
        out.append(f"(?>.*?{re.escape(last)})")
    return "".join(out)


def _literal_prefix(pattern: str) -> str:
    """The text of a protego pattern before its first ``*`` (without a trailing ``$``)."""
    star = pattern.find("*")
    if star >= 0:
        return pattern[:star]
    return pattern[:-1] if pattern.endswith("$") else pattern


@dataclass(frozen=True, slots=True)
class _Bucket:
    """The rules sharing one literal prefix, in precedence order.

    ``first_rank``/``first_allow``: the bucket's best rule. ``regex`` None: that rule is
    plain (a pure prefix), so it matches whenever the prefix does. Otherwise ``regex`` is
    an alternation over the bucket's rules (up to its first plain one, which always
    matches), matched from the end of the prefix; the number of the capturing group that
    matched picks ``ranks``/``allows``.
    """

    first_rank: int
    first_allow: bool
    regex: re.Pattern[str] | None
    ranks: tuple[int, ...] = ()
    allows: tuple[bool, ...] = ()


def _make_bucket(prefix: str, rules: list[tuple[int, bool, str]]) -> _Bucket:
    """Build a :class:`_Bucket` from (rank, allow, pattern) triples sorted by rank."""
    rank0, allow0, pattern0 = rules[0]
    if pattern0 == prefix:  # plain: always matches once the prefix does
        return _Bucket(rank0, allow0, None)
    alternatives: list[str] = []
    ranks: list[int] = []
    allows: list[bool] = []
    for rank, allow, pattern in rules:
        alternatives.append(f"({_rest_regex(pattern, len(prefix))})")
        ranks.append(rank)
        allows.append(allow)
        if pattern == prefix:
            break
    regex = re.compile("|".join(alternatives), re.DOTALL)
    return _Bucket(rank0, allow0, regex, tuple(ranks), tuple(allows))


_NO_RANK = 1 << 62


@dataclass(frozen=True, slots=True)
class _Matcher:
    """The rules of the one group that applies to a token, indexed by literal prefix.

    A rule can only match a URL its literal prefix is a prefix of, so a check looks up
    the URL's prefixes of the few distinct prefix lengths in ``by_prefix``; each bucket
    found yields its best matching rule (directly, or with one regex match in C), and
    the best-ranked of those decides. Equivalent to protego's walk over every rule in
    precedence order (see the differential tests), and much faster on large files.

    ``parser`` set: protego's internals were not as expected; use ``parser.can_fetch``.
    """

    lengths: tuple[int, ...] = ()
    by_prefix: dict[str, _Bucket] = field(default_factory=dict)
    parser: Protego | None = None
    key: str = _STAR

    def decide(self, url: str) -> bool:
        """True if the normalised path+query ``url`` is allowed (no match → allowed)."""
        by_prefix = self.by_prefix
        n = len(url)
        best_rank = _NO_RANK
        best_allow = True
        for length in self.lengths:
            if length > n:
                break
            bucket = by_prefix.get(url[:length])
            if bucket is None or bucket.first_rank >= best_rank:
                continue
            if bucket.regex is None:
                best_rank, best_allow = bucket.first_rank, bucket.first_allow
                continue
            m = bucket.regex.match(url, length)
            if m is not None:
                i = (m.lastindex or 1) - 1
                if bucket.ranks[i] < best_rank:
                    best_rank, best_allow = bucket.ranks[i], bucket.allows[i]
        return best_allow


def _drop_dollar_twins(pairs: list[tuple[bool, str]]) -> list[tuple[bool, str]]:
    """Remove the literal-"$" twins protego adds for each rule ending in a "$" anchor.

    For ``Disallow: /*.pdf$`` protego also stores ``/*.pdf%24``, which matches a URL
    with a literal "$" there; RFC 9309 §2.2.3 makes only the trailing "$" special, and
    a literal one must be written "%24". One twin is dropped per anchored rule, so a
    ``Disallow: /x%24`` that the file really contains is kept. (protego's Google-style
    ``X/index.html`` → ``X/$`` Allow gets no twin, so none is dropped for it.)
    """
    twins: dict[tuple[bool, str], int] = {}
    for allow, pattern in pairs:
        if pattern.endswith("$"):
            twin = (allow, pattern[:-1] + "%24")
            twins[twin] = twins.get(twin, 0) + 1
    for allow, pattern in pairs:
        if allow and pattern.endswith("/index.html"):
            synthetic = (True, pattern.removesuffix("index.html") + "%24")
            if twins.get(synthetic, 0) > 0:
                twins[synthetic] -= 1
    kept: list[tuple[bool, str]] = []
    for pair in pairs:
        if twins.get(pair, 0) > 0:
            twins[pair] -= 1
            continue
        kept.append(pair)
    return kept


def _compile_matcher(parser: Protego, key: str) -> _Matcher:
    """Index the rules protego parsed for ``key`` (see :class:`_Matcher`)."""
    if _quote_path is None:  # pragma: no cover - depends on the protego version
        return _Matcher(parser=parser, key=key)
    try:
        rule_set = parser._get_matching_rule_set(key)
        if rule_set is None:
            return _Matcher()
        pairs = [(rule.field == "allow", rule.value._pattern) for rule in rule_set._rules]
    except AttributeError:  # pragma: no cover - depends on the protego version
        return _Matcher(parser=parser, key=key)
    if not all(isinstance(pattern, str) for _, pattern in pairs):  # pragma: no cover
        return _Matcher(parser=parser, key=key)
    grouped: dict[str, list[tuple[int, bool, str]]] = {}
    for rank, (allow, pattern) in enumerate(_drop_dollar_twins(pairs)):
        grouped.setdefault(_literal_prefix(pattern), []).append((rank, allow, pattern))
    return _Matcher(
        lengths=tuple(sorted({len(p) for p in grouped})),
        by_prefix={p: _make_bucket(p, rules) for p, rules in grouped.items()},
    )


@dataclass(frozen=True, slots=True)
class _Line:
    """A user-agent line: its index in the line list and its normalised key."""

    index: int
    key: str


@dataclass(slots=True, eq=False)
class RobotsRules:
    """The parsed rules of one robots.txt.

    Build with :meth:`parse`, :meth:`allow_all` or :meth:`disallow_all`.

    Attributes:
        truncated: the body was longer than the parse limit and its tail was ignored.
        size_bytes: size of the body given to :meth:`parse`, in bytes.
    """

    truncated: bool = False
    size_bytes: int = 0
    _lines: list[str] = field(default_factory=list, repr=False)
    _agents: list[_Line] = field(default_factory=list, repr=False)
    _keys: frozenset[str] = field(default_factory=frozenset, repr=False)
    _fixed: bool | None = field(default=None, repr=False)
    _parsers: dict[str, Protego] = field(default_factory=dict, repr=False)
    _token_to_key: dict[str, str] = field(default_factory=dict, repr=False)
    _matchers: dict[str, _Matcher] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, body: bytes, *, max_bytes: int = MAX_ROBOTS_BYTES) -> RobotsRules:
        """Parse a robots.txt body (RFC 9309 §2.2).

        Args:
            body: the raw response body, any encoding (UTF-8 expected, RFC 9309 §2.3).
            max_bytes: only the first ``max_bytes`` bytes are parsed (RFC 9309 §2.5);
                a line cut by the limit is dropped, and ``truncated`` is set.

        Never raises on any content: unparseable lines are ignored (RFC 9309 §2.3.1.5).
        """
        size = len(body)
        truncated = size > max_bytes
        if truncated:
            body = body[:max_bytes]
            # Drop the partial last line: a cut "Allow: /a..." would allow too much.
            last = max(body.rfind(b"\n"), body.rfind(b"\r"))
            body = body[: last + 1] if last >= 0 else b""
        body = _strip_bom(body)
        text = _decode(body).translate(_EXTRA_LINE_BREAKS)
        lines = _NL.split(text)
        agents: list[_Line] = []
        for i, raw in enumerate(lines):
            line = raw.split("#", 1)[0].strip()
            if not line or line[0] not in "Uu":
                continue
            m = _AGENT_LINE.fullmatch(line)
            if m is not None:
                agents.append(_Line(i, agent_key(m.group(1))))
            elif _AGENT_LINE_NO_VALUE.fullmatch(line):
                agents.append(_Line(i, ""))
        rules = cls(
            truncated=truncated,
            size_bytes=size,
            _lines=lines,
            _agents=agents,
            _keys=frozenset(a.key for a in agents if a.key and a.key != _STAR),
        )
        rules._parser_for(_STAR)  # built eagerly: it is the common case, and has the sitemaps
        return rules

    @classmethod
    def allow_all(cls) -> RobotsRules:
        """Rules that allow every URL (no robots.txt, or a 4xx one: RFC 9309 §2.3.1.3)."""
        return cls(_fixed=True)

    @classmethod
    def disallow_all(cls) -> RobotsRules:
        """Rules that disallow every URL but /robots.txt (unreachable: RFC 9309 §2.3.1.4)."""
        return cls(_fixed=False)

    @property
    def is_allow_all(self) -> bool:
        """True for :meth:`allow_all` rules."""
        return self._fixed is True

    @property
    def is_disallow_all(self) -> bool:
        """True for :meth:`disallow_all` rules."""
        return self._fixed is False

    def _key_for(self, token: str) -> str:
        """The group choice for ``token``: its own key if the file names it, else "*"."""
        key = self._token_to_key.get(token)
        if key is None:
            k = agent_key(token)
            key = k if k in self._keys else _STAR
            self._token_to_key[token] = key
        return key

    def _parser_for(self, key: str) -> Protego:
        """The protego parser in which only the groups for ``key`` can match ``key``."""
        parser = self._parsers.get(key)
        if parser is None:
            lines = list(self._lines)
            for a in self._agents:
                name = a.key if a.key in (key, _STAR) else _NO_MATCH
                lines[a.index] = f"User-agent: {name}"
            parser = Protego.parse("\n".join(lines))
            self._parsers[key] = parser
        return parser

    def allowed(self, url: str, token: str) -> bool:
        """May the crawler with product ``token`` fetch ``url``? (RFC 9309 §2.2.2)

        Args:
            url: absolute URL (or a path starting with "/"); only path and query are
                matched, percent-encoding normalised on both sides.
            token: the crawler's product token (see :func:`product_token`); matched
                case-insensitively and exactly against the file's user-agent names,
                falling back to the ``*`` group (RFC 9309 §2.2.1).

        "/robots.txt" is always allowed. Longest match wins; a tie goes to Allow. A URL
        that cannot be split at all (``urlsplit`` rejects it, e.g. an unbalanced "[" in
        the host) is not allowed; nothing is raised.
        """
        fixed = self._fixed
        if fixed is not None:
            return fixed or _is_robots_txt(url)
        matcher = self._matchers.get(token)
        if matcher is None:
            key = self._key_for(token)
            matcher = _compile_matcher(self._parser_for(key), key)
            self._matchers[token] = matcher
        if matcher.parser is not None:  # pragma: no cover - protego internals changed
            return bool(matcher.parser.can_fetch(url, matcher.key))
        if not matcher.lengths or _is_robots_txt(url):
            return True
        try:
            path = _normalise_url(url)
        except ValueError:  # urlsplit: e.g. an unbalanced "[" in the host
            return False
        return matcher.decide(path)

    def allowed_by_protego(self, url: str, token: str) -> bool:
        """:meth:`allowed` computed by protego's own matcher (reference for tests)."""
        fixed = self._fixed
        if fixed is not None:
            return fixed or _is_robots_txt(url)
        key = self._key_for(token)
        return bool(self._parser_for(key).can_fetch(url, key))

    def crawl_delay(self, token: str) -> float | None:
        """The Crawl-delay (seconds) of the group that applies to ``token``, or None.

        Crawl-delay is not part of RFC 9309 (§2.2.4 "other records"); it is read from
        the same group that :meth:`allowed` uses. Negative or non-numeric values are
        ignored.
        """
        if self._fixed is not None:
            return None
        key = self._key_for(token)
        delay = self._parser_for(key).crawl_delay(key)
        return None if delay is None else float(delay)

    @property
    def sitemaps(self) -> list[str]:
        """The Sitemap URLs listed anywhere in the file, in file order (RFC 9309 §2.2.4)."""
        if self._fixed is not None:
            return []
        return list(self._parser_for(_STAR).sitemaps)


def _is_robots_txt(url: str) -> bool:
    """True if ``url``'s path is exactly /robots.txt (always allowed, RFC 9309 §2.2.2)."""
    return "/robots.txt" in url and urlsplit(url).path == "/robots.txt"
