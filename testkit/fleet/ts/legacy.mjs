// The fleet's legacy client on the official TypeScript SDK v1
// (@modelcontextprotocol/sdk 1.x, protocol 2025-11-25), as desktop and IDE
// clients embed it: node legacy.mjs <endpoint> <tool> <ref> <delay-ms>.
// It calls the tool with the ref, answers the confirmation it is asked
// after waiting delay-ms (a user reading the question, while the fleet
// kills the replica holding the call's stream), and prints what happened
// as one line of JSON.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, tool, ref, delay] = process.argv.slice(2);
const seen = { asked: 0 };
const client = new Client(
  { name: 'opsmcp-fleet-ts', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async () => {
  seen.asked++;
  if (seen.asked === 1) await new Promise((resolve) => setTimeout(resolve, Number(delay)));
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
