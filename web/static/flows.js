// The Flows page: every flow the admin may see, live. Filters live in the
// URL; rows update in place as the stream reports changes (fixed row
// heights and column widths, so nothing jumps); a pause keeps the table
// still while you read it.
import { api, stream } from "./api.js";
import { h, STATES, stateBadge, stateWord, duration, since, errorBox, empty, shortIssuer, timeEl, tickTimes, confirmDialog, toast } from "./ui.js";

// FILTERS are the page's filters, as the URL keeps them. target,
// subject, client and session are exact (links from other pages set
// them, and the page shows each as a chip that removes it); q searches
// ids, targets, principals and clients by prefix.
const FILTERS = ["tenant", "state", "q", "kind", "method", "issuer", "target", "subject", "client", "session", "key", "waitingLongerThan", "minRounds", "since", "sort"];
const EXACT = { target: "Target", subject: "Principal", client: "Client", session: "Legacy session" };
const KINDS = { "": "any kind", call: "calls (one round)", flow: "multi-round flows", legacy: "bridged legacy flows", task: "tasks" };
const METHODS = { "": "any method", "tools/call": "tools/call", "prompts/get": "prompts/get", "resources/read": "resources/read" };
const SINCE = { "": "any time", "1h": "last hour", "24h": "last 24 hours", "168h": "last 7 days" };
const WAITING = { "": "any", "1m": "over 1 minute", "5m": "over 5 minutes", "15m": "over 15 minutes", "1h": "over 1 hour" };
const SORTS = { updated: "recently changed", started: "recently started", waiting: "waiting longest", rounds: "most rounds" };

function readFilters() {
  const q = new URLSearchParams(location.search);
  const f = {};
  for (const k of FILTERS) f[k] = q.get(k) || "";
  if (!f.sort) f.sort = "updated";
  return f;
}

function writeFilters(f) {
  const q = new URLSearchParams();
  for (const k of FILTERS) if (f[k] && !(k === "sort" && f[k] === "updated")) q.set(k, f[k]);
  const url = location.pathname + (q.toString() ? "?" + q : "");
  history.replaceState(null, "", url);
}

// selection is the page's filters as the API reads them (GET /flows,
// and a bulk cancel's filter), without the state and the sort.
function selection(f) {
  const out = {};
  for (const k of ["tenant", "q", "kind", "method", "issuer", "target", "subject", "client", "session", "key", "waitingLongerThan", "minRounds"]) if (f[k]) out[k] = f[k];
  if (f.since) out.since = new Date(Date.now() - parseDuration(f.since)).toISOString().replace(/\.\d+Z$/, "Z");
  return out;
}

// apiQuery turns the page's filters into GET /flows parameters.
function apiQuery(f, extra = {}) {
  const q = new URLSearchParams(selection(f));
  for (const k of ["state", "sort"]) if (f[k]) q.set(k, f[k]);
  for (const [k, v] of Object.entries(extra)) q.set(k, v);
  return q.toString();
}

function parseDuration(s) {
  const m = /^(\d+)(ms|s|m|h)$/.exec(s || "");
  if (!m) return 0;
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2]];
}

// matches reports whether a changed flow belongs in the table as
// filtered (the server applies the same filters to lists).
function matches(f, flow) {
  if (f.tenant && flow.tenant !== f.tenant) return false;
  if (f.state && !f.state.split(",").includes(flow.state)) return false;
  if (f.kind && !f.kind.split(",").includes(flow.kind)) return false;
  if (f.method && flow.method !== f.method) return false;
  if (f.issuer && flow.principal?.issuer !== f.issuer) return false;
  if (f.q && ![flow.id, flow.target, flow.principal?.subject, flow.client?.name].some((v) => v && v.startsWith(f.q))) return false;
  if (f.target && flow.target !== f.target) return false;
  if (f.subject && flow.principal?.subject !== f.subject) return false;
  if (f.client && flow.client?.name !== f.client) return false;
  if (f.session && flow.sessionId !== f.session) return false;
  if (f.key && flow.keyId !== f.key) return false;
  if (f.minRounds && flow.rounds < Number(f.minRounds)) return false;
  if (f.waitingLongerThan && !(flow.state === "awaiting_input" && since(flow.waitingSince) > parseDuration(f.waitingLongerThan))) return false;
  return true;
}

