"""Unit tests of skitter.checklinks: verdicts, fragments, report building and formats;
plus the link-checking extras of link extraction (resources, srcset, ids) and the
resolver's negative cache."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from skitter.checklinks import (
    AnchorsWriter,
    CheckPolicy,
    Outcome,
    build_report,
    classify_final,
    collect_cache,
    format_report,
    fragment_ok,
    host_failure,
    read_anchors,
    status_from_detail,
)
from skitter.errors import ConnectError
from skitter.export.links import LinkRow
from skitter.fetch.resolver import SkitterResolver
from skitter.links import extract, parse_srcset
from skitter.settings import CrawlSettings, ScopeSettings

S = "http://www.test/"


# ---------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    ("status", "error", "detail", "expected"),
    [
        (200, None, None, ("ok", 200, None)),
        (204, None, None, ("ok", 204, None)),
        (304, None, None, ("ok", 304, None)),
        (404, None, None, ("broken", 404, None)),
        (410, None, None, ("broken", 410, None)),
        (400, None, None, ("broken", 400, None)),
        (405, None, None, ("broken", 405, None)),
        (500, None, None, ("broken", 500, None)),
        (503, None, None, ("broken", 503, None)),
        (302, None, "redirect without Location", ("broken", 302, None)),
        (401, None, None, ("unverified", 401, None)),
        (403, None, None, ("unverified", 403, None)),
        (429, None, None, ("unverified", 429, None)),
        (451, None, None, ("unverified", 451, None)),
        (999, None, None, ("unverified", 999, None)),
        (100, None, None, ("unverified", 100, None)),
        (None, "dns", "dns: x", ("broken", None, "dns")),
        (None, "connect", "connect: refused", ("broken", None, "connect")),
        (None, "tls", "tls: bad cert", ("broken", None, "tls")),
        (None, "timeout", "timeout (total deadline)", ("broken", None, "timeout")),
        (None, "too_many_redirects", "loop", ("broken", None, "too_many_redirects")),
        (None, "protocol", "incomplete body", ("broken", None, "protocol")),
        (None, "robots_unreachable", "5xx", ("unverified", None, "robots_unreachable")),
        (None, "blocked_address", "private", ("excluded", None, "blocked_address")),
        (
            None,
            "body_too_large",
            "body exceeds limit: Content-Length 52428800 > 1048576 bytes (HTTP status 200)",
            ("ok", 200, None),
        ),
        (
            None,
            "body_too_large",
            "body exceeds limit of 1048576 bytes (raw) (HTTP status 404)",
            ("broken", 404, None),
        ),
        (None, "body_too_large", "no status", ("unverified", None, "body_too_large")),
    ],
)
def test_classify_final_table(
    status: int | None, error: str | None, detail: str | None, expected: tuple[Any, ...]
) -> None:
    assert classify_final(status, error, detail) == expected


def test_classify_final_accept() -> None:
    accept = frozenset({429, 999, 404})
    assert classify_final(429, None, None, accept) == ("ok", 429, None)
    assert classify_final(999, None, None, accept) == ("ok", 999, None)
    assert classify_final(404, None, None, accept) == ("ok", 404, None)
    assert classify_final(410, None, None, accept) == ("broken", 410, None)


@pytest.mark.parametrize(
    ("fragment", "ok"),
    [
        ("", True),
        ("top", True),
        ("TOP", True),
        ("intro", True),
        ("Intro", False),  # ids are case-sensitive
        ("caf%C3%A9", True),  # percent-decoded (UTF-8) when not found as written
        ("a%20b", True),
        ("%FF", False),  # not UTF-8: no match, no crash
        ("nosuch", False),
        (":~:text=hello", True),  # a text directive alone
        ("intro:~:text=x", True),
        ("nosuch:~:text=x", False),
        ("legacy", True),  # an <a name>
    ],
)
def test_fragment_ok(fragment: str, ok: bool) -> None:
    assert fragment_ok(fragment, {"intro", "café", "a b", "legacy"}) is ok


def test_status_from_detail_and_host_failure() -> None:
    assert status_from_detail("x (HTTP status 200)") == 200
    assert status_from_detail("x (HTTP status 200) more") is None
    assert status_from_detail(None) is None
    assert host_failure("dns", "dns: x")
    assert host_failure("tls", "tls: x")
    assert host_failure("connect", "connect: a.test:80: Connection refused")
    assert not host_failure("connect", "connect: Connection reset by peer during body")
    assert host_failure("timeout", "timeout (connect): no connection within 10 s")
    assert not host_failure("timeout", "timeout (total deadline): 30 s passed during body")
    assert not host_failure("protocol", "incomplete body")


# ---------------------------------------------------------------------------- policy


def _policy(**scope: Any) -> CheckPolicy:
    settings = CrawlSettings(out_dir="x", scope=ScopeSettings(**scope), check_links=True)
    return CheckPolicy(settings, [S])


@pytest.mark.parametrize(
    ("decision", "url", "kind", "expected"),
    [
        ("queued", S + "a", "a", False),  # an internal page: crawled
        ("queued", S + "i.png", "img", True),  # a resource: checked only
        ("queued", S + "s.css", "link", True),
        ("scope", "http://other.test/", "a", True),  # another host: checked only
        ("scope", "http://other.test/private/x", "a", None),  # --exclude / --ignore
        ("scope", S + "private/x", "a", None),
        ("nofollow", S + "n", "a", True),
        ("depth", S + "d", "a", True),
        ("scheme", "mailto:x@y", "a", None),
        ("url_length", S + "x" * 10, "a", None),
        ("limit", S + "l", "a", None),
        ("trap", S + "t", "a", None),
    ],
)
def test_check_only_for(decision: str, url: str, kind: str, expected: bool | None) -> None:
    assert _policy(exclude=("/private/",)).check_only_for(decision, url, kind) is expected


def test_check_only_for_include_miss_is_checked_not_crawled() -> None:
    p = _policy(include=("/docs/",))
    # in scope by host but not matching --include: the crawl says "scope"; checked only
    assert p.check_only_for("scope", S + "blog/x", "a") is True
    assert p.is_internal(S + "blog/x") and not p.is_internal("http://other.test/")


def test_failed_host_memory_expires() -> None:
    now = [100.0]
    settings = CrawlSettings(out_dir="x", check_links=True)
    p = CheckPolicy(settings, [S], clock=lambda: now[0])
    assert p.failed_host("a.test") is None
    p.fail_host("a.test", "connect", "connect: a.test:80: refused")
    assert p.failed_host("a.test") == ("connect", "connect: a.test:80: refused")
    now[0] += settings.politeness.robots_retry_s + 1
    assert p.failed_host("a.test") is None


# ---------------------------------------------------------------------------- report


def rec(
    url: str,
    status: int | None = 200,
    *,
    final: str | None = None,
    hops: tuple[tuple[str, int], ...] = (),
    error: str | None = None,
    detail: str | None = None,
    depth: int = 1,
    fetched_at: str = "2024-05-01T12:00:00.000Z",
) -> dict[str, Any]:
    return {
        "url": url,
        "final_url": final or url,
        "status": status,
        "depth": depth,
        "content_type": "text/html",
        "bytes": 0,
        "sha1": None,
        "fetched_at": fetched_at,
        "elapsed_s": 0.0,
        "attempts": 1,
        "redirects": [{"url": u, "status": s} for u, s in hops],
        "error": error,
        "error_detail": detail,
    }


def row(
    target: str,
    *,
    source: str = S,
    anchor: str = "",
    fragment: str = "",
    decision: str = "queued",
    kind: str = "a",
) -> LinkRow:
    return LinkRow(source, target, fragment, anchor, kind, False, decision)


def test_report_groups_by_target_with_sources_and_counts() -> None:
    records = [
        rec(S, depth=0),
        rec(S + "a"),
        rec(S + "gone", 404),
        rec("http://x.test/", None, error="dns", detail="dns: x.test"),
    ]
    rows = [
        row(S + "a", anchor="A"),
        row(S + "gone", anchor="Gone"),
        row(S + "gone", anchor="Gone", decision="seen"),
        row(S + "gone", anchor="Other", decision="seen"),
        row(S + "gone", source=S + "a", anchor="Gone", decision="seen"),
        row("http://x.test/", source=S + "a", anchor="X"),
        row("mailto:me@x.test", decision="scheme"),
        row("javascript:void(0)", decision="scheme"),
        row("http://[bad", decision="scheme"),
        row(S + "private/p", decision="queued"),  # no record: refused by robots.txt
        row(S + "excluded", decision="scope"),
    ]
    report = build_report(records, rows, {}, robots_disallowed=[S + "private/p"])
    assert report.to_json() == {
        "summary": {
            "checked": 5,
            "ok": 2,
            "broken": 3,
            "unverified": 0,
            "redirected": 0,
            "excluded": 4,
        },
        "broken": [
            {"url": "http://[bad", "status": None, "error": "invalid_url", "sources": [
                {"url": S, "anchor": "", "count": 1}]},
            {"url": "http://www.test/gone", "status": 404, "error": None, "sources": [
                {"url": S, "anchor": "Gone", "count": 2},
                {"url": S, "anchor": "Other", "count": 1},
                {"url": S + "a", "anchor": "Gone", "count": 1},
            ]},
            {"url": "http://x.test/", "status": None, "error": "dns", "sources": [
                {"url": S + "a", "anchor": "X", "count": 1}]},
        ],
        "unverified": [],
        "redirected": [],
    }  # fmt: skip
    assert report.excluded_reasons == {
        "robots.txt": 1,
        "scope / --exclude / --ignore": 1,
        "skipped: unsupported scheme": 2,
    }


def test_report_redirect_chains() -> None:
    n = "http://n.test/"
    records = [
        rec(S, depth=0),
        # 301 then 200: redirected, the target is the page reached
        rec(S + "old", final=S + "new", hops=((S + "old", 301),)),
        # 302 then 301 then 200: the link itself is only temporarily elsewhere: ok
        rec(S + "tmp", final=S + "new2", hops=((S + "tmp", 302), (S + "mid", 301))),
        # 308, 302, 200: update the link to the URL after the permanent hop
        rec(n + "a", final=n + "c", hops=((n + "a", 308), (n + "b", 302))),
        # 301 to a page already crawled: the chain goes on in that page's record
        rec(S + "moved", 301),
        rec(S + "target"),
        # 301 to a 404
        rec(S + "dead", final=S + "gone", hops=((S + "dead", 301),), status=404),
        # a loop through two records
        rec(S + "l1", 302),
        rec(S + "l2", 302),
        # redirect without Location
        rec(S + "noloc", 302, detail="redirect without Location"),
        # redirected to a target robots.txt refuses
        rec(S + "r", 302, detail="redirect target http://www.test/private disallowed"),
    ]
    rows = [
        row(S + "old"),
        row(S + "tmp"),
        row(n + "a"),
        row(S + "moved"),
        row(S + "dead"),
        row(S + "l1"),
        row(S + "noloc"),
        row(S + "r"),
        row(S + "mid", source="elsewhere", decision="seen"),  # reached mid-chain
        # the crawler's redirect rows: a 3xx at source -> target, and its decision
        row(S + "target", source=S + "moved", kind="redirect", decision="seen"),
        row(S + "l2", source=S + "l1", kind="redirect", decision="seen"),
        row(S + "l1", source=S + "l2", kind="redirect", decision="seen"),
        row(S + "private", source=S + "r", kind="redirect", decision="queued"),
    ]
    report = build_report(records, rows, None)
    red = {e.url: (e.outcome.status, e.outcome.target) for e in report.redirected}
    assert red == {
        S + "old": (301, S + "new"),
        n + "a": (308, n + "b"),
        S + "moved": (301, S + "target"),
        S + "mid": (301, S + "new2"),
    }
    broken = {e.url: (e.outcome.status, e.outcome.error) for e in report.broken}
    assert broken == {
        S + "dead": (404, None),
        S + "l1": (None, "too_many_redirects"),
        S + "noloc": (302, None),
    }
    assert report.summary["ok"] == 2  # the seed and /tmp
    assert report.excluded_reasons == {"redirect target http://www.test/private disallowed": 1}


def test_report_accept_and_permanent_hops() -> None:
    records = [
        rec(S, depth=0),
        rec(S + "busy", 429),
        rec(S + "old", final=S + "new", hops=((S + "old", 301),)),
    ]
    rows = [row(S + "busy"), row(S + "old")]
    plain = build_report(records, rows)
    assert plain.summary["unverified"] == 1 and plain.summary["redirected"] == 1
    accepted = build_report(records, rows, accept=[429, 301])
    assert accepted.summary == {
        "checked": 3,
        "ok": 3,
        "broken": 0,
        "unverified": 0,
        "redirected": 0,
        "excluded": 0,
    }


def test_report_fragments() -> None:
    records = [
        rec(S, depth=0),
        rec(S + "a"),
        rec(S + "gone", 404),
        rec(S + "old", final=S + "a", hops=((S + "old", 301),)),
        rec("http://ext.test/p"),
    ]
    anchors = {S: frozenset({"top-id"}), S + "a": frozenset({"sec", "legacy"})}
    rows = [
        row(S + "a", fragment="sec", anchor="ok"),
        row(S + "a", fragment="legacy", anchor="ok"),
        row(S + "a", fragment="nosuch", anchor="bad"),
        row(S + "a", fragment="nosuch", anchor="bad", source=S + "a", decision="seen"),
        row(S, fragment="top-id", decision="seen"),
        row(S, fragment="missing-here", decision="seen", anchor="self"),
        # the page is broken: every fragment merges into the page's entry
        row(S + "gone", fragment="x", anchor="g1"),
        row(S + "gone", fragment="y", anchor="g2", decision="seen"),
        # through a permanent redirect: the final page's ids are used
        row(S + "old", fragment="sec"),
        row(S + "old", fragment="nope", anchor="o"),
        # not an internal page (no ids recorded): fragments are not checked
        row("http://ext.test/p", fragment="whatever"),
    ]
    report = build_report(records, rows, anchors)
    broken = {e.url: (e.outcome.status, e.outcome.error, e.sources) for e in report.broken}
    assert set(broken) == {S + "#missing-here", S + "a#nosuch", S + "gone", S + "old#nope"}
    assert broken[S + "a#nosuch"][:2] == (200, "missing_fragment")
    assert [(s.url, s.anchor, s.count) for s in broken[S + "a#nosuch"][2]] == [
        (S, "bad", 1),
        (S + "a", "bad", 1),
    ]
    assert broken[S + "gone"][:2] == (404, None)
    assert len(broken[S + "gone"][2]) == 2
    assert broken[S + "old#nope"][:2] == (200, "missing_fragment")
    assert [e.url for e in report.redirected] == [S + "old"]
    # without anchors (--no-check-fragments) nothing is a missing fragment
    plain = build_report(records, rows, None)
    assert [e.url for e in plain.broken] == [S + "gone"]


def test_report_seed_without_sources_and_reason_not_checked() -> None:
    records = [rec(S, 404, depth=0)]
    rows = [row(S + "never", decision="seen")]
    report = build_report(records, rows)
    assert [(e.url, e.sources) for e in report.broken] == [(S, ())]
    assert report.excluded_reasons == {"not checked": 1}


# ---------------------------------------------------------------------------- formats


def _sample() -> Any:
    records = [
        rec(S, depth=0),
        rec(S + "gone", 404),
        rec(S + "wall", 403),
        rec(S + "old", final=S + "new", hops=((S + "old", 308),)),
    ]
    rows = [
        row(S + "gone", anchor='A "quoted" | <b>'),
        row(S + "gone", anchor='A "quoted" | <b>', decision="seen"),
        row(S + "wall", anchor="Wall"),
        row(S + "old", anchor="Old"),
        row("mailto:x@y", decision="scheme"),
    ]
    return build_report(records, rows)


def test_format_json_is_the_contract() -> None:
    doc = json.loads(format_report(_sample(), "json"))
    assert list(doc) == ["summary", "broken", "unverified", "redirected"]
    assert list(doc["summary"]) == [
        "checked",
        "ok",
        "broken",
        "unverified",
        "redirected",
        "excluded",
    ]
    assert doc["redirected"] == [
        {
            "url": S + "old",
            "status": 308,
            "error": None,
            "target": S + "new",
            "sources": [{"url": S, "anchor": "Old", "count": 1}],
        }
    ]
    assert list(doc["broken"][0]) == ["url", "status", "error", "sources"]


def test_format_text() -> None:
    assert format_report(_sample(), "text") == (
        "Broken links: 1\n"
        "  http://www.test/gone\n"
        "    HTTP 404\n"
        '    on http://www.test/ "A "quoted" | <b>" (2 times)\n'
        "\n"
        "Unverified links (could not be checked; not proof that they are gone): 1\n"
        "  http://www.test/wall\n"
        "    HTTP 403\n"
        '    on http://www.test/ "Wall"\n'
        "\n"
        "Permanently redirected links (update them): 1\n"
        "  http://www.test/old\n"
        "    HTTP 308, -> http://www.test/new\n"
        '    on http://www.test/ "Old"\n'
        "\n"
        "4 checked: 1 ok, 1 broken, 1 unverified, 1 redirected; 1 excluded "
        "(skipped: unsupported scheme 1)\n"
    )


def test_format_csv_markdown_html_junit() -> None:
    report = _sample()
    rows = list(csv.reader(io.StringIO(format_report(report, "csv"))))
    assert rows == [
        ["verdict", "url", "status", "error", "target", "source", "anchor", "count"],
        ["broken", S + "gone", "404", "", "", S, 'A "quoted" | <b>', "2"],
        ["unverified", S + "wall", "403", "", "", S, "Wall", "1"],
        ["redirected", S + "old", "308", "", S + "new", S, "Old", "1"],
    ]
    md = format_report(report, "markdown")
    assert "| http://www.test/gone | HTTP 404 | http://www.test/ | " in md
    assert 'A "quoted" \\| <b> | 2 |' in md
    html = format_report(report, "html")
    assert html.startswith("<!doctype html>") and "<b>" not in html
    assert "A &quot;quoted&quot; | &lt;b&gt;" in html
    root = ET.fromstring(format_report(report, "junit"))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("broken", S + "gone"),
        ("unverified", S + "wall"),
        ("redirected", S + "old"),
    ]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "HTTP 404"
    with pytest.raises(ValueError, match="unknown report format"):
        format_report(report, "yaml")


# ---------------------------------------------------------------------------- files


def test_anchors_file_round_trip_and_crash_repair(tmp_path: Path) -> None:
    path = tmp_path / "anchors.jsonl"
    w = AnchorsWriter(path)
    w.write(S, {"b", "a"})
    w.write(S + "x", [])
    w.close()
    with open(path, "ab") as fh:
        fh.write(b'{"url": "http://www.test/partial", "ids": ["q"')  # kill -9 mid-write
    w = AnchorsWriter(path)  # cuts the partial line
    w.write(S, {"c"})  # fetched again after a resume: the last line wins
    w.close()
    assert read_anchors(path) == {S: frozenset({"c"}), S + "x": frozenset()}
    assert read_anchors(path, {S + "x"}) == {S + "x": frozenset()}
    assert read_anchors(tmp_path / "none.jsonl") == {}


def test_collect_cache_keeps_fresh_stable_external_verdicts(tmp_path: Path) -> None:
    now = 1714564800.0  # 2024-05-01T12:00:00Z
    fresh, old = "2024-05-01T11:00:00.000Z", "2024-04-29T12:00:00.000Z"
    lines = [
        rec("http://e.test/ok", fetched_at=fresh),
        rec("http://e.test/gone", 404, fetched_at=fresh),
        rec("http://e.test/moved", final="http://e.test/new", hops=(("http://e.test/moved", 301),),
            fetched_at=fresh),
        rec("http://e.test/old-ok", fetched_at=old),  # too old
        rec("http://e.test/busy", 429, fetched_at=fresh),  # transient: checked again
        rec("http://e.test/err", None, error="timeout", fetched_at=fresh),
        rec("http://e.test/3xx", 302, fetched_at=fresh),  # chain continued elsewhere
        rec(S + "internal", fetched_at=fresh),  # internal pages are always crawled
    ]  # fmt: skip
    (tmp_path / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    policy = CheckPolicy(CrawlSettings(out_dir="x", check_links=True), [S])
    got = collect_cache(tmp_path, policy, 86400, now)
    assert [r["url"] for r in got] == [
        "http://e.test/gone",
        "http://e.test/moved",
        "http://e.test/ok",
    ]
    assert collect_cache(tmp_path, policy, 0, now) == []
    # carried over: the cache file of the previous check counts too, newest record wins
    policy.set_cache(got, tmp_path)
    (tmp_path / "pages.jsonl").write_text("")
    again = collect_cache(tmp_path, policy, 86400, now)
    assert [r["url"] for r in again] == [r["url"] for r in got]
    fresh_policy = CheckPolicy(CrawlSettings(out_dir="x", check_links=True), [S])
    assert fresh_policy.load_cache(tmp_path) == 3
    assert fresh_policy.cached("http://e.test/ok") is not None
    assert fresh_policy.cached("http://e.test/busy") is None


def test_outcome_defaults() -> None:
    assert Outcome("ok").target is None


# ---------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("value", "urls"),
    [
        ("a.png", ["a.png"]),
        ("a.png 1x, b.png 2x", ["a.png", "b.png"]),
        ("  a.png   480w ,b.png 800w  ", ["a.png", "b.png"]),
        ("a.png,b.png", ["a.png,b.png"]),  # no whitespace after the comma: one URL
        ("a.png, b.png", ["a.png", "b.png"]),  # trailing comma ends the URL
        ("a.png 1x,, ,b.png", ["a.png", "b.png"]),
        ("x.png (a, b) 1x, y.png", ["x.png", "y.png"]),  # comma inside parentheses
        ("data:image/png;base64,AAA= 1x, z.png 2x", ["data:image/png;base64,AAA=", "z.png"]),
        ("", []),
        (" , ", []),
    ],
)
def test_parse_srcset(value: str, urls: list[str]) -> None:
    assert parse_srcset(value) == urls


PAGE = b"""<!doctype html><html><head>
<link rel="stylesheet" href="/s.css"><link rel="shortcut icon" href="/f.ico">
<link rel="alternate" href="/feed.xml"><link rel="canonical" href="/">
<script src="/app.js"></script><script>inline()</script>
</head><body id="top-of-page">
<h2 id="sec">S</h2><a name="legacy"></a><a id="both" name="both-name" href="/x">X</a>
<img src="/i.png" srcset="/i-1x.png 1x, /i-2x.png 2x" alt=" The  logo ">
<img alt="no src">
<picture><source srcset="/p.webp" type="image/webp"><source src="/v.mp4"></picture>
<iframe src="/frame.html"></iframe>
<template><img src="/tpl.png"><p id="in-template"></p></template>
<!-- <img src="/commented.png"> -->
</body></html>"""


def test_extract_resources_and_ids() -> None:
    page = extract(PAGE, "http://h.test/p", resources=True, ids=True)
    got = [(lk.kind, lk.url, lk.anchor) for lk in page.links]
    assert got == [
        ("link", "http://h.test/s.css", ""),
        ("link", "http://h.test/f.ico", ""),
        ("canonical", "http://h.test/", ""),
        ("script", "http://h.test/app.js", ""),
        ("a", "http://h.test/x", "X"),
        ("img", "http://h.test/i.png", "The logo"),
        ("srcset", "http://h.test/i-1x.png", "The logo"),
        ("srcset", "http://h.test/i-2x.png", "The logo"),
        ("srcset", "http://h.test/p.webp", ""),
        ("media", "http://h.test/v.mp4", ""),
        ("iframe", "http://h.test/frame.html", ""),
    ]
    assert page.ids == {"top-of-page", "sec", "legacy", "both", "both-name"}


def test_extract_without_the_extras_is_unchanged() -> None:
    page = extract(PAGE, "http://h.test/p")
    assert [lk.kind for lk in page.links] == ["canonical", "a", "iframe"]
    assert page.ids == frozenset()


# ---------------------------------------------------------------------------- resolver


class _CountingResolver(AbstractResolver):
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.calls.append((host, int(family)))
        await asyncio.sleep(0.01)
        if host == "good.test":
            return [
                ResolveResult(
                    hostname=host, host="93.184.216.34", port=port, family=socket.AF_INET,
                    proto=0, flags=0,
                )
            ]  # fmt: skip
        raise OSError(-2, "Name or service not known")

    async def close(self) -> None:
        pass


async def test_resolver_caches_failed_lookups() -> None:
    now = [0.0]
    delegate = _CountingResolver()
    r = SkitterResolver(delegate=delegate, clock=lambda: now[0], allow_private=True)
    # concurrent and later lookups of a dead name: one query, the same error for all
    results = await asyncio.gather(
        *(r.lookup("dead.test", 80) for _ in range(5)), return_exceptions=True
    )
    assert all(isinstance(e, ConnectError) and e.kind == "dns" for e in results)
    for _ in range(3):
        with pytest.raises(ConnectError) as info:
            await r.lookup("dead.test", 443)
        assert info.value.kind == "dns" and "Name or service not known" in info.value.detail
    # a failure for AF_UNSPEC (no address at all) also answers the per-family lookups
    with pytest.raises(ConnectError):
        await r.resolve("dead.test", 80, socket.AF_INET)
    assert delegate.calls == [("dead.test", int(socket.AF_UNSPEC))]
    assert r.lookups == 1
    # after the negative TTL the name is asked again
    now[0] += 61
    with pytest.raises(ConnectError):
        await r.lookup("dead.test", 80)
    assert r.lookups == 2
    # good names are unaffected
    assert await r.lookup("good.test", 80) == ["93.184.216.34"]
    # negative caching can be turned off
    off = SkitterResolver(delegate=_CountingResolver(), negative_ttl_s=0, allow_private=True)
    for _ in range(2):
        with pytest.raises(ConnectError):
            await off.lookup("dead.test", 80)
    assert off.lookups == 2


def test_fragment_past_the_cut_is_unverified_and_text_fragments_never_broken() -> None:
    ext = "http://ext.test/p"
    records = [rec(S, depth=0), rec(ext)]
    rows = [
        row(ext, fragment="early", anchor="e"),
        row(ext, fragment="deep", anchor="d", decision="seen"),
        row(ext, fragment=":~:text=anything", anchor="t", decision="seen"),
        row(ext, fragment="early:~:text=x", anchor="t2", decision="seen"),
    ]
    anchors = {ext: frozenset({"early"})}
    report = build_report(records, rows, anchors, cut_pages=[ext])
    assert [(e.url, e.outcome.error) for e in report.unverified] == [
        (ext + "#deep", "fragment_unverified")
    ]
    assert report.broken == ()
    whole = build_report(records, rows, anchors)  # the page was read whole: broken
    assert [(e.url, e.outcome.error) for e in whole.broken] == [(ext + "#deep", "missing_fragment")]


def test_start_url_refused_by_robots_is_excluded_and_no_seed_answered() -> None:
    seed = S + "private/start"
    report = build_report([], [], {}, robots_disallowed=[seed], seeds=[seed])
    assert report.summary["excluded"] == 1 and report.summary["checked"] == 0
    assert report.excluded_reasons == {"robots.txt": 1}
    assert report.no_seed_answered and report.seeds_unanswered == (seed,)
    other = build_report([rec(S, depth=0)], [], {}, robots_disallowed=[seed], seeds=[seed, S])
    assert not other.no_seed_answered and other.seeds_unanswered == (seed,)
    assert other.summary["ok"] == 1 and other.summary["excluded"] == 1
