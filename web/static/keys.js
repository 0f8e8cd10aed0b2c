// The Keys page: across the fleet, every ring's phase and next
// transition and the flows in flight under each key (linked to them);
// then one tenant's ring: rotate now, or revoke a key in an emergency
// (typing its id to confirm).
import { api } from "./api.js";
import { h, clock, duration, confirmDialog, toast, errorBox, empty, stacked } from "./ui.js";

export default async function keysPage(ctx) {
  const { main } = ctx;
  const list = await api("/tenants?limit=200");
  const q = new URLSearchParams(location.search);
  const sel = h("select", { "aria-label": "Tenant" }, list.items.map((t) => h("option", { value: t.slug }, t.slug)));
  const body = h("div");
  const fleet = h("div");
  main.append(h("div", { class: "bar" }, h("h1", {}, "Keys")), fleet,
    h("div", { class: "bar" }, h("h2", {}, "One tenant's ring"), h("label", { class: "hint" }, "Tenant ", sel)), body);
  if (!list.items.length) { body.append(empty("No tenants yet.")); return; }
  showFleet();

  // showFleet lists every ring: its phase, what comes next and when, and
  // its keys with the flows in flight under each.
  async function showFleet() {
    let data;
    try { data = await api("/keys"); } catch (err) {
      fleet.replaceChildren(err.status === 404 ? "" : errorBox(err));
      return;
    }
    const rows = data.items.map((it) => {
      const r = it.ring;
      const next = r?.next || {};
      return h("tr", { dataset: { slug: it.tenant }, onclick: () => { sel.value = it.tenant; sel.dispatchEvent(new Event("change")); } },
        h("td", {}, h("strong", {}, it.tenant)),
        h("td", {}, r ? h("span", { class: "kind" }, r.phase) : h("span", { class: "sub" }, it.problem)),
        h("td", { title: next.at ? new Date(next.at).toLocaleString() : "" }, next.transition ? `${next.transition} in ${duration(Date.parse(next.at) - Date.now())}` : r ? "none scheduled" : ""),
        h("td", {}, (r?.keys || []).map((k) => {
          const n = it.inFlight[k.id] || 0;
          return h("a", { class: "keychip", href: `/admin/flows?key=${encodeURIComponent(k.id)}&state=awaiting_input,running`, "data-link": true,
            onclick: (e) => e.stopPropagation(), title: `${k.state}: ${n} flow${n === 1 ? "" : "s"} in flight sealed under it` },
          h("span", { class: "mono" }, k.id), " ", k.state, " · ", h("strong", {}, String(n)));
        })));
    });
    const table = h("table", { class: "grid", "aria-label": "Key rings of the fleet" },
      h("colgroup", {}, h("col", { style: "width:16%" }), h("col", { style: "width:140px" }), h("col", { style: "width:220px" }), h("col", {})),
      h("thead", {}, h("tr", {}, h("th", {}, "Tenant"), h("th", {}, "Phase"), h("th", {}, "Next"), h("th", {}, "Keys · flows in flight"))),
      h("tbody", {}, rows));
    fleet.replaceChildren(stacked(table), data.truncated ? h("p", { class: "hint" }, "The first 500 tenants.") : "");
  }
  if (q.get("tenant")) sel.value = q.get("tenant");
  sel.addEventListener("change", () => { history.replaceState(null, "", "/admin/keys?tenant=" + encodeURIComponent(sel.value)); show(); });

  async function show() {
    const slug = sel.value;
    const may = ctx.can(slug);
    body.replaceChildren(h("p", { class: "muted" }, "Loading…"));
    let v;
    try {
      v = await api(`/tenants/${encodeURIComponent(slug)}/keys`);
    } catch (err) {
      if (err.status === 404 && /not enabled/.test(err.message)) {
        body.replaceChildren(empty("Every tenant shares the static key ring (PLATFORM_STATE_KEYS): per-tenant rings and rotation need the local or Vault keys provider."));
      } else if (err.status === 404) {
        body.replaceChildren(empty(`${slug} has no key ring yet: its first multi-round flow creates one.`));
      } else {
        body.replaceChildren(errorBox(err));
      }
      return;
    }
    const next = v.next || {};
    body.replaceChildren(
      h("div", { class: "panel" }, h("dl", { class: "facts" },
        h("dt", {}, "Provider"), h("dd", {}, `${v.provider} · custody ${v.custody}`),
        h("dt", {}, "Phase"), h("dd", {}, `${v.phase} since ${clock(v.phaseSince)}`),
        h("dt", {}, "Next"), h("dd", {}, next.transition ? `${next.transition} at ${clock(next.at)} (in ${duration(Date.parse(next.at) - Date.now())})` : "none scheduled"),
        h("dt", {}, "Rotation period"), h("dd", {}, duration(v.rotationPeriodSeconds * 1000)),
        h("dt", {}, "State lifetime"), h("dd", {}, duration(v.stateTtlSeconds * 1000)),
        h("dt", {}, "Propagation margin"), h("dd", {}, duration(v.propagationMarginSeconds * 1000)))),
      h("div", { class: "bar" }, h("h2", {}, "Keys"), h("span", { class: "spacer" }),
        may ? h("button", { type: "button", class: "primary", onclick: rotate }, "Rotate now") : null),
      stacked(h("table", { class: "grid", "aria-label": "Keys of " + slug },
        h("colgroup", {}, h("col", { style: "width:22%" }), h("col", { style: "width:14%" }), h("col", { style: "width:14%" }), h("col", {}), h("col", { style: "width:120px" })),
        h("thead", {}, h("tr", {}, h("th", {}, "Key"), h("th", {}, "Kind"), h("th", {}, "State"), h("th", {}, "Created"), h("th", {}, ""))),
        h("tbody", {}, (v.keys || []).map((k) => h("tr", {},
          h("td", { class: "mono" }, k.id), h("td", {}, k.kind), h("td", {}, k.state), h("td", {}, clock(k.created || k.createdAt)),
          h("td", {}, may ? h("button", { type: "button", class: "danger", onclick: () => revoke(k.id) }, "Revoke…") : null)))))));
  }

  async function rotate() {
    const slug = sel.value;
    const ok = await confirmDialog({ title: `Rotate ${slug}'s keys now?`, body: "A new key is staged now; it starts minting and the old key retires on the schedule, without failing a round in flight.", action: "Rotate" });
    if (!ok) return;
    try { await api(`/tenants/${encodeURIComponent(slug)}/keys/rotate`, { method: "POST" }); toast("Rotation started"); show(); } catch (err) { toast(err.message); }
  }

  async function revoke(id) {
    const slug = sel.value;
    const v = await confirmDialog({
      title: "Emergency revoke", danger: true, action: "Revoke key",
      body: `Key ${id} leaves ${slug}'s ring at once: every flow sealed under it is refused on its next round. Type the key id to confirm.`,
      fields: [{ name: "confirm", label: "Key id", match: id }],
    });
    if (!v) return;
    try { await api(`/tenants/${encodeURIComponent(slug)}/keys/${encodeURIComponent(id)}/revoke`, { method: "POST", body: { confirm: v.confirm } }); toast("Key revoked"); show(); } catch (err) { toast(err.message); }
  }

  await show();
}
