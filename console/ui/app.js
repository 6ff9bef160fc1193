// hourglass console: one page, no dependencies, no build step. It talks
// only to the broker that served it: the /v1 API (with the operator's
// token, if the broker has one) and /metrics. Every value from the broker
// is put into the page as text (textContent), never as HTML.
"use strict";

(() => {
  const $ = (sel) => document.querySelector(sel);
  const TOKEN_KEY = "hourglass.token";
  const SVG = "http://www.w3.org/2000/svg";
  const POLL_MS = 2000;

  // ---- API ----------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // api calls the broker. Every call carries the token when there is one;
  // a body is always JSON, declared as such (the server refuses other
  // types, which keeps form posts from other sites out).
  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    const init = { method, headers, credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
    if (!resp.ok) {
      const err = data && data.error ? data.error : { code: "http_" + resp.status, message: text || resp.statusText };
      if (resp.status === 401) showLogin(err.message);
      throw new APIError(resp.status, err.code, err.message);
    }
    return data;
  }

  // me is the signed-in principal and its rules (GET /v1/whoami). The
  // console offers only what they allow; the broker checks every call.
  let me = { principal: "", allow: [] };

  // can says whether the principal's rules allow action on resource: a
  // pattern is exact or ends with one '*' (package access's rules).
  function can(action, resource) {
    return me.allow.some((r) => {
      const i = r.indexOf(":");
      if (r.slice(0, i) !== action) return false;
      const p = r.slice(i + 1);
      return p.endsWith("*") ? resource.startsWith(p.slice(0, -1)) : p === resource;
    });
  }
  const canAny = (action) => me.allow.some((r) => r.startsWith(action + ":"));

  // metrics reads /metrics with the operator's token: a broker with
  // -metrics-token accepts its -auth-token there too.
  async function metrics() {
    const headers = {};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    const resp = await fetch("/metrics", { headers, credentials: "omit", cache: "no-store" });
    if (resp.status === 401) showLogin("/metrics needs a token: enter the broker's -auth-token or -metrics-token");
    if (!resp.ok) throw new Error("/metrics answered " + resp.status);
    return parseMetrics(await resp.text());
  }

  // parseMetrics reads the Prometheus text format into
  // [{name, labels, value}].
  function parseMetrics(text) {
    const out = [];
    for (const line of text.split("\n")) {
      if (!line || line[0] === "#") continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      if (m[3]) {
        for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, "$1");
      }
      out.push({ name: m[1], labels, value: Number(m[4]) });
    }
    return out;
  }

  const pick = (ms, name, labels = {}) => ms.filter((s) => s.name === name &&
    Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  const one = (ms, name, labels) => { const s = pick(ms, name, labels); return s.length ? s[0].value : NaN; };

  // quantile of a Prometheus histogram: the upper bound of the bucket
  // holding it (null when nothing was observed).
  function quantile(ms, name, q) {
    const buckets = pick(ms, name + "_bucket").map((s) => ({ le: Number(s.labels.le), n: s.value }))
      .sort((a, b) => a.le - b.le);
    const total = one(ms, name + "_count");
    if (!total) return null;
    const rank = Math.ceil(q * total);
    for (const b of buckets) if (b.n >= rank) return b.le;
    return Infinity;
  }

  // ---- formatting -------------------------------------------------------

  const nf = new Intl.NumberFormat();
  const fmtInt = (n) => (Number.isFinite(n) ? nf.format(Math.round(n)) : "–");
  function fmtSeconds(s) {
    if (s === null || s === undefined || Number.isNaN(s)) return "–";
    if (s === Infinity) return "> max";
    if (s < 0.001) return (s * 1e6).toFixed(0) + " µs";
    if (s < 1) return +(s * 1000).toPrecision(3) + " ms";
    return +s.toPrecision(3) + " s";
  }
  function fmtBytes(b) {
    if (!Number.isFinite(b)) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(1) : b) + " " + u[i];
  }
  const pad = (n) => String(n).padStart(2, "0");
  function fmtTime(ms, withDate) {
    const d = new Date(ms);
    const t = pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
    return withDate ? d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + t : t;
  }
  function fmtSpan(ms) {
    const neg = ms < 0;
    let s = Math.floor(Math.abs(ms) / 1000);
    const d = Math.floor(s / 86400); s %= 86400;
    const h = Math.floor(s / 3600); s %= 3600;
    const m = Math.floor(s / 60); s %= 60;
    const txt = (d ? d + "d " : "") + (d || h ? h + "h " : "") + (d || h || m ? m + "m " : "") + s + "s";
    return neg ? txt + " ago" : "in " + txt;
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const setText = (sel, v) => { $(sel).textContent = v; };

  // ---- charts -------------------------------------------------------------

  // isHerd: at least 1,000 messages and five times the average bucket
  // (the same rule as `hourglass forecast`).
  const isHerd = (count, total, n) => count >= 1000 && n > 0 && count * n >= 5 * total;

  // barChart draws bars into box as an SVG: items [{label, value, title,
  // data, herd}]. Each bar is a rect.bar with the item's data-* attributes,
  // and the chart is described for screen readers by its aria-label.
  //
  // With opts.log the heights follow log10(1 + count): a herd of a
  // million beside buckets of ten leaves them a third of its height
  // rather than a pixel, and the axis marks the powers of ten.
  function barChart(box, items, opts) {
    const W = 1000, H = opts.height || 220, left = 56, bottom = 34, top = 18;
    const peak = Math.max(1, ...items.map((i) => i.value));
    const scale = opts.log ? (v) => Math.log10(1 + v) / Math.log10(1 + peak) : (v) => v / peak;
    const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.label + (opts.log ? " (log scale)" : ""),
      preserveAspectRatio: "none", "data-scale": opts.log ? "log" : "linear" });
    const plotW = W - left - 6, plotH = H - top - bottom;
    const bw = plotW / Math.max(1, items.length);
    s.append(svg("line", { class: "axis", x1: left, y1: top + plotH, x2: W, y2: top + plotH }));
    s.append(svg("text", { x: left - 6, y: top + 10, "text-anchor": "end" }, fmtInt(peak)));
    s.append(svg("text", { x: left - 6, y: top + plotH, "text-anchor": "end" }, "0"));
    if (opts.log) {
      for (let p = 10; p * 2 <= peak; p *= 10) {
        const y = top + plotH - scale(p) * plotH;
        s.append(svg("line", { class: "axis", x1: left, y1: y, x2: W, y2: y }));
        s.append(svg("text", { x: left - 6, y: y + 4, "text-anchor": "end" }, fmtInt(p)));
      }
    }
    const every = Math.max(1, Math.ceil(items.length / (opts.labels || 8)));
    items.forEach((it, i) => {
      const h = it.value > 0 ? Math.max(2, scale(it.value) * plotH) : 0;
      const x = left + i * bw;
      const r = svg("rect", { class: "bar" + (it.herd ? " herd" : ""), x: x + bw * 0.1, y: top + plotH - h,
        width: Math.max(1, bw * 0.8), height: h });
      for (const [k, v] of Object.entries(it.data || {})) r.setAttribute("data-" + k, v);
      r.append(svg("title", {}, it.title));
      s.append(r);
      if (it.herd) s.append(svg("text", { class: "herd", x: x + bw / 2, y: Math.max(11, top + plotH - h - 4), "text-anchor": "middle" }, "herd"));
      if (i % every === 0) s.append(svg("text", { x: x + bw / 2, y: H - 12, "text-anchor": "middle" }, it.label));
    });
    box.replaceChildren(s);
  }

  // ---- pages ----------------------------------------------------------------

  const pages = ["login", "overview", "topics", "find", "schedules"];
  // extra holds the pages other scripts add (browse.js): name -> show(arg).
  const extra = {};
  let authed = false;
  let timer = null;

  function showPage(name) {
    for (const p of pages) $("#page-" + p).hidden = p !== name;
    for (const a of document.querySelectorAll("nav a")) {
      if (a.dataset.page === name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
  }

  // showLogin hides every page that shows data and asks for the token.
  function showLogin(message) {
    authed = false;
    clearInterval(timer);
    timer = null;
    $("#nav").hidden = true;
    $("#logout").hidden = !sessionStorage.getItem(TOKEN_KEY);
    $("#message").hidden = true;
    showPage("login");
    setText("#login-error", sessionStorage.getItem(TOKEN_KEY) ? "The broker refused the token: " + message : "");
    setText("#status", "signed out");
    $("#login-token").focus();
  }

  async function start() {
    try {
      me = await api("GET", "/v1/whoami");
    } catch (e) {
      if (e.status !== 401) setText("#status", "broker unreachable: " + e.message);
      return;
    }
    authed = true;
    $("#nav").hidden = false;
    // Pages the principal cannot use are not offered: the overview reads
    // metrics; finding a message, and the listings of messages and dead
    // letters, need to manage some topic.
    const manages = ["find", "browse", "dead"];
    for (const a of document.querySelectorAll("nav a")) {
      a.hidden = (a.dataset.page === "overview" && !(can("metrics", "metrics") && can("metrics", "stats"))) || (manages.includes(a.dataset.page) && !canAny("manage"));
    }
    setText("#whoami", me.principal === "anonymous" ? "" : "signed in as " + me.principal);
    $("#logout").hidden = !sessionStorage.getItem(TOKEN_KEY);
    loadTopicNames().catch(() => {});
    route();
  }

  // firstPage is the first page the principal may use.
  function firstPage() {
    const a = [...document.querySelectorAll("nav a")].find((x) => !x.hidden);
    return a ? a.dataset.page : "topics";
  }

  function route() {
    if (!authed) return;
    const [, page, arg] = (location.hash || "#/" + firstPage()).split("/");
    clearInterval(timer);
    timer = null;
    switch (page) {
      case "topics":
        showPage("topics");
        poll(refreshTopics);
        break;
      case "schedules":
        showPage("schedules");
        poll(refreshSchedules);
        break;
      case "find":
      case "message":
        showPage("find");
        if (page === "message" && arg) showMessage(decodeURIComponent(arg));
        else $("#message").hidden = true;
        break;
      default:
        if (extra[page]) {
          showPage(page);
          extra[page](arg === undefined ? undefined : decodeURIComponent(arg));
          break;
        }
        if (!(can("metrics", "metrics") && can("metrics", "stats"))) {
          showPage("topics");
          poll(refreshTopics);
          break;
        }
        showPage("overview");
        poll(refreshOverview);
    }
  }

  // poll runs fn now and every POLL_MS while its page is shown.
  function poll(fn) {
    const run = async () => {
      try {
        await fn();
        setText("#status", "updated " + fmtTime(Date.now()));
      } catch (e) {
        if (e.status !== 401) setText("#status", "update failed: " + e.message);
      }
    };
    run();
    timer = setInterval(run, POLL_MS);
  }

  // Rates are computed between two polls of a counter.
  const prev = {};
  function rate(key, value) {
    const now = Date.now();
    const p = prev[key];
    prev[key] = { value, at: now };
    if (!p || now <= p.at || value < p.value) return NaN;
    return ((value - p.value) * 1000) / (now - p.at);
  }

  // ---- overview ----

  const ranges = {
    hour: { span: 3600e3, step: 60e3, stepParam: "1m", label: (ms) => fmtTime(ms).slice(0, 5) },
    day: { span: 86400e3, step: 600e3, stepParam: "10m", label: (ms) => fmtTime(ms).slice(0, 5) },
    week: { span: 7 * 86400e3, step: 3600e3, stepParam: "1h",
      label: (ms) => { const d = new Date(ms); return pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + "h"; } },
  };
  let range = "hour";
  let lastForecast = 0;

  // health reads /healthz, which answers 503 with a body when the broker
  // stopped: that body is what to show, not an error.
  async function health() {
    const resp = await fetch("/healthz", { credentials: "omit", cache: "no-store" });
    return resp.json();
  }

  // refreshHealth shows what /healthz says when it is not ok, and the
  // damage the broker knows of (GET /v1/admin/damage): where an operator
  // looks first.
  function refreshHealth(h, d) {
    const bad = h.status !== "ok";
    $("#health").hidden = !bad;
    $("#health").classList.toggle("failed", h.status === "failed");
    setText("#health-status", h.status);
    const lines = h.status === "failed" ? [h.error] : (h.problems || []);
    $("#health-problems").replaceChildren(...lines.map((p) => el("li", {}, p)));
    const rows = [
      ...d.ranges.map((r) => el("tr", {}, el("td", {}, "scrub"), el("td", {}, r.segment + " at offset " + fmtInt(r.offset)),
        el("td", { class: "num" }, String(r.pos)), el("td", {}, `${fmtInt(r.length)} bytes: ${r.reason}`))),
      ...d.set_aside.map((s) => el("tr", {}, el("td", {}, "set aside"), el("td", {}, s.segment || "(segment removed)"),
        el("td", { class: "num" }, String(s.pos)), el("td", {}, `topic ${s.topic}, group ${s.group}, queue ${s.queue} offset ${s.offset}` +
          (s.reason ? ": " + s.reason : "")))),
    ];
    $("#damage").hidden = rows.length === 0;
    $("#damage-table tbody").replaceChildren(...rows);
    const sc = d.scrub;
    setText("#m-scrub", !can("admin", "damage") ? "not shown (needs admin:damage)" : !sc.enabled ? "off" : sc.last_pass_time ? fmtTime(Date.parse(sc.last_pass_time), true) : "not yet");
    setText("#m-scrub-sub", `${fmtBytes(sc.bytes)} read in ${fmtInt(sc.passes)} pass${sc.passes === 1 ? "" : "es"}` +
      (sc.enabled ? ` at ${fmtBytes(sc.rate_bytes_per_second)}/s` : "") +
      (d.ranges.length + d.set_aside_total ? `; ${fmtInt(d.ranges.length)} damaged range(s), ${fmtInt(d.set_aside_total)} set aside` : "; no damage found"));
  }

  async function refreshOverview() {
    // The damage report is admin:damage; a principal without it sees the
    // rest of the overview.
    const noDamage = { ranges: [], set_aside: [], set_aside_total: 0, scrub: { enabled: false, bytes: 0, passes: 0 } };
    const [stats, ms, h, d] = await Promise.all([api("GET", "/v1/stats"), metrics(), health(),
      can("admin", "damage") ? api("GET", "/v1/admin/damage") : Promise.resolve(noDamage)]);
    refreshHealth(h, d);
    setText("#m-pending", fmtInt(stats.pending));
    setText("#m-pending-sub", `due within 1m ${fmtInt(one(ms, "hourglass_due_next", { window: "1m" }))}, ` +
      `1h ${fmtInt(one(ms, "hourglass_due_next", { window: "1h" }))}, 24h ${fmtInt(one(ms, "hourglass_due_next", { window: "24h" }))}`);
    const r = rate("fired", stats.fired);
    setText("#m-rate", Number.isNaN(r) ? "…" : fmtInt(r) + "/s");
    const lq = [0.5, 0.99, 0.999].map((q) => quantile(ms, "hourglass_lateness_seconds", q));
    setText("#m-lateness", lq[0] === null ? "none yet" : lq.map(fmtSeconds).join(" / "));
    const fq = [0.5, 0.99].map((q) => quantile(ms, "hourglass_fsync_seconds", q));
    setText("#m-fsync", fq[0] === null ? "none yet" : fq.map(fmtSeconds).join(" / "));
    const disk = pick(ms, "hourglass_disk_bytes");
    const dsum = disk.reduce((a, s) => a + s.value, 0);
    setText("#m-disk", fmtBytes(dsum));
    setText("#m-disk-sub", disk.map((s) => s.labels.part + " " + fmtBytes(s.value)).sort().join(", "));
    setText("#m-recovery", fmtSeconds(stats.recovery_seconds));
    const started = one(ms, "process_start_time_seconds");
    setText("#m-recovery-sub", `${fmtInt(one(ms, "hourglass_recovery_replayed_records"))} records replayed` +
      (Number.isFinite(started) ? `, started ${fmtTime(started * 1000, true)}` : ""));
    drawLateness(ms);
    if (!can("metrics", "forecast")) setText("#fc-summary", `Principal ${me.principal} may not read the forecast (it needs metrics:forecast).`);
    else if (Date.now() - lastForecast >= 5000 || !$("#forecast-chart svg")) await refreshForecast();
  }

  function drawLateness(ms) {
    const buckets = pick(ms, "hourglass_lateness_seconds_bucket").map((s) => ({ le: Number(s.labels.le), n: s.value }))
      .sort((a, b) => a.le - b.le);
    let below = 0;
    const items = buckets.map((b) => {
      const n = b.n - below;
      below = b.n;
      const label = b.le === Infinity ? "more" : "≤" + fmtSeconds(b.le);
      return { label, value: n, title: `${fmtInt(n)} messages ${label} late` };
    });
    barChart($("#lateness-chart"), items, { label: "Lateness histogram", height: 160, labels: 10 });
  }

  async function refreshForecast() {
    const rg = ranges[range];
    const from = Math.floor(Date.now() / rg.step) * rg.step;
    const topic = $("#fc-topic").value;
    const q = new URLSearchParams({ from: String(from), to: String(from + rg.span), step: rg.stepParam });
    if (topic) q.set("topic", topic);
    const f = await api("GET", "/v1/forecast?" + q.toString());
    lastForecast = Date.now();
    const n = f.buckets.length;
    const items = f.buckets.map((b) => ({
      label: rg.label(b.start), value: b.count, herd: isHerd(b.count, f.total, n),
      title: `${fmtInt(b.count)} due ${fmtTime(b.start, true)} – ${fmtTime(b.end)}`,
      data: { start: b.start, count: b.count },
    }));
    const herds = items.filter((i) => i.herd).length;
    setText("#fc-summary", `${fmtInt(f.total)} messages due ${range === "hour" ? "in the next hour" : range === "day" ? "in the next day" : "in the next week"}` +
      ` (${topic ? "topic " + topic : "all topics"}), by ${rg.stepParam}` + (herds ? `; ${herds} herd bucket${herds > 1 ? "s" : ""}` : ""));
    barChart($("#forecast-chart"), items, { label: `Messages falling due per ${rg.stepParam}, ${fmtInt(f.total)} in all`, log: $("#fc-log").checked });
  }

  async function loadTopicNames() {
    const list = await api("GET", "/v1/topics");
    const sel = $("#fc-topic");
    const keep = sel.value;
    const names = list.topics.map((t) => t.name);
    sel.replaceChildren(el("option", { value: "" }, "All topics"), ...names.map((n) => el("option", { value: n }, n)));
    sel.value = names.includes(keep) ? keep : "";
    $("#topic-names").replaceChildren(...names.map((n) => el("option", { value: n })));
    return list;
  }

  // ---- topics and groups ----

  async function refreshTopics() {
    // Rates come from /metrics, which a principal without metrics:metrics
    // may not read: its table shows "…" there.
    const [list, ms] = await Promise.all([loadTopicNames(), can("metrics", "metrics") ? metrics() : Promise.resolve([])]);
    const trows = [], grows = [];
    for (const t of list.topics) {
      const r = rate("topic:" + t.name, one(ms, "hourglass_topic_messages_fired_total", { topic: t.name }));
      trows.push(el("tr", { "data-topic": t.name }, el("th", { scope: "row" }, t.name), el("td", {}, t.queues),
        el("td", {}, t.fifo ? "yes" : "no"), el("td", { class: "num" }, fmtInt(t.pending)),
        el("td", { class: "num" }, fmtInt(t.visible)), el("td", { class: "num" }, Number.isNaN(r) ? "…" : r.toFixed(1))));
      for (const g of t.groups) {
        const dead = g.dead_lettered;
        const btn = el("button", { type: "button", class: "quiet" }, "Redrive…");
        if (!dead) {
          // Nothing was ever dead-lettered: there is nothing to move back.
          btn.disabled = true;
          btn.title = "This group has no dead letters.";
        } else if (!can("admin", "group/" + g.topic + "/" + g.name)) {
          btn.disabled = true;
          btn.title = `Principal ${me.principal} may not redrive ${g.topic}/${g.name} (it needs admin:group/${g.topic}/${g.name}).`;
        }
        btn.addEventListener("click", () => redrive(g));
        const change = el("button", { type: "button", class: "quiet" }, "Change…");
        change.addEventListener("click", () => pickGroup(g));
        const name = el("th", { scope: "row" }, g.name);
        if (g.paused) name.append(" ", el("span", { class: "badge cancelled" }, "paused"));
        grows.push(el("tr", { "data-group": g.topic + "/" + g.name }, el("td", {}, g.topic), name,
          el("td", { class: "num" }, fmtInt(g.backlog)), el("td", { class: "num" }, fmtInt(g.in_flight)),
          el("td", { class: "num" }, fmtInt(g.redelivered)), el("td", { class: "num" },
            // The count since the start links to the group's dead letters.
            canAny("manage") ? el("a", { href: `#/dead/${encodeURIComponent(g.topic)}/${encodeURIComponent(g.name)}`, class: "dead-link" }, fmtInt(dead)) : fmtInt(dead)),
          el("td", {}, btn, " ", change)));
      }
    }
    if (!trows.length) trows.push(el("tr", {}, el("td", { colspan: 6 }, "No topics yet.")));
    if (!grows.length) grows.push(el("tr", {}, el("td", { colspan: 7 }, "No consumer groups yet.")));
    $("#topics-table tbody").replaceChildren(...trows);
    $("#groups-table tbody").replaceChildren(...grows);
  }

  async function redrive(g) {
    const ok = await confirmAction(`Move up to 100 dead letters of group ${g.name} (topic ${g.topic}, dead-letter topic ${g.dead_letter_topic}) back to ${g.topic}, visible now?`, "Redrive");
    if (!ok) return;
    try {
      const r = await api("POST", `/v1/topics/${encodeURIComponent(g.topic)}/groups/${encodeURIComponent(g.name)}/redrive`, { max: 100 });
      setText("#groups-result", `Redrove ${r.redriven} message(s) of ${g.topic}/${g.name}.`);
    } catch (e) {
      setText("#groups-result", `Redrive failed: ${e.message}`);
    }
  }

  // ---- schedules ----

  let firingsOf = ""; // the schedule whose firings are shown

  // zoned shows an RFC 3339 time with its offset (the broker renders it in
  // the schedule's zone) as "2026-12-07 09:00:00 +01:00".
  function zoned(rfc) {
    const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(rfc || "");
    return m ? `${m[1]} ${m[2]} ${m[3] === "Z" ? "UTC" : m[3]}` : rfc;
  }

  async function refreshSchedules() {
    const list = await api("GET", "/v1/schedules");
    const rows = list.schedules.map((sc) => {
      const paused = sc.state === "paused";
      const toggle = el("button", { type: "button", class: "quiet" }, paused ? "Resume" : "Pause…");
      toggle.addEventListener("click", () => (paused ? scheduleOp(sc, "resume") : pauseSchedule(sc)));
      const del = el("button", { type: "button", class: "quiet" }, "Delete…");
      del.addEventListener("click", () => deleteSchedule(sc));
      const show = el("button", { type: "button", class: "quiet" }, "Firings");
      show.addEventListener("click", () => { firingsOf = sc.id; refreshFirings().catch((e) => setText("#schedules-result", e.message)); });
      const next = sc.next_local.slice(0, 3).map((t) => el("div", {}, zoned(t)));
      return el("tr", { "data-schedule": sc.id }, el("th", { scope: "row" }, sc.id),
        el("td", {}, el("span", { class: "badge " + (paused ? "cancelled" : "visible") }, sc.state)),
        el("td", {}, sc.topic), el("td", {}, el("code", {}, sc.cron), ` in ${sc.tz}`),
        el("td", { class: "next" }, ...(next.length ? next : ["–"])),
        el("td", {}, toggle, " ", show, " ", del));
    });
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 6 }, "No schedules yet (hourglass schedule create, or PUT /v1/schedules/{id}).")));
    $("#schedules-table tbody").replaceChildren(...rows);
    if (firingsOf && !list.schedules.some((sc) => sc.id === firingsOf)) firingsOf = "";
    if (firingsOf) await refreshFirings(); else $("#firings").hidden = true;
  }

  // refreshFirings shows what became of the chosen schedule's latest
  // firings (GET /v1/schedules/{id}/firings), each message linked to its page.
  async function refreshFirings() {
    const id = firingsOf;
    if (!id) return;
    const fs = await api("GET", `/v1/schedules/${encodeURIComponent(id)}/firings?n=10`);
    if (id !== firingsOf) return;
    setText("#firings-id", `${id} (${fs.tz})`);
    const rows = fs.firings.map((f) => {
      const what = el("td", {});
      if (!f.sent) what.append("not sent (skipped while paused, or by the catch-up policy)");
      else what.append(el("span", { class: "badge " + f.state }, f.state), f.ahead ? " sent ahead; " : " ",
        el("a", { href: "#/message/" + f.message_id }, f.message_id));
      return el("tr", { "data-fire": String(f.fire) }, el("td", {}, zoned(f.fire_local)), what);
    });
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 2 }, "No fire time yet.")));
    $("#firings-table tbody").replaceChildren(...rows);
    $("#firings").hidden = false;
  }

  async function scheduleOp(sc, op) {
    try {
      const r = await api(op === "delete" ? "DELETE" : "POST", `/v1/schedules/${encodeURIComponent(sc.id)}` + (op === "delete" ? "" : "/" + op));
      setText("#schedules-result", `Schedule ${r.id} is ${r.state}.` + (r.next_local.length ? ` Next: ${zoned(r.next_local[0])}.` : ""));
    } catch (e) {
      setText("#schedules-result", `${op} failed: ${e.message}`);
    }
    refreshSchedules().catch(() => {});
  }

  async function pauseSchedule(sc) {
    if (!(await confirmAction(`Pause schedule ${sc.id}? The firings already sent ahead are cancelled, and fire times that pass while it is paused are skipped.`, "Pause"))) return;
    await scheduleOp(sc, "pause");
  }

  async function deleteSchedule(sc) {
    if (!(await confirmAction(`Delete schedule ${sc.id} (${sc.cron} in ${sc.tz})? Its firing sent ahead is cancelled; messages already fired stay.`, "Delete"))) return;
    if (firingsOf === sc.id) { firingsOf = ""; $("#firings").hidden = true; } // nothing to poll once it is gone
    await scheduleOp(sc, "delete");
  }

  // ---- create and change a group ----

  // pickGroup fills the group form with a group of the table.
  function pickGroup(g) {
    $("#ga-topic").value = g.topic;
    $("#ga-group").value = g.name;
    $("#ga-attempts").value = String(g.max_attempts);
    $("#ga-base").value = g.backoff_base;
    $("#ga-max").value = g.backoff_max;
    setText("#ga-result", "");
    $("#ga-topic").scrollIntoView({ block: "center" });
    $("#ga-attempts").focus();
  }

  // groupTarget reads topic and group from the form, or says what is missing.
  function groupTarget() {
    const topic = $("#ga-topic").value.trim(), group = $("#ga-group").value.trim();
    if (!topic || !group) { setText("#ga-result", "Give a topic and a group."); return null; }
    return { topic, group, path: `/v1/topics/${encodeURIComponent(topic)}/groups/${encodeURIComponent(group)}` };
  }

  // policyBody is the policy fields the form gives; the broker checks them.
  function policyBody() {
    const b = {};
    const n = $("#ga-attempts").value.trim();
    if (n) b.max_attempts = Number(n);
    if ($("#ga-base").value.trim()) b.backoff_base = $("#ga-base").value.trim();
    if ($("#ga-max").value.trim()) b.backoff_max = $("#ga-max").value.trim();
    return b;
  }

  function describeGroup(g) {
    return `${g.topic}/${g.name}: ${g.paused ? "paused" : "running"}, ${g.max_attempts} attempts, backoff ${g.backoff_base}..${g.backoff_max}`;
  }

  // groupCall runs one change and says what became of it.
  async function groupCall(what, method, suffix, body) {
    const t = groupTarget();
    if (!t) return;
    try {
      const r = await api(method, t.path + suffix, body);
      setText("#ga-result", `${what}: ${describeGroup(r.group || r)}` + (r.queues ? "; " + seekSummary(r.queues) : ""));
      refreshTopics().catch(() => {});
    } catch (e) {
      setText("#ga-result", `${what} failed: ${e.message}`);
    }
  }

  function seekSummary(queues) {
    let again = 0, skipped = 0;
    for (const q of queues) { if (q.to < q.from) again += q.from - q.to; else skipped += q.to - q.from; }
    return `${fmtInt(again)} message(s) to deliver again, ${fmtInt(skipped)} skipped`;
  }

  // parseSeekTo reads "now", "0", "-1h30m" (before now) or a date-time.
  function parseSeekTo(s) {
    s = s.trim();
    if (s === "now") return Date.now();
    if (s === "0") return 0;
    const rel = /^-(\d+d)?(\d+h)?(\d+m)?(\d+s)?$/.exec(s);
    if (rel && rel[0] !== "-") {
      const n = (x) => (x ? parseInt(x, 10) : 0);
      return Date.now() - (((n(rel[1]) * 24 + n(rel[2])) * 60 + n(rel[3])) * 60 + n(rel[4])) * 1000;
    }
    const t = new Date(s).getTime();
    return s && Number.isFinite(t) && t >= 0 ? t : null;
  }

  async function seekGroup() {
    const t = groupTarget();
    if (!t) return;
    const to = parseSeekTo($("#ga-to").value);
    if (to === null) { setText("#ga-result", "Seek to: give now, 0, a time before now such as -1h, or a date and time."); return; }
    if (!(await confirmAction(`Move group ${t.group} of ${t.topic} to ${to ? fmtTime(to, true) : "the start of its queues"}? ` +
      "Messages made visible before then count as done; those after are delivered again, acked or not. Leases under way end.", "Seek"))) return;
    await groupCall("Moved", "POST", "/seek", { to });
  }

  async function pauseGroup() {
    const t = groupTarget();
    if (!t) return;
    if (!(await confirmAction(`Pause group ${t.group} of ${t.topic}? Its consumers receive nothing until it is resumed.`, "Pause"))) return;
    await groupCall("Paused", "POST", "/pause");
  }

  function bindGroupAdmin() {
    $("#group-admin").addEventListener("submit", (ev) => ev.preventDefault());
    $("#ga-create").addEventListener("click", () => groupCall("Created", "PUT", "", policyBody()));
    $("#ga-policy").addEventListener("click", () => {
      const b = policyBody();
      if (!Object.keys(b).length) { setText("#ga-result", "Give max attempts, a backoff base or a backoff max to change."); return; }
      groupCall("Changed", "PATCH", "", b);
    });
    $("#ga-pause").addEventListener("click", pauseGroup);
    $("#ga-resume").addEventListener("click", () => groupCall("Resumed", "POST", "/resume"));
    $("#ga-seek").addEventListener("click", seekGroup);
  }

  // confirmAction asks in a modal dialog (Escape or Back says no). The
  // answer is taken when a button submits the dialog's form, which happens
  // at once; the dialog's close event comes in a later task, after the
  // dialog may have been opened again for the next question, so it answers
  // no only for a question still open when it closed (Escape).
  let confirmResolve = null;
  function settleConfirm(ok) {
    const r = confirmResolve;
    confirmResolve = null;
    if (r) r(ok);
  }
  function bindConfirm() {
    const d = $("#confirm");
    d.querySelector("form").addEventListener("submit", (ev) => settleConfirm(!!ev.submitter && ev.submitter.value === "ok"));
    d.addEventListener("close", () => { if (!d.open) settleConfirm(false); });
  }
  function confirmAction(text, okLabel) {
    const d = $("#confirm");
    settleConfirm(false); // a question still waiting is answered no
    setText("#confirm-text", text);
    setText("#confirm-ok", okLabel);
    d.returnValue = "";
    d.showModal();
    return new Promise((resolve) => { confirmResolve = resolve; });
  }

  // ---- find a message ----

  let shown = null; // the message on screen
  let countdown = null;

  async function findByID(ev) {
    ev.preventDefault();
    const id = $("#find-id-input").value.trim().toLowerCase();
    if (!/^[0-9a-f]{32}$/.test(id)) { setText("#find-error", "A message ID is 32 hex digits."); return; }
    location.hash = "#/message/" + id;
  }

  async function findByKey(ev) {
    ev.preventDefault();
    const topic = $("#find-topic").value.trim(), key = $("#find-key-input").value;
    if (!topic || !key) { setText("#find-error", "Give a topic and a key."); return; }
    try {
      const info = await api("GET", `/v1/topics/${encodeURIComponent(topic)}/keys/${encodeURIComponent(key)}`);
      setText("#find-error", "");
      location.hash = "#/message/" + info.id;
    } catch (e) {
      setText("#find-error", e.message);
    }
  }

  async function showMessage(id) {
    let info, preview;
    try {
      [info, preview] = await Promise.all([api("GET", "/v1/messages/" + encodeURIComponent(id)),
        api("GET", "/v1/messages/" + encodeURIComponent(id) + "/preview")]);
    } catch (e) {
      $("#message").hidden = true;
      setText("#find-error", e.message);
      return;
    }
    setText("#find-error", "");
    shown = { info, preview, hex: false };
    $("#find-id-input").value = info.id;
    setText("#msg-id", info.id);
    const st = $("#msg-state");
    st.textContent = info.state;
    st.className = "badge " + info.state;
    setText("#msg-due", fmtTime(info.due, true) + " (" + info.due_time + ")");
    setText("#msg-topic", `${info.topic} (queue ${info.queue})`);
    setText("#msg-key", info.key || "–");
    setText("#msg-tag", info.tag || "–");
    setText("#msg-sent", fmtTime(info.sent, true));
    setText("#msg-bytes", `${fmtInt(info.body_bytes)} bytes`);
    const props = Object.entries(info.properties || {}).sort();
    $("#msg-props tbody").replaceChildren(...(props.length ? props.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)))
      : [el("tr", {}, el("td", { colspan: 2 }, "none"))]));
    drawBody();
    showTrail(info.id);
    const pending = info.state === "pending";
    const manage = can("manage", info.topic);
    for (const b of ["#msg-cancel", "#msg-reschedule", "#msg-when"]) $(b).disabled = !pending || !manage;
    setText("#msg-action-result", !manage ? `Principal ${me.principal} may not manage topic ${info.topic}: cancel and reschedule are not offered.`
      : pending ? "" : `A ${info.state} message cannot be cancelled or rescheduled.`);
    $("#message").hidden = false;
    tick();
    clearInterval(countdown);
    countdown = setInterval(tick, 1000);
  }

  // ---- a message's history, from the broker's log ----

  const TRAIL_TEXT = { sent: "sent", rescheduled: "rescheduled", cancelled: "cancelled", fell_due: "fell due",
    visible: "made visible", delivered: "delivered", acked: "acked", nacked: "nacked", lease_expired: "lease expired",
    dead_lettered: "dead-lettered", redriven: "redriven" };

  function fmtMillis(ms) { return fmtTime(ms, true) + "." + String(ms % 1000).padStart(3, "0"); }

  // trailDetail is what an event says besides its time and kind.
  function trailDetail(ev) {
    const parts = [];
    if (ev.group) parts.push(`group ${ev.group}` + (ev.attempt ? `, attempt ${ev.attempt}` : ""));
    if (ev.due) parts.push(`due ${fmtMillis(ev.due)}`);
    else if (ev.until && ev.kind === "delivered") parts.push(`lease until ${fmtMillis(ev.until)}`);
    else if (ev.until) parts.push(`back at ${fmtMillis(ev.until)}`);
    else if (ev.kind === "nacked" || ev.kind === "lease_expired") parts.push("out of attempts");
    if (ev.reason) parts.push(`reason ${ev.reason}`);
    return parts.join("; ");
  }

  // showTrail lists the events the broker's commit log holds for a
  // message, each with its time (GET /v1/messages/{id}/trail); nothing is
  // made up from its current state.
  async function showTrail(id) {
    const list = $("#msg-history");
    list.replaceChildren(el("li", {}, "reading the log…"));
    setText("#msg-trail-cost", "");
    let tr;
    try {
      tr = await api("GET", "/v1/messages/" + encodeURIComponent(id) + "/trail");
    } catch (e) {
      list.replaceChildren(el("li", { class: "error" }, "history: " + e.message));
      return;
    }
    if (!shown || shown.info.id !== id) return; // another message is on screen now
    const items = [];
    if (tr.partial) items.push(el("li", {}, "Retention removed log segments written after this message: the events recorded there are gone."));
    let of = tr.id;
    for (const ev of tr.events) {
      if (ev.message !== of) {
        of = ev.message;
        items.push(el("li", { class: "trail-copy" }, "events of the dead-letter copy ", el("a", { href: "#/message/" + of }, of)));
      }
      const li = el("li", { "data-kind": ev.kind }, el("time", { datetime: ev.at_time }, fmtMillis(ev.at)), " ",
        el("strong", {}, TRAIL_TEXT[ev.kind] || ev.kind));
      const detail = trailDetail(ev);
      if (detail) li.append(" — " + detail);
      if (ev.dead_letter) li.append("; copy ", el("a", { href: "#/message/" + ev.dead_letter }, ev.dead_letter));
      items.push(li);
    }
    list.replaceChildren(...items);
    setText("#msg-trail-cost", `Read from ${fmtInt(tr.scanned_bytes)} bytes of the commit log.`);
  }

  function tick() {
    if (!shown || $("#message").hidden) return;
    const i = shown.info;
    setText("#msg-countdown", i.state === "pending" || i.state === "due" ? fmtSpan(i.due - Date.now()) : "");
  }

  function drawBody() {
    const p = shown.preview;
    const bytes = Uint8Array.from(atob(p.base64), (c) => c.charCodeAt(0));
    let text;
    if (shown.hex || p.text === null) {
      const lines = [];
      for (let o = 0; o < bytes.length; o += 16) {
        const row = Array.from(bytes.slice(o, o + 16));
        lines.push(o.toString(16).padStart(4, "0") + "  " + row.map((b) => b.toString(16).padStart(2, "0")).join(" ").padEnd(48) +
          "  " + row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join(""));
      }
      text = lines.join("\n");
    } else {
      text = p.text;
    }
    if (p.truncated) text += `\n… (${fmtInt(p.body_bytes - bytes.length)} more bytes not shown)`;
    $("#msg-body").textContent = text || "(empty body)";
    const hb = $("#msg-hex");
    hb.hidden = p.text === null;
    hb.setAttribute("aria-pressed", String(shown.hex));
    hb.textContent = shown.hex ? "Show text" : "Show hex";
  }

  // parseWhen reads "10m", "2h30m", "1d" (from now) or a local date-time.
  function parseWhen(s) {
    s = s.trim();
    const rel = /^(\d+d)?(\d+h)?(\d+m)?(\d+s)?$/.exec(s);
    if (s && rel && rel[0]) {
      const n = (x) => (x ? parseInt(x, 10) : 0);
      return { delay: `${n(rel[1]) * 24 + n(rel[2])}h${n(rel[3])}m${n(rel[4])}s` };
    }
    const t = new Date(s).getTime();
    if (s && Number.isFinite(t)) return { at: t };
    return null;
  }

  async function cancelShown() {
    const i = shown.info;
    if (!(await confirmAction(`Cancel message ${i.id} of topic ${i.topic}, due ${fmtTime(i.due, true)}? It will never be delivered.`, "Cancel message"))) return;
    try {
      await api("DELETE", "/v1/messages/" + encodeURIComponent(i.id));
      await showMessage(i.id);
      setText("#msg-action-result", "Cancelled.");
    } catch (e) {
      setText("#msg-action-result", "Cancel failed: " + e.message);
    }
  }

  async function rescheduleShown() {
    const i = shown.info;
    const w = parseWhen($("#msg-when").value);
    if (!w) { setText("#msg-action-result", "Give a delay such as 10m or 2h30m, or a date and time such as 2026-12-01T09:00."); return; }
    const target = w.at !== undefined ? fmtTime(w.at, true) : "now + " + $("#msg-when").value.trim();
    if (!(await confirmAction(`Move message ${i.id} from ${fmtTime(i.due, true)} to ${target}?`, "Reschedule"))) return;
    try {
      // Compare-and-set: only if it is still due when we saw it.
      const r = await api("POST", "/v1/messages/" + encodeURIComponent(i.id) + "/reschedule", { ...w, if_due: i.due });
      await showMessage(i.id);
      setText("#msg-action-result", "Rescheduled to " + fmtTime(r.due, true) + ".");
    } catch (e) {
      setText("#msg-action-result", "Reschedule failed: " + e.message);
    }
  }

  // The console's shared parts, for the pages other scripts add: page
  // registers a page (its section is #page-<name>, its route #/<name>).
  window.hourglassConsole = {
    api, el, setText, fmtInt, fmtTime, confirmAction, loadTopicNames,
    page(name, show) { pages.push(name); extra[name] = show; },
  };

  // ---- wiring ----

  document.addEventListener("DOMContentLoaded", () => {
    $("#login-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const name = $("#login-name").value.trim();
      const secret = $("#login-token").value.trim();
      sessionStorage.setItem(TOKEN_KEY, name ? name + ":" + secret : secret);
      $("#login-token").value = "";
      setText("#login-error", "");
      start();
    });
    $("#logout").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      location.hash = "";
      start();
    });
    for (const b of document.querySelectorAll("button.seg")) {
      b.addEventListener("click", () => {
        range = b.dataset.range;
        for (const o of document.querySelectorAll("button.seg")) o.setAttribute("aria-pressed", String(o === b));
        refreshForecast().catch((e) => setText("#fc-summary", "forecast failed: " + e.message));
      });
    }
    $("#fc-topic").addEventListener("change", () => refreshForecast().catch((e) => setText("#fc-summary", "forecast failed: " + e.message)));
    $("#fc-log").addEventListener("change", () => refreshForecast().catch((e) => setText("#fc-summary", "forecast failed: " + e.message)));
    bindGroupAdmin();
    bindConfirm();
    $("#find-id").addEventListener("submit", findByID);
    $("#find-key").addEventListener("submit", findByKey);
    $("#msg-cancel").addEventListener("click", cancelShown);
    $("#msg-reschedule").addEventListener("click", rescheduleShown);
    $("#msg-hex").addEventListener("click", () => { shown.hex = !shown.hex; drawBody(); });
    window.addEventListener("hashchange", route);
    start();
  });
})();
