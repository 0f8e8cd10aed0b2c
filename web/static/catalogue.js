// A tenant's catalogue: its tools, prompts, resources and templates as
// its clients see them, with what the platform does around each (declared
// inputs, task mode, scopes, the webhook's host and timeout) and how
// often each failed over the last day. A view (MCP Apps) previews in a
// frame sandboxed as a host would sandbox it: its own opaque origin,
// under the Content Security Policy its metadata declares.
import { api } from "./api.js";
import { h, empty, stacked } from "./ui.js";

// all reads every page of a collection.
async function all(path) {
  const out = [];
  let cursor = "";
  for (;;) {
    const page = await api(`${path}?limit=200${cursor ? "&cursor=" + encodeURIComponent(cursor) : ""}`);
    out.push(...page.items);
    if (!page.nextCursor) return out;
    cursor = page.nextCursor;
  }
}

const VIEW_TYPE = "text/html;profile=mcp-app";

// host is a handler URL's host, which is what an operator recognises.
function host(handler) {
  if (!handler?.url) return null;
  try { return new URL(handler.url).host; } catch { return handler.url; }
}

function typeOf(s) {
  if (!s || typeof s !== "object") return "";
  if (Array.isArray(s.enum)) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (s.const !== undefined) return JSON.stringify(s.const);
  const t = Array.isArray(s.type) ? s.type.join(" | ") : s.type || (s.anyOf || s.oneOf ? "one of several" : "any");
  return t === "array" && s.items ? `array of ${typeOf(s.items)}` : t;
}

// schemaView renders an object schema's properties as a list a person
// reads: name, type, required, constraints, description; nested objects
// indented, to a depth.
function schemaView(schema, depth = 0) {
  const props = schema && typeof schema === "object" ? schema.properties || {} : {};
  const names = Object.keys(props);
  if (!names.length) return h("p", { class: "sub" }, depth ? "no properties" : "No arguments.");
  const required = new Set(schema.required || []);
  return h("ul", { class: "schema" }, names.map((name) => {
    const p = props[name] || {};
    const notes = [];
    for (const [k, label] of [["pattern", "pattern"], ["minimum", "≥"], ["maximum", "≤"], ["minLength", "min length"], ["maxLength", "max length"], ["format", "format"]]) {
      if (p[k] !== undefined) notes.push(`${label} ${p[k]}`);
    }
    if (p.default !== undefined) notes.push(`default ${JSON.stringify(p.default)}`);
    if (p["x-mcp-header"]) notes.push(`header Mcp-Param-${p["x-mcp-header"]}`);
    return h("li", {},
      h("code", {}, name), required.has(name) ? h("span", { class: "req", title: "required" }, " *") : null, " ",
      h("span", { class: "type" }, typeOf(p)),
      notes.length ? h("span", { class: "sub" }, " · " + notes.join(" · ")) : null,
      p.description ? h("div", { class: "sub" }, p.description) : null,
      depth < 2 && p.type === "object" && p.properties ? schemaView(p, depth + 1) : null);
  }));
}

function badge(text, title, cls = "kind") { return h("span", { class: cls, title }, text); }

// failing shows a target's failure rate over the window, linked to its
// failed calls.
// A template's reads are counted under the template (the server matches
// each URI read to the template it expands from); their link lists the
// reads of the tenant.
function failing(slug, act, method, target, template = "") {
  const a = act.get(method + "\u0000" + target + "\u0000" + template);
  if (!a || !a.calls) return h("span", { class: "sub", title: "no calls in the last day" }, "–");
  const pct = 100 * a.failureRate;
  const text = (pct > 0 && pct < 10 ? pct.toFixed(1) : Math.round(pct)) + "%";
  const q = { tenant: slug, method, state: "failed,rejected", since: "24h" };
  if (target) q.target = target;
  const href = "/admin/flows?" + new URLSearchParams(q);
  return h("a", { href, "data-link": true, class: a.failureRate > 0.05 ? "warn" : "", title: `${a.failed} of ${a.calls} calls failed or refused in the last day` }, text);
}

