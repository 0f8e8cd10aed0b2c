// An MCP Apps host's first steps, on the official TypeScript SDK v2
// client and the host helpers of @modelcontextprotocol/ext-apps: it
// declares the extension, lists the tools, finds each tool's view with
// the package's own reading of _meta (getToolUiResourceUri, the nested
// key first, then the deprecated flat one), reads deploy's view and
// checks it as a host would before rendering it. It prints one JSON line
// of what it saw. Usage: node apps.mjs <endpoint URL> <bearer token>
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  getToolUiResourceUri, isToolVisibilityAppOnly, isToolVisibilityModelOnly, buildAllowAttribute,
  RESOURCE_MIME_TYPE,
} from "@modelcontextprotocol/ext-apps/app-bridge";

const [url, token] = process.argv.slice(2);
const client = new Client({ name: "ext-apps-interop", version: "1" }, {
  capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } },
  versionNegotiation: { mode: { pin: "2026-07-28" } },
});
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
const { tools } = await client.listTools();
const views = tools.filter((t) => getToolUiResourceUri(t)).map((t) => ({
  name: t.name, uri: getToolUiResourceUri(t), appOnly: isToolVisibilityAppOnly(t), modelOnly: isToolVisibilityModelOnly(t),
}));
const deploy = tools.find((t) => t.name === "deploy");
const uri = getToolUiResourceUri(deploy);
const read = await client.readResource({ uri });
const content = read.contents[0];
console.log(JSON.stringify({
  views,
  read: {
    uri: content.uri, mimeType: content.mimeType, isView: content.mimeType === RESOURCE_MIME_TYPE,
    html: typeof content.text === "string" && content.text.startsWith("<!DOCTYPE html>"),
    prefersBorder: content._meta?.ui?.prefersBorder, allow: buildAllowAttribute(content._meta?.ui?.permissions),
  },
}));
await client.close();
