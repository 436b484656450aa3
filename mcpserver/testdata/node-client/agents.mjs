// Agents over MCP, driven by the official TypeScript SDK. Usage:
//   node agents.mjs http URL ALICE_TOKEN BOB_TOKEN
//       two agents' tokens in the client's headers; pauses twice, printing
//       "PAUSE card" then "PAUSE token" and reading a line from stdin, while
//       the test revokes alice's card, then her token, with the maiden CLI
//   node agents.mjs stdio MAIDEN AGENT_TOML AGENT
//       maiden serve -agent AGENT over stdio
// Exits 0 when every check passed, 1 otherwise; prints one line per check.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, a, b, c] = process.argv.slice(2);
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
const textOf = (r) => (r.content || []).filter((x) => x.type === "text").map((x) => x.text).join("\n");
const names = async (client) => (await client.listTools()).tools.map((t) => t.name).sort().join(",");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function pause(what) {
  console.log(`PAUSE ${what}`);
  await lines.next();
}
const denial = (agent, g) => `denied: no card of agent "${agent}" allows ${g} (grant it: maiden cards grant -agent ${agent} '${g}')`;

const clients = [];
function connect(transport) {
  const client = new Client({ name: "node-agents-test", version: "1.0.0" });
  clients.push(client);
  return client.connect(transport).then(() => client);
}
const overHTTP = (token) => new StreamableHTTPClientTransport(new URL(a), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });

try {
  if (mode === "http") {
    const alice = await connect(overHTTP(b));
    const bob = await connect(overHTTP(c));
    check("alice's tools/list", (await names(alice)) === "echo", await names(alice));
    check("bob's tools/list", (await names(bob)) === "echo,logger", await names(bob));
    const ok = await alice.callTool({ name: "echo", arguments: { message: "from alice" } });
    check("alice calls echo", !ok.isError && textOf(ok) === '{"message":"from alice"}', JSON.stringify(ok));
    const denied = await bob.callTool({ name: "logger", arguments: {} });
    check("bob is denied logger, with the grant to paste", denied.isError === true && textOf(denied) === denial("bob", "tool:invoke logger"),
      JSON.stringify(denied));
    let unbound;
    try {
      await alice.callTool({ name: "logger", arguments: {} });
    } catch (e) {
      unbound = e;
    }
    check("a tool not bound to alice is unknown", String(unbound?.message).includes("unknown tool"), String(unbound));

    await pause("card"); // maiden cards revoke (alice's card)
    const after = await alice.callTool({ name: "echo", arguments: { message: "again" } });
    check("the next call after maiden cards revoke is denied", after.isError === true && textOf(after).startsWith('denied: no card of agent "alice"'),
      JSON.stringify(after));

    await pause("token"); // maiden agents revoke-token (alice's token)
    let refused;
    try {
      await alice.listTools();
    } catch (e) {
      refused = e;
    }
    check("a revoked token is refused in its open session", String(refused?.message).includes("not a valid agent token"), String(refused));
    check("bob's session goes on", (await names(bob)) === "echo,logger", "");
  } else if (mode === "stdio") {
    const agent = c;
    const client = await connect(new StdioClientTransport({ command: a, args: ["serve", "-config", b, "-agent", agent], stderr: "inherit" }));
    check(`${agent}'s tools/list`, (await names(client)) === "echo,logger", await names(client));
    const ok = await client.callTool({ name: "echo", arguments: { message: "hi" } });
    check("a call its card allows", !ok.isError && textOf(ok) === '{"message":"hi"}', JSON.stringify(ok));
    const denied = await client.callTool({ name: "echo", arguments: { message: "ho" } });
    check("a call its card does not allow", denied.isError === true && textOf(denied) === denial(agent, "tool:invoke echo --message=ho"),
      JSON.stringify(denied));
  } else {
    console.error("usage: node agents.mjs http URL ALICE_TOKEN BOB_TOKEN | stdio MAIDEN AGENT_TOML AGENT");
    process.exit(2);
  }
} catch (e) {
  check("no exception", false, e?.stack || String(e));
} finally {
  for (const client of clients) await client.close().catch(() => {});
}
console.log(`node-agents ${mode}: ${passed} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
