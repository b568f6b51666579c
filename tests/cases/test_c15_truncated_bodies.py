"""C15 — truncated bodies and chunked framing.

End to end through the crawler: a body cut short of its Content-Length or of its last
chunk is an "incomplete body" error, retried up to the retry limit and never recorded as a
200 page (its links are not followed); a complete chunked body whose ``0\\r\\n`` and final
``\\r\\n`` arrive 200 ms apart is a good page.
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import run
from tests.integration.rawserver import RawServer, head, response

T1 = "t1.example.test"
T2 = "t2.example.test"
T3 = "t3.example.test"


async def test_c15_truncated_and_split_chunked_bodies(raw: RawServer, tmp_path: Path) -> None:
    prefix = b'<html><a href="/t1-link">x</a>'
    t1_body = prefix + b"." * (1200 - len(prefix))
    raw.route(
        "/t1",
        [head(200, [("Content-Type", "text/html"), ("Content-Length", "5000")]), t1_body],
        host=T1,
    )
    raw.route(
        "/t2",
        [
            head(200, [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]),
            b"400\r\n" + b'<a href="/t2-link">' + b"y" * (1024 - 19) + b"\r\n",
        ],
        host=T2,
    )
    raw.route(
        "/t3",
        [
            head(200, [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]),
            b'19\r\n<html><a href="/ok">k</a>\r\n',
            b"0\r\n",
            0.2,
            b"\r\n",
        ],
        host=T3,
    )
    ok = response(200, [("Content-Type", "text/html")], b"<p>ok</p>")
    for host, path in ((T1, "/t1-link"), (T2, "/t2-link"), (T3, "/ok")):
        raw.route(path, ok, host=host)
    seeds = [raw.url("/t1", T1), raw.url("/t2", T2), raw.url("/t3", T3)]
    res = await run(raw, tmp_path / "out", seeds, pol_retries=1)

    t1 = res.record(raw.url("/t1", T1))
    assert t1["error"] == "protocol" and t1["status"] is None
    assert t1["error_detail"] == "incomplete body: 1200 of 5000 bytes"
    assert t1["attempts"] == 2 and len(raw.requests("/t1", T1)) == 2
    t2 = res.record(raw.url("/t2", T2))
    assert t2["error"] == "protocol" and t2["status"] is None
    assert t2["error_detail"].startswith("incomplete body: 1024 bytes")
    assert t2["attempts"] == 2 and len(raw.requests("/t2", T2)) == 2
    # never stored as a good page: no 200 record, links not followed, not in the WARC
    assert [r["url"] for r in res.records if r["status"] == 200] == [
        raw.url("/t3", T3),
        raw.url("/ok", T3),
    ]
    assert not raw.requests("/t1-link") and not raw.requests("/t2-link")
    assert res.links == [
        {
            "source": raw.url("/t3", T3),
            "target": raw.url("/ok", T3),
            "fragment": "",
            "anchor": "k",
            "kind": "a",
            "nofollow": "0",
            "decision": "queued",
        }
    ]
    t3 = res.record(raw.url("/t3", T3))
    assert t3["status"] == 200 and t3["bytes"] == 25 and t3["attempts"] == 1
    assert len(raw.requests("/ok", T3)) == 1
    from warcio.archiveiterator import ArchiveIterator

    warc_uris = []
    for w in (tmp_path / "out").glob("*.warc.gz"):
        with open(w, "rb") as fh:
            warc_uris += [
                r.rec_headers.get_header("WARC-Target-URI")
                for r in ArchiveIterator(fh)
                if r.rec_type == "response"
            ]
    assert raw.url("/t3", T3) in warc_uris
    assert raw.url("/t1", T1) not in warc_uris and raw.url("/t2", T2) not in warc_uris
