// The Tenants page, an operator's overview: each tenant's endpoint, who
// may call it, its catalogue, its calls a minute, failure rate and p95
// round time over the last hour, and what waits on its people now (the
// oldest for how long). Each figure links to the calls behind it; the
// tenant's name, to its catalogue.
import { api } from "./api.js";
import { h, empty, toast, duration, since, tickTimes } from "./ui.js";

// perMinute shows a rate to two significant figures or so.
function perMinute(x) {
  if (x === 0) return "0";
  if (x < 0.01) return "<0.01";
  return x.toFixed(x >= 10 ? 0 : x >= 1 ? 1 : 2);
}

const KINDS = [["tool", "tool", "tools"], ["prompt", "prompt", "prompts"], ["resource", "resource", "resources"], ["resource_template", "template", "templates"]];

export default async function tenantsPage(ctx) {
  const { main } = ctx;
  const [list, overview] = await Promise.all([api("/tenants?limit=200"), api("/overview")]);
  main.append(h("div", { class: "bar" }, h("h1", {}, "Tenants"), h("span", { class: "muted" }, `${list.items.length} you can see`)));
  if (!list.items.length) { main.append(empty("No tenants yet.")); return; }
  const flows = (slug, q = "") => `/admin/flows?tenant=${encodeURIComponent(slug)}${q}`;
  const link = (href, ...children) => h("a", { href, "data-link": true, onclick: (e) => e.stopPropagation() }, ...children);
  const rows = list.items.map((t) => {
    const o = overview.tenants[t.slug] || { catalogue: {}, flows: {}, activity: {} };
    const a = o.activity || {};
    const access = t.access === "bearer" ? `bearer · ${t.settings.auth.issuers.length} issuer${t.settings.auth.issuers.length === 1 ? "" : "s"}` : t.access;
    const rate = a.calls ? a.failureRate : null;
    return h("tr", { onclick: () => ctx.navigate(flows(t.slug)), dataset: { slug: t.slug } },
      h("td", { class: "c-tenant" }, link(`/admin/tenants/${encodeURIComponent(t.slug)}`, h("strong", {}, t.slug)), h("div", { class: "sub" }, t.displayName)),
      h("td", { class: "c-status" }, t.disabled ? h("span", { class: "badge s-cancelled" }, "disabled") : h("span", { class: "badge s-completed" }, "serving")),
      h("td", { class: "mono c-endpoint", title: t.endpoint },
        h("button", { type: "button", title: "Copy the endpoint URL", onclick: (e) => { e.stopPropagation(); navigator.clipboard?.writeText(t.endpoint).then(() => toast("Copied")); } }, "copy"),
        " ", t.endpoint),
      h("td", { class: "c-access" }, access),
      h("td", { class: "c-catalogue", title: KINDS.map(([k, one, many]) => o.catalogue[k] ? `${o.catalogue[k]} ${o.catalogue[k] === 1 ? one : many}` : "").filter(Boolean).join(", ") },
        KINDS.map(([k, one, many]) => o.catalogue[k] ? h("span", { class: "kind" }, `${o.catalogue[k]} ${o.catalogue[k] === 1 ? one : many}`) : null)),
      h("td", { class: "num c-rate", title: `${a.calls || 0} calls in the last ${a.window || "hour"}` }, link(flows(t.slug), perMinute(a.callsPerMinute || 0))),
      h("td", { class: "num c-failing" + (rate > 0.05 ? " warn" : ""), title: `${a.failed || 0} failed or refused of ${a.calls || 0} in the last ${a.window || "hour"}` },
        rate === null ? h("span", { class: "sub" }, "–") : link(flows(t.slug, "&state=failed,rejected"), (100 * rate).toFixed(rate < 0.1 && rate > 0 ? 1 : 0) + "%")),
      h("td", { class: "num c-p95", title: "95th percentile of the server time a round, last hour (of the most recent 50,000 calls of the fleet)" }, a.calls && a.p95RoundMs ? duration(a.p95RoundMs) : h("span", { class: "sub" }, "–")),
      h("td", { class: "num c-waiting", title: `${a.waiting || 0} flows awaiting input now` },
        a.waiting ? link(flows(t.slug, "&state=awaiting_input&sort=waiting"), h("span", { class: "badge s-awaiting_input" }, String(a.waiting))) : "0"),
      h("td", { class: "num c-oldest", "data-since": a.oldestWaitingSince || "", title: a.oldestWaitingSince ? "waiting since " + new Date(a.oldestWaitingSince).toLocaleString() : "" },
        a.oldestWaitingSince ? duration(since(a.oldestWaitingSince)) : ""));
  });
  const table = h("table", { class: "grid tenants", "aria-label": "Tenants" },
    h("colgroup", {}, h("col", { style: "width:12%" }), h("col", { style: "width:118px" }), h("col", {}), h("col", { style: "width:130px" }),
      h("col", { style: "width:15%" }), h("col", { style: "width:96px" }), h("col", { style: "width:84px" }), h("col", { style: "width:104px" }),
      h("col", { style: "width:120px" }), h("col", { style: "width:96px" })),
    h("thead", {}, h("tr", {}, h("th", {}, "Tenant"), h("th", {}, "Status"), h("th", {}, "Endpoint"), h("th", {}, "Access"),
      h("th", {}, "Catalogue"), h("th", { class: "num", title: "calls a minute, last hour" }, "Calls/min"), h("th", { class: "num" }, "Failing"),
      h("th", { class: "num" }, "p95 round"), h("th", { class: "num" }, "Waiting now"), h("th", { class: "num" }, "Oldest"))),
    h("tbody", {}, rows));
  main.append(table, h("p", { class: "hint" }, "Rates over the last hour, from the flow record. Click a tenant's name for its catalogue, elsewhere on its row for its calls."));
  const tick = setInterval(() => {
    for (const td of table.querySelectorAll("td[data-since]")) if (td.dataset.since) td.textContent = duration(since(td.dataset.since));
    tickTimes(table);
  }, 1000);
  ctx.onLeave(() => clearInterval(tick));
}
