"""File-type focus end to end: a loopback site with misleading extensions (a PDF served as
/x.html, an HTML page at /doc.pdf), a body that is never sent, hostile paths."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from aiohttp import web

from skitter.settings import FocusSettings
from tests.integration.site import Site, crawl, links_page, text

A = "files.test"
PDF1 = b"%PDF-1.4\n" + bytes(range(256)) * 40
PDF2 = b"%PDF-1.7\n" + b"\x00\xff" * 3000
PDF3 = b"%PDF-1.5 deep\n" + b"\x10" * 700
PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * 5000


def _held_body(released: asyncio.Event, content_type: str) -> web.StreamResponse:
    """A handler that sends its headers, then holds the body until ``released``: a client
    that read the body would wait for it (and time out)."""

    async def h(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": content_type})
        resp.content_length = 1 << 20
        await resp.prepare(request)
        await released.wait()
        return resp

    return h  # type: ignore[return-value]


def _build(site: Site, released: asyncio.Event) -> None:
    site.route(
        A,
        "/",
        links_page("/x.html", "/doc.pdf", "/img.png", "/big.bin", "/a.zip", "/real.pdf"),
    )
    site.route(A, "/x.html", text(PDF1, content_type="application/pdf"))
    site.route(
        A,
        "/doc.pdf",
        links_page("/deep/Deep.pdf", "/%2e%2e/%2e%2e/evil.pdf", "/a/..%2F..%2Fout.pdf"),
    )
    site.route(A, "/img.png", text(PNG, content_type="image/png"))
    site.route(A, "/big.bin", _held_body(released, "application/octet-stream"))
    site.route(A, "/a.zip", text(b"PK", content_type="application/zip"))
    site.route(A, "/real.pdf", text(PDF2, content_type="application/pdf"))
    site.route(A, "/deep/Deep.pdf", text(PDF3, content_type="application/pdf"))
    site.route(A, "/evil.pdf", text(b"%PDF evil", content_type="application/pdf"))
    site.route(A, "/a/..%2F..%2Fout.pdf", text(b"%PDF out", content_type="application/pdf"))


def _warc_response_uris(out: Path) -> set[str]:
    from warcio.archiveiterator import ArchiveIterator

    uris = set()
    for w in out.glob("*.warc.gz"):
        with open(w, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    uris.add(rec.rec_headers.get_header("WARC-Target-URI"))
    return uris


async def test_accept_type_follows_content_type_and_saves_files(site: Site, tmp_path: Path) -> None:
    released = asyncio.Event()
    _build(site, released)
    files = tmp_path / "files"
    focus = FocusSettings(
        accept_types=("application/pdf",), reject_exts=("zip",), save_files=str(files)
    )
    try:
        res = await crawl(site, tmp_path / "out", [site.url(A, "/")], focus=focus)
    finally:
        released.set()
    u = lambda p: site.url(A, p)  # noqa: E731
    # the zip link is not queued (extension rejected): decision "type", never requested
    zips = [r for r in res.links if r["target"] == u("/a.zip")]
    assert [r["decision"] for r in zips] == ["type"]
    assert "/a.zip" not in site.paths(A)
    # type decisions follow Content-Type: the PDF at /x.html is a result, the HTML at
    # /doc.pdf is followed (its links are queued) but not a result
    assert res.record(u("/x.html"))["error"] is None
    assert res.record(u("/doc.pdf"))["error"] is None
    assert "/deep/Deep.pdf" in site.paths(A)
    # rejected types are dropped on their headers: recorded as a decision, body not read
    for p in ("/img.png", "/big.bin"):
        rec = res.record(u(p))
        assert rec["error"] == "rejected_type" and rec["status"] == 200 and rec["bytes"] == 0
        assert "body not read" in rec["error_detail"]
    totals = res.report["totals"]
    assert totals["errors"] == 0 and totals["by_error"] == {"rejected_type": 2}
    assert totals["by_verdict"]["excluded"] == 2
    # x.html, real.pdf, Deep.pdf, evil.pdf, out.pdf
    assert res.report["focus"]["results"] == 5
    assert res.report["focus"]["followed"] == 2 and res.report["focus"]["rejected"] == 2
    assert res.report["focus"]["saved"] == 5
    # only the results are WARC response records (and robots.txt)
    assert _warc_response_uris(res.out) == {
        u("/x.html"),
        u("/real.pdf"),
        u("/deep/Deep.pdf"),
        u("/evil.pdf"),
        u("/a/..%2F..%2Fout.pdf"),
        u("/robots.txt"),
    }
    # exactly the accepted files, byte-identical, under files/host+port/path
    top = files / f"{A}+{site.port}"
    written = sorted(p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file())
    assert written == sorted(
        [
            ".skitter-files.tsv",
            f"{A}+{site.port}/deep/Deep.pdf",
            f"{A}+{site.port}/evil.pdf",
            f"{A}+{site.port}/a/..%2F..%2Fout.pdf",
            f"{A}+{site.port}/real.pdf",
            f"{A}+{site.port}/x.html",
        ]
    )
    assert (top / "x.html").read_bytes() == PDF1
    assert (top / "real.pdf").read_bytes() == PDF2
    assert (top / "deep" / "Deep.pdf").read_bytes() == PDF3
    for p in tmp_path.rglob("*"):
        assert p.resolve().is_relative_to(tmp_path.resolve())


async def test_extension_lists_follow_the_path(site: Site, tmp_path: Path) -> None:
    released = asyncio.Event()
    released.set()
    _build(site, released)
    focus = FocusSettings(accept_exts=("pdf",))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")], focus=focus)
    u = lambda p: site.url(A, p)  # noqa: E731
    decisions = {r["target"]: r["decision"] for r in res.links if r["source"] == u("/")}
    assert decisions[u("/img.png")] == "type" and decisions[u("/a.zip")] == "type"
    assert decisions[u("/big.bin")] == "type"
    assert decisions[u("/x.html")] == "queued" and decisions[u("/doc.pdf")] == "queued"
    # /x.html is a PDF but its path is not .pdf: dropped; /doc.pdf is HTML at a .pdf path: kept
    assert res.record(u("/x.html"))["error"] == "rejected_type"
    assert res.record(u("/doc.pdf"))["error"] is None
    assert res.report["focus"]["results"] == 5  # doc, real, Deep, evil, out .pdf


async def test_cli_save_files_accept_pdf_and_bad_values(site: Site, tmp_path: Path) -> None:
    released = asyncio.Event()
    released.set()
    _build(site, released)
    out, files = tmp_path / "out", tmp_path / "files"
    args = [
        *("crawl", site.url(A, "/"), "--out", str(out), "--save-files", str(files)),
        *("--accept-type", "application/pdf", "--reject-ext", ".ZIP", "--processes", "1"),
        *("--concurrency", "auto", "--cpu-target", "0.9", "--max-memory", "2GiB"),
        *("--timeout", "auto", "--timeout", "12"),
        *("--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0", "-q"),
    ]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", *args, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    top = files / f"{A}+{site.port}"
    assert sorted(p.name for p in top.rglob("*") if p.is_file()) == sorted(
        [
            "..%2F..%2Fout.pdf",
            "Deep.pdf",
            "evil.pdf",
            "real.pdf",
            "x.html",
        ]
    )
    report = json.loads((out / "report.json").read_text())
    assert report["timeouts"]["mode"] == "auto" and report["timeouts"]["ceiling_s"] == 12
    conc = report["concurrency"]
    assert conc["mode"] == "auto" and conc["ceiling"] == 256 and conc["cpu_target"] == 0.9
    assert conc["max_memory_bytes"] == 2 << 30
    state = (out / "state.json").read_text()
    assert '"accept_types": [' in state and str(files) in state
    for flags, message in (
        (["--accept-type", "pdf"], "not a media type"),
        (["--reject-ext", "a/b"], "not a file extension"),
        (["--concurrency", "lots"], "(or 'auto')"),
        (["--cpu-target", "0"], "share of one core"),
    ):
        bad = subprocess.run(
            [
                sys.executable,
                "-m",
                "skitter",
                "crawl",
                "http://x.test/",
                "--out",
                str(tmp_path / "o"),
                *flags,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
        assert message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_unusable_save_files_dir_is_refused_before_the_output_folder(tmp_path: Path) -> None:
    # an unusable --save-files DIR (a file, or under a file) is one line, exit 2, and leaves
    # no half-made crawl in --out (which would make the corrected command say "holds a crawl")
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for n, where in enumerate((blocker, blocker / "sub")):
        out = tmp_path / f"o{n}"
        bad = subprocess.run(
            [sys.executable, "-m", "skitter", "crawl", "http://x.test/", "--out", str(out),
             "--save-files", str(where), "--resolve-only"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert bad.returncode == 2, bad.stderr
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"skitter: error: --save-files {where}:")
        assert not out.exists()


async def test_two_processes_save_files_and_merge_the_sections(site: Site, tmp_path: Path) -> None:
    released = asyncio.Event()
    released.set()
    _build(site, released)
    B = "other.test"
    site.route(A, "/", links_page("/x.html", "/doc.pdf", "/img.png", f"http://{B}:{site.port}/"))
    site.route(B, "/", links_page("/b.pdf"))
    site.route(B, "/b.pdf", text(b"%PDF b", content_type="application/pdf"))
    out, files = tmp_path / "out", tmp_path / "files"
    args = [
        *("crawl", site.url(A, "/"), site.url(B, "/"), "--out", str(out), "--processes", "2"),
        *("--save-files", str(files), "--accept-type", "application/pdf", "--scope", "any"),
        *("--concurrency", "auto", "--max-memory", "1GiB", "--timeout", "auto", "-q"),
        *("--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve", f"{B}:{site.port}:127.0.0.1"),
        *("--resolve-only", "--delay", "0"),
    ]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", *args, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err
    assert (files / f"{B}+{site.port}" / "b.pdf").read_bytes() == b"%PDF b"
    assert (files / f"{A}+{site.port}" / "x.html").read_bytes() == PDF1
    report = json.loads((out / "report.json").read_text())
    f = report["focus"]
    assert f["accept_types"] == ["application/pdf"]
    assert (f["results"], f["rejected"], f["saved"]) == (5, 1, 5)  # x, Deep, evil, out, b
    assert report["totals"]["by_error"] == {"rejected_type": 1}
    per = report["concurrency"]["per_process"]
    assert len(per) == 2 and all(p["max_memory_bytes"] == 1 << 29 for p in per)
    assert len(report["timeouts"]["per_process"]) == 2
    manifest = (files / ".skitter-files.tsv").read_text().splitlines()
    assert len(manifest) == 5 and all("\t" in ln for ln in manifest)


async def test_kill_9_while_saving_then_resume_writes_every_file_once(
    site: Site, tmp_path: Path
) -> None:
    """kill -9 while a PDF body is on its way (held by the server), then --resume: every
    accepted file is there, byte-identical, listed once in the manifest."""
    held = asyncio.Event()
    seen_held = asyncio.Event()
    pdfs = {f"/f{i}.pdf": b"%PDF-" + bytes([i]) * (1000 + i) for i in range(6)}

    async def hold(request: web.Request) -> web.StreamResponse:
        seen_held.set()
        resp = web.StreamResponse(headers={"Content-Type": "application/pdf"})
        resp.content_length = 13
        await resp.prepare(request)
        await resp.write(b"%PDF-")
        await held.wait()
        await resp.write(b"the rest")
        return resp

    site.route(A, "/", links_page(*pdfs, "/next.html"))
    site.route(A, "/next.html", links_page("/held.pdf"))
    for p, body in pdfs.items():
        site.route(A, p, text(body, content_type="application/pdf"))
    site.route(A, "/held.pdf", hold)
    out, files = tmp_path / "out", tmp_path / "files"
    args = [
        *("crawl", "--out", str(out), "--save-files", str(files), "--processes", "1"),
        *("--accept-type", "application/pdf", "--resolve", f"{A}:{site.port}:127.0.0.1"),
        *("--resolve-only", "--delay", "0", "-q"),
    ]
    exe = (sys.executable, "-m", "skitter")
    proc = await asyncio.create_subprocess_exec(*exe, *args, site.url(A, "/"))
    try:
        await asyncio.wait_for(seen_held.wait(), 60)
    finally:
        proc.kill()
        await proc.wait()
    held.set()
    proc = await asyncio.create_subprocess_exec(*exe, *args, "--resume")
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    top = files / f"{A}+{site.port}"
    for p, body in pdfs.items():
        assert (top / p.lstrip("/")).read_bytes() == body
    assert (top / "held.pdf").read_bytes() == b"%PDF-the rest"
    manifest = (files / ".skitter-files.tsv").read_text().splitlines()
    assert sorted(ln.split("\t")[1] for ln in manifest) == sorted(
        f"{A}+{site.port}/{n}" for n in [*(p.lstrip("/") for p in pdfs), "held.pdf"]
    )
    assert not list((files / ".skitter-tmp").iterdir())