// viewLink says where a tool's view is, and who sees the tool.
function viewBadges(meta) {
  const ui = meta?.ui || {};
  const uri = ui.resourceUri || meta?.["ui/resourceUri"];
  const vis = ui.visibility;
  const out = [];
  if (uri) out.push(badge("view " + uri, "its interactive view (MCP Apps)", "kind view"));
  if (vis && !vis.includes("model")) out.push(badge("views only", "hidden from the model: only its views call it", "kind"));
  return out;
}

function inputsBadge(inputs) {
  if (!Array.isArray(inputs) || !inputs.length) return null;
  return badge(`asks ${inputs.map((i) => `${i.name} (${i.kind})`).join(", ")}`, "declared inputs: asked before the webhook is called");
}

// item is one row; each cell's content is one block, so a phone's
// stacked row (a label beside each cell) keeps it whole.
function item(name, title, description, details, handler, rate, extra) {
  const cell = (cls, ...content) => h("td", { class: cls }, h("div", { class: "cell" }, ...content));
  return h("tr", { dataset: { name } },
    cell("c-item", h("code", { class: "name" }, name), title ? h("span", { class: "sub" }, " " + title) : null,
      description ? h("div", { class: "desc", title: description }, description) : null, extra),
    cell("c-details", details.filter(Boolean)),
    cell("c-handler", handler ? [host(handler), h("span", { class: "sub" }, ` · ${((handler.timeoutMs || 10000) / 1000)} s`)] : h("span", { class: "sub" }, "none")),
    cell("num c-failing", rate));
}

function section(id, heading, rows, emptyText) {
  const table = h("table", { class: "grid catalogue", "aria-labelledby": id },
    h("colgroup", {}, h("col", {}), h("col", { style: "width:34%" }), h("col", { style: "width:20%" }), h("col", { style: "width:88px" })),
    h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "What the platform does"), h("th", {}, "Webhook"),
      h("th", { class: "num", title: "failed or refused, last day" }, "Failing"))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 4 }, empty(emptyText)))));
  return h("section", { class: "catalogue-kind" }, h("h2", { id }, `${heading} `, h("span", { class: "muted" }, String(rows.length))), stacked(table));
}

