// The Audit page: every admin change, newest first.
import { api } from "./api.js";
import { h, clock, exact, empty, stacked } from "./ui.js";

// ACTIONS say in words what a route did; the route stays on hover.
const ACTIONS = [
  [/^POST \/api\/v1\/tenants$/, "created tenant"],
  [/^(PUT|PATCH) \/api\/v1\/tenants\/:slug$/, "changed tenant"],
  [/^DELETE \/api\/v1\/tenants\/:slug$/, "deleted tenant"],
  [/^POST \/api\/v1\/tenants\/:slug\/(tools|prompts|resources|resource-templates)$/, (m) => "created " + singular(m[1])],
  [/^PUT \/api\/v1\/tenants\/:slug\/(tools|prompts|resources|resource-templates)\/:name$/, (m) => "changed " + singular(m[1])],
  [/^DELETE \/api\/v1\/tenants\/:slug\/(tools|prompts|resources|resource-templates)\/:name$/, (m) => "deleted " + singular(m[1])],
  [/^POST .*\/webhook-secret$/, "rotated a webhook secret"],
  [/^POST \/api\/v1\/flows\/cancel$/, "cancelled flows (bulk)"],
  [/^POST .*\/flows\/:flow\/cancel$/, "cancelled a flow"],
  [/^DELETE .*\/sessions/, "ended a session"],
  [/^POST \/api\/v1\/tokens$/, "created an API token"],
  [/^DELETE \/api\/v1\/tokens\/:id$/, "revoked an API token"],
  [/^keys\.(.*)$/, (m) => "keys: " + m[1].replace(".", " ")],
];

function singular(kind) { return { tools: "tool", prompts: "prompt", resources: "resource", "resource-templates": "template" }[kind]; }

function actionWords(action) {
  for (const [re, words] of ACTIONS) {
    const m = re.exec(action);
    if (m) return typeof words === "function" ? words(m) : words;
  }
  return action;
}

// facts is an entry's detail, in a line.
function facts(d) {
  if (!d) return "";
  const parts = [];
  if (d.matched !== undefined) parts.push(`${d.matched} of this tenant's flows (${d.matchedAll} in all)`);
  if (d.reason) parts.push(`reason: ${d.reason}`);
  if (d.filter) parts.push("filter " + Object.entries(d.filter).map(([k, v]) => `${k}=${v}`).join(" "));
  return parts.join(" · ");
}

export default async function auditPage(ctx) {
  const { main } = ctx;
  const tbody = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  let cursor = "";
  const table = h("table", { class: "grid", "aria-label": "Audit log" },
      h("colgroup", {}, h("col", { style: "width:170px" }), h("col", { style: "width:18%" }), h("col", {}), h("col", { style: "width:12%" }), h("col", { style: "width:16%" }), h("col", { style: "width:130px" })),
      h("thead", {}, h("tr", {}, h("th", {}, "When"), h("th", {}, "Who"), h("th", {}, "Action"), h("th", {}, "Tenant"), h("th", {}, "Object"), h("th", {}, "From"))),
      tbody);
  main.append(h("div", { class: "bar" }, h("h1", {}, "Audit")), table, more);
  async function load() {
    const tenant = ctx.me.role === "tenant-admin" ? "&tenant=" + encodeURIComponent((ctx.me.tenants || [])[0] || "") : "";
    const data = await api("/audit?limit=100" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "") + tenant);
    for (const e of data.items) {
      const said = facts(e.detail);
      tbody.append(h("tr", {},
        h("td", { title: exact(e.at) }, clock(e.at)), h("td", { title: e.actor }, e.actor),
        h("td", { title: e.action + (said ? "\n" + said : "") }, actionWords(e.action), said ? h("span", { class: "sub" }, " · " + said) : null),
        h("td", {}, e.tenantSlug || e.tenant || ""), h("td", { class: "mono", title: e.object }, e.object || ""), h("td", { class: "mono" }, e.remoteAddr || "")));
    }
    cursor = data.nextCursor || "";
    more.hidden = !cursor;
    if (!tbody.rows.length) tbody.append(h("tr", {}, h("td", { colspan: 6 }, empty("Nothing audited yet."))));
    stacked(table);
  }
  more.addEventListener("click", load);
  await load();
}
