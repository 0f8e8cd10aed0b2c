// The admin UI's shell: who is signed in, the navigation, and the router
// that renders the page the path names without reloading.
import { api, setCSRF } from "./api.js";
import { h, errorBox } from "./ui.js";
import flowsPage from "./flows.js";
import flowPage from "./flow.js";
import tenantsPage from "./tenants.js";
import keysPage from "./keys.js";
import auditPage from "./audit.js";
import sessionsPage from "./sessions.js";
import cataloguePage from "./catalogue.js";

const routes = [
  [/^\/admin\/?$/, () => ({ section: "flows", render: flowsPage })],
  [/^\/admin\/flows\/?$/, () => ({ section: "flows", render: flowsPage })],
  [/^\/admin\/flows\/([^/]+)$/, (m) => ({ section: "flows", render: (ctx) => flowPage(ctx, decodeURIComponent(m[1])) })],
  // Links from before a flow opened by its id alone.
  [/^\/admin\/flows\/[^/]+\/([^/]+)$/, (m) => ({ section: "flows", render: (ctx) => flowPage(ctx, decodeURIComponent(m[1])) })],
  [/^\/admin\/tenants\/?$/, () => ({ section: "tenants", render: tenantsPage })],
  [/^\/admin\/tenants\/([^/]+)$/, (m) => ({ section: "tenants", render: (ctx) => cataloguePage(ctx, decodeURIComponent(m[1])) })],
  [/^\/admin\/sessions\/?$/, () => ({ section: "sessions", render: sessionsPage })],
  [/^\/admin\/keys\/?$/, () => ({ section: "keys", render: keysPage })],
  [/^\/admin\/audit\/?$/, () => ({ section: "audit", render: auditPage })],
];

let me = null;
let cleanup = null;

// can reports whether the signed-in admin may change tenant slug.
function can(slug) {
  if (!me) return false;
  if (me.role === "platform-admin") return true;
  return me.role === "tenant-admin" && (me.tenants || []).includes(slug);
}

export function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  render();
}

function render() {
  if (cleanup) { cleanup(); cleanup = null; }
  const main = document.getElementById("main");
  const path = location.pathname;
  let page = null;
  for (const [re, make] of routes) {
    const m = path.match(re);
    if (m) { page = make(m); break; }
  }
  for (const a of document.querySelectorAll("[data-section]")) {
    if (page && a.dataset.section === page.section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  main.replaceChildren();
  if (!page) {
    main.append(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "/admin/flows", "data-link": true }, "Back to flows")));
    return;
  }
  const ctx = { main, me, can, navigate, onLeave: (f) => { cleanup = f; } };
  Promise.resolve(page.render(ctx)).catch((err) => main.replaceChildren(errorBox(err)));
}

// Links marked data-link navigate in place; modified clicks open tabs.
document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-link]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", render);
// A page restored from the browser's back-forward cache has neither its
// stream nor fresh data: load it again.
window.addEventListener("pageshow", (e) => { if (e.persisted) location.reload(); });

async function signOut() {
  await fetch("/admin/logout", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": me.csrfToken || "" } });
  location.assign("/admin/login");
}

async function boot() {
  try {
    me = await api("/me");
  } catch (err) {
    if (err.status !== 401) document.getElementById("main").replaceChildren(errorBox(err));
    return;
  }
  setCSRF(me.csrfToken);
  const roleText = me.role === "tenant-admin" ? "tenant admin · " + (me.tenants || []).join(", ") : me.role;
  document.getElementById("who").replaceChildren(
    h("span", { title: me.subject }, me.name || me.subject),
    h("span", { class: "role", "data-role": me.role }, roleText),
    me.session ? h("button", { type: "button", onclick: signOut }, "Sign out") : null);
  render();
}

boot();
