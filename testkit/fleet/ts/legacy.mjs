// The fleet's legacy client on the official TypeScript SDK v1
// (@modelcontextprotocol/sdk 1.x, protocol 2025-11-25), as desktop and IDE
// clients embed it: node legacy.mjs <endpoint> <tool> <ref> <max-wait-ms>.
// It calls the tool with the ref and answers the confirmation it is asked
// when a line arrives on stdin, or after max-wait-ms (a user reading the
// question, while the fleet kills the replica holding the call's stream
// and then says "answer"), and prints what happened as one line of JSON.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, tool, ref, maxWait] = process.argv.slice(2);
// The fleet's word to answer: a line on stdin, or the longest wait.
const told = new Promise((resolve) => {
  const timer = setTimeout(resolve, Number(maxWait));
  process.stdin.once('data', () => { clearTimeout(timer); resolve(); });
}).then(() => process.stdin.destroy());
const seen = { asked: 0 };
const client = new Client(
  { name: 'opsmcp-fleet-ts', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async () => {
  seen.asked++;
  if (seen.asked === 1) await told;
  return { action: 'accept', content: { nonce: `ts-${ref}` } };
});
const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
  const result = await client.callTool({ name: tool, arguments: { ref } }, undefined, { timeout: 120000 });
  await transport.terminateSession();
  await client.close();
  console.log(JSON.stringify({ result, ...seen }));
} catch (err) {
  console.log(JSON.stringify({ error: String(err?.message ?? err), ...seen }));
  process.exitCode = 1;
}
