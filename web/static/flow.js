// The Flow page: one flow's rounds as a timeline (what was asked, when,
// how long the user took, which replica and key, rejections with their
// logged class, each round's trace) and, for admins who may, cancel.
import { api, stream } from "./api.js";
import { h, stateBadge, duration, since, clock, exact, confirmDialog, toast, errorBox, shortIssuer } from "./ui.js";

function fields(schema) {
  const props = schema?.properties || {};
  const req = new Set(schema?.required || []);
  return Object.entries(props).map(([name, p]) => {
    let t = p.type || "";
    const opts = p.enum || (p.oneOf || []).map((o) => o.const) || [];
    const items = p.items?.enum || (p.items?.anyOf || []).map((o) => o.const);
    if (items?.length) t = "any of " + items.join(" / ");
    else if (opts.length) t = "one of " + opts.join(" / ");
    return `${p.title || name}${req.has(name) ? "*" : ""} (${t})`;
  }).join(" · ");
}

function question(q) {
  const message = q.message ?? q.params?.message;
  const schema = q.requestedSchema ?? q.params?.requestedSchema;
  return h("div", { class: "question" },
    h("div", {}, h("span", { class: "kind" }, q.kind), " ", h("strong", {}, q.key)),
    message ? h("div", {}, message) : null,
    q.url ? h("div", { class: "mono" }, q.url) : null,
    schema ? h("div", { class: "fields" }, fields(schema)) : null);
}

// EVENTS says in words what a task's lifecycle event was.
const EVENTS = {
  progress: "progress", input_required: "asked the user", answered: "the user answered", completed: "completed",
  failed: "failed", cancelled: "cancelled", delivered: "delivered again",
};

// time is a round's time to the millisecond, in full on hover.
function time(iso) {
  return h("time", { class: "muted", datetime: iso, title: exact(iso) }, clock(iso, { ms: true }));
}

// breakdown says where a round's server time went: the token's check,
// opening the inbound state, the record's writes it waited on (a
// destructive tool's), the webhook, sealing the outbound state, and the
// rest (reading, deciding, writing the answer).
function breakdown(r) {
  const parts = [["token", r.authUs], ["state", r.openUs], ["record", r.recordUs], ["webhook", r.webhook ? r.webhook.durationUs ?? r.webhook.durationMs * 1000 : 0], ["seal", r.sealUs]]
    .filter(([, us]) => us > 0);
  if (!parts.length) return null;
  const rest = r.serverUs - parts.reduce((a, [, us]) => a + us, 0);
  if (rest > 0) parts.push(["other", rest]);
  // Steps under a tenth of a millisecond are said in µs, not "0.0 ms".
  const said = (us) => us < 100 ? `${Math.round(us)} µs` : duration(us / 1000);
  return h("span", { class: "breakdown" }, " (" + parts.map(([k, us]) => `${k} ${said(us)}`).join(" · ") + ")");
}

// answersOf says how each question was answered: the actions alone, or,
// for a tenant that records answers, the answers in a disclosure.
function answersOf(answers) {
  if (!answers) return null;
  if (answers.keys) return h("div", { class: "answers" }, "Answered: " + answers.keys.join(", "));
  const entries = Object.entries(answers);
  const actionsOnly = entries.every(([, a]) => a && typeof a === "object" && Object.keys(a).length === 1 && a.action);
  if (actionsOnly) {
    return h("div", { class: "answers" }, "Answered: ", entries.flatMap(([k, a], i) => [i ? ", " : "", h("strong", {}, k), " ",
      h("span", { class: "act-" + a.action }, a.action)]));
  }
  return h("details", {}, h("summary", {}, "Answers (recorded: the tenant opted in)"), h("pre", { class: "mono" }, JSON.stringify(answers, null, 2)));
}

