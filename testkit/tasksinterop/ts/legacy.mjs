// The official MCP TypeScript SDK v1 client (@modelcontextprotocol/sdk
// 1.x, protocol 2025-11-25) with its experimental tasks, against one
// tenant endpoint of the platform: it lists the tools (learning which
// must run as tasks), streams a call of one that becomes a task and asks
// a question midway (answered by its elicitation handler, on the
// tasks/result stream), starts a long one as a task and cancels it,
// lists its tasks, and ends its session. It prints one JSON line of what
// it saw. Usage: node legacy.mjs <endpoint URL>
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.argv[2]);
const seen = { asked: [], confirm: [], slow: {} };
const client = new Client({ name: 'sdk-v1-tasks-interop', version: '1' }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  seen.asked.push({ message: request.params.message, taskId: request.params._meta?.['io.modelcontextprotocol/related-task']?.taskId ?? null });
  return { action: 'accept', content: { confirm: true } };
});
const transport = new StreamableHTTPClientTransport(url);
try {
  await client.connect(transport);
  seen.protocolVersion = transport.protocolVersion;
  seen.serverTasks = client.getServerCapabilities()?.tasks ?? null;
  const { tools } = await client.listTools();
  seen.taskSupport = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));

  // confirm must run as a task: the SDK asks for one by itself.
  for await (const message of client.experimental.tasks.callToolStream({ name: 'confirm', arguments: { what: 'orders' } })) {
    if (message.type === 'taskCreated') seen.confirm.push({ type: 'taskCreated', taskId: message.task.taskId, status: message.task.status });
    else if (message.type === 'taskStatus') seen.confirm.push({ type: 'taskStatus', status: message.task.status });
    else if (message.type === 'result') seen.confirm.push({ type: 'result', text: message.result.content?.[0]?.text, taskId: message.result._meta?.['io.modelcontextprotocol/related-task']?.taskId ?? null });
    else seen.confirm.push({ type: message.type, error: String(message.error?.message ?? message.error) });
  }

  // slow may run as a task: asked for one, with a ttl, then cancelled.
  const stream = client.experimental.tasks.callToolStream({ name: 'slow', arguments: {} }, undefined, { task: { ttl: 60000 } });
  const first = await stream.next();
  seen.slow.created = first.value?.type === 'taskCreated' ? first.value.task : first.value;
  await stream.return();
  const cancelled = await client.experimental.tasks.cancelTask(seen.slow.created.taskId);
  seen.slow.cancelled = cancelled.status;
  seen.slow.after = (await client.experimental.tasks.getTask(seen.slow.created.taskId)).status;
  seen.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => ({ taskId: t.taskId, status: t.status }));

  await transport.terminateSession();
  await client.close();
  console.log(JSON.stringify(seen));
} catch (err) {
  console.log(JSON.stringify({ error: String(err?.message ?? err), ...seen }));
  process.exitCode = 1;
}
