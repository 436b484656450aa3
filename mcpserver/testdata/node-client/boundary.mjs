// Issue 14's flow over MCP, driven by the official TypeScript SDK
// (protocol 2025-11-25: each client connection is an Mcp-Session-Id, so a
// maiden session of its own). Usage:
//   node boundary.mjs URL TOKEN OUTSIDE CONTENT
// OUTSIDE is a file outside the agent's initial boundary and CONTENT its
// text. The script acts as a model would: it reads OUTSIDE, gets
// sandbox_boundary_required, asks for exactly the requiredExpansion with
// request_sandbox_boundary, and retries. When a request waits for a human
// it prints "APPROVE <handle> <session>", "DENY <handle> <session>" or
// "DENYCLI <handle> <session>" and reads a line from stdin while the test
// decides (in the inbox page, in headless Chromium, or with maiden deny).
// Exits 0 when every check passed, 1 otherwise; prints one line per check.
import { createInterface } from "node:readline";
import { isDeepStrictEqual } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, outside, content] = process.argv.slice(2);
if (!content) {
  console.error("usage: node boundary.mjs URL TOKEN OUTSIDE CONTENT");
  process.exit(2);
}
let failures = 0;
let passed = 0;
function check(name, ok, detail) {
  if (ok) {
    passed++;
    console.log(`ok   ${name}`);
  } else {
    failures++;
    console.log(`FAIL ${name}: ${detail}`);
  }
}
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
const show = (r) => JSON.stringify(r);

// connect opens one client: one MCP session, so one maiden session.
async function connect(name) {
  const client = new Client({ name, version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  // As a model's host does: list the tools (the SDK then validates every
  // structuredContent against the tool's outputSchema, errors included).
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(`${name}: fs_read and request_sandbox_boundary are listed`, isDeepStrictEqual(names, ["fs_read", "request_sandbox_boundary"]), show(names));
  return { client, transport };
}

// read calls fs_read on OUTSIDE.
const read = (c) => c.client.callTool({ name: "fs_read", arguments: { path: outside } }, undefined, { timeout: 30000 });

// expectRequired checks a refusal with the structured error and returns
// its requiredExpansion.
function expectRequired(what, r) {
  const sc = r.structuredContent || {};
  check(`${what}: isError with SANDBOX_COMMAND_EXECUTION_FAILED, sandbox_boundary_required`,
    r.isError === true && sc.code === "SANDBOX_COMMAND_EXECUTION_FAILED" && sc.reason === "sandbox_boundary_required" && sc.domain === "filesystem", show(r));
  const want = { filesystem: { entries: [{ path: outside, access: "read", scope: "exact" }] } };
  check(`${what}: the requiredExpansion is exactly the file, read`, isDeepStrictEqual(sc.requiredExpansion, want), show(sc.requiredExpansion));
  check(`${what}: nothing of the file leaks`, !show(r).includes(content), show(r));
  return sc.requiredExpansion;
}

// request calls request_sandbox_boundary, recording its progress
// messages, and resolves to the handle the call waits for.
function request(c, id, expansion, justification) {
  const progress = [];
  const done = { value: undefined };
  const promise = c.client.callTool({ name: "request_sandbox_boundary", arguments: { id, expansion, justification } }, undefined, {
    onprogress: (p) => progress.push(p.message || ""),
    resetTimeoutOnProgress: true,
    timeout: 60000,
  }).then((r) => { done.value = r; return r; });
  const waitingRE = /^waiting for approval (bnd_\S+): /;
  const handle = until("a progress message naming the boundary request", () => progress.map((m) => waitingRE.exec(m)).find(Boolean)).then((m) => m[1]);
  return { progress, promise, done, handle };
}

const justification = "the task needs to read <b>b.txt</b> & nothing else";
let a, b;
try {
  // 1. A read outside the boundary fails before anything is read.
  a = await connect("session-a");
  const sessionA = a.transport.sessionId;
  check("session A has an Mcp-Session-Id", typeof sessionA === "string" && sessionA !== "", String(sessionA));
  const x = expectRequired("session A's read", await read(a));

  // 2. The model's next call asks for exactly that; it waits for a human.
  const q = request(a, "r1", x, justification);
  const h1 = await q.handle;
  check("the waiting call names its boundary request", /^bnd_/.test(h1), h1);
  check("progress says what the call waits for (the justification)", q.progress.some((m) => m.includes(justification)), q.progress.join(" | "));
  await sleep(500);
  check("the call waits for the human", q.done.value === undefined, show(q.done.value));
  await ask(`APPROVE ${h1} ${sessionA}`);
  const r1 = await q.promise;
  const s1 = r1.structuredContent || {};
  check("approved in the inbox: the call returns status approved", !r1.isError && s1.status === "approved" && s1.reason === "applied" &&
    s1.requestId === "r1" && s1.handle === h1 && s1.revision === 1, show(r1));

  // 3. The retried read succeeds with the file's content.
  const r2 = await read(a);
  const s2 = r2.structuredContent || {};
  check("the retried read returns the file", !r2.isError && s2.content === content && s2.encoding === "text" && s2.path === outside, show(r2));

  // 4. Another session of the same agent keeps the old boundary.
  b = await connect("session-b");
  const sessionB = b.transport.sessionId;
  check("session B is another Mcp-Session-Id", typeof sessionB === "string" && sessionB !== "" && sessionB !== sessionA, `${sessionA} ${sessionB}`);
  const xb = expectRequired("session B's read", await read(b));

  // 5. A denial in the inbox: the waiting call fails with the structured
  // error, status denied and the operator's reason.
  const d = request(b, "r2", xb, "session B wants it too");
  const h2 = await d.handle;
  await ask(`DENY ${h2} ${sessionB}`);
  const r3 = await d.promise;
  const s3 = r3.structuredContent || {};
  check("denied in the inbox: isError, status denied, the operator's reason", r3.isError === true && s3.status === "denied" &&
    s3.code === "SANDBOX_COMMAND_EXECUTION_FAILED" && s3.reason === "denied" && s3.requestId === "r2" && s3.handle === h2 &&
    String(s3.message).includes("not for this task"), show(r3));
  expectRequired("session B's read after the denial", await read(b));

  // 6. The same with maiden deny -reason from another process.
  const e = request(b, "r3", xb, "asking once more");
  const h3 = await e.handle;
  await ask(`DENYCLI ${h3} ${sessionB}`);
  const r4 = await e.promise;
  const s4 = r4.structuredContent || {};
  check("denied with maiden deny: isError, status denied, the reason", r4.isError === true && s4.status === "denied" &&
    s4.reason === "denied" && s4.requestId === "r3" && s4.handle === h3 && String(s4.message).includes("denied from the command line"), show(r4));
  expectRequired("session B's read after the second denial", await read(b));

  // The same request ID again is the same request: settled, answered at once.
  const again = await b.client.callTool({ name: "request_sandbox_boundary", arguments: { id: "r2", expansion: xb, justification: "again" } });
  check("repeating a denied request's id is answered at once, denied", again.isError === true && again.structuredContent?.status === "denied" &&
    again.structuredContent?.handle === h2, show(again));

  // Session A still reads the file.
  const r5 = await read(a);
  check("session A still reads the file", !r5.isError && r5.structuredContent?.content === content, show(r5));
} catch (err) {
  check("no exception", false, err?.stack || String(err));
} finally {
  await a?.client.close().catch(() => {});
  await b?.client.close().catch(() => {});
}
console.log(`node-boundary: ${passed} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
