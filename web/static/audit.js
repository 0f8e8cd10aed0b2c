// The Audit page: every admin change, newest first.
import { api } from "./api.js";
import { h, clock, empty } from "./ui.js";

export default async function auditPage(ctx) {
  const { main } = ctx;
  const tbody = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  let cursor = "";
  main.append(h("div", { class: "bar" }, h("h1", {}, "Audit")),
    h("table", { class: "grid", "aria-label": "Audit log" },
      h("colgroup", {}, h("col", { style: "width:170px" }), h("col", { style: "width:18%" }), h("col", {}), h("col", { style: "width:12%" }), h("col", { style: "width:16%" }), h("col", { style: "width:130px" })),
      h("thead", {}, h("tr", {}, h("th", {}, "When"), h("th", {}, "Who"), h("th", {}, "Action"), h("th", {}, "Tenant"), h("th", {}, "Object"), h("th", {}, "From"))),
      tbody), more);
  async function load() {
    const tenant = ctx.me.role === "tenant-admin" ? "&tenant=" + encodeURIComponent((ctx.me.tenants || [])[0] || "") : "";
    const data = await api("/audit?limit=100" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "") + tenant);
    for (const e of data.items) {
      tbody.append(h("tr", { title: JSON.stringify(e.detail || {}) },
        h("td", {}, clock(e.at)), h("td", { title: e.actor }, e.actor), h("td", { class: "mono" }, e.action),
        h("td", {}, e.tenantSlug || e.tenant || ""), h("td", { class: "mono", title: e.object }, e.object || ""), h("td", { class: "mono" }, e.remoteAddr || "")));
    }
    cursor = data.nextCursor || "";
    more.hidden = !cursor;
    if (!tbody.rows.length) tbody.append(h("tr", {}, h("td", { colspan: 6 }, empty("Nothing audited yet."))));
  }
  more.addEventListener("click", load);
  await load();
}