export default async function flowsPage(ctx) {
  const { main } = ctx;
  const f = readFilters();
  let rows = new Map(); // id -> {flow, tr}
  let order = [];       // ids in display order
  let cursor = "";
  let selected = -1;
  let paused = false;
  const held = new Map();

  const counts = h("div", { class: "states", role: "group", "aria-label": "Flows by state (click to filter)" });
  const live = h("span", { class: "live", role: "status" }, h("span", { class: "dot", "aria-hidden": "true" }), h("span", {}, "connecting"));
  const pauseBtn = h("button", { type: "button", "aria-pressed": "false", title: "Pause live updates (p)" }, "Pause");
  const tbody = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const status = h("div");

  const tenants = await api("/tenants?limit=200").catch(() => ({ items: [] }));
  const tenantSel = h("select", { name: "tenant" }, h("option", { value: "" }, "all tenants"),
    tenants.items.map((t) => h("option", { value: t.slug }, t.slug)));
  const input = (name, placeholder) => h("input", { name, placeholder, value: f[name], autocomplete: "off", spellcheck: "false" });
  const select = (name, options) => h("select", { name }, Object.entries(options).map(([v, label]) => h("option", { value: v }, label)));
  const form = h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
    h("label", { class: "wide" }, "Search", input("q", "flow id, target, principal or client: the start of it")),
    h("label", {}, "Tenant", tenantSel),
    h("label", {}, "Kind", select("kind", KINDS)),
    h("label", {}, "Method", select("method", METHODS)),
    h("label", {}, "Issuer", input("issuer", "https://…")),
    h("label", {}, "Key", input("key", "key id")),
    h("label", {}, "Waiting", select("waitingLongerThan", WAITING)),
    h("label", {}, "Rounds at least", h("input", { name: "minRounds", type: "number", min: 1, value: f.minRounds })),
    h("label", {}, "Changed", select("since", SINCE)),
    h("label", {}, "Sort", select("sort", SORTS)));
  for (const el of form.elements) if (f[el.name] !== undefined) el.value = f[el.name];
  let typing;
  form.addEventListener("input", (e) => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      for (const el of form.elements) if (el.name) f[el.name] = el.value.trim();
      writeFilters(f);
      reload();
    }, e.target.tagName === "INPUT" ? 300 : 0);
  });

  // The exact filters a link set, each a chip that removes it: a page
  // reached from a session or a principal says what it shows.
  const exact = h("div", { class: "exact", role: "group", "aria-label": "Exact filters" });
  function renderExact() {
    exact.replaceChildren(...Object.entries(EXACT).filter(([k]) => f[k]).map(([k, label]) =>
      h("button", { type: "button", class: "keychip", dataset: { filter: k }, title: "Remove this filter", "aria-label": `Remove the filter ${label} ${f[k]}`,
        onclick: () => { f[k] = ""; writeFilters(f); renderExact(); reload(); } },
      label + ": ", h("span", { class: "mono" }, f[k]), " ×")));
    exact.hidden = exact.childElementCount === 0;
  }
  renderExact();

  // Fixed widths, each at least its header's word; the target takes the
  // rest. On a phone each row is a card instead (app.css).
  const table = h("table", { class: "grid flows", "aria-label": "Flows" },
    h("colgroup", {},
      h("col", { style: "width:168px" }), h("col", { style: "width:100px" }), h("col", {}), h("col", { style: "width:12%" }),
      h("col", { style: "width:9%" }), h("col", { style: "width:76px" }), h("col", { style: "width:100px" }),
      h("col", { style: "width:76px" }), h("col", { style: "width:84px" }), h("col", { style: "width:84px" }), h("col", { style: "width:212px" })),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "State"), h("th", { scope: "col" }, "Tenant"), h("th", { scope: "col" }, "Target · why"),
      h("th", { scope: "col" }, "Principal"), h("th", { scope: "col" }, "Client"), h("th", { scope: "col", class: "num" }, "Rounds"),
      h("th", { scope: "col" }, "Waiting on"), h("th", { scope: "col", class: "num" }, "Waited"), h("th", { scope: "col", class: "num" }, "Started"),
      h("th", { scope: "col", class: "num" }, "Changed"), h("th", { scope: "col" }, "Flow id"))),
    tbody);

  const bulk = h("button", { type: "button", class: "danger", hidden: !ctx.me || ctx.me.role === "viewer", title: "Cancel every in-flight flow these filters select, after a preview" }, "Cancel matching…");
  bulk.addEventListener("click", bulkCancel);

  main.append(
    h("div", { class: "bar" }, h("h1", {}, "Flows"), h("span", { class: "spacer" }), live, pauseBtn, bulk),
    counts, form, exact, status, table, h("div", { class: "bar" }, more,
      h("span", { class: "hint" }, h("kbd", {}, "j"), "/", h("kbd", {}, "k"), " move · ", h("kbd", {}, "Enter"), " open · ",
        h("kbd", {}, "/"), " filter · ", h("kbd", {}, "p"), " pause")));

  function cells(flow) {
    const p = flow.principal;
    const task = flow.kind === "task";
    const live = flow.state === "awaiting_input" || flow.state === "running";
    // A flow's wait is on its user; a live task's age is its whole life.
    const from = task && live ? flow.startedAt : flow.state === "awaiting_input" ? flow.waitingSince : "";
    const waited = from ? since(from) : null;
    const left = !task && flow.state === "awaiting_input" && flow.stateExpiresAt ? Date.parse(flow.stateExpiresAt) - Date.now() : null;
    const why = flow.message || (flow.state === "cancelled" && flow.cancelReason ? "cancelled: " + flow.cancelReason : "");
    return [
      h("td", { class: "c-state" }, stateBadge(flow.state)),
      h("td", { class: "c-tenant", title: flow.tenant }, flow.tenant),
      // The kind says so first, so a narrow column never cuts the tag off;
      // why it failed follows the target.
      h("td", { class: "c-target", title: `${flow.method} ${flow.target}${why ? "\n" + why : ""}` },
        flow.kind !== "call" ? h("span", { class: "kind", title: KINDS[flow.kind] }, flow.kind) : null,
        h("span", { class: "sub" }, flow.method.split("/")[0] + " "),
        flow.target || h("span", { class: "sub" }, "(refused before its target was read)"),
        why ? h("span", { class: "why" + (flow.state === "failed" || flow.state === "rejected" ? " bad" : "") }, " · " + why) : null),
      h("td", { class: "c-who", title: p ? `${p.subject || "(machine)"} @ ${p.issuer} via ${p.client}` : "no principal" },
        p ? [p.subject || "(machine)", h("span", { class: "sub" }, " @" + shortIssuer(p.issuer))] : h("span", { class: "sub" }, "no principal")),
      h("td", { class: "c-client", title: `${flow.client?.name || ""} ${flow.client?.version || ""} · ${flow.era}` },
        flow.client?.name || h("span", { class: "sub" }, "unnamed"), h("span", { class: "sub" }, " " + (flow.client?.version || ""))),
      h("td", { class: "num c-rounds" }, flow.rounds),
      h("td", { class: "c-pending" }, (flow.pendingKinds || []).map((k) => h("span", { class: "kind" }, k))),
      h("td", { class: "num c-waited" + (left !== null && left < 60_000 ? " warn" : ""), "data-since": from || "",
        "data-until": left === null ? "" : flow.stateExpiresAt,
        title: task ? "the task's age" : left !== null ? `waiting on the user; its state expires in ${duration(left)}` : "waiting on the user" },
        waited === null ? "" : duration(waited)),
      timeEl(flow.startedAt, "td", { class: "num c-started" }),
      timeEl(flow.updatedAt, "td", { class: "num c-changed" }),
      h("td", { class: "mono c-id", title: flow.id }, flow.id),
    ];
  }

  function row(flow) {
    const tr = h("tr", { tabindex: "-1", dataset: { id: flow.id }, "aria-selected": "false",
      onclick: () => open(flow), "aria-label": `${stateWord(flow.state)} flow of ${flow.target} in ${flow.tenant}` }, cells(flow));
    return tr;
  }

  function open(flow) { ctx.navigate(`/admin/flows/${encodeURIComponent(flow.id)}`); }

  // bulkCancel cancels what the filters select, in flight: a preview of
  // how many (and which), a reason, then exactly that many.
  async function bulkCancel() {
    const filter = selection(f);
    if (!Object.keys(filter).length) {
      toast("Choose a tenant or another filter first: a bulk cancel never selects every flow");
      return;
    }
    let prev;
    try {
      prev = await api("/flows/cancel", { method: "POST", body: { filter, preview: true } });
    } catch (err) { toast(err.message); return; }
    if (!prev.matched) { toast("No flow in flight matches these filters"); return; }
    const said = Object.entries(filter).map(([k, v]) => `${k} ${v}`).join(", ");
    const v = await confirmDialog({
      title: `Cancel ${prev.matched} in-flight flow${prev.matched === 1 ? "" : "s"}?`,
      body: `Every flow awaiting input or running that matches ${said}. Their next rounds are refused on every replica, and tasks among them are told to stop. ` +
        `First ${prev.sample.length}: ${prev.sample.join(", ")}`,
      action: `Cancel ${prev.matched}`, danger: true,
      fields: [{ name: "reason", label: "Reason (recorded and audited)", multiline: true, required: true }],
    });
    if (!v) return;
    try {
      const done = await api("/flows/cancel", { method: "POST", body: { filter, reason: v.reason, expect: prev.matched } });
      toast(`Cancelled ${done.cancelled} of ${done.matched}`);
    } catch (err) { toast(err.message); }
  }

  function choose(i) {
    const trs = tbody.rows;
    if (!trs.length) return;
    selected = Math.max(0, Math.min(i, trs.length - 1));
    for (const tr of trs) tr.setAttribute("aria-selected", "false");
    trs[selected].setAttribute("aria-selected", "true");
    trs[selected].focus({ preventScroll: false });
  }

  let shownCounts = {};
  function renderCounts(c) {
    shownCounts = { ...(c || {}) };
    const active = new Set((f.state || "").split(",").filter(Boolean));
    counts.replaceChildren(...STATES.map((s) => h("button", {
      type: "button", "aria-pressed": String(active.has(s)), dataset: { state: s },
      title: `Show only ${stateWord(s)} flows (click again to clear)`,
      onclick: () => {
        active.has(s) ? active.delete(s) : active.add(s);
        f.state = [...active].join(",");
        writeFilters(f);
        reload();
      },
    }, stateBadge(s), h("span", { class: "count" }, String(c?.[s] ?? 0)))));
  }

  async function load(append) {
    const q = apiQuery(f, { limit: 50, ...(append && cursor ? { cursor } : {}) });
    const data = await api("/flows?" + q);
    if (!append) {
      rows = new Map();
      order = [];
      tbody.replaceChildren();
      selected = -1;
    }
    for (const flow of data.items) {
      if (rows.has(flow.id)) continue;
      const tr = row(flow);
      rows.set(flow.id, { flow, tr });
      order.push(flow.id);
      tbody.append(tr);
    }
    cursor = data.nextCursor || "";
    more.hidden = !cursor;
    renderCounts(data.counts);
    status.replaceChildren(rows.size ? "" : empty("No flows match these filters."));
  }

  // A reload's answer may be older than changes the stream delivered
  // while it was on its way: those are held, and applied over it.
  let loading = 0;
  const during = [];
  async function reload() {
    loading++;
    try { await load(false); } catch (err) { status.replaceChildren(errorBox(err)); }
    if (--loading === 0) for (const flow of during.splice(0)) apply(flow);
  }

  let countsTimer;
  function refreshCounts() {
    clearTimeout(countsTimer);
    countsTimer = setTimeout(async () => {
      try { renderCounts((await api("/flows?" + apiQuery(f, { limit: 1 }))).counts); } catch { /* next change retries */ }
    }, 800);
  }

  // adjustCounts moves a flow between the state counts at once; the
  // debounced refresh then corrects whatever the table cannot know.
  function adjustCounts(from, to) {
    if (from === to) return;
    if (from) shownCounts[from] = Math.max(0, (shownCounts[from] || 0) - 1);
    if (to) shownCounts[to] = (shownCounts[to] || 0) + 1;
    for (const b of counts.querySelectorAll("button[data-state]")) {
      b.querySelector(".count").textContent = String(shownCounts[b.dataset.state] || 0);
    }
  }

  function apply(flow) {
    const known = rows.get(flow.id);
    adjustCounts(known ? known.flow.state : null, flow.state);
    if (known) {
      if (!matches(f, flow)) {
        known.tr.remove();
        rows.delete(flow.id);
        order = order.filter((id) => id !== flow.id);
      } else {
        known.flow = flow;
        known.tr.replaceChildren(...cells(flow));
        known.tr.setAttribute("aria-label", `${stateWord(flow.state)} flow of ${flow.target} in ${flow.tenant}`);
        known.tr.classList.remove("changed");
        void known.tr.offsetWidth; // restart the highlight
        known.tr.classList.add("changed");
      }
    } else if (matches(f, flow) && (f.sort === "updated" || f.sort === "started")) {
      const tr = row(flow);
      tr.classList.add("changed");
      rows.set(flow.id, { flow, tr });
      order.unshift(flow.id);
      tbody.prepend(tr);
      if (selected >= 0) selected++;
      status.replaceChildren();
    }
    refreshCounts();
  }

  function setLive(state) {
    live.className = "live" + (paused ? " paused" : state === "down" ? " down" : "");
    live.lastChild.textContent = paused ? `paused${held.size ? ` · ${held.size} updates waiting` : ""}` : state === "down" ? "reconnecting…" : "live";
  }
  let linkState = "connecting";

  pauseBtn.addEventListener("click", () => {
    paused = !paused;
    pauseBtn.setAttribute("aria-pressed", String(paused));
    pauseBtn.textContent = paused ? "Resume" : "Pause";
    if (!paused) {
      for (const flow of held.values()) apply(flow);
      held.clear();
    }
    setLive(linkState);
  });

  await reload();
  let wasLive = false;
  const stop = stream(f.tenant, (kind, flow) => {
    if (kind === "reset") { if (!paused) reload(); return; }
    if (paused) { held.set(flow.id, flow); setLive(linkState); return; }
    if (loading) { during.push(flow); return; }
    apply(flow);
  }, (s) => {
    linkState = s;
    setLive(s);
    // The list was read before the stream was live: what changed in
    // between came on neither. Read it again once the stream is live
    // (and after each time it was down), so no change falls between.
    if (s === "live" && !wasLive && !paused) reload();
    wasLive = s === "live";
  });

  more.addEventListener("click", () => load(true).catch((err) => status.replaceChildren(errorBox(err))));

  // Waited and time-left cells tick once a second; only their text
  // changes (fixed widths, tabular figures).
  const tick = setInterval(() => {
    for (const td of tbody.querySelectorAll("td[data-since]")) {
      if (td.dataset.since) td.textContent = duration(since(td.dataset.since));
    }
    for (const td of tbody.querySelectorAll("td[data-until]")) {
      if (!td.dataset.until) continue;
      const left = Date.parse(td.dataset.until) - Date.now();
      td.classList.toggle("warn", left < 60_000);
    }
    tickTimes(tbody);
  }, 1000);

  const keys = (e) => {
    if (e.target.closest("input, select, textarea") || e.metaKey || e.ctrlKey || e.altKey) {
      if (e.key === "Escape") e.target.blur();
      return;
    }
    if (e.key === "j" || e.key === "ArrowDown") { e.preventDefault(); choose(selected + 1); }
    else if (e.key === "k" || e.key === "ArrowUp") { e.preventDefault(); choose(selected - 1); }
    else if (e.key === "Enter" && selected >= 0) { const id = tbody.rows[selected]?.dataset.id; if (id) open(rows.get(id).flow); }
    else if (e.key === "/") { e.preventDefault(); form.elements.q.focus(); }
    else if (e.key === "p") { pauseBtn.click(); }
  };
  document.addEventListener("keydown", keys);
  ctx.onLeave(() => { stop(); clearInterval(tick); clearTimeout(countsTimer); document.removeEventListener("keydown", keys); });

}
