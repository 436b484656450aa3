// A line-driven MCP client over the official TypeScript SDK, for the tests
// of several `maiden serve -http` instances on one state store. It reads one
// JSON command per line on stdin and answers with JSON lines on stdout:
//   {"op":"connect","c":NAME,"url":URL,"token":TOKEN}
//       → {"op":"connected","c":NAME} or {"op":"connected","c":NAME,"error":MSG}
//   {"op":"call","id":ID,"c":NAME,"tool":TOOL,"args":{...}}
//       → {"op":"progress","id":ID,"message":MSG} for each progress notification, then
//         {"op":"result","id":ID,"isError":BOOL,"text":TEXT} or {"op":"result","id":ID,"error":MSG}
//   {"op":"close","c":NAME} → {"op":"closed","c":NAME}
// Calls run concurrently: a result line may come in any order. End of input
// closes every client and exits.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const clients = new Map();
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const textOf = (r) => (r.content || []).filter((x) => x.type === "text").map((x) => x.text).join("\n");
const pending = new Set();

async function handle(cmd) {
  switch (cmd.op) {
    case "connect": {
      const transport = new StreamableHTTPClientTransport(new URL(cmd.url), {
        requestInit: { headers: { Authorization: `Bearer ${cmd.token}` } },
      });
      const client = new Client({ name: "maiden-multi-instance-test", version: "1.0.0" });
      try {
        await client.connect(transport);
        clients.set(cmd.c, client);
        out({ op: "connected", c: cmd.c });
      } catch (e) {
        out({ op: "connected", c: cmd.c, error: String(e?.message || e) });
      }
      return;
    }
    case "call": {
      const client = clients.get(cmd.c);
      if (!client) {
        out({ op: "result", id: cmd.id, error: `no client ${cmd.c}` });
        return;
      }
      try {
        const r = await client.callTool({ name: cmd.tool, arguments: cmd.args || {} }, undefined, {
          onprogress: (p) => out({ op: "progress", id: cmd.id, message: p.message || "" }),
          resetTimeoutOnProgress: true,
          timeout: 120000,
        });
        const text = textOf(r);
        // A result without text is reported whole: it is what the test
        // must explain.
        out({ op: "result", id: cmd.id, isError: r.isError === true, text: text === "" ? `(no text content) ${JSON.stringify(r)}` : text });
      } catch (e) {
        out({ op: "result", id: cmd.id, error: String(e?.message || e) });
      }
      return;
    }
    case "close": {
      const client = clients.get(cmd.c);
      clients.delete(cmd.c);
      await client?.close().catch(() => {});
      out({ op: "closed", c: cmd.c });
      return;
    }
    default:
      out({ op: "error", error: `unknown op ${cmd.op}` });
  }
}

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (!line.trim()) return;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    out({ op: "error", error: `bad line: ${e}` });
    return;
  }
  const p = handle(cmd).finally(() => pending.delete(p));
  pending.add(p);
});
lines.on("close", async () => {
  await Promise.allSettled([...pending]);
  for (const c of clients.values()) await c.close().catch(() => {});
  process.exit(0);
});
