// The Sessions page: a tenant's live legacy (2025-11-25 and earlier)
// client sessions: which client, whose, how old, when last used, its
// open streams, and the calls each has in flight, linked to exactly
// those calls in the flow record. Sessions end singly or all at once, with a reason, audited.
// The list is read again every 5 s; rows are kept by session id and
// changed in place, so nothing jumps.
import { api } from "./api.js";
import { h, empty, toast, timeEl, tickTimes, confirmDialog, shortIssuer, stacked, errorBox } from "./ui.js";

const REFRESH_MS = 5000;

export default async function sessionsPage(ctx) {
  const { main } = ctx;
  const tenants = (await api("/tenants?limit=200")).items;
  if (!tenants.length) { main.append(h("h1", {}, "Sessions"), empty("No tenants yet.")); return; }
  const params = new URLSearchParams(location.search);
  let slug = params.get("tenant") || tenants[0].slug;
  if (!tenants.some((t) => t.slug === slug)) slug = tenants[0].slug;

  const picker = h("select", { id: "sessions-tenant", "aria-label": "Tenant" },
    tenants.map((t) => h("option", { value: t.slug, selected: t.slug === slug }, t.slug)));
  const count = h("span", { class: "muted", "aria-live": "polite" });
  const endAll = h("button", { type: "button", class: "danger", "data-action": "end-all", hidden: true }, "End all…");
  const tbody = h("tbody");
  const table = h("table", { class: "grid sessions", "aria-label": "Live legacy sessions" },
    h("colgroup", {}, h("col", { style: "width:16%" }), h("col", { style: "width:16%" }), h("col", { style: "width:112px" }), h("col", {}),
      h("col", { style: "width:96px" }), h("col", { style: "width:104px" }), h("col", { style: "width:80px" }), h("col", { style: "width:88px" }), h("col", { style: "width:96px" }), h("col", { style: "width:84px" })),
    h("thead", {}, h("tr", {}, h("th", {}, "Session"), h("th", {}, "Client"), h("th", {}, "Protocol"), h("th", {}, "Principal"),
      h("th", { class: "num" }, "Started"), h("th", { class: "num", title: "last used, to within 30 s" }, "Last active"),
      h("th", { class: "num", title: "streams open on any replica (the GET stream, call streams, task waits), to within 30 s" }, "Streams"),
      h("th", { class: "num", title: "bridged calls whose stream began and that have not ended" }, "In flight"),
      h("th", { class: "num" }, "Expires"), h("th", {}, h("span", { class: "visually-hidden" }, "Actions")))),
    tbody);
  const status = h("div");
  main.append(
    h("div", { class: "bar" }, h("h1", {}, "Sessions"), h("label", { for: "sessions-tenant", class: "visually-hidden" }, "Tenant"), picker, count,
      h("span", { class: "spacer" }), endAll),
    status, table,
    h("p", { class: "hint" }, "Sessions of initialization-era clients (protocol 2025-11-25 and earlier). An ended session's id gets 404 on every replica; its client starts a new one. Sessions unused for an hour end by themselves."));

  const rows = new Map(); // session id → tr
  // A session's flows and calls, or those of them in flight.
  const flowsOf = (s, state) => "/admin/flows?" + new URLSearchParams({ tenant: slug, session: s.id, ...(state ? { state } : {}) });

  function row(s) {
    const p = s.principal;
    const end = ctx.can(slug)
      ? h("button", { type: "button", "data-action": "end", "aria-label": `End session ${s.id}`, onclick: () => endOne(s) }, "End")
      : null;
    return h("tr", { dataset: { id: s.id } },
      h("td", { class: "mono c-id" }, h("a", { href: flowsOf(s), "data-link": true, title: `every call of session ${s.id}` }, s.id)),
      h("td", { class: "c-client", title: s.client ? `${s.client.name} ${s.client.version}` : "" },
        s.client ? [s.client.name, h("span", { class: "sub" }, " " + (s.client.version || ""))] : h("span", { class: "sub" }, "unnamed")),
      h("td", { class: "c-proto" }, s.protocolVersion),
      h("td", { class: "c-who", title: p ? `${p.subject || "(machine)"} @ ${p.issuer} via ${p.client}` : "public tenant: no principal" },
        p ? [p.subject || "(machine)", h("span", { class: "sub" }, " @" + shortIssuer(p.issuer))] : h("span", { class: "sub" }, "no principal")),
      timeEl(s.createdAt, "td", { class: "num" }),
      timeEl(s.lastSeenAt, "td", { class: "num c-seen" }),
      h("td", { class: "num c-streams" }, s.openStreams ? String(s.openStreams) : h("span", { class: "sub" }, "0")),
      h("td", { class: "num c-inflight" }, s.callsInFlight
        ? h("a", { href: flowsOf(s, "awaiting_input,running"), "data-link": true, title: "this session's calls in flight" }, h("span", { class: "badge s-awaiting_input" }, String(s.callsInFlight)))
        : h("a", { href: flowsOf(s), "data-link": true, class: "sub", title: "every call of this session" }, "0")),
      timeEl(s.expiresAt, "td", { class: "num" }),
      h("td", { class: "c-actions" }, end));
  }

  async function load() {
    let list;
    try {
      list = await api(`/tenants/${encodeURIComponent(slug)}/sessions?limit=200`);
      status.replaceChildren();
    } catch (err) { status.replaceChildren(errorBox(err)); return; }
    const seen = new Set();
    list.items.forEach((s, i) => {
      seen.add(s.id);
      const fresh = row(s);
      const old = rows.get(s.id);
      if (old) old.replaceWith(fresh); // in place: the row keeps its position
      else if (tbody.rows[i]) tbody.insertBefore(fresh, tbody.rows[i]);
      else tbody.append(fresh);
      rows.set(s.id, fresh);
    });
    for (const [id, tr] of rows) if (!seen.has(id)) { tr.remove(); rows.delete(id); }
    tbody.querySelector("tr.none")?.remove();
    if (!list.items.length) tbody.append(h("tr", { class: "none" }, h("td", { colspan: 10 }, empty("No live sessions."))));
    count.textContent = `${list.items.length}${list.nextCursor ? "+" : ""} live`;
    endAll.hidden = !ctx.can(slug) || !list.items.length;
    endAll.textContent = `End all ${list.items.length}${list.nextCursor ? "+" : ""}…`;
    stacked(table);
  }

  async function endOne(s) {
    const v = await confirmDialog({
      title: "End this session?",
      body: `${s.client?.name || "The client"}${s.principal?.subject ? " of " + s.principal.subject : ""} gets 404 on its next request, on every replica, and starts a new session; ${s.callsInFlight ? `its ${s.callsInFlight} call${s.callsInFlight === 1 ? "" : "s"} in flight stop` : "it has no call in flight"}.`,
      action: "End session", danger: true,
      fields: [{ name: "reason", label: "Reason (audited)", multiline: true }],
    });
    if (!v) return;
    try {
      await api(`/tenants/${encodeURIComponent(slug)}/sessions/${encodeURIComponent(s.id)}`, { method: "DELETE", body: { reason: v.reason } });
      toast("Session ended");
    } catch (err) { toast(err.message); }
    await load();
  }

  endAll.addEventListener("click", async () => {
    const n = rows.size;
    const v = await confirmDialog({
      title: `End all of ${slug}'s live sessions?`,
      body: `Every live session of ${slug} ends (${n} listed here, and any started since); their calls in flight stop. Type the tenant's name to confirm.`,
      action: "End all", danger: true,
      fields: [{ name: "confirm", label: "Tenant", required: true, match: slug }, { name: "reason", label: "Reason (audited)", multiline: true }],
    });
    if (!v) return;
    try {
      const r = await api(`/tenants/${encodeURIComponent(slug)}/sessions`, { method: "DELETE", body: { reason: v.reason } });
      toast(`${r.ended} session${r.ended === 1 ? "" : "s"} ended`);
    } catch (err) { toast(err.message); }
    await load();
  });

  picker.addEventListener("change", () => ctx.navigate(`/admin/sessions?tenant=${encodeURIComponent(picker.value)}`, { replace: true }));

  await load();
  const refresh = setInterval(load, REFRESH_MS);
  const tick = setInterval(() => tickTimes(table), 1000);
  ctx.onLeave(() => { clearInterval(refresh); clearInterval(tick); });
}
