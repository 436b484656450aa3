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
await client.connect(new StdioClientTransport({ command: bin, args: ["serve", "-config", cfg], stderr: "inherit" }));

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
  // The SDK handles a response at once but a notification a microtask later
  // (Protocol._onnotification), so the final report, which maiden writes
  // before the response, can reach the SDK's progress handler after the
  // response removed the call's token: it then reports "unknown token"
  // with the notification. That late final report still counts as this
  // call's (and is the only unknown-token error allowed).
  await new Promise((res) => setTimeout(res, 50));
  const late = errors.findIndex((e) => e.includes("unknown token") && e.includes('"progress":3000') && e.includes('"total":3000'));
  if (late >= 0) {
    errors.splice(late, 1);
    got.push({ progress: 3000, total: 3000, message: "flood 3000 (handled after the response)", at: took });
  }
  const last = got[got.length - 1];
  check("the flood ends at the upstream's last value", last && last.progress === 3000 && last.total === 3000, JSON.stringify(last));
  check("the flood is increasing", increasing(got), show(got));
  const limit = Math.floor(took / 100) + 2;
  check(`the flood is coalesced (${got.length} notifications in ${took} ms, at most ${limit})`, got.length <= limit, show(got));
}

check("no progress notification for an unknown token", errors.length === 0, errors.join("; "));
await client.close();
console.log(`${passed} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
