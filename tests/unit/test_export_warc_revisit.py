"""WARC revisit records (WARC 1.1 §6.7): identical-payload-digest and server-not-modified."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from skitter.export.warc import REVISIT_PROFILES, WarcRevisit, WarcWriter
from skitter.models import Response

HTML = b"<html><body>same</body></html>"


def _resp(url: str, status: int = 200, body: bytes = HTML) -> Response:
    return Response(url, status, "OK", (("Content-Type", "text/html"),), body, body)


def _sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def test_revisits_point_at_their_capture_and_pass_warcio_check(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path)
    w.write_exchange("http://a.test/", _resp("http://a.test/"), fetched_at=1714564800.5)
    w.write_exchange(
        "http://a.test/copy",
        _resp("http://a.test/copy"),
        fetched_at=1714564801.0,
        revisit=WarcRevisit("identical-payload-digest", "http://a.test/", "2024-05-01T12:00:00.5Z"),
    )
    w.write_exchange(
        "http://a.test/nm",
        Response("http://a.test/nm", 304, "Not Modified", (("ETag", '"v1"'),)),
        fetched_at=1714564802.0,
        revisit=WarcRevisit(
            "server-not-modified", "http://a.test/nm", "2024-04-01T00:00:00Z", "<urn:uuid:x>"
        ),
    )
    w.close()
    [path] = w.files
    check = subprocess.run(
        [str(Path(sys.executable).parent / "warcio"), "check", path], capture_output=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    with open(path, "rb") as f:
        recs = [
            (r.rec_type, dict(r.rec_headers.headers), r.content_stream().read())
            for r in ArchiveIterator(f)
        ]
    by_uri = {h.get("WARC-Target-URI"): (t, h, body) for t, h, body in recs if t != "request"}
    t, h, body = by_uri["http://a.test/copy"]
    assert t == "revisit"
    assert h["WARC-Profile"] == REVISIT_PROFILES["identical-payload-digest"]
    assert h["WARC-Refers-To-Target-URI"] == "http://a.test/"
    assert h["WARC-Refers-To-Date"] == "2024-05-01T12:00:00.5Z"
    assert h["WARC-Payload-Digest"] == _sha1(HTML)
    assert h["WARC-Payload-Digest"] == by_uri["http://a.test/"][1]["WARC-Payload-Digest"]
    assert "WARC-Refers-To" not in h
    assert body == b""  # the payload is left out
    t, h, body = by_uri["http://a.test/nm"]
    assert t == "revisit"
    assert h["WARC-Profile"] == REVISIT_PROFILES["server-not-modified"]
    assert h["WARC-Refers-To"] == "<urn:uuid:x>"
    assert "WARC-Payload-Digest" not in h


def test_unknown_profile_is_refused(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path)
    with pytest.raises(ValueError, match="revisit profile"):
        w.write_exchange(
            "http://a.test/", _resp("http://a.test/"), revisit=WarcRevisit("x", "u", "d")
        )
    w.close()


@pytest.mark.parametrize("ts", [1714564800.5, 1714564800.0, 1714564800.000001, 1714564800.123])
def test_written_date_is_the_records_warc_date(tmp_path: Path, ts: float) -> None:
    w = WarcWriter(tmp_path)
    written = w.write_exchange("http://a.test/", _resp("http://a.test/"), fetched_at=ts)
    w.close()
    with open(written.path, "rb") as f:
        dates = [r.rec_headers.get_header("WARC-Date") for r in ArchiveIterator(f)]
    assert dates[1:] == [written.date, written.date]
