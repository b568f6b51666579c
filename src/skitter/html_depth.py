"""Guard against quadratic HTML tree building on absurdly deep documents.

Owns the cheap nesting estimate (:func:`_may_be_deep`) and the flattening scan
(:func:`_flatten_deep`) that :func:`skitter.links.extract` runs before parsing a page with
many tags, so that tree building stays linear (browsers cap the tree depth too; Blink: 512).
"""

from __future__ import annotations

import re
from collections.abc import Callable

# --------------------------------------------------------------------------------------
# Guard against quadratic tree building on absurdly deep documents
# --------------------------------------------------------------------------------------
# The HTML tree builder walks the stack of open elements for many tokens (e.g. "has a p
# element in button scope" for every <div>), so N nested <div>s cost O(N^2): 40,000 take
# ~6 s in Lexbor, a 10 MB page would take hours. Browsers cap the tree depth (Blink: 512).
#
# 1. Documents with fewer than _DEEP_CHECK_MIN_TAGS "<" (or shorter than 3 x that: a tag takes
#    at least 3 characters, "<a>") are parsed as they are (:func:`is_deep`).
# 2. Otherwise a cheap estimate (C-speed str.count per 32 KB window: start tags minus end
#    tags, running maximum over window boundaries; ~1 ms per MB per count) looks for deep
#    nesting. Legitimate pages stay far below _DEEP_SUSPECT (the 530 Python doc pages: at
#    most 51 without discounting voids).
# 3. Only if it is exceeded, an approximate tokenizer (comments and raw-text elements
#    skipped, common implied end tags modelled) tracks the open-element stack; start tags
#    that would nest deeper than _MAX_DEPTH are removed (their text stays), with their end
#    tags and with unmatched end tags seen at that depth. Link-bearing elements are never
#    removed, so links and anchor text survive; only the nesting is flattened. ~1-2 us/tag.
#
# Residual risk: step 2 counts, it does not match names, so a page crafted to keep start
# and end tag counts balanced while nesting deeply (e.g. "<x></y>" repeated: every </y> is
# unmatched) is not caught and still costs O(N^2) in Lexbor.

#: Below this many "<", the worst case (all tags nested) costs ~0.8 s.
_DEEP_CHECK_MIN_TAGS = 15_000
_DEEP_WINDOW_CHARS = 32_768
#: Estimated nesting depth above which the flattening scan runs (real pages: < 100;
#: unclosed <p>/<li> and rarer voids count too, so leave room). Window granularity means
#: nesting up to about _DEEP_SUSPECT + 6,000 can go unnoticed (< 0.5 s in Lexbor).
_DEEP_SUSPECT = 4_096
_MAX_DEPTH = 512


def _bound(text: str, start: int, end: int) -> int:
    """Start tags minus end tags of ``text[start:end]``, counting every "<" but "</" as a
    start tag: never less than :func:`_estimate` (two scans, not six)."""
    return text.count("<", start, end) - 2 * text.count("</", start, end)


def _estimate(text: str, start: int, end: int) -> int:
    """Start tags minus end tags of ``text[start:end]``: "<" minus "</", "<!", self-closing
    "/>" and the common voids <br>, <img>."""
    return (
        _bound(text, start, end)
        - text.count("<!", start, end)
        - text.count("/>", start, end)
        - text.count("<br", start, end)
        - text.count("<img", start, end)
    )


def _running_sum_exceeds(text: str, weigh: Callable[[str, int, int], int]) -> bool:
    """Whether the running sum of ``weigh`` over ``text``'s windows of
    ``_DEEP_WINDOW_CHARS`` passes ``_DEEP_SUSPECT`` at a window's end (each window counted in
    place, ``str.count`` with bounds: the same counts as on a slice, without the copy)."""
    depth = 0
    for i in range(0, len(text), _DEEP_WINDOW_CHARS):
        depth += weigh(text, i, i + _DEEP_WINDOW_CHARS)
        if depth > _DEEP_SUSPECT:
            return True
    return False


def _may_be_deep(text: str) -> bool:
    """Cheap estimate: does the running (start tags - end tags) exceed _DEEP_SUSPECT?

    The upper bound :func:`_bound` is summed first: when it stays under _DEEP_SUSPECT (nearly
    every page) the answer is already known; else the estimate (:func:`_estimate`) is.
    """
    return _running_sum_exceeds(text, _bound) and _running_sum_exceeds(text, _estimate)


def is_deep(text: str) -> bool:
    """Whether :func:`skitter.links.extract` must flatten ``text`` (:func:`_flatten_deep`)
    before parsing it: it holds at least ``_DEEP_CHECK_MIN_TAGS`` "<" and its estimated
    nesting (:func:`_may_be_deep`) passes ``_DEEP_SUSPECT``.

    Costs two ``str.count`` passes over a page with that many tags (one for the "<" of each
    window, kept for the bound; one for its "</"), one over a page with fewer, none over a
    text shorter than 3 x the threshold (a tag takes at least 3 characters, "<a>"). Same
    verdict as ``text.count("<") >= _DEEP_CHECK_MIN_TAGS and _may_be_deep(text)``.
    """
    n = len(text)
    if n < 3 * _DEEP_CHECK_MIN_TAGS:
        return False
    step = _DEEP_WINDOW_CHARS
    starts = range(0, n, step)
    opens = [text.count("<", i, i + step) for i in starts]
    if sum(opens) < _DEEP_CHECK_MIN_TAGS:
        return False
    depth = 0
    for i, lt in zip(starts, opens, strict=True):
        depth += lt - 2 * text.count("</", i, i + step)
        if depth > _DEEP_SUSPECT:
            return _running_sum_exceeds(text, _estimate)
    return False


