// An MCP client nobody on the maiden team wrote: the official TypeScript SDK.
// It drives `maiden serve` over stdio or streamable HTTP and checks each
// answer. Usage:
//   node client.mjs stdio MAIDEN_BINARY AGENT_TOML
//   node client.mjs http  URL            (e.g. http://127.0.0.1:8700/mcp)
// Exits 0 when every check passed, 1 otherwise; prints one line per check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, a, b] = process.argv.slice(2);
let failures = 0;
let passed = 0;
function check(name, ok, detail) {
  if (ok) {
    passed++;
    console.log(`ok   ${mode}: ${name}`);
  } else {
    failures++;
    console.log(`FAIL ${mode}: ${name}: ${detail}`);
  }
}
const textOf = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: a, args: ["serve", "-config", b], stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(a));
} else {
  console.error("usage: node client.mjs stdio MAIDEN AGENT_TOML | http URL");
  process.exit(2);
}

const client = new Client({ name: "node-client-test", version: "1.0.0" });
try {
  await client.connect(transport);
  check("initialize", client.getServerVersion()?.name === "maiden", JSON.stringify(client.getServerVersion()));

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check("tools/list names", JSON.stringify(names) === JSON.stringify(["echo", "loop"]), JSON.stringify(names));
  const echo = tools.find((t) => t.name === "echo");
  check("echo input schema", echo?.inputSchema?.type === "object" && echo?.inputSchema?.required?.includes("message"),
    JSON.stringify(echo?.inputSchema));

  const ok = await client.callTool({ name: "echo", arguments: { message: "from node" } });
  check("call echo", !ok.isError && textOf(ok) === '{"message":"from node"}', JSON.stringify(ok));
  check("structured content", ok.structuredContent?.message === "from node", JSON.stringify(ok.structuredContent));

  const slow = await client.callTool({ name: "loop", arguments: {} });
  check("call that times out", slow.isError === true && textOf(slow).startsWith("deadline:"), JSON.stringify(slow));

  const bad = await client.callTool({ name: "echo", arguments: { message: 5 } });
  check("invalid arguments", bad.isError === true && textOf(bad).startsWith("input:") && textOf(bad).includes("/message"),
    JSON.stringify(bad));

  let unknown;
  try {
    await client.callTool({ name: "no-such-tool", arguments: {} });
  } catch (e) {
    unknown = e;
  }
  check("unknown tool is a protocol error", unknown !== undefined, "no error");

  if (mode === "http") {
    const resp = await fetch(a, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", Origin: "https://evil.example" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
    });
    check("foreign Origin refused", resp.status === 403, `status ${resp.status}`);
  }
} catch (e) {
  check("no exception", false, e?.stack || String(e));
} finally {
  await client.close().catch(() => {});
}
console.log(`node-client ${mode}: ${passed} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
