// The approval flow over MCP, driven by the official TypeScript SDK
// (protocol 2025-11-25, sessions). Usage:
//   node approvals.mjs elicit URL TOKEN COUNTER   a client declaring URL-mode elicitation
//   node approvals.mjs plain  URL TOKEN COUNTER   a client declaring no elicitation
//   node approvals.mjs stdio  MAIDEN AGENT_TOML AGENT COUNTER [CACHE]
//       maiden serve -agent AGENT over stdio (no inbox URL: progress only)
// COUNTER is the URL of the test's HTTPS server that counts the fetcher
// tool's executions; each call of fetcher needs a human's approval. When a
// call waits, the script prints "APPROVE <id>" or "DENY <id>" and reads a
// line from stdin, while the test decides with the maiden CLI (maiden
// approve, maiden deny -reason "not today").
// Exits 0 when every check passed, 1 otherwise; prints one line per check.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ElicitationCompleteNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, a, b, c, d, cache] = process.argv.slice(2);
const counter = mode === "stdio" ? d : c;
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
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function ask(what) {
  console.log(what);
  await lines.next();
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, cond, ms = 30000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = cond();
    if (v) return v;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const elicit = mode === "elicit" || mode === "stdio";
const client = new Client({ name: "node-approvals-test", version: "1.0.0" },
  { capabilities: elicit ? { elicitation: { url: {} } } : {} });
const elicitations = [];
const completions = [];
let answer = "accept";
if (elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicitations.push(req.params);
    return { action: answer };
  });
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
    completions.push(n.params.elicitationId);
  });
}

// call starts a fetcher call, recording its progress messages.
function call(q) {
  const progress = [];
  const done = { value: undefined };
  const promise = client.callTool({ name: "fetcher", arguments: { url: `${counter}?${mode}-${q}` } }, undefined, {
    onprogress: (p) => progress.push(p.message || ""),
    resetTimeoutOnProgress: true,
    timeout: 60000,
  }).then((r) => { done.value = r; return r; });
  return { progress, promise, done };
}
const waitingRE = /^waiting for approval (\S+): fetches from the network/;
const approvalOf = async (cl) => (await until("a progress message naming the approval", () => cl.progress.map((m) => waitingRE.exec(m)).find(Boolean)))[1];

let transport;
let base = "";
if (mode === "elicit" || mode === "plain") {
  transport = new StreamableHTTPClientTransport(new URL(a), { requestInit: { headers: { Authorization: `Bearer ${b}` } } });
  base = new URL(a).origin;
} else if (mode === "stdio") {
  transport = new StdioClientTransport({ command: a, args: ["serve", "-config", b, "-agent", c, ...(cache ? ["-cache", cache] : [])], stderr: "inherit" });
} else {
  console.error("usage: node approvals.mjs elicit|plain URL TOKEN COUNTER | stdio MAIDEN AGENT_TOML AGENT COUNTER [CACHE]");
  process.exit(2);
}

try {
  await client.connect(transport);
  const echo = await client.callTool({ name: "echo", arguments: { message: "no approval needed" } });
  check("a call no rule sends to a human runs at once", !echo.isError, JSON.stringify(echo));

  // Approved.
  const first = call("a");
  const id = await approvalOf(first);
  check("progress says what the call waits for", id !== "", first.progress.join(" | "));
  if (mode === "elicit") {
    await until("the elicitation", () => elicitations.length === 1);
    const e = elicitations[0];
    check("a URL elicitation of the inbox page", e.mode === "url" && e.url === `${base}/ui/approvals/${id}` && e.elicitationId === id,
      JSON.stringify(e));
    check("the progress message names the inbox page", first.progress.some((m) => m.includes(`${base}/ui/approvals/${id}`)),
      first.progress.join(" | "));
  }
  await sleep(500);
  check(mode === "elicit" ? "accepting the elicitation does not run the call" : "the call waits for the human", first.done.value === undefined, JSON.stringify(first.done.value));
  await ask(`APPROVE ${id}`);
  const r1 = await first.promise;
  check("the approved call runs, once", !r1.isError && textOf(r1) === "200 hit 1", JSON.stringify(r1));
  if (mode === "elicit") {
    await until("the completion notification", () => completions.length > 0, 10000).catch(() => {});
    check("the elicitation's completion is notified", completions.length === 1 && completions[0] === id, JSON.stringify(completions));
  }

  // Denied.
  const second = call("b");
  const id2 = await approvalOf(second);
  await ask(`DENY ${id2}`);
  const r2 = await second.promise;
  check("a denial is a denied result with the human's reason", r2.isError === true && textOf(r2).startsWith("denied:") && textOf(r2).includes("not today"),
    JSON.stringify(r2));
  check("the denial names the request", r2._meta?.["maiden/approval"] === id2, JSON.stringify(r2._meta));

  if (mode === "elicit") {
    // Declined on the client: the call returns pending; the request waits
    // for an operator, and once approved the repeated call runs, once.
    answer = "decline";
    const third = call("c");
    const r3 = await third.promise;
    const sc = r3.structuredContent || {};
    check("a declined elicitation ends the wait: pending", r3.isError === true && textOf(r3).startsWith("pending:") && sc.status === "pending" &&
      typeof sc.approval === "string" && sc.inbox === `${base}/ui/approvals/${sc.approval}`, JSON.stringify(r3));
    await ask(`APPROVE ${sc.approval}`);
    const again = await call("c").promise;
    check("after approval the repeated call runs, once", !again.isError && textOf(again) === "200 hit 2", JSON.stringify(again));
  }
  if (mode === "stdio") {
    check("no inbox URL over stdio: no elicitation", elicitations.length === 0, JSON.stringify(elicitations));
  }
} catch (e) {
  check("no exception", false, e?.stack || String(e));
} finally {
  await client.close().catch(() => {});
}
console.log(`node-approvals ${mode}: ${passed} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