_SCAN_RE = re.compile(
    r"<(?:!--(?:-?>|.*?(?:--!?>|\Z))"  # comment
    r"|(?i:(script|style|textarea|title|xmp|iframe|noembed|noframes)(?=[\t\n\f\r />])"
    r"(?:[^>\"']|\"[^\"]*\"|'[^']*')*>.*?(?:</\1(?=[\t\n\f\r />])[^>]*>|\Z))"  # raw text
    r"|(?i:plaintext).*"
    r"|(/?)([a-zA-Z][^\t\n\f\r />]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>"  # tag
    r"|[!?/][^>]*>)",  # doctype, bogus comment
    re.DOTALL,
)
_VOID = frozenset(
    {
        "area",
        "base",
        "basefont",
        "bgsound",
        "br",
        "col",
        "embed",
        "frame",
        "hr",
        "image",
        "img",
        "input",
        "keygen",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
_KEEP = frozenset(
    {"a", "area", "base", "link", "meta", "frame", "iframe", "title", "html", "head", "body"}
)
_CLOSES_P = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "center",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "li",
        "listing",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "pre",
        "search",
        "section",
        "summary",
        "table",
        "ul",
        "dd",
        "dt",
    }
)
_P_SCOPE = frozenset(
    [
        "applet",
        "button",
        "caption",
        "html",
        "marquee",
        "object",
        "table",
        "td",
        "th",
        "template",
        "svg",
        "math",
    ]
)
_LIST_SCOPE = frozenset(["dl", "html", "menu", "ol", "table", "td", "th", "template", "ul"])
_TABLE_SCOPE = frozenset(["html", "table", "template"])
# start tag -> (open elements it implicitly closes, elements that stop the search).
_IMPLIED: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "li": (frozenset({"li"}), _LIST_SCOPE),
    "dt": (frozenset({"dt", "dd"}), _LIST_SCOPE),
    "dd": (frozenset({"dt", "dd"}), _LIST_SCOPE),
    "option": (frozenset({"option"}), frozenset({"select", "datalist", "html", "template"})),
    "tr": (frozenset({"tr"}), _TABLE_SCOPE),
    "td": (frozenset({"td", "th"}), frozenset({"tr"}) | _TABLE_SCOPE),
    "th": (frozenset({"td", "th"}), frozenset({"tr"}) | _TABLE_SCOPE),
}
_P_CLOSE = (frozenset({"p"}), _P_SCOPE)
#: An implied end tag is searched for this far down the stack at most (keeps the scan
#: linear; missing one only overestimates the depth, which is the safe direction).
_IMPLIED_WALK = 16


def _flatten_deep(text: str) -> str:
    """``text`` with start tags nested deeper than ``_MAX_DEPTH`` removed (see above)."""
    stack: list[str] = []
    open_count: dict[str, int] = {}
    dropped: dict[str, int] = {}
    cuts: list[tuple[int, int]] = []
    count_get = open_count.get
    implied_get = _IMPLIED.get

    def pop_to(name: str) -> None:
        while stack:
            top = stack.pop()
            open_count[top] -= 1
            if top == name:
                return

    def close_implied(targets: frozenset[str], stop: frozenset[str]) -> None:
        for i in range(len(stack) - 1, max(-1, len(stack) - 1 - _IMPLIED_WALK), -1):
            node = stack[i]
            if node in targets:
                pop_to(node)
                return
            if node in stop:
                return

    for m in _SCAN_RE.finditer(text):
        end_slash, name, attrs = m.group(2, 3, 4)
        if name is None:
            continue
        name = name.lower()
        if end_slash:  # end tag
            if count_get(name):
                pop_to(name)
            elif dropped.get(name):
                dropped[name] -= 1
                cuts.append(m.span())
            elif len(stack) >= _MAX_DEPTH:
                cuts.append(m.span())
            continue
        if name in _VOID or attrs.endswith("/"):
            continue
        if name in _CLOSES_P and count_get("p"):
            close_implied(*_P_CLOSE)
        implied = implied_get(name)
        if implied is not None and any(count_get(t) for t in implied[0]):
            close_implied(*implied)
        if len(stack) >= _MAX_DEPTH and name not in _KEEP:
            dropped[name] = dropped.get(name, 0) + 1
            cuts.append(m.span())
            continue
        stack.append(name)
        open_count[name] = count_get(name, 0) + 1
    if not cuts:
        return text
    parts: list[str] = []
    pos = 0
    for start, end in cuts:
        parts.append(text[pos:start])
        pos = end
    parts.append(text[pos:])
    return "".join(parts)
