"""Tests for skitter.traps: the spider-trap defences and the per-host page cap."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skitter.cli import build_parser, settings_from_args
from skitter.export.links import LinkRow, LinksWriter
from skitter.rules import Decision
from skitter.settings import ScopeSettings
from skitter.state import check_resume_compatible, loosened_limits, resume_limits
from skitter.traps import DEFENCES, MAX_REPORTED_URLS, TrapGuard, path_depth
from skitter.urls import canonicalize

H = "http://www.example.test"


def guard(**kw: object) -> TrapGuard:
    return TrapGuard(ScopeSettings(**kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "depth"),
    [("/", 0), ("/a", 1), ("/a/", 1), ("/a/b", 2), ("/a/b/", 2), ("/a//b", 3), ("////", 3)],
)
def test_path_depth(path: str, depth: int) -> None:
    assert path_depth(path) == depth


@pytest.mark.parametrize(
    ("path", "trapped"),
    [
        ("/a/b/a/b/a/b/", True),
        ("/x/x/x", True),
        ("/x/y/x/z/x", True),
        ("/x/x", False),
        ("/a/b/a/b", False),
        ("/a//b//c//d", False),  # empty segments are not repeats
        ("/2024/01/01/post", False),
        ("/X/x/X", False),  # case-sensitive, like paths
    ],
)
def test_repeated_segments(path: str, trapped: bool) -> None:
    v = guard().admit(H + path)
    assert (v is not None) is trapped
    if v is not None:
        assert v.decision is Decision.TRAP and v.defence == "repeated_segments"


def test_path_depth_default_32() -> None:
    g = guard()
    ok = "".join(f"/s{i}" for i in range(32))
    assert g.admit(H + ok) is None
    v = g.admit(H + ok + "/s32")
    assert v is not None and v.defence == "path_depth"
    assert v.detail == "path has 33 segments (at most 32)"


def test_query_variants_budget_per_scheme_host_path() -> None:
    g = guard(max_query_variants_per_path=3)
    for i in range(3):
        assert g.admit(f"{H}/cal?m={i}") is None
    v = g.admit(f"{H}/cal?m=3")
    assert v is not None and v.decision is Decision.TRAP and v.defence == "query_variants"
    assert g.admit(f"{H}/cal?m=1") is None  # a known variant passes again (frontier: "seen")
    assert g.admit(f"{H}/cal") is None  # no query: not a variant
    assert g.admit(f"{H}/other?m=9") is None  # another path
    assert g.admit("https://www.example.test/cal?m=9") is None  # another scheme
    assert g.admit(f"{H}:8080/cal?m=9") is None  # another host key
    assert g.report()["query_variants"] == {"limit": 3, "count": 1, "urls": [f"{H}/cal?m=3"]}


def test_query_variants_of_one() -> None:
    g = guard(max_query_variants_per_path=1)
    assert g.admit(f"{H}/s?a=1") is None
    assert g.admit(f"{H}/s?a=1") is None
    assert g.admit(f"{H}/s?a=2") is not None


def test_max_pages_per_host() -> None:
    g = guard(max_pages_per_host=2)
    g.note(f"{H}/")  # a seed counts
    assert g.admit(f"{H}/a") is None
    v = g.admit(f"{H}/b")
    assert v is not None and v.decision is Decision.LIMIT and v.defence == "max_pages_per_host"
    assert g.admit(f"{H}/a") is None and g.admit(f"{H}/") is None  # known URLs pass
    assert g.admit("http://b.example.test/x") is None  # per host
    assert g.report()["max_pages_per_host"]["count"] == 1


def test_a_dropped_url_spends_no_budget() -> None:
    g = guard(max_pages_per_host=2, max_query_variants_per_path=1)
    assert g.admit(f"{H}/q?a=1") is None
    assert g.admit(f"{H}/q?a=2") is not None  # query budget: spends no host budget
    assert g.admit(f"{H}/other") is None


@pytest.mark.parametrize("off", [None, 0])
def test_defences_can_be_turned_off(off: int | None) -> None:
    g = guard(
        max_path_depth=off,
        max_query_variants_per_path=off,
        max_segment_repeats=off,
        max_pages_per_host=off,
    )
    assert g.admit(H + "/x" * 100) is None
    for i in range(300):
        assert g.admit(f"{H}/cal?i={i}") is None
    assert all(v["limit"] is None and v["count"] == 0 for v in g.report().values())


def test_report_lists_at_most_100_urls_and_state_round_trips() -> None:
    g = guard(max_query_variants_per_path=1)
    g.admit(f"{H}/c?i=0")
    for i in range(1, 150):
        assert g.admit(f"{H}/c?i={i}") is not None
    rep = g.report()
    assert list(rep) == list(DEFENCES)
    assert rep["query_variants"]["count"] == 149
    assert len(rep["query_variants"]["urls"]) == MAX_REPORTED_URLS
    g2 = guard(max_query_variants_per_path=1)
    g2.load_state(g.to_state())
    assert g2.report() == rep
    g2.load_state({"counts": {"path_depth": -1, "x": 3}, "urls": {"path_depth": [1, "u"]}})
    assert g2.report()["path_depth"]["count"] == 0
    assert g2.report()["path_depth"]["urls"] == ["u"]


def test_replay_links_rebuilds_budgets(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    with LinksWriter(str(path)) as w:
        w.write_rows(
            [LinkRow(f"{H}/", f"{H}/cal?m={i}", "", "a\tb", "a", False, "queued") for i in range(3)]
            + [
                LinkRow(f"{H}/", f"{H}/cal?m=9", "", "", "a", False, "seen"),
                LinkRow(f"{H}/", f"{H}/x", "", "", "a", False, "queued"),
                LinkRow(f"{H}/", f"{H}/cal?m=8", "", "", "redirect", False, "queued"),
            ]
        )
    g = guard(max_query_variants_per_path=4, max_pages_per_host=10)
    assert g.replay_links(path) == 5
    assert g.admit(f"{H}/cal?m=5") is not None  # 4 variants known already
    assert g.admit(f"{H}/cal?m=0") is None
    g = guard(max_query_variants_per_path=4)
    assert g.replay_links(path) == 4  # only rows with a query are needed
    assert g.replay_links(tmp_path / "missing.tsv") == 0


def test_cli_flags_and_resume_compatibility(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [
            "crawl",
            "--out",
            str(tmp_path / "o"),
            "--max-pages-per-host",
            "50",
            "--max-path-depth",
            "0",
            "--max-query-variants-per-path",
            "7",
            "--max-segment-repeats",
            "3",
            "http://a.test/",
        ]
    )
    s = settings_from_args(args)
    assert s.scope.max_pages_per_host == 50
    assert s.scope.max_path_depth is None  # 0 = off
    assert s.scope.max_query_variants_per_path == 7
    assert s.scope.max_segment_repeats == 3
    defaults = settings_from_args(
        build_parser().parse_args(["crawl", "--out", str(tmp_path / "o"), "http://a.test/"])
    )
    assert defaults.scope.max_pages_per_host is None
    assert defaults.scope.max_path_depth == 32
    assert defaults.scope.max_query_variants_per_path == 100
    assert defaults.scope.max_segment_repeats == 2
    # the trap limits may change on resume (stored; raised: what they left out is queued)
    check_resume_compatible(defaults, s)
    assert loosened_limits(resume_limits(defaults.scope), resume_limits(s.scope)) == [
        "max-path-depth",  # 32 -> off
        "max-segment-repeats",  # 2 -> 3
    ]
    assert loosened_limits(resume_limits(s.scope), resume_limits(defaults.scope)) == [
        "max-pages-per-host",  # 50 -> none (lifted)
        "max-query-variants-per-path",  # 7 -> 100
    ]
    # a limit the checkpoint does not know (an older Skitter's) counts as unchanged
    two = replace(s.scope, max_depth=2)
    assert loosened_limits({"max_depth": 2}, resume_limits(two)) == []
    assert loosened_limits({"max_depth": 2}, resume_limits(replace(two, max_depth=3))) == [
        "max-depth"
    ]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["crawl", "--out", "o", "--max-pages-per-host", "0", "x"])


_segment = st.sampled_from(["a", "b", "x", "", "%2F", "é", "1"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(_segment, max_size=40), max_size=20),
    st.lists(st.text(max_size=8), max_size=30),
)
def test_bounds_hold_for_any_urls(paths: list[list[str]], queries: list[str]) -> None:
    g = guard(max_query_variants_per_path=5, max_pages_per_host=12)
    admitted: set[str] = set()
    for segs in paths:
        for q in [*queries, None]:
            raw = H + "/" + "/".join(segs) + ("" if q is None else "?" + q)
            url = canonicalize(raw)
            if url is not None and g.admit(url) is None:
                admitted.add(url)
    assert len(admitted) <= 12
    per_path: dict[str, set[str]] = {}
    for url in admitted:
        head, sep, query = url.partition("?")
        if sep:
            per_path.setdefault(head, set()).add(query)
        path = head.split("/", 3)[3] if head.count("/") >= 3 else ""
        segs = [s for s in path.split("/") if s]
        assert not segs or max(segs.count(s) for s in segs) <= 2
        assert path_depth("/" + path) <= 32
    assert all(len(v) <= 5 for v in per_path.values())


def test_path_verdict_memo_is_bounded_and_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    from skitter import traps

    monkeypatch.setattr(traps, "_PATH_MEMO_SIZE", 4)
    g = TrapGuard(ScopeSettings())
    urls = [f"{H}/a/{i}/a/a" if i % 3 == 0 else f"{H}/a/{i}" for i in range(30)]
    for _ in range(2):  # the second pass answers from the memo (or after it was emptied)
        for u in urls:
            verdict = g.admit(u)
            assert (verdict is not None) == u.endswith("/a/a"), u
            if verdict is not None:
                assert verdict.defence == "repeated_segments"
        assert len(g._path_verdicts) <= 4
    assert g.report()["repeated_segments"]["count"] == 20
