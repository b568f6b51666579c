"""Link-check report formats (:data:`FORMATS`): text, json, csv, markdown, html, junit.

Pure renderers of a :class:`skitter.checklinks.verdicts.Report`; :func:`format_report` is the
entry point.
"""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html import escape as html_escape

from skitter.checklinks.verdicts import Entry, Report, Source

__all__ = ["FORMATS", "format_report"]

FORMATS = ("text", "json", "csv", "markdown", "html", "junit")

_TITLES = {
    "broken": "Broken links",
    "unverified": "Unverified links (could not be checked; not proof that they are gone)",
    "redirected": "Permanently redirected links (update them)",
}


def _what(e: Entry) -> str:
    o = e.outcome
    if o.error == "missing_fragment":
        return f"missing fragment (page answered HTTP {o.status})"
    parts = []
    if o.status is not None:
        parts.append(f"HTTP {o.status}")
    if o.error is not None:
        parts.append(o.error)
    if o.verdict == "redirected":
        parts.append(f"-> {o.target}")
    text = ", ".join(parts) or "no answer"
    if o.error is not None and o.detail:
        text += f" ({o.detail})"
    return text


def _summary_line(r: Report) -> str:
    s = r.summary
    line = (
        f"{s['checked']} checked: {s['ok']} ok, {s['broken']} broken, "
        f"{s['unverified']} unverified, {s['redirected']} redirected; {s['excluded']} excluded"
    )
    if r.excluded_reasons:
        line += " (" + ", ".join(f"{k} {v}" for k, v in r.excluded_reasons.items()) + ")"
    return line


def _sections(r: Report) -> Iterator[tuple[str, str, tuple[Entry, ...]]]:
    for name in ("broken", "unverified", "redirected"):
        yield name, _TITLES[name], getattr(r, name)


def _text(r: Report) -> str:
    out: list[str] = []
    for _, title, entries in _sections(r):
        if not entries:
            continue
        out.append(f"{title}: {len(entries)}")
        for e in entries:
            out.append(f"  {e.url}")
            out.append(f"    {_what(e)}")
            for s in e.sources:
                anchor = f' "{s.anchor}"' if s.anchor else ""
                times = f" ({s.count} times)" if s.count > 1 else ""
                out.append(f"    on {s.url}{anchor}{times}")
            if not e.sources:
                out.append("    (a start URL)")
        out.append("")
    out.append(_summary_line(r))
    return "\n".join(out) + "\n"


def _csv(r: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["verdict", "url", "status", "error", "target", "source", "anchor", "count"])
    for name, _, entries in _sections(r):
        for e in entries:
            o = e.outcome
            head = [
                name,
                e.url,
                "" if o.status is None else o.status,
                o.error or "",
                o.target or "",
            ]
            if not e.sources:
                w.writerow([*head, "", "", ""])
            for s in e.sources:
                w.writerow([*head, s.url, s.anchor, s.count])
    return buf.getvalue()


def _md(text: str) -> str:
    return (
        text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("`", "\\`") or " "
    )


def _markdown(r: Report) -> str:
    out = ["# Link check report", "", f"**{_summary_line(r)}**", ""]
    for _, title, entries in _sections(r):
        if not entries:
            continue
        out += [f"## {title}: {len(entries)}", ""]
        out += ["| Link | Result | Found on | Anchor text | Count |", "|---|---|---|---|---|"]
        for e in entries:
            first = True
            for s in e.sources or (Source("", "", 0),):
                link, what = (_md(e.url), _md(_what(e))) if first else ("", "")
                count = str(s.count) if s.count else ""
                out.append(f"| {link} | {what} | {_md(s.url)} | {_md(s.anchor)} | {count} |")
                first = False
        out.append("")
    return "\n".join(out)


