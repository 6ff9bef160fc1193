// hourglass console: the Messages page (pending and in-flight messages,
// page by page, with filters) and the Dead letters page (list, resend,
// delete, purge), over GET /v1/pending, .../inflight, .../dead and POST
// .../dead/{resend,delete,purge}. Like app.js, every value from the
// broker goes into the page as text. Each listed message links to its
// page by ID, keyed or not.
"use strict";

(() => {
  const $ = (sel) => document.querySelector(sel);
  const hc = window.hourglassConsole;
  const { api, el, setText, fmtInt, fmtTime, confirmAction } = hc;
  const enc = encodeURIComponent;
  const PAGE = 50;

  const msgLink = (id) => el("a", { href: "#/message/" + id, class: "mono" }, id);
  const when = (ms) => (ms ? fmtTime(ms, true) : "–");
  const dash = (s) => s || "–";

  // groupOptions fills a select with "topic / group" of every user group.
  async function groupOptions(sel) {
    const list = await hc.loadTopicNames();
    const keep = sel.value;
    const opts = [];
    for (const t of list.topics) {
      for (const g of t.groups) opts.push(el("option", { value: t.name + "\n" + g.name }, t.name + " / " + g.name));
    }
    if (!opts.length) opts.push(el("option", { value: "" }, "no consumer groups"));
    sel.replaceChildren(...opts);
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
    return list;
  }

  // localMs reads a time input as Unix ms (0 when empty): a local date
  // and time ("2026-12-06 20:00"), or a span from now ("2h", "1d6h").
  function localMs(input, name) {
    const v = input.value.trim();
    if (!v) return 0;
    const rel = /^(?:in )?(\d+d)?(\d+h)?(\d+m)?(\d+s)?$/.exec(v);
    if (rel && rel[0] && rel[0] !== "in ") {
      const n = (x) => (x ? parseInt(x, 10) : 0);
      return Date.now() + (((n(rel[1]) * 24 + n(rel[2])) * 60 + n(rel[3])) * 60 + n(rel[4])) * 1000;
    }
    const t = new Date(v.replace(" ", "T")).getTime();
    if (!Number.isFinite(t) || t < 0) throw new Error(`${name} "${v}" is not a time: give a date and time such as 2026-12-06 20:00, or a span from now such as 2h`);
    return t;
  }

  // pageSummary says what a page holds and why it may be short.
  function pageSummary(p, what) {
    const more = p.next_cursor ? " More after this page." : " End of the list.";
    const short = p.next_cursor && p.items.length < PAGE ? ` (the broker examined ${fmtInt(p.scanned)} entries for this page and stops at its bound; the next page goes on)` : "";
    return `${fmtInt(p.items.length)} ${what} on this page.${short}${more}`;
  }

  // ---- messages: pending and in flight ----

  const br = { kind: "pending", cursors: [""], at: 0 };

  async function showBrowse(arg) {
    if (arg === "pending" || arg === "inflight") setKind(arg);
    try {
      const list = await groupOptions($("#br-group"));
      const tsel = $("#br-topic"), keep = tsel.value;
      tsel.replaceChildren(el("option", { value: "" }, "All topics"), ...list.topics.map((t) => el("option", { value: t.name }, t.name)));
      tsel.value = list.topics.some((t) => t.name === keep) ? keep : "";
    } catch (e) {
      setText("#br-error", e.message);
      return;
    }
    await listBrowse(true);
  }

  function setKind(kind) {
    br.kind = kind;
    for (const b of document.querySelectorAll("button[data-list]")) b.setAttribute("aria-pressed", String(b.dataset.list === kind));
    const inflight = kind === "inflight";
    $("#br-topic").hidden = $("label[for=br-topic]").hidden = inflight;
    $("#br-group").hidden = $("label[for=br-group]").hidden = !inflight;
  }

  function browsePath() {
    const q = new URLSearchParams();
    const key = $("#br-key").value, tag = $("#br-tag").value;
    if (key) q.set("key_prefix", key);
    if (tag) q.set("tag", tag);
    const from = localMs($("#br-from"), "Due from"), to = localMs($("#br-to"), "Due to");
    if (to && to <= from) throw new Error("Due to is not after due from: nothing can be due in that range.");
    if (from) q.set("due_from", String(from));
    if (to) q.set("due_to", String(to));
    q.set("limit", String(PAGE));
    const cursor = br.cursors[br.at];
    if (cursor) q.set("cursor", cursor);
    if (br.kind === "pending") {
      if ($("#br-topic").value) q.set("topic", $("#br-topic").value);
      return "/v1/pending?" + q;
    }
    const [topic, group] = $("#br-group").value.split("\n");
    if (!group) throw new Error("Choose a consumer group: in-flight messages are leased by one.");
    return `/v1/topics/${enc(topic)}/groups/${enc(group)}/inflight?` + q;
  }

  async function listBrowse(first) {
    if (first) { br.cursors = [""]; br.at = 0; }
    let p;
    try {
      p = await api("GET", browsePath());
    } catch (e) {
      setText("#br-error", e.message);
      return;
    }
    setText("#br-error", "");
    const pending = br.kind === "pending";
    const head = pending ? ["Message", "State", "Topic", "Key", "Tag", "Fires", "Due"]
      : ["Message", "Topic", "Key", "Tag", "Attempt", "Lease ends", "Due"];
    $("#br-table thead").replaceChildren(el("tr", {}, ...head.map((h) => el("th", { scope: "col" }, h))));
    const rows = p.items.map((m) => pending
      ? el("tr", { "data-id": m.id }, el("td", {}, msgLink(m.id)), el("td", {}, el("span", { class: "badge " + m.state }, m.state)),
        el("td", {}, m.topic), el("td", {}, dash(m.key)), el("td", {}, dash(m.tag)), el("td", {}, when(m.fire_at)), el("td", {}, when(m.due)))
      : el("tr", { "data-id": m.id }, el("td", {}, msgLink(m.id)), el("td", {}, m.topic), el("td", {}, dash(m.key)), el("td", {}, dash(m.tag)),
        el("td", { class: "num" }, String(m.attempt)), el("td", {}, when(m.lease_end)), el("td", {}, when(m.due))));
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: head.length }, "Nothing on this page.")));
    $("#br-table tbody").replaceChildren(...rows);
    setText("#br-summary", pageSummary(p, pending ? "pending messages" : "messages in flight"));
    br.cursors[br.at + 1] = p.next_cursor || "";
    $("#br-next").disabled = !p.next_cursor;
    $("#br-first").disabled = br.at === 0;
  }

  // ---- dead letters ----

  const dl = { cursors: [""], at: 0, items: [] };

  // showDead shows #/dead, or #/dead/TOPIC/GROUP with that group chosen.
  async function showDead() {
    try {
      await groupOptions($("#dl-group"));
    } catch (e) {
      setText("#dl-error", e.message);
      return;
    }
    const [topic, group] = location.hash.split("/").slice(2).map(decodeURIComponent);
    const want = topic + "\n" + group;
    if (group && [...$("#dl-group").options].some((o) => o.value === want)) $("#dl-group").value = want;
    setText("#dl-result", "");
    await listDead(true);
  }

  function deadBase() {
    const [topic, group] = $("#dl-group").value.split("\n");
    if (!group) throw new Error("There is no consumer group yet.");
    return { topic, group, path: `/v1/topics/${enc(topic)}/groups/${enc(group)}/dead` };
  }

  async function listDead(first) {
    if (first) { dl.cursors = [""]; dl.at = 0; }
    let p, base;
    try {
      base = deadBase();
      const q = new URLSearchParams({ limit: String(PAGE) });
      if ($("#dl-key").value) q.set("key_prefix", $("#dl-key").value);
      if ($("#dl-tag").value) q.set("tag", $("#dl-tag").value);
      if (dl.cursors[dl.at]) q.set("cursor", dl.cursors[dl.at]);
      p = await api("GET", base.path + "?" + q);
    } catch (e) {
      setText("#dl-error", e.message);
      $("#dl-table tbody").replaceChildren();
      return;
    }
    setText("#dl-error", "");
    dl.items = p.items;
    const rows = p.items.map((m) => el("tr", { "data-id": m.id },
      el("td", {}, el("input", { type: "checkbox", class: "dl-pick", value: m.id, "aria-label": "Select dead letter " + m.id })),
      el("td", {}, msgLink(m.id)), el("td", {}, dash(m.key)), el("td", {}, dash(m.tag)), el("td", {}, m.reason),
      el("td", { class: "num" }, String(m.attempts)), el("td", {}, when(m.due)), el("td", {}, m.origin_id ? msgLink(m.origin_id) : "–")));
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 8 }, `Group ${base.group} of ${base.topic} has no dead letters${dl.at ? " after this point" : ""}.`)));
    $("#dl-table tbody").replaceChildren(...rows);
    $("#dl-all").checked = false;
    setText("#dl-summary", pageSummary(p, "dead letters"));
    dl.cursors[dl.at + 1] = p.next_cursor || "";
    $("#dl-next").disabled = !p.next_cursor;
    $("#dl-first").disabled = dl.at === 0;
    $("#dl-purge").disabled = p.items.length === 0 && dl.at === 0;
    pickChanged();
  }

  const picked = () => [...document.querySelectorAll("input.dl-pick:checked")].map((c) => c.value);

  function pickChanged() {
    const n = picked().length;
    $("#dl-resend").disabled = $("#dl-delete").disabled = n === 0;
    setText("#dl-resend", n ? `Resend ${n} selected…` : "Resend selected…");
    setText("#dl-delete", n ? `Delete ${n} selected…` : "Delete selected…");
  }

  // deadAction asks, acts, says what happened and lists again.
  async function deadAction(action) {
    let base;
    try { base = deadBase(); } catch (e) { setText("#dl-error", e.message); return; }
    const ids = picked();
    const text = {
      resend: `Send ${ids.length} dead letter(s) back to group ${base.group} of ${base.topic}, visible now? Only this group receives them; the topic's other groups do not.`,
      delete: `Delete ${ids.length} dead letter(s) of group ${base.group} of ${base.topic} for good? They cannot be resent afterwards.`,
      purge: `Delete every dead letter of group ${base.group} of ${base.topic} for good? They cannot be resent afterwards.`,
    }[action];
    const label = { resend: "Resend", delete: "Delete", purge: "Purge all" }[action];
    if (!(await confirmAction(text, label))) return;
    try {
      const r = await api("POST", `${base.path}/${action}`, action === "purge" ? {} : { ids });
      const past = { resend: "Resent", delete: "Deleted", purge: "Purged" }[action];
      setText("#dl-result", `${past} ${fmtInt(r.count)} dead letter(s) of ${base.topic}/${base.group}.`);
    } catch (e) {
      setText("#dl-result", `${label} failed, nothing changed: ${e.message}`);
    }
    await listDead(true);
  }

  // ---- wiring ----

  hc.page("browse", (arg) => { showBrowse(arg); });
  hc.page("dead", () => { showDead(); });

  document.addEventListener("DOMContentLoaded", () => {
    for (const b of document.querySelectorAll("button[data-list]")) {
      b.addEventListener("click", () => { setKind(b.dataset.list); listBrowse(true); });
    }
    $("#br-form").addEventListener("submit", (ev) => { ev.preventDefault(); listBrowse(true); });
    $("#br-next").addEventListener("click", () => { br.at++; listBrowse(false); });
    $("#br-first").addEventListener("click", () => listBrowse(true));
    $("#dl-form").addEventListener("submit", (ev) => { ev.preventDefault(); listDead(true); });
    $("#dl-group").addEventListener("change", () => listDead(true));
    $("#dl-next").addEventListener("click", () => { dl.at++; listDead(false); });
    $("#dl-first").addEventListener("click", () => listDead(true));
    $("#dl-table tbody").addEventListener("change", pickChanged);
    $("#dl-all").addEventListener("change", () => {
      for (const c of document.querySelectorAll("input.dl-pick")) c.checked = $("#dl-all").checked;
      pickChanged();
    });
    $("#dl-resend").addEventListener("click", () => deadAction("resend"));
    $("#dl-delete").addEventListener("click", () => deadAction("delete"));
    $("#dl-purge").addEventListener("click", () => deadAction("purge"));
    setKind("pending");
  });
})();
