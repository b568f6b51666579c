"""File-type rules and the --save-files layout (pure parts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skitter.savefiles import MANIFEST, TMP_DIR, FileSaver, safe_relpath
from skitter.typefocus import (
    TypeRules,
    Verdict,
    normalize_ext,
    normalize_type,
    path_extension,
    type_matches,
)


def test_path_extension_follows_the_last_segment() -> None:
    assert path_extension("http://h/a/Doc.PDF?x=1.html") == "pdf"
    assert path_extension("http://h/a.b/") == ""
    assert path_extension("http://h/.profile") == ""
    assert path_extension("http://h/a%2Epdf") == "pdf"
    assert path_extension("http://h/") == ""


def test_type_patterns_and_flag_values() -> None:
    assert type_matches("image/png", ["image/*"])
    assert not type_matches("text/html", ["image/*", "application/pdf"])
    assert type_matches("text/html", ["*/*"])
    assert not type_matches("", ["*/*"])
    assert normalize_type(" Application/PDF ") == "application/pdf"
    assert normalize_ext(".PDF") == "pdf"
    for bad in ("pdf", "image/", "*/png", "a/b*", "a b/c"):
        with pytest.raises(ValueError):
            normalize_type(bad)
    for bad in ("", "a/b", "."):
        with pytest.raises(ValueError):
            normalize_ext(bad)


def test_verdicts_follow_content_type_not_extension() -> None:
    r = TypeRules(accept_types=["application/pdf"])
    assert r.verdict("http://h/x.html", 200, "application/pdf") is Verdict.ACCEPT
    assert r.verdict("http://h/doc.pdf", 200, "text/html; charset=utf-8") is Verdict.FOLLOW
    assert r.verdict("http://h/a.png", 200, "image/png") is Verdict.REJECT
    assert r.verdict("http://h/a.png", 404, "image/png") is Verdict.FOLLOW
    assert r.verdict("http://h/a", 200, None) is Verdict.FOLLOW  # sniffed by the worker
    r = TypeRules(reject_types=["image/*", "text/html"])
    assert r.verdict("http://h/x.html", 200, "text/html") is Verdict.REJECT
    assert r.verdict("http://h/x.png", 200, "application/pdf") is Verdict.ACCEPT
    assert r.verdict("http://h/y", 200, "image/gif") is Verdict.REJECT


def test_extension_rules_follow_the_path() -> None:
    r = TypeRules(accept_exts=["pdf"])
    assert r.verdict("http://h/doc.pdf", 200, "text/html") is Verdict.ACCEPT
    assert r.verdict("http://h/x.html", 200, "application/pdf") is Verdict.REJECT
    assert r.verdict("http://h/x.html", 200, "text/html") is Verdict.FOLLOW
    assert r.link_allowed("http://h/doc.pdf") and r.link_allowed("http://h/page.html")
    assert r.link_allowed("http://h/dir/") and not r.link_allowed("http://h/a.png")
    r = TypeRules(reject_exts=["png", "zip"])
    assert not r.link_allowed("http://h/a.PNG") and r.link_allowed("http://h/a.png.txt")
    assert r.verdict("http://h/a.zip", 200, "application/zip") is Verdict.REJECT
    assert not TypeRules().active and TypeRules(reject_exts=["x"]).filters_links


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("http://H.test/a/b.pdf", ("h.test", "a", "b.pdf")),
        ("http://h.test/", ("h.test", "index.html")),
        ("http://h.test/d/", ("h.test", "d", "index.html")),
        ("http://h.test:8080/x", ("h.test+8080", "x")),
        ("https://h.test:443/x", ("h.test", "x")),
        ("http://h.test/%2e%2e/%2E%2E/etc/passwd", ("h.test", "%2E%2E", "%2E%2E", "etc", "passwd")),
        ("http://h.test/..%2F..%2Fx", ("h.test", "..%2F..%2Fx")),
        ("http://h.test/a%5C..%5Cb", ("h.test", "a%5C..%5Cb")),
        ("http://h.test//abs/x", ("h.test", "abs", "x")),
        ("http://h.test/C:%5Cwin", ("h.test", "C%3A%5Cwin")),
        ("http://h.test/s?q=1/2", ("h.test", "s@q=1%2F2")),
        ("http://h.test/a%00b%0a", ("h.test", "a%00b%0A")),
    ],
)
def test_safe_relpath(url: str, parts: tuple[str, ...]) -> None:
    assert safe_relpath(url) == parts


def test_long_names_are_cut_with_a_hash() -> None:
    parts = safe_relpath("http://h.test/" + "a" * 1000 + ".pdf")
    assert parts is not None
    name = parts[-1]
    assert len(name.encode()) <= 200 and name.endswith(".pdf") and "~" in name
    other = safe_relpath("http://h.test/" + "a" * 999 + ".pdf")
    assert other is not None and other[-1] != name


def test_saver_case_collisions_file_dir_clash_and_resume(tmp_path: Path) -> None:
    root = tmp_path / "files"
    s = FileSaver(root)
    a = s.save("http://h.test/Report.pdf", b"A")
    b = s.save("http://h.test/report.pdf", b"B")
    c = s.save("http://h.test/x", b"C")  # a file named x ...
    d = s.save("http://h.test/x/y", b"D")  # ... where a folder x is needed
    assert a is not None and b is not None and c is not None and d is not None
    assert a.name == "Report.pdf"
    assert b.name.casefold() != a.name.casefold() and b.name.endswith(".pdf")
    assert d.parent.name != "x" and d.read_bytes() == b"D" and c.read_bytes() == b"C"
    # the same URL gets the same file again (a resumed crawl overwrites its own)
    assert s.save("http://h.test/report.pdf", b"B2") == b
    s.close()
    # a torn manifest line (crash while appending) is dropped on reopen
    with open(root / MANIFEST, "a") as fh:
        fh.write("http://h.test/torn")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = root / TMP_DIR / f"{dead.stdout.strip()}-1.tmp"  # left by a killed writer
    stale.write_bytes(b"half a file")
    s2 = FileSaver(root)
    assert not stale.exists()
    assert s2.path_for("http://h.test/report.pdf") == b
    assert s2.path_for("http://h.test/Report.pdf") == a
    s2.save("http://h.test/new.pdf", b"N")
    lines = (root / MANIFEST).read_text().splitlines()
    assert lines[-2:] == ["http://h.test/torn", "http://h.test/new.pdf\th.test/new.pdf"]
    assert b.read_bytes() == b"B2" and a.read_bytes() == b"A"
    s2.close()
    for p in root.rglob("*"):
        assert p.resolve().is_relative_to(root.resolve())
    assert not list(root.rglob("*.tmp"))


def test_saver_refuses_paths_leaving_dir_through_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "files"
    outside = tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "h.test").symlink_to(outside)
    s = FileSaver(root)
    assert s.save("http://h.test/evil.pdf", b"x") is None
    assert not list(outside.iterdir())
    s.close()


def test_rejected_type_is_not_an_error_per_host_either() -> None:
    # report.json totals.errors and by_host[...].errors agree: a rejected type is a decision
    from skitter.stats import Stats

    st = Stats()
    st.count_record("h.test", 0, 200, "rejected_type", 0, "excluded")
    st.count_record("h.test", 1, None, "timeout", 0, "broken")
    snap = st.snapshot(1.0).to_dict()
    assert snap["errors"] == 1 and snap["by_error"] == {"rejected_type": 1, "timeout": 1}
    assert snap["by_host"]["h.test"] == {"records": 2, "bytes": 0, "errors": 1}


def test_multi_part_extensions_match_as_suffixes_like_wget() -> None:
    # wget -A tar.gz: a two-part extension matched nothing (only the last part was compared)
    from skitter.typefocus import TypeRules, Verdict, path_extensions

    assert path_extensions("http://h/x.Tar.GZ?q=1") == {"tar.gz", "gz"}
    assert path_extensions("http://h/.profile") == frozenset()
    accept = TypeRules(accept_exts=["tar.gz"])
    assert accept.link_allowed("http://h/src/x-1.0.tar.gz")
    assert not accept.link_allowed("http://h/src/x-1.0.gz")
    assert accept.link_allowed("http://h/src/")  # a page, followed
    assert accept.verdict("http://h/x.tar.gz", 200, "application/gzip") is Verdict.ACCEPT
    assert accept.verdict("http://h/x.gz", 200, "application/gzip") is Verdict.REJECT
    reject = TypeRules(reject_exts=["tar.gz"])
    assert not reject.link_allowed("http://h/x.TAR.GZ")
    assert reject.link_allowed("http://h/x.gz")
