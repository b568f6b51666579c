// Skitter live status page: polls /api/status and /api/hosts, draws with inline SVG (no library).
"use strict";
(function () {
  const POLL_MS = 2000;
  const view = { sort: "fetched", order: "desc", q: "", page: 1, per_page: 50, pages: 1 };
  const $ = (id) => document.getElementById(id);
  const fmt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en"));
  const SVGNS = "http://www.w3.org/2000/svg";

  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + u[i];
  }
  function dur(s) {
    if (s === null || s === undefined) return "–";
    s = Math.round(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), x = s % 60;
    return (h ? h + "h " : "") + (h || m ? m + "m " : "") + x + "s";
  }
  function el(tag, attrs, text) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function bars(box, counts, limit) {
    const items = Object.entries(counts || {}).sort((a, b) => b[1] - a[1]).slice(0, limit);
    const max = items.length ? items[0][1] : 1;
    box.replaceChildren();
    if (!items.length) box.append(el("div", { class: "dim" }, "none yet"));
    for (const [k, v] of items) {
      const row = el("div", { class: "bar", "data-key": k });
      row.append(el("span", {}, k));
      const w = el("span"); const i = el("i"); i.style.width = (100 * v / max) + "%"; w.append(i);
      row.append(w, el("span", { class: "n" }, fmt(v)));
      box.append(row);
    }
  }

  function chart(box, series) {
    const W = 600, H = 160, L = 40, B = 18;
    const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img",
      "aria-label": "pages per second and errors per second over time", "data-points": series.length });
    const max = Math.max(1, ...series.map((p) => Math.max(p[1], p[2])));
    const t0 = series.length ? series[0][0] : 0, t1 = series.length ? series[series.length - 1][0] : 1;
    const x = (t) => L + (W - L - 5) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1);
    const y = (v) => H - B - (H - B - 5) * v / max;
    svg.append(el("svg:line", { x1: L, y1: H - B, x2: W - 5, y2: H - B, stroke: "#cbd5e1" }));
    svg.append(el("svg:text", { x: 2, y: 12 }, max.toFixed(max < 10 ? 1 : 0)));
    svg.append(el("svg:text", { x: 2, y: H - B }, "0"));
    svg.append(el("svg:text", { x: L, y: H - 4 }, series.length ? dur(t1 - t0) + " shown" : "waiting for data"));
    for (const [i, color, name] of [[1, "#2563eb", "pages"], [2, "#dc2626", "errors"]]) {
      const pts = series.map((p) => x(p[0]).toFixed(1) + "," + y(p[i]).toFixed(1)).join(" ");
      svg.append(el("svg:polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 1.5, class: "line-" + name }));
    }
    svg.append(el("svg:text", { x: W - 120, y: 12, fill: "#2563eb" }, "pages/s"));
    svg.append(el("svg:text", { x: W - 60, y: 12, fill: "#dc2626" }, "errors/s"));
    box.replaceChildren(svg);
  }

  function renderStatus(s) {
    const t = s.totals;
    for (const k of ["fetched", "ok", "errors", "queued", "in_flight", "hosts", "hosts_in_backoff", "robots_disallowed"]) {
      $("t-" + k).textContent = fmt(t[k]);
    }
    $("t-bytes").textContent = bytes(t.bytes);
    if (t.workers !== null && t.workers !== undefined) {  // a Redis crawl: the whole cluster
      $("c-workers").hidden = false;
      $("t-workers").textContent = fmt(t.workers) + " (" + fmt(t.worker_runs) + ")";
    }
    $("t-rate").textContent = s.pages_per_s_1m.toFixed(1);
    $("t-elapsed").textContent = dur(t.elapsed_s);
    $("t-remaining").textContent = t.state === "finished" ? "done" : dur(s.remaining_s);
    const st = $("state"); st.textContent = t.state; st.className = "badge " + t.state;
    $("updated").textContent = "updated " + new Date(s.now * 1000).toLocaleTimeString();
    chart($("chart"), s.series);
    bars($("classes"), t.by_status_class, 8);
    bars($("types"), t.by_content_type, 10);
    document.body.dataset.fetched = t.fetched;
  }

  function renderHosts(h) {
    view.pages = h.pages;
    $("hosts-count").textContent = h.hosts_loading  // a Redis crawl's table still being read
      ? `loading ${fmt(h.hosts_loading.read)} of ${fmt(h.hosts_loading.of)} hosts · ${fmt(h.total)} shown`
      : `${fmt(h.total)} shown of ${fmt(h.hosts_total)}`;
    $("pageinfo").textContent = `page ${h.page} of ${h.pages}`;
    $("prev").disabled = h.page <= 1; $("next").disabled = h.page >= h.pages;
    const body = $("hosts-body");
    const rows = [];
    for (const r of h.rows) {
      const tr = el("tr", { "data-host": r.host });
      const until = r.backoff_until ? new Date(r.backoff_until * 1000).toLocaleTimeString() : "";
      for (const [v, cls] of [[r.host], [fmt(r.queued)], [fmt(r.fetched)], [fmt(r.errors), r.errors ? "err" : ""],
        [bytes(r.bytes)], [r.avg_s.toFixed(3) + " s"], [r.delay_s.toFixed(2) + " s"], [r.delay_cause],
        [until], [r.robots + (r.robots_disallowed ? ` (${fmt(r.robots_disallowed)} blocked)` : "")],
        [r.last_error || "", "err"]]) {
        tr.append(el("td", cls ? { class: cls } : {}, v));
      }
      rows.push(tr);
    }
    body.replaceChildren(...rows);
    for (const th of document.querySelectorAll("th[data-sort]")) {
      th.className = th.dataset.sort === h.sort ? h.order : "";
    }
    document.body.dataset.hostsSort = h.sort + ":" + h.order;
  }

  async function get(url) {
    const r = await fetch(url, { cache: "no-store" });
    if (!r.ok) throw new Error(url + ": HTTP " + r.status);
    return r.json();
  }
  function hostsUrl() {
    const p = new URLSearchParams({ sort: view.sort, order: view.order, q: view.q, page: view.page, per_page: view.per_page });
    return "/api/hosts?" + p;
  }
  let busy = false, again = false;
  async function poll() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const [s, h] = await Promise.all([get("/api/status"), get(hostsUrl())]);
      renderStatus(s); renderHosts(h);
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    } catch (e) {
      const st = $("state"); st.textContent = "disconnected"; st.className = "badge error";
    } finally {
      busy = false;
      if (again) { again = false; poll(); }
    }
  }

  function init() {
    for (const th of document.querySelectorAll("th[data-sort]")) {
      th.addEventListener("click", () => {
        const f = th.dataset.sort;
        if (view.sort === f) view.order = view.order === "desc" ? "asc" : "desc";
        else { view.sort = f; view.order = f === "host" || f === "delay_cause" || f === "robots" ? "asc" : "desc"; }
        view.page = 1; poll();
      });
    }
    let timer = 0;
    $("q").addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => { view.q = $("q").value; view.page = 1; poll(); }, 250);
    });
    $("per-page").addEventListener("change", () => { view.per_page = Number($("per-page").value); view.page = 1; poll(); });
    $("prev").addEventListener("click", () => { if (view.page > 1) { view.page--; poll(); } });
    $("next").addEventListener("click", () => { if (view.page < view.pages) { view.page++; poll(); } });
    poll();
    setInterval(poll, POLL_MS);
  }
  init();
})();
