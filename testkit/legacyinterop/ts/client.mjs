// An MCP client on the official TypeScript SDK v1 (@modelcontextprotocol/sdk
// 1.x, protocol 2025-11-25), as desktop and IDE clients embed it: it
// connects to the endpoint given as its argument, answers every request
// the server sends it (form and URL elicitation, sampling) as a user and
// a model would, calls the multi-round tool "onboard", ends its session,
// and prints what happened as one line of JSON. A second argument delays
// its first answer by that many milliseconds (a user taking their time,
// while a test kills the replica holding the call's stream).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ElicitationCompleteNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[2];
let firstDelay = Number(process.argv[3] ?? 0);
const seen = { asked: [], urlIds: [], completed: [], sampled: 0 };

const client = new Client(
  { name: 'opsmcp-legacy-interop', version: '1.0.0' },
  { capabilities: { elicitation: { form: {}, url: {} }, sampling: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  const params = request.params;
  if (firstDelay > 0) {
    const ms = firstDelay;
    firstDelay = 0;
    await new Promise((resolve) => setTimeout(resolve, ms));
  }
  if (params.mode === 'url') {
    seen.asked.push('url');
    seen.urlIds.push(params.elicitationId);
    return { action: 'accept' };
  }
  seen.asked.push('form');
  const properties = params.requestedSchema?.properties ?? {};
  if (properties.name) return { action: 'accept', content: { name: 'Ada' } };
  if (properties.ok) return { action: 'accept', content: { ok: true } };
  return { action: 'decline' };
});
client.setRequestHandler(CreateMessageRequestSchema, async () => {
  seen.sampled++;
  return {
    role: 'assistant',
    content: { type: 'text', text: 'all good' },
    model: 'interop-model',
    stopReason: 'endTurn',
  };
});
client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => {
  seen.completed.push(notification.params.elicitationId);
});

const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
  const result = await client.callTool({ name: 'onboard', arguments: { team: 'platform' } });
  const protocolVersion = transport.protocolVersion;
  await transport.terminateSession();
  await client.close();
  console.log(JSON.stringify({ protocolVersion, result, ...seen }));
} catch (err) {
  console.log(JSON.stringify({ error: String(err?.message ?? err), ...seen }));
  process.exitCode = 1;
}