export default async function cataloguePage(ctx, slug) {
  const { main } = ctx;
  const base = `/tenants/${encodeURIComponent(slug)}`;
  const [tenant, tools, prompts, resources, templates, activity] = await Promise.all([
    api(base), all(base + "/tools"), all(base + "/prompts"), all(base + "/resources"), all(base + "/resource-templates"),
    api(base + "/activity").catch(() => ({ items: [] })),
  ]);
  const act = new Map(activity.items.map((a) => [a.method + "\u0000" + (a.target || "") + "\u0000" + (a.template || ""), a]));

  const preview = h("dialog", { class: "preview", "aria-labelledby": "preview-title" });
  async function openPreview(r) {
    const url = `/api/v1${base}/resources/${encodeURIComponent(r.name)}/preview`;
    let csp = "";
    try {
      const res = await fetch(url, { credentials: "same-origin" });
      csp = res.headers.get("Content-Security-Policy") || "";
    } catch { /* the frame says what went wrong */ }
    const perms = Object.keys(r._meta?.ui?.permissions || {});
    const frame = h("iframe", { title: `Preview of ${r.uri}`, src: url, sandbox: "allow-scripts", referrerpolicy: "no-referrer", loading: "eager" });
    preview.replaceChildren(
      h("div", { class: "bar" }, h("h2", { id: "preview-title" }, "Preview of ", h("code", {}, r.uri)), h("span", { class: "spacer" }),
        h("button", { type: "button", onclick: () => preview.close() }, "Close")),
      h("p", { class: "hint" }, "Sandboxed as a host sandboxes it: its own opaque origin, none of your session's cookies or storage, and only what its metadata declares. ",
        perms.length ? `It asks for ${perms.join(", ")}; the preview grants none.` : "It asks for no permission."),
      frame,
      h("details", {}, h("summary", {}, "Content Security Policy"), h("pre", { class: "mono csp" }, csp.split("; ").join(";\n"))));
    preview.showModal();
  }
  preview.addEventListener("close", () => preview.replaceChildren());

  const toolRows = tools.map((t) => item(t.name, t.title, t.description, [
    t.task && t.task.mode && t.task.mode !== "never" ? badge(`task: ${t.task.mode}`, "runs as a task (the Tasks extension)") : null,
    inputsBadge(t.inputs),
    t.annotations?.destructiveHint ? badge("destructive", "its confirmed rounds are single-use, recorded before its webhook runs") : null,
    t.singleUse ? badge("single-use", "each request state is good for one webhook call") : null,
    t.annotations?.readOnlyHint ? badge("read-only", "declared read-only") : null,
    t.scopes?.length ? badge(`scopes ${t.scopes.join(" ")}`, "a caller's token must carry these") : null,
    ...viewBadges(t._meta),
  ], t.handler, failing(slug, act, "tools/call", t.name),
  h("details", { class: "schema" }, h("summary", {}, "Arguments"), schemaView(t.inputSchema),
    t.outputSchema ? [h("div", { class: "sub" }, "Result"), schemaView(t.outputSchema)] : null)));

  const promptRows = prompts.map((p) => item(p.name, p.title, p.description, [
    p.handler ? null : badge("answered from its templates", "no webhook: the platform renders its messages"),
    inputsBadge(p.inputs),
    p.arguments?.length ? badge("arguments " + p.arguments.map((a) => a.name + (a.required ? "*" : "")).join(", "), "* required") : null,
  ], p.handler, failing(slug, act, "prompts/get", p.name)));

  // Which tools link to each view.
  const linkedBy = (uri) => tools.filter((t) => (t._meta?.ui?.resourceUri || t._meta?.["ui/resourceUri"]) === uri).map((t) => t.name);
  const resourceRows = resources.map((r) => {
    const isView = r.mimeType === VIEW_TYPE && /^ui:\/\//i.test(r.uri);
    const linking = isView ? linkedBy(r.uri) : [];
    const size = r.text !== undefined ? new TextEncoder().encode(r.text).length : Math.floor((r.blob || "").length * 3 / 4);
    return item(r.name, r.title, r.description, [
      badge(r.mimeType || "no type", "its mimeType"),
      badge(size < 1024 ? `${size} B` : `${(size / 1024).toFixed(1)} KiB`, "its size"),
      r.cacheScope === "public" ? badge("public", "cacheable for every user") : null,
      linking.length ? badge("view of " + linking.join(", "), "the tools that link to this view", "kind view") : null,
      isView ? h("button", { type: "button", class: "small", "data-action": "preview", "aria-label": `Preview the view ${r.uri}`, onclick: () => openPreview(r) }, "Preview") : null,
    ], null, failing(slug, act, "resources/read", r.uri), h("div", { class: "mono sub" }, r.uri));
  });

  const templateRows = templates.map((t) => item(t.name, t.title, t.description, [
    badge(t.mimeType || "no type", "its mimeType"),
    inputsBadge(t.inputs),
    /^ui:\/\//i.test(t.uriTemplate) ? badge("view", "its reads are views (MCP Apps)", "kind view") : null,
  ], t.handler, failing(slug, act, "resources/read", "", t.name), h("div", { class: "mono sub" }, t.uriTemplate)));

  main.append(
    h("div", { class: "bar" }, h("h1", {}, h("a", { href: "/admin/tenants", "data-link": true }, "Tenants"), " / ", slug),
      h("span", { class: "muted" }, tenant.displayName), h("span", { class: "spacer" }),
      h("a", { href: "/admin/flows?" + new URLSearchParams({ tenant: slug }), "data-link": true }, "Its calls")),
    h("p", { class: "mono sub" }, tenant.endpoint || ""),
    section("cat-tools", "Tools", toolRows, "No tools."),
    section("cat-prompts", "Prompts", promptRows, "No prompts."),
    section("cat-resources", "Resources", resourceRows, "No resources."),
    section("cat-templates", "Resource templates", templateRows, "No resource templates."),
    h("p", { class: "hint" }, "Failure rates over the last day, from the flow record."),
    preview);
}
