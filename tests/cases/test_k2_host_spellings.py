"""Kind 2 of issue 10 — one host, many spellings.

Case, a trailing dot, Unicode and punycode, full-width letters: every spelling that names one
server is one host for politeness (one request in flight with host concurrency 1), robots.txt
(fetched once), the URL-seen test, process routing and the canonical URL.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web

from skitter.sharding import shard_of_url
from skitter.state import FORMAT_VERSION, StateError, load_state
from skitter.urls import canonicalize, normalize_host
from tests.cases._util import WWW, requested, run
from tests.integration.site import Handler, Site, links_page

IDN = "xn--bcher-kva.example.test"  # bücher.example.test


def slow_page(*hrefs: str) -> Handler:
    """A page linking ``hrefs`` that answers after one loop turn plus 20 ms, so that two
    requests the crawler believed to be for different hosts would overlap on the server."""
    inner = links_page(*hrefs)

    async def h(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.02)
        return await inner(request)

    return h


async def test_k2_spellings_of_one_host_are_one_host(site: Site, tmp_path: Path) -> None:
    p = site.port
    spellings = [
        f"http://www.example.test.:{p}/a",  # trailing dot
        f"http://WWW.Example.TEST:{p}/b",  # case
        f"http://ｗｗｗ．ｅｘａｍｐｌｅ．ｔｅｓｔ:{p}/c",  # full-width letters and dots
        f"//www.example.test..:{p}/d",  # two trailing dots, scheme-relative
        f"http://www.example.test.:{p}/a",  # the first again
        f"http://bücher.example.test:{p}/u",  # Unicode
        f"http://XN--BCHER-KVA.example.test.:{p}/u",  # punycode, upper case, trailing dot
        f"http://BÜCHER.EXAMPLE.TEST:{p}/v",  # Unicode upper case
    ]
    site.route(WWW, "/", slow_page(*spellings))
    for path in ("/a", "/b", "/c", "/d"):
        site.route(WWW, path, slow_page(*spellings))
    for path in ("/u", "/v"):
        site.route(IDN, path, slow_page(*spellings))
    seeds = [f"http://WWW.EXAMPLE.TEST.:{p}/", f"http://www.example.test:{p}/"]
    res = await run(
        site, tmp_path / "out", seeds, pol_host_concurrency=1, pol_concurrency=8, scope_scope="any"
    )

    assert sorted(requested(site, WWW)) == ["/", "/a", "/b", "/c", "/d"]
    assert sorted(requested(site, IDN)) == ["/u", "/v"]
    assert site.paths(WWW).count("/robots.txt") == 1
    assert site.paths(IDN).count("/robots.txt") == 1
    assert site.max_inflight[WWW] == 1 and site.max_inflight[IDN] == 1
    assert sorted(r["url"] for r in res.records) == sorted(
        [site.url(WWW, x) for x in ("/", "/a", "/b", "/c", "/d")]
        + [site.url(IDN, x) for x in ("/u", "/v")]
    )
    # links.tsv: every spelling's target is the one canonical URL
    targets = {r["target"] for r in res.links}
    assert targets == {site.url(WWW, x) for x in ("/a", "/b", "/c", "/d")} | {
        site.url(IDN, x) for x in ("/u", "/v")
    }
    # the seed given twice under two spellings is one seed, fetched once
    assert requested(site, WWW).count("/") == 1


def test_k2_process_routing_uses_the_one_spelling() -> None:
    shards = {
        shard_of_url(canonicalize(u) or "", 7)
        for u in (
            "http://www.example.test/x",
            "http://WWW.EXAMPLE.TEST./x",
            "http://ｗｗｗ．ｅｘａｍｐｌｅ．ｔｅｓｔ/x",
            "http://www.example.test../x",
        )
    }
    assert len(shards) == 1
    assert normalize_host("BÜCHER.example.test.") == IDN


def test_k2_older_state_folder_is_refused_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(
        json.dumps({"format": FORMAT_VERSION - 1, "skitter": "0.1.0", "settings": {}})
    )
    with pytest.raises(StateError) as info:
        load_state(tmp_path)
    msg = str(info.value)
    assert "\n" not in msg and f"format {FORMAT_VERSION - 1}" in msg
    assert FORMAT_VERSION >= 2


def test_k2_resuming_an_older_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    old = tmp_path / "old"
    old.mkdir()
    (old / "state.json").write_text(
        json.dumps({"format": 1, "skitter": "0.1.0", "settings": {"seeds": ["http://a.test/"]}})
    )
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "crawl", "--resume", "--out", str(old)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "state format 1" in proc.stderr
    assert "Traceback" not in proc.stderr
