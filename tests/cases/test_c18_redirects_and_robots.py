"""C18 — redirects and robots.txt across hosts.

A redirect is a new request: scope, the target host's robots.txt and its politeness apply
before it is followed. A robots.txt fetch follows up to five redirects and its result
applies to the host that was asked (never cached under the redirect target's host).
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import WWW, page, requested, run
from tests.integration.site import Site, redirect, text

OTHER = "other.example.test"


def build(site: Site) -> None:
    allow_all = text("User-agent: *\nDisallow:\n")
    site.route(WWW, "/robots.txt", allow_all)
    site.route(WWW, "/go?id=1", redirect(site.url(OTHER, "/private/report.html")))
    site.route(OTHER, "/robots.txt", text("User-agent: *\nDisallow: /private/\n"))
    site.route("r.example.test", "/robots.txt", redirect("/config/robots-main.txt", 301))
    site.route(
        "r.example.test", "/config/robots-main.txt", text("User-agent: *\nDisallow: /scratch/\n")
    )
    site.route("m.example.test", "/robots.txt", redirect(site.url("n.example.test", "/")))
    site.route("n.example.test", "/robots.txt", text("User-agent: *\nDisallow: /\n"))
    site.route(
        "n.example.test",
        "/",
        page("<h1>n home</h1><p>User-agent: *</p>"),
    )
    site.route("c.example.test", "/robots.txt", redirect("/r1", 301))
    for i in range(1, 6):
        site.route("c.example.test", f"/r{i}", redirect(f"/r{i + 1}", 301))
    site.route("c.example.test", "/r6", text("User-agent: *\nDisallow: /\n"))
    for h in (WWW, OTHER, "r.example.test", "m.example.test", "n.example.test", "c.example.test"):
        site.fallback(h, page())


async def test_c18_run1_redirect_targets_obey_their_hosts_robots(
    site: Site, tmp_path: Path
) -> None:
    build(site)
    seeds = [
        site.url(WWW, "/go?id=1"),
        site.url(OTHER, "/pub.html"),
        site.url("r.example.test", "/scratch/x"),
        site.url("r.example.test", "/ok"),
        site.url("m.example.test", "/page"),
        site.url("n.example.test", "/page"),
        site.url("c.example.test", "/page"),
    ]
    res = await run(site, tmp_path / "out", seeds)
    # other: robots.txt first; the redirect target it forbids is never requested
    assert site.paths(OTHER)[0] == "/robots.txt"
    assert site.paths(OTHER).count("/robots.txt") == 1
    assert requested(site, OTHER) == ["/pub.html"]
    rec = res.record(site.url(WWW, "/go?id=1"))
    assert rec["status"] == 302 and rec["error"] is None
    assert rec["final_url"] == site.url(WWW, "/go?id=1")
    assert rec["error_detail"] == (
        f"redirect target {site.url(OTHER, '/private/report.html')} disallowed by robots.txt"
    )
    robots = res.report["robots"]
    assert robots[site.url(OTHER, "")]["disallowed_urls"] == [
        site.url(OTHER, "/private/report.html")
    ]
    # r: robots.txt redirected on the same host; its rules apply to r
    assert site.paths("r.example.test") == ["/robots.txt", "/config/robots-main.txt", "/ok"]
    assert robots[site.url("r.example.test", "")]["final_url"] == site.url(
        "r.example.test", "/config/robots-main.txt"
    )
    # m: robots.txt redirected to n's HTML homepage -> no rules for m; n keeps its own
    assert requested(site, "m.example.test") == ["/page"]
    assert "/page" not in site.paths("n.example.test")
    assert robots[site.url("m.example.test", "")]["status"] == "ok"
    assert robots[site.url("m.example.test", "")]["final_url"] == site.url("n.example.test", "/")
    assert robots[site.url("n.example.test", "")]["disallowed_urls"] == [
        site.url("n.example.test", "/page")
    ]
    # c: more than five robots.txt redirects -> unavailable -> allow all
    assert site.paths("c.example.test") == [
        "/robots.txt",
        "/r1",
        "/r2",
        "/r3",
        "/r4",
        "/r5",
        "/page",
    ]
    assert robots[site.url("c.example.test", "")]["status"] == "redirect_limit"


async def test_c18_run2_offsite_redirect_is_not_followed(site: Site, tmp_path: Path) -> None:
    build(site)
    res = await run(site, tmp_path / "out", [site.url(WWW, "/go?id=1")])
    assert site.paths(OTHER) == []  # not even robots.txt
    rec = res.record(site.url(WWW, "/go?id=1"))
    assert rec["status"] == 302 and rec["error"] is None
    target = site.url(OTHER, "/private/report.html")
    assert rec["error_detail"] == f"redirect to {target} not followed: out of scope (offsite)"
    assert [(r["kind"], r["target"], r["decision"]) for r in res.links] == [
        ("redirect", target, "scope")
    ]