// eventItem is one lifecycle event of a task: what happened, who did it,
// the task's message after it, what it asked or was answered.
function eventItem(r) {
  const wh = r.webhook;
  const cls = { failed: "s-failed", cancelled: "s-cancelled", completed: "s-completed", input_required: "s-awaiting_input" }[r.event] || "s-running";
  const by = r.by?.startsWith("admin:") ? "admin " + r.by.slice(6) : r.by;
  return h("li", { class: "round panel", dataset: { round: r.n, event: r.event } },
    h("h3", {}, h("span", {}, "Event " + r.n), h("span", { class: "badge " + cls }, EVENTS[r.event] || r.event), time(r.arrivedAt)),
    h("div", { class: "meta" },
      by ? h("span", {}, "by " + by) : null,
      h("span", {}, "replica " + (r.replica || "?")),
      r.errorClass ? h("span", {}, "why: " + r.errorClass) : null,
      wh ? h("span", {}, `delivery ${wh.outcome}${wh.status ? " (HTTP " + wh.status + ")" : ""} in ${duration(wh.durationMs)}`) : null),
    r.message ? h("div", {}, r.message) : null,
    (r.asked || []).map(question),
    answersOf(r.answers));
}

function roundItem(r, flow) {
  if (r.event) return eventItem(r);
  const wh = r.webhook;
  const title = [h("span", {}, "Round " + r.n)];
  if (r.stateIn === "rejected" || r.errorClass?.startsWith("token_")) title.push(h("span", { class: "badge s-rejected" }, "refused"));
  else if (r.resultType === "input_required") title.push(h("span", { class: "badge s-awaiting_input" }, "asked for input"));
  else if (r.resultType === "task") title.push(h("span", { class: "badge s-running" }, "became a task"));
  else if (r.errorClass?.startsWith("webhook_")) title.push(h("span", { class: "badge s-failed" }, "webhook failed"));
  else if (r.resultType === "complete") title.push(h("span", { class: `badge ${r.errorClass ? "s-failed" : "s-completed"}` }, r.errorClass ? "tool error" : "completed"));
  else if (r.errorClass) title.push(h("span", { class: "badge s-failed" }, "failed"));
  const p = r.principal;
  const who = p ? `${p.subject || "(machine)"} @ ${shortIssuer(p.issuer)} via ${p.client}` : "";
  const whoDiffers = p && flow.principal && (p.subject !== flow.principal.subject || p.issuer !== flow.principal.issuer);
  return h("li", { class: "round panel", dataset: { round: r.n } },
    h("h3", {}, title, time(r.arrivedAt)),
    r.cause ? h("div", { class: "cause", role: "note" }, r.cause, h("span", { class: "sub" }, " (" + r.errorClass + ")")) : null,
    h("div", { class: "meta" },
      h("span", { title: "where the server time went" }, "served in " + duration(r.serverMs), breakdown(r)),
      h("span", {}, "replica " + (r.replica || "?")),
      r.keyIn ? h("span", {}, "state verified by key ", h("span", { class: "mono" }, r.keyIn)) : null,
      r.keyOut ? h("span", {}, "next state sealed by ", h("span", { class: "mono" }, r.keyOut)) : null,
      r.stateExpiresAt ? h("span", {}, "state expires " + clock(r.stateExpiresAt)) : null,
      wh ? h("span", {}, `webhook ${wh.outcome}${wh.status ? " (HTTP " + wh.status + ")" : ""} in ${duration(wh.durationMs)}`) : null,
      r.traceUrl ? h("a", { href: r.traceUrl, target: "_blank", rel: "noopener" }, "trace") : r.traceId ? h("span", { class: "mono", title: "trace id" }, r.traceId.slice(0, 12) + "…") : null),
    whoDiffers ? h("div", { class: "warn" }, "Sent by " + who + ", not the flow's principal") : null,
    (r.asked || []).map(question),
    answersOf(r.answers));
}

// setText changes el's text only when it differs, so an unchanged
// read leaves the node (and a screen reader's place in it) alone.
function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

