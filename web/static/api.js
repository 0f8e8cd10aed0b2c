// The admin API, as the signed-in admin: the session cookie travels with
// every request; state-changing requests carry the CSRF token the API
// gave this session.
let csrf = "";

export function setCSRF(token) { csrf = token || ""; }

export class APIError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || "HTTP " + status);
    this.status = status;
    this.problem = problem;
  }
}

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    headers["X-CSRF-Token"] = csrf;
    if (body !== undefined) headers["Content-Type"] = "application/json";
  }
  const res = await fetch("/api/v1" + path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    if (res.status === 401) location.assign("/admin/login?next=" + encodeURIComponent(location.pathname + location.search));
    throw new APIError(res.status, data);
  }
  return data;
}

// stream follows the live flow stream, of one tenant or (tenant "") of
// every tenant the admin may see. onEvent gets ("flow", flow) or
// ("reset"); onStatus gets "live", "down". Every tab shares one stream,
// held by a SharedWorker (stream-worker.js), so however many tabs are
// open, the browser's connections to the platform stay free for the
// API; where there is no SharedWorker (some mobile browsers) the tab
// opens its own. Either way EventSource reconnects by itself and
// resumes after the last event id it saw.
export function stream(tenant, onEvent, onStatus) {
  if (typeof SharedWorker === "function") {
    try {
      const port = new SharedWorker("/admin/static/stream-worker.js", { name: "opsmcp-flow-stream", type: "classic" }).port;
      port.onmessage = (m) => {
        const d = m.data || {};
        if (d.status) onStatus(d.status === "live" ? "live" : "down");
        else if (d.kind === "flow") onEvent("flow", d.flow);
        else if (d.kind === "reset") onEvent("reset");
      };
      port.postMessage({ subscribe: true, tenant });
      const stop = () => {
        removeEventListener("pagehide", stop);
        port.postMessage({ unsubscribe: true });
        port.close();
      };
      addEventListener("pagehide", stop);
      return stop;
    } catch { /* the tab's own stream, below */ }
  }
  const es = new EventSource("/api/v1/flows/stream" + (tenant ? "?tenant=" + encodeURIComponent(tenant) : ""));
  es.addEventListener("open", () => onStatus("live"));
  es.addEventListener("error", () => onStatus("down"));
  es.addEventListener("flow", (e) => { try { onEvent("flow", JSON.parse(e.data)); } catch { /* ignore a bad event */ } });
  es.addEventListener("reset", () => onEvent("reset"));
  return () => es.close();
}