def _html(r: Report) -> str:
    """The report as one self-contained page, in the look of report.html
    (:mod:`skitter.report.page`): counts, a chart of verdicts, a searchable table per section
    (one row per page a link is on)."""
    from skitter.report.page import cards, document, panel, table
    from skitter.report.svg import bar_chart

    h = html_escape
    s = r.summary
    names = ("ok", "broken", "unverified", "redirected", "excluded")
    body = [cards([(f"{s.get(k, 0):,}", k) for k in ("checked", *names)])]
    body.append(
        panel(
            "Links by verdict",
            bar_chart(
                "verdicts",
                "distinct links by verdict",
                [(k, s.get(k, 0)) for k in names],
                colors=["#059669", "#dc2626", "#d97706", "#2563eb", "#6b7280"],
            ),
            note=_summary_line(r),
        )
    )
    for name, title, entries in _sections(r):
        rows = []
        for e in entries:
            link = f'<a href="{h(e.url)}" class="{name}">{h(e.url)}</a>'
            for src in e.sources or (Source("", "", 0),):
                found = f'<a href="{h(src.url)}">{h(src.url)}</a>' if src.url else "(a start URL)"
                count = str(src.count) if src.count else ""
                rows.append((link, h(_what(e)), found, h(src.anchor), count))
        headers = ("Link", "Result", "Found on", "Anchor text", "Count")
        content = table(name, headers, rows, html_cells=True) if rows else "<p>none</p>"
        body.append(panel(f"{title}: {len(entries)}", content))
    return document("Link check report", "".join(body))


def _junit(r: Report) -> str:
    entries = [(n, e) for n, _, es in _sections(r) for e in es]
    suites = ET.Element("testsuites", name="skitter check-links")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="check-links",
        tests=str(len(entries)),
        failures=str(len(r.broken)),
        errors="0",
        skipped=str(len(r.unverified)),
    )
    props = ET.SubElement(suite, "properties")
    for k, v in r.summary.items():
        ET.SubElement(props, "property", name=k, value=str(v))
    for name, e in entries:
        case = ET.SubElement(suite, "testcase", classname=name, name=e.url)
        found = "\n".join(
            f"on {s.url}" + (f' "{s.anchor}"' if s.anchor else "") + f" ({s.count}x)"
            for s in e.sources
        )
        if name == "broken":
            fail = ET.SubElement(case, "failure", type="broken", message=_what(e))
            fail.text = found
        elif name == "unverified":
            ET.SubElement(case, "skipped", message=_what(e))
            ET.SubElement(case, "system-out").text = found
        else:
            ET.SubElement(case, "system-out").text = f"{_what(e)}\n{found}"
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


def format_report(report: Report, fmt: str = "text") -> str:
    """Render the report.

    Formats (:data:`FORMATS`):

    * ``text``: human-readable, one block per target with its result and sources, then the
      summary line;
    * ``json``: the stable contract ``{"summary": {"checked", "ok", "broken", "unverified",
      "redirected", "excluded"}, "broken": [...], "unverified": [...], "redirected": [...]}``,
      each entry ``{"url", "status" (int or null), "error" (kind or null), "target"
      (redirected only), "sources": [{"url", "anchor", "count"}]}``; indented, UTF-8;
    * ``csv``: header ``verdict,url,status,error,target,source,anchor,count``, one row per
      source (a start URL without sources has one row with empty source fields);
    * ``markdown``: summary and one table per non-empty section;
    * ``html``: a standalone page with the same tables (everything escaped);
    * ``junit``: JUnit XML, one testcase per reported target: broken = failure,
      unverified = skipped, redirected = passed with the new target in system-out.

    Raises:
        ValueError: unknown format.
    """
    if fmt == "json":
        return json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n"
    if fmt == "text":
        return _text(report)
    if fmt == "csv":
        return _csv(report)
    if fmt == "markdown":
        return _markdown(report)
    if fmt == "html":
        return _html(report)
    if fmt == "junit":
        return _junit(report)
    raise ValueError(f"unknown report format {fmt!r} (use one of {', '.join(FORMATS)})")
