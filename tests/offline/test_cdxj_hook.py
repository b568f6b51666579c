"""The crawl's CDXJ hook gets a response record's HTTP head only (no copy of its payload,
issue 16): its lines are still those read back from the file and cdxj-indexer's, also for a
head with bare LF line ends before a payload holding CRLF CRLF and header-like lines."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cdxj_indexer.main import CDXJIndexer

from skitter.export.warc import RecordWritten, WarcWriter
from skitter.models import Response
from skitter.offline.cdxj import CrawlIndexer, _http_head, cdxj_path_for, index_lines

REQ = (("Host", "a.test"), ("User-Agent", "Skitter/0.1"))


def _theirs(path: str) -> list[str]:
    out = io.StringIO()
    CDXJIndexer(output=out, inputs=[path], records="response,revisit,resource").process_all()
    return sorted(line + "\n" for line in out.getvalue().splitlines())


def test_http_head_ends_at_the_first_empty_line() -> None:
    crlf = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nbody\n\nmore"
    assert _http_head(crlf) == ("200", {"content-type": "text/html"}, crlf.index(b"body"))
    lf = b"HTTP/1.1 404 Nope\nContent-Type: text/plain\n\nx\r\nContent-Type: a/b\r\n\r\ny"
    assert _http_head(lf) == ("404", {"content-type": "text/plain"}, lf.index(b"x\r\n"))
    assert _http_head(b"HTTP/1.0 204 No\r\nA: b") == ("204", {"a": "b"}, 21)  # no end: all
    assert _http_head(b"not http") is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_hook_gets_the_head_and_its_lines_are_the_files(tmp_path: Path) -> None:
    seen: list[RecordWritten] = []
    indexer = CrawlIndexer()

    def on_record(path: str, rec: RecordWritten) -> None:
        seen.append(rec)
        indexer.on_record(path, rec)

    w = WarcWriter(tmp_path, on_file_done=indexer, on_record=on_record)
    body = b"<html>" + b"<p>a page</p>" * 5000
    w.write_exchange(
        "http://a.test/page",
        Response("http://a.test/page", 200, "OK", (("Content-Type", "text/html"),), body, body,
                 request_headers=REQ),
        fetched_at=1_714_564_800.0,
    )  # fmt: skip
    # a head with bare LF line ends (kept as received) and no Content-Type; the payload
    # has a CRLF CRLF after a header-like line: the mime is not taken from the payload
    weird = b"x\r\nContent-Type: text/evil\r\n\r\nrest"
    raw_head = b"HTTP/1.1 200 OK\nServer: old\n\n"
    w.write_exchange(
        "http://a.test/weird",
        Response("http://a.test/weird", 200, "OK", (("Server", "old"),), weird, weird,
                 request_headers=REQ, raw_head=raw_head),
        fetched_at=1_714_564_801.0,
    )  # fmt: skip
    w.close()
    [path] = w.files
    assert [r.block for r in seen] == [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
        raw_head,
    ]
    written = Path(cdxj_path_for(path)).read_text().splitlines(keepends=True)
    read_back = index_lines(path, lambda d: pytest.fail(str(d)))
    assert written == read_back == _theirs(path)
    assert len(written) == 2
    assert '"mime": "text/html"' in written[0]
    assert written[1].startswith("test,a)/weird ") and "evil" not in written[1]
