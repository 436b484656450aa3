// An MCP client nobody on the maiden team wrote: the official TypeScript SDK.
// It drives `maiden serve` over stdio or streamable HTTP and checks each
// answer. Usage:
//   node client.mjs stdio MAIDEN_BINARY AGENT_TOML
//   node client.mjs http  URL            (e.g. http://127.0.0.1:8700/mcp)
//   node client.mjs http-token URL TOKEN (a server run with -auth-token-env)
// Exits 0 when every check passed, 1 otherwise; prints one line per check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

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

if (mode === "http-token") {
  // A client with OAuth support (an auth provider, as the Inspector, Claude
  // Code or mcp-remote have) but no token: it must get maiden's message, and
  // never start OAuth discovery.
  const seen = [];
  const recordingFetch = (url, init) => {
    seen.push(String(url));
    return fetch(url, init);
  };
  let oauthStarted = false;
  const start = () => {
    oauthStarted = true;
    throw new Error("OAuth started");
  };
  const authProvider = {
    get redirectUrl() { return "http://127.0.0.1:1/callback"; },
    get clientMetadata() { return { redirect_uris: ["http://127.0.0.1:1/callback"], client_name: "node-client-test" }; },
    tokens: () => undefined,
    clientInformation: start,
    saveClientInformation: start,
    saveTokens: start,
    redirectToAuthorization: start,
    saveCodeVerifier: start,
    codeVerifier: start,
  };
  const noToken = new Client({ name: "node-client-test", version: "1.0.0" });
  let refusal;
  try {
    await noToken.connect(new StreamableHTTPClientTransport(new URL(a), { authProvider, fetch: recordingFetch }));
  } catch (e) {
    refusal = e;
  }
  check("no token: refused", refusal !== undefined, "connected without the token");
  check("no token: the error names the header", String(refusal?.message).includes("Authorization: Bearer <token>"), String(refusal));
  check("no token: no OAuth", !oauthStarted && seen.every((u) => !u.includes("/.well-known/") && !u.includes("/register")),
    `OAuth started: ${oauthStarted}, requests: ${seen.join(" ")}`);
  await noToken.close().catch(() => {});
}

let transport;
if (mode === "http-token") {
  transport = new StreamableHTTPClientTransport(new URL(a), { requestInit: { headers: { Authorization: `Bearer ${b}` } } });
} else if (mode === "stdio") {
  transport = new StdioClientTransport({ command: a, args: ["serve", "-config", b], stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(a));
} else {
  console.error("usage: node client.mjs stdio MAIDEN AGENT_TOML | http URL | http-token URL TOKEN");
  process.exit(2);
}

const client = new Client({ name: "node-client-test", version: "1.0.0" });
const logLevels = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  if (n.params.logger === "logger") logLevels.push(n.params.level);
});
try {
  await client.connect(transport);
  check("initialize", client.getServerVersion()?.name === "maiden", JSON.stringify(client.getServerVersion()));

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check("tools/list names", JSON.stringify(names) === JSON.stringify(["echo", "logger", "loop"]), JSON.stringify(names));

  // This client never sends logging/setLevel: tool logs still come, from
  // maiden's default level (info) up, before the result.
  const logged = await client.callTool({ name: "logger", arguments: {} });
  await new Promise((r) => setTimeout(r, 100));
  check("logs without setLevel", !logged.isError && logLevels.join(",") === "info,warning,error", logLevels.join(","));

  let notFound;
  try {
    await client.request({ method: "resources/list", params: {} }, (await import("@modelcontextprotocol/sdk/types.js")).ListResourcesResultSchema);
  } catch (e) {
    notFound = e;
  }
  check("resources/list is not found", notFound?.code === -32601, String(notFound));
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

  if (mode !== "stdio") {
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