// flowPage shows the flow with id (tenant, from an older link, is not
// needed: a flow opens by its id alone).
export default async function flowPage(ctx, id) {
  const { main } = ctx;
  // The header is built once and updated in place: a read that lands
  // while an admin is on the cancel button (focused, or mid-click) must
  // not swap the button out from under them.
  const title = h("h1");
  const badge = h("span");
  const kind = h("span", { class: "kind", hidden: true });
  const cancelButton = h("button", { type: "button", class: "danger", onclick: cancel, "data-action": "cancel", hidden: true });
  const head = h("div", {}, h("div", { class: "bar" }, title, badge, kind, h("span", { class: "spacer" }), cancelButton));
  const facts = h("div", { class: "panel" });
  const timeline = h("ol", { class: "timeline", "aria-label": "Rounds" });
  main.append(h("p", {}, h("a", { href: "/admin/flows", "data-link": true }, "← Flows")), head, facts, h("h2", {}, "Rounds"), timeline);

  let flow;
  // Reads one at a time, the last asked for last: an answer never lands
  // over a newer one.
  let inFlight = null, again = false;
  function load() {
    if (inFlight) { again = true; return inFlight; }
    inFlight = read().finally(() => {
      inFlight = null;
      if (again) { again = false; load(); }
    });
    return inFlight;
  }
  async function read() {
    let data;
    try {
      data = await api(`/flows/${encodeURIComponent(id)}`);
    } catch (err) {
      main.replaceChildren(h("p", {}, h("a", { href: "/admin/flows", "data-link": true }, "← Flows")), errorBox(err));
      return;
    }
    flow = data.flow;
    const task = flow.kind === "task";
    const live = flow.state === "awaiting_input" || flow.state === "running";
    const cancellable = live && ctx.can(flow.tenant);
    setText(title, `${flow.method} ${flow.target}`);
    if (badge.dataset.state !== flow.state) {
      badge.replaceChildren(stateBadge(flow.state));
      badge.dataset.state = flow.state;
    }
    kind.hidden = flow.kind === "call";
    setText(kind, flow.kind);
    cancelButton.hidden = !cancellable;
    setText(cancelButton, task ? "Cancel task…" : "Cancel flow…");
    const p = flow.principal;
    facts.replaceChildren(h("dl", { class: "facts" },
      h("dt", {}, "Flow"), h("dd", { class: "mono" }, flow.id),
      task ? [h("dt", {}, "Task"), h("dd", {}, `${live ? "open for " + duration(since(flow.startedAt)) : "ran " + duration(Date.parse(flow.updatedAt) - Date.parse(flow.startedAt))}${flow.message ? " · " + flow.message : ""}`)] : null,
      h("dt", {}, "Tenant"), h("dd", {}, flow.tenant),
      h("dt", {}, "Principal"), h("dd", {}, p ? `${p.subject || "(machine)"} @ ${p.issuer}` : "public (no principal)"),
      h("dt", {}, "Client"), h("dd", {}, `${flow.client?.name || "unnamed"} ${flow.client?.version || ""} · protocol ${flow.era}${p?.client ? " · OAuth client " + p.client : ""}`),
      flow.sessionId ? [h("dt", {}, "Legacy session"), h("dd", {}, h("a", { class: "mono", href: "/admin/flows?" + new URLSearchParams({ tenant: flow.tenant, session: flow.sessionId }), "data-link": true, title: "every call of this session" }, flow.sessionId))] : null,
      h("dt", {}, "Started"), h("dd", {}, time(flow.startedAt)),
      h("dt", {}, "Changed"), h("dd", {}, time(flow.updatedAt)),
      h("dt", {}, "Server time"), h("dd", {}, duration(flow.serverMs)),
      flow.kind === "call" ? null : [h("dt", {}, "Waiting on people"), h("dd", {}, duration(flow.clientWaitMs + (flow.state === "awaiting_input" ? since(flow.waitingSince) : 0)))],
      flow.keyId ? [h("dt", {}, "Key"), h("dd", { class: "mono" }, flow.keyId)] : null,
      h("dt", {}, "Replica"), h("dd", {}, flow.replica || ""),
      flow.state === "awaiting_input" && flow.stateExpiresAt ? [h("dt", {}, "State expires"), h("dd", {}, clock(flow.stateExpiresAt) + " (" + duration(Date.parse(flow.stateExpiresAt) - Date.now()) + " left)")] : null,
      flow.message || flow.detail ? [h("dt", {}, "Why"), h("dd", { class: "cause" }, flow.message || flow.detail, flow.message && flow.detail ? h("span", { class: "sub" }, " (" + flow.detail + ")") : null)] : null,
      flow.cancelReason || flow.cancelledBy ? [h("dt", {}, "Cancelled"), h("dd", {}, `by ${flow.cancelledBy || "?"}`,
        flow.cancelledAt ? [", ", time(flow.cancelledAt)] : null, flow.cancelReason ? ": " + flow.cancelReason : "")] : null,
      flow.traceUrl ? [h("dt", {}, "Trace"), h("dd", {}, h("a", { href: flow.traceUrl, target: "_blank", rel: "noopener" }, flow.traceId))] : null));
    const items = [];
    let prevEnd = null;
    for (const r of data.rounds) {
      if (prevEnd && r.clientWaitMs > 0) items.push(h("li", { class: "wait" }, "user took " + duration(r.clientWaitMs)));
      items.push(roundItem(r, flow));
      prevEnd = r.endedAt;
    }
    if (flow.state === "awaiting_input") items.push(h("li", { class: "wait" }, `waiting for the user for ${duration(since(flow.waitingSince))}…`));
    else if (task && flow.state === "running") items.push(h("li", { class: "wait" }, `the backend is working${flow.message ? ": " + flow.message : "…"}`));
    if (flow.state === "cancelled") items.push(h("li", { class: "wait" }, `cancelled by ${flow.cancelledBy || "an admin"}${flow.cancelReason ? ": " + flow.cancelReason : ""}`));
    if (flow.state === "expired") items.push(h("li", { class: "wait" }, "expired: no answer came before its state expired"));
    // Answers an admin opened stay open across reads.
    const open = new Set([...timeline.querySelectorAll("li.round details[open]")].map((d) => d.closest("li").dataset.round));
    timeline.replaceChildren(...items);
    for (const d of timeline.querySelectorAll("li.round details")) if (open.has(d.closest("li").dataset.round)) d.open = true;
  }

  async function cancel() {
    const task = flow.kind === "task";
    const v = await confirmDialog({
      title: task ? "Cancel this task?" : "Cancel this flow?",
      body: task ? `The task ends cancelled at once, and its backend is told to stop. ${flow.principal?.subject ? flow.principal.subject + "'s" : "The"} client sees it cancelled on its next poll.`
        : `Its next round, on any replica, is refused. ${flow.principal?.subject ? flow.principal.subject + "'s" : "The"} client gets an error it can act on.`,
      action: task ? "Cancel task" : "Cancel flow", danger: true,
      fields: [{ name: "reason", label: "Reason (recorded and audited)", multiline: true }],
    });
    if (!v) return;
    try {
      await api(`/flows/${encodeURIComponent(flow.id)}/cancel`, { method: "POST", body: { reason: v.reason } });
      toast(task ? "Task cancelled" : "Flow cancelled");
      await load();
    } catch (err) { toast(err.message); }
  }

  await load();
  if (!flow) return;
  // Read again whenever the stream becomes live: a change between the
  // first read and the stream's start came on neither.
  let wasLive = false;
  const stop = stream(flow.tenant, (kind, f) => {
    if (kind === "reset" || f?.id === id) load();
  }, (s) => {
    if (s === "live" && !wasLive) load();
    wasLive = s === "live";
  });
  ctx.onLeave(stop);
}
