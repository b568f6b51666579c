"""Kind 3 of issue 10 — HEAD is not GET.

A link checker's verdict is what a GET of the original URL gives. When HEAD and GET disagree
(HEAD redirected to an error page, HEAD 404/405/501 while GET works, a HEAD answered with a
body), the GET of the original URL decides, never a GET of HEAD's redirect target; a
connection that received bytes after a HEAD answer is not reused.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.rawserver import RawConnection, RawRequest, RawServer, response
from tests.integration.test_check_links import run_cli

W = "www.example.test"
EXT = "ext.example.test"
HB = "hb.example.test"  # HEAD answered with a body (a host that otherwise takes HEAD)
PAGE = b"<!doctype html><p>the page</p>"


def head_get(head: bytes, get: bytes):  # type: ignore[no-untyped-def]
    """HEAD is answered ``head`` (written as is, maybe with a body), GET ``get``; the
    connection stays open for more requests."""

    async def handler(req: RawRequest, conn: RawConnection) -> None:
        await conn.write(head if req.method == "HEAD" else get)
        conn.keep_alive = True

    return handler


def html(status: int, body: bytes = PAGE, extra: list[tuple[str, str]] | None = None) -> bytes:
    return response(status, [("Content-Type", "text/html"), *(extra or [])], body)


async def late_body(req: RawRequest, conn: RawConnection) -> None:
    """HEAD: the answer, then (after the client has it) a few body bytes with no line end,
    which a reused connection would put in front of the next response."""
    if req.method == "HEAD":
        await conn.write(html(200)[: -len(PAGE)])  # the head alone: a proper HEAD answer
        await conn.sleep(0.05)
        await conn.write(b"<p>late")
    else:
        await conn.write(html(200))
    conn.keep_alive = True


async def test_k3_get_of_the_original_url_decides(raw: RawServer, tmp_path: Path) -> None:
    cases = {
        # HEAD is redirected to an error page; GET of the URL itself works
        "/head-redirect": head_get(
            response(302, [("Location", "/error-page")], b"", content_length=True), html(200)
        ),
        "/head-404": head_get(html(404, b""), html(200)),
        "/head-405": head_get(html(405, b""), html(200)),
        "/head-501": head_get(html(501, b""), html(200)),
        # HEAD answered with a body (bytes after the answer), GET works
        # HEAD says fine, but the page is gone: HEAD 2xx is trusted (no GET), as before
        "/gone": head_get(html(404, b""), html(404)),
    }
    for path, handler in cases.items():
        raw.route(path, handler, host=EXT, keep_alive=True)
    raw.route("/error-page", html(404), host=EXT, keep_alive=True)
    raw.route("/head-body", head_get(html(200), html(200)), host=HB, keep_alive=True)
    raw.route("/head-late-body", late_body, host=HB, keep_alive=True)
    raw.route("/hb-after", head_get(html(200, b""), html(200)), host=HB, keep_alive=True)
    raw.route("/after", head_get(html(200, b""), html(200)), host=EXT, keep_alive=True)
    links = [*cases, "/after"]
    links_hb = ["/head-body", "/head-late-body", "/hb-after"]
    seed = "".join(
        [f'<a href="{raw.url(p, EXT)}">{p}</a>' for p in links]
        + [f'<a href="{raw.url(p, HB)}">{p}</a>' for p in links_hb]
    ).encode()
    raw.route("/", html(200, b"<!doctype html>" + seed), host=W)
    code, out, err = await run_cli(
        raw.port, raw.hosts(), raw.url("/", W), "--format", "json", "--out", str(tmp_path / "c")
    )
    report = json.loads(out)
    assert [b["url"] for b in report["broken"]] == [raw.url("/gone", EXT)], out
    assert code == 1, err
    assert report["summary"]["ok"] == 1 + 5 + 3, out  # the seed page and 8 links
    # the redirect HEAD pointed to was never the verdict: it was not fetched with GET
    assert [r.method for r in raw.requests("/error-page", EXT)] in ([], ["HEAD"])
    for path in ("/head-redirect", "/head-404", "/head-405", "/head-501"):
        assert "GET" in [r.method for r in raw.requests(path, EXT)], path
    # the request after a HEAD answered with a body came on another connection
    head_body = [
        r
        for p in ("/head-body", "/head-late-body")
        for r in raw.requests(p, HB)
        if r.method == "HEAD"
    ]
    assert head_body
    for req in head_body:
        later = [r for r in raw.log if r.time > req.time and r.host == HB]
        assert all(r.conn != req.conn for r in later)
