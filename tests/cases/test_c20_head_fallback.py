"""C20 — HEAD not allowed: the crawl side only.

The link-checker half (HEAD first, fall back to GET on 405/501/400..., read at most ~1 MiB
of a fallback body) is ``skitter check-links``, issue 5, built separately. What the crawler
itself must do: it never trusts HEAD -- it only sends GET, so servers that reject HEAD are
crawled normally -- and a 50 MiB body is refused from its Content-Length without being
downloaded (the record names the live 200 status).
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import WWW, run
from tests.integration.rawserver import RawConnection, RawRequest, RawServer, head, response

LC = "lc.example.test"
MIB = 1 << 20


def by_method(head_status: int, get_status: int) -> object:
    async def handler(req: RawRequest, conn: RawConnection) -> None:
        status = head_status if req.method == "HEAD" else get_status
        extra = [("Allow", "GET")] if status == 405 else []
        await conn.write(response(status, [("Content-Type", "text/html"), *extra], b"<p>x</p>"))

    return handler


async def big(req: RawRequest, conn: RawConnection) -> None:
    if req.method == "HEAD":
        await conn.write(response(405, [("Allow", "GET")]))
        return
    await conn.write(head(200, [("Content-Type", "text/html"), ("Content-Length", "52428800")]))
    chunk = b"x" * MIB
    for _ in range(50):
        if conn.peer_closed():
            return
        await conn.write(chunk)


async def test_c20_crawler_uses_get_only_and_refuses_huge_bodies_early(
    raw: RawServer, tmp_path: Path
) -> None:
    paths = ["/doc", "/api", "/odd", "/gone", "/big"]
    links = "".join(f'<a href="{raw.url(p, LC)}">{p}</a>' for p in paths)
    raw.route("/", response(200, [("Content-Type", "text/html")], links.encode()), host=WWW)
    raw.route("/doc", by_method(405, 200), host=LC)  # type: ignore[arg-type]
    raw.route("/api", by_method(501, 200), host=LC)  # type: ignore[arg-type]
    raw.route("/odd", by_method(400, 200), host=LC)  # type: ignore[arg-type]
    raw.route("/gone", by_method(404, 404), host=LC)  # type: ignore[arg-type]
    raw.route("/big", big, host=LC)
    res = await run(raw, tmp_path / "out", [raw.url("/", WWW)], scope_scope="domain")
    assert {r.method for r in raw.log} == {"GET"}
    for p in ("/doc", "/api", "/odd"):
        rec = res.record(raw.url(p, LC))
        assert rec["status"] == 200 and rec["error"] is None, p
    gone = res.record(raw.url("/gone", LC))
    assert gone["status"] == 404 and gone["error"] is None  # a status, not a fetch error
    rec = res.record(raw.url("/big", LC))
    assert rec["error"] == "body_too_large"
    assert rec["error_detail"] == (
        "body exceeds limit: Content-Length 52428800 > 10485760 bytes (HTTP status 200)"
    )
    assert len(raw.requests("/big", LC)) == 1
