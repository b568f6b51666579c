"""C16 — Location header parsing: raw UTF-8 and Latin-1 bytes, ``///host``, relative,
a literal space, and a 3xx without Location.

End to end through the crawler on a raw-bytes server: the next request the crawler makes
(server log, pages.jsonl ``final_url``, links.tsv redirect rows) is the browser's URL.
Targets on port 80/443 (cases 3 and 5) cannot reach the test server: their record shows
the URL the crawler tried (it then fails with ``dns``, the name being unmapped).
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import WWW, run
from tests.integration.rawserver import RawServer, response

NEWS = "новости".encode()
assert bytes.fromhex("D0BDD0BED0B2D0BED181D182D0B8") == NEWS


def redirect(location: bytes | None, status: int = 302, body: bytes = b"") -> bytes:
    headers: list[tuple[bytes, bytes]] = [(b"Content-Type", b"text/html")]
    if location is not None:
        headers.append((b"Location", location))
    return response(status, headers, body)


async def test_c16_location_header_end_to_end(raw: RawServer, tmp_path: Path) -> None:
    ok = response(200, [("Content-Type", "text/html")], b"<p>ok</p>")
    raw.route("/news/15/", redirect(b"/news/15/" + NEWS, 301), host=WWW)
    raw.route("/l2", redirect(b"/caf\xe9"), host=WWW)
    raw.route("/l3", redirect(b"///other.example.test/p"), host=WWW)
    raw.route("/a/b", redirect(b"c"), host=WWW)
    raw.route("/l5", redirect(b"https://www.example.test/x?q=a b"), host=WWW)
    raw.route("/l6", redirect(None, body=b'<a href="/l6-body">body</a>'), host=WWW)
    raw.route("/after", ok, host=WWW)
    news_target = "/news/15/%D0%BD%D0%BE%D0%B2%D0%BE%D1%81%D1%82%D0%B8"
    for path in (news_target, "/caf%E9", "/a/c"):
        raw.route(path, ok, host=WWW)
    seeds = [raw.url(p, WWW) for p in ("/news/15/", "/l2", "/l3", "/a/b", "/l5", "/l6", "/after")]
    res = await run(raw, tmp_path / "out", seeds, scope_scope="any", pol_retries=0)

    def follows(path: str) -> str:
        rec = res.record(raw.url(path, WWW))
        assert rec["redirects"] == [{"url": raw.url(path, WWW), "status": rec_status(path)}]
        rows = [
            r for r in res.links if r["kind"] == "redirect" and r["source"] == raw.url(path, WWW)
        ]
        assert len(rows) == 1 and rows[0]["decision"] == "queued"
        assert rows[0]["target"] == rec["final_url"]
        return str(rec["final_url"])

    def rec_status(path: str) -> int:
        return 301 if path == "/news/15/" else 302

    # 1, 2, 4: followed on the test server; the request line is byte-exact
    assert follows("/news/15/") == raw.url(news_target, WWW)
    assert follows("/l2") == raw.url("/caf%E9", WWW)  # not %C3%A9
    assert follows("/a/b") == raw.url("/a/c", WWW)
    targets = [r.target for r in raw.log if r.host == WWW]
    for t in (news_target, "/caf%E9", "/a/c"):
        assert targets.count(t) == 1, t
    assert "/caf%C3%A9" not in targets
    # 3: "///host/p" after an http base names host "other.example.test"
    assert follows("/l3") == "http://other.example.test/p"
    # 5: a literal space is percent-encoded
    assert follows("/l5") == "https://www.example.test/x?q=a%20b"
    for p in ("/l3", "/l5"):
        rec = res.record(raw.url(p, WWW))
        assert rec["error"] == "dns" and rec["status"] is None  # unmapped: nothing sent
    # 6: no Location: the 302 is the final answer, flagged; no crash, the crawl goes on
    rec = res.record(raw.url("/l6", WWW))
    assert rec["status"] == 302 and rec["error"] is None and rec["redirects"] == []
    assert rec["error_detail"] == "redirect without Location"
    assert rec["final_url"] == raw.url("/l6", WWW)
    assert res.record(raw.url("/after", WWW))["status"] == 200
    assert not raw.requests("/l6-body")
    assert res.report["finished"] is True
