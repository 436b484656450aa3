// The official TypeScript SDK as the client of `maiden serve` over stdio,
// calling up.progress, a tool of an imported MCP server (testdata/mcpstdio)
// that reports its own progress: the SDK routes each notification to the
// call's onprogress by the progress token it chose (an unknown token is an
// error the client reports), so what arrives there came with this call's
// token. Usage:
//   node progress.mjs stdio MAIDEN_BINARY AGENT_TOML
// Exits 0 when every check passed, 1 otherwise; prints one line per check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, bin, cfg] = process.argv.slice(2);
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
if (mode !== "stdio") {
  console.error("usage: node progress.mjs stdio MAIDEN AGENT_TOML");
  process.exit(2);
}

const client = new Client({ name: "node-progress-test", version: "1.0.0" });
const errors = [];
client.onerror = (e) => errors.push(String(e));
const transport = new StdioClientTransport({ command: bin, args: ["serve", "-config", cfg], stderr: "inherit" });
await client.connect(transport);

// What came on the wire, in order: each progress notification (its token
// and values) and each response (its id; the SDK's progress token for a
// call is the call's request id). The SDK handles a response at once but a
// notification a microtask later (Protocol._onnotification), so when
// notifications and the response arrive in one read, the response removes
// the call's token first and the SDK reports each of those notifications
// as "unknown token". Whether maiden wrote a notification after its call's
// result is read here, on the wire, not from the SDK's order of handling.
const wire = [];
const sdkOnMessage = transport.onmessage;
transport.onmessage = (m, extra) => {
  if (m.method === "notifications/progress") {
    wire.push({ token: Number(m.params.progressToken), progress: m.params.progress, total: m.params.total, message: m.params.message });
  } else if (m.id !== undefined && (m.result !== undefined || m.error !== undefined)) {
    wire.push({ response: Number(m.id) });
  }
  sdkOnMessage?.(m, extra);
};
// afterResponse lists the notifications that came after their call's
// response on the wire.
const afterResponse = () => {
  const done = new Set();
  const late = [];
  for (const w of wire) {
    if (w.response !== undefined) done.add(w.response);
    else if (done.has(w.token)) late.push(w);
  }
  return late;
};

// call calls up.progress with args, recording each progress notification
// and when it came.
async function call(args) {
  const got = [];
  const start = Date.now();
  const r = await client.callTool({ name: "up.progress", arguments: args }, undefined, {
    onprogress: (p) => got.push({ ...p, at: Date.now() - start }),
    timeout: 60000,
  });
  return { r, got, took: Date.now() - start };
}
const increasing = (got) => got.every((p, i) => i === 0 || p.progress > got[i - 1].progress);
const show = (got) => got.map((p) => `${p.progress}/${p.total} ${p.message}`).join(", ");

// A first call without progress: the server and its import are warm.
await call({});

// Three steps 300 ms apart: the tool's own reports, with its own values and
// messages, and nothing of the server's ticker (which speaks every second
// only for a call that reports nothing).
{
  const { r, got } = await call({ steps: 3, every_ms: 300 });
  check("up.progress succeeds", !r.isError, JSON.stringify(r));
  check("the tool's own progress, with this call's token", show(got) === "1/3 step 1, 2/3 step 2, 3/3 step 3", show(got));
}

// A flood: 3000 notifications as fast as the upstream can send them (some
// going backwards) reach the client coalesced: at most one per 100 ms plus
// the last, increasing, ending at the upstream's last value.
{
  const { r, got, took } = await call({ flood: 3000 });
  check("a flooding up.progress succeeds", !r.isError, JSON.stringify(r));
  // The reports the SDK handled after the response (see wire above) are
  // this call's when they came before its response on the wire: they
  // count as its own, in the order they came, and are the only
  // unknown-token errors allowed. Waiting for the SDK's microtasks: one
  // macrotask turn runs them all.
  await new Promise((res) => setImmediate(res));
  const id = wire.filter((w) => w.response !== undefined).at(-1)?.response;
  const before = wire.slice(0, wire.findIndex((w) => w.response === id)).filter((w) => w.token === id);
  for (let i = errors.length - 1; i >= 0; i--) {
    const m = /unknown token: (\{.*\})$/.exec(errors[i]);
    const n = m && JSON.parse(m[1]).params;
    if (n && Number(n.progressToken) === id && before.some((w) => w.progress === n.progress)) {
      errors.splice(i, 1);
    }
  }
  for (const w of before.slice(got.length)) {
    got.push({ progress: w.progress, total: w.total, message: `${w.message} (handled after the response)`, at: took });
  }
  const last = got[got.length - 1];
  check("the flood ends at the upstream's last value", last && last.progress === 3000 && last.total === 3000, JSON.stringify(last));
  check("the flood is increasing", increasing(got), show(got));
  const limit = Math.floor(took / 100) + 2;
  check(`the flood is coalesced (${got.length} notifications in ${took} ms, at most ${limit})`, got.length <= limit, show(got));
}

check("no progress notification after its call's result", afterResponse().length === 0, JSON.stringify(afterResponse()));
check("no progress notification for an unknown token", errors.length === 0, errors.join("; "));
await client.close();
console.log(`${passed} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
