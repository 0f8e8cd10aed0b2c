// One flow stream for every tab of the admin UI, in a SharedWorker. A
// browser holds six connections to a host over HTTP/1.1 (the platform
// serves plain HTTP; TLS, and so HTTP/2, is the ingress's), and a stream
// holds one for as long as it is open: with a stream per tab, the
// seventh tab's requests, actions included, would wait behind streams.
// Here every tab's subscription is a port; the worker holds one
// EventSource for the admin's whole view and hands each port the
// changes of the tenant it follows.
const subs = new Map(); // port -> { tenant }
let es = null;
let status = "connecting";

function post(port, msg) {
  try { port.postMessage(msg); } catch { subs.delete(port); }
}

function tell(msg, filter) {
  for (const [port, sub] of subs) if (!filter || filter(sub)) post(port, msg);
}

function setStatus(s) {
  status = s;
  tell({ status: s });
}

function open() {
  if (es || !subs.size) return;
  es = new EventSource("/api/v1/flows/stream");
  es.addEventListener("open", () => setStatus("live"));
  es.addEventListener("error", () => {
    setStatus("down");
    if (es && es.readyState === EventSource.CLOSED) {
      // Refused (signed out, a revoked token): try again later, and have
      // every tab reload what it shows, since changes may have been missed.
      es = null;
      setTimeout(() => { open(); tell({ kind: "reset" }); }, 5000);
    }
  });
  es.addEventListener("ended", () => {
    es.close();
    es = null;
    setStatus("down");
    setTimeout(() => { open(); tell({ kind: "reset" }); }, 2000);
  });
  es.addEventListener("flow", (e) => {
    let flow;
    try { flow = JSON.parse(e.data); } catch { return; }
    tell({ kind: "flow", flow }, (sub) => !sub.tenant || sub.tenant === flow.tenant);
  });
  es.addEventListener("reset", () => tell({ kind: "reset" }));
}

function close() {
  if (es && !subs.size) {
    es.close();
    es = null;
    status = "connecting";
  }
}

self.addEventListener("connect", (e) => {
  const port = e.ports[0];
  port.addEventListener("message", (m) => {
    const d = m.data || {};
    if (d.subscribe) {
      subs.set(port, { tenant: d.tenant || "" });
      open();
      post(port, { status });
    } else if (d.unsubscribe) {
      subs.delete(port);
      close();
    }
  });
  port.start();
});
