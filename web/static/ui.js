// DOM and formatting helpers shared by every page.

// h builds an element: h("td", {class: "num"}, "3", child, …). Strings are
// text, never HTML: nothing from the API is parsed as markup.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "style") {
      // Set through the CSSOM: the page's CSP refuses style attributes.
      for (const decl of String(v).split(";")) {
        const i = decl.indexOf(":");
        if (i > 0) el.style.setProperty(decl.slice(0, i).trim(), decl.slice(i + 1).trim());
      }
    }
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const STATES = ["awaiting_input", "running", "completed", "failed", "cancelled", "expired", "rejected"];
const STATE_WORDS = {
  awaiting_input: "awaiting input", running: "running", completed: "completed", failed: "failed",
  cancelled: "cancelled", expired: "expired", rejected: "rejected",
};

export function stateBadge(state) {
  return h("span", { class: "badge s-" + state }, STATE_WORDS[state] || state);
}

export function stateWord(state) { return STATE_WORDS[state] || state; }

// duration formats milliseconds compactly: 850 ms, 12.3 s, 4m05s, 2h10m.
export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "";
  const neg = ms < 0;
  ms = Math.abs(ms);
  let s;
  if (ms < 1000) s = ms < 10 ? ms.toFixed(1) + " ms" : Math.round(ms) + " ms";
  else if (ms < 60_000) s = (ms / 1000).toFixed(1) + " s";
  else if (ms < 3_600_000) s = Math.floor(ms / 60_000) + "m" + String(Math.floor(ms / 1000) % 60).padStart(2, "0") + "s";
  else if (ms < 86_400_000) s = Math.floor(ms / 3_600_000) + "h" + String(Math.floor(ms / 60_000) % 60).padStart(2, "0") + "m";
  else s = Math.floor(ms / 86_400_000) + "d" + String(Math.floor(ms / 3_600_000) % 24).padStart(2, "0") + "h";
  return neg ? "−" + s : s;
}

export function since(iso) { return iso ? Date.now() - Date.parse(iso) : null; }

// clock is a time of day in the browser's zone, with the date when it is
// not today; ms adds milliseconds (a round timeline's rounds are often
// in the same second).
export function clock(iso, { ms = false } = {}) {
  if (!iso) return "";
  const d = new Date(iso);
  const today = new Date();
  const t = d.toLocaleTimeString(undefined, { hour12: false, hour: "2-digit", minute: "2-digit", second: "2-digit", ...(ms ? { fractionalSecondDigits: 3 } : {}) });
  return d.toDateString() === today.toDateString() ? t : d.toLocaleDateString() + " " + t;
}

// exact is a time in full: date, time to the millisecond, and zone, for
// a title on hover.
export function exact(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const local = d.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    fractionalSecondDigits: 3, hour12: false, timeZoneName: "short",
  });
  return local + " · " + d.toISOString();
}

// ago is how long ago a time was, compactly: "12s ago", "4m ago",
// "3h ago", "2d ago" ("now" under a second; "in 5s" for a clock ahead).
export function ago(iso) {
  if (!iso) return "";
  const ms = Date.now() - Date.parse(iso);
  const a = Math.abs(ms);
  let s;
  if (a < 1000) return "now";
  if (a < 60_000) s = Math.floor(a / 1000) + "s";
  else if (a < 3_600_000) s = Math.floor(a / 60_000) + "m";
  else if (a < 86_400_000) s = Math.floor(a / 3_600_000) + "h";
  else s = Math.floor(a / 86_400_000) + "d";
  return ms < 0 ? "in " + s : s + " ago";
}

// timeCell is a relative time that says the exact one on hover (and to
// screen readers), kept current by tickTimes.
export function timeEl(iso, tag = "span", attrs = {}) {
  return h(tag, { ...attrs, "data-ago": iso || "", title: exact(iso) },
    iso ? h("time", { datetime: iso }, ago(iso)) : "");
}

// tickTimes brings the relative times under root up to date.
export function tickTimes(root) {
  for (const el of root.querySelectorAll("[data-ago] > time")) el.textContent = ago(el.getAttribute("datetime"));
}

export function toast(msg) {
  const el = document.getElementById("toast");
  el.textContent = msg;
  el.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.remove("show"), 2600);
}

// confirmDialog asks before an action. fields: [{name, label, required,
// match}] where match is a value the input must equal (to type a key id
// before revoking it). It resolves to the field values, or null.
export function confirmDialog({ title, body, action, danger, fields = [] }) {
  return new Promise((resolve) => {
    const inputs = fields.map((f) => {
      const input = f.multiline
        ? h("textarea", { name: f.name, rows: 3, maxlength: 500 })
        : h("input", { name: f.name, autocomplete: "off", spellcheck: "false" });
      return { f, input };
    });
    const ok = h("button", { type: "submit", class: danger ? "danger" : "primary" }, action);
    const check = () => {
      ok.disabled = inputs.some(({ f, input }) => (f.required && !input.value.trim()) || (f.match !== undefined && input.value !== f.match));
    };
    inputs.forEach(({ input }) => input.addEventListener("input", check));
    check();
    const dlg = h("dialog", { "aria-labelledby": "dlg-title" },
      h("form", { method: "dialog" },
        h("h2", { id: "dlg-title" }, title),
        body ? h("p", {}, body) : null,
        inputs.map(({ f, input }) => h("label", { class: "hint" }, f.label, input)),
        h("div", { class: "actions" }, h("button", { type: "button", value: "cancel", onclick: () => dlg.close("cancel") }, "Cancel"), ok)));
    dlg.addEventListener("close", () => {
      const values = Object.fromEntries(inputs.map(({ f, input }) => [f.name, input.value.trim()]));
      dlg.remove();
      resolve(dlg.returnValue === "cancel" || ok.disabled ? null : values);
    });
    document.body.append(dlg);
    dlg.showModal();
    (inputs[0]?.input || ok).focus();
  });
}

export function errorBox(err) {
  return h("div", { class: "error", role: "alert" }, err.message || String(err));
}

export function empty(text) { return h("div", { class: "empty" }, text); }

// shortIssuer shows an issuer URL by its host.
export function shortIssuer(iss) {
  try { return new URL(iss).host; } catch { return iss || ""; }
}

// stacked marks a table whose rows become labelled blocks on a phone
// (app.css, table.grid.stack): each cell is labelled with its column's
// header. Call it once the rows are in, and after adding rows.
export function stacked(table) {
  table.classList.add("stack");
  const heads = [...table.tHead.rows[0].cells].map((th) => th.textContent.trim());
  for (const tr of table.tBodies[0].rows) {
    [...tr.cells].forEach((td, i) => { if (heads[i] && td.colSpan === 1) td.dataset.label = heads[i]; });
  }
  return table;
}
