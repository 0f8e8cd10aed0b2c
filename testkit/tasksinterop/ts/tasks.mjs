// The official MCP TypeScript SDK v2 client with its Tasks extension
// client (@modelcontextprotocol/ext-tasks), against one tenant endpoint of
// the platform: it calls a tool that becomes a task and asks a question
// (answered through the extension's input handler), settles it, then
// starts a long one and cancels it. It prints one JSON line of what it
// saw. Usage: node tasks.mjs <endpoint URL>
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, createApplicationInputHandler, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const url = new URL(process.argv[2]);
const clientInfo = { name: "ext-tasks-interop", version: "1" };
const client = new Client(clientInfo, { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: "2026-07-28" } } });
await client.connect(new StreamableHTTPClientTransport(url));

// rawDispatch carries the extension's requests as they are framed (the
// SDK's own codecs do not know tasks/*), with the routing headers the
// protocol asks for.
let ids = 1;
async function rawDispatch(request, options) {
  const params = request.params ?? {};
  const name = request.method === "tools/call" ? params.name : request.method.startsWith("tasks/") ? params.taskId : undefined;
  const id = ids++;
  const res = await fetch(url, {
    method: "POST", signal: options?.signal,
    headers: {
      "Content-Type": "application/json", Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": request.method,
      ...(name ? { "Mcp-Name": name } : {}), ...(options?.context?.headers ?? {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id, ...request }),
  });
  const msg = await answerTo(res, id);
  return msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
}

// answerTo reads the JSON-RPC response with id from a JSON or an event
// stream answer.
async function answerTo(res, id) {
  const text = await res.text();
  if ((res.headers.get("content-type") || "").startsWith("application/json")) return JSON.parse(text);
  for (const event of text.split(/\n\n/)) {
    const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
    if (!data) continue;
    const m = JSON.parse(data);
    if (m.id === id) return m;
  }
  throw new Error(`no response to ${id} in: ${text.slice(0, 200)}`);
}

const asked = [];
const session = createTaskSessionFromClient(client, {
  endpointId: "opsmcp-interop", rawDispatch,
  v2RequestFraming: { protocolVersion: "2026-07-28", clientInfo, clientCapabilities: { elicitation: {} } },
  onInputRequest: createApplicationInputHandler({
    elicitation: async (request, context) => {
      asked.push({ message: request.params?.message ?? request.message, delivery: context.delivery, taskId: context.taskId ?? null });
      return { action: "accept", content: { confirm: true } };
    },
    sampling: async () => { throw new Error("no sampling here"); },
    roots: async () => ({ roots: [] }),
  }),
});

const out = { asked };
const confirm = await session.callTool("confirm", { what: "the export" }, { task: { preference: "require" } });
out.confirmKind = confirm.kind;
out.confirmTaskId = confirm.handle?.taskId ?? null;
const { outcome } = await confirm.settle();
out.confirmStatus = outcome.status;
out.confirmText = resultFromTaskOutcome(outcome).content?.[0]?.text ?? null;

const slow = await session.callTool("slow", {}, { task: { preference: "require" } });
out.slowKind = slow.kind;
out.slowTaskId = slow.handle?.taskId ?? null;
await slow.cancel();
const cancelled = await slow.settle();
out.slowStatus = cancelled.outcome.status;

await session.close();
await client.close();
console.log(JSON.stringify(out));
