// The Tenants page: each tenant's endpoint, who may call it, its
// catalogue, and how many of its flows wait on people right now.
import { api } from "./api.js";
import { h, stateBadge, empty, toast } from "./ui.js";

const KINDS = [["tool", "tool", "tools"], ["prompt", "prompt", "prompts"], ["resource", "resource", "resources"], ["resource_template", "template", "templates"]];

export default async function tenantsPage(ctx) {
  const { main } = ctx;
  const [list, overview] = await Promise.all([api("/tenants?limit=200"), api("/overview")]);
  main.append(h("div", { class: "bar" }, h("h1", {}, "Tenants"), h("span", { class: "muted" }, `${list.items.length} you can see`)));
  if (!list.items.length) { main.append(empty("No tenants yet.")); return; }
  const rows = list.items.map((t) => {
    const o = overview.tenants[t.slug] || { catalogue: {}, flows: {} };
    const waiting = o.flows.awaiting_input || 0;
    const running = o.flows.running || 0;
    const access = t.access === "bearer" ? `bearer · ${t.settings.auth.issuers.length} issuer${t.settings.auth.issuers.length === 1 ? "" : "s"}` : t.access;
    return h("tr", { onclick: () => ctx.navigate("/admin/flows?tenant=" + encodeURIComponent(t.slug)), dataset: { slug: t.slug } },
      h("td", {}, h("strong", {}, t.slug), h("div", { class: "sub" }, t.displayName)),
      h("td", {}, t.disabled ? h("span", { class: "badge s-cancelled" }, "disabled") : h("span", { class: "badge s-completed" }, "serving")),
      h("td", { class: "mono", title: t.endpoint },
        h("button", { type: "button", title: "Copy the endpoint URL", onclick: (e) => { e.stopPropagation(); navigator.clipboard?.writeText(t.endpoint).then(() => toast("Copied")); } }, "copy"),
        " ", t.endpoint),
      h("td", {}, access),
      h("td", {}, KINDS.map(([k, one, many]) => o.catalogue[k] ? h("span", { class: "kind" }, `${o.catalogue[k]} ${o.catalogue[k] === 1 ? one : many}`) : null)),
      h("td", { class: "num" }, waiting ? [stateBadge("awaiting_input"), " ", String(waiting)] : "0"),
      h("td", { class: "num" }, running ? String(running) : "0"));
  });
  main.append(h("table", { class: "grid", "aria-label": "Tenants" },
    h("colgroup", {}, h("col", { style: "width:13%" }), h("col", { style: "width:100px" }), h("col", {}), h("col", { style: "width:140px" }),
      h("col", { style: "width:18%" }), h("col", { style: "width:160px" }), h("col", { style: "width:80px" })),
    h("thead", {}, h("tr", {}, h("th", {}, "Tenant"), h("th", {}, "Status"), h("th", {}, "Endpoint"), h("th", {}, "Access"),
      h("th", {}, "Catalogue"), h("th", { class: "num" }, "Waiting now"), h("th", { class: "num" }, "Running"))),
    h("tbody", {}, rows)));
}
