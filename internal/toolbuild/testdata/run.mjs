// Test-only runner: executes a built component under jco's JS transpilation
// (V8 instead of wasmtime) with a mock maiden host, so the fixtures' ABI
// handling can be checked before and independently of maiden's own host.
//
// stdin: {"component": path, "calls": [{"fn": "execute", "input": "..."}]}
// stdout: {"describe": s, "schema": s, "results": [{ok|err|trap, len,
//          logs, fetches}]}
// Each call gets a fresh instance (a trap poisons an instance).
//
// Mock http-fetch, keyed on the URL: contains "deny" -> denied("not
// allowed"), "timeout" -> timeout, "toolarge" -> too-large, "fail" ->
// failed("boom"); otherwise ok 200 with body "got <url> cred=<credential>".
import { transpileBytes } from '@bytecodealliance/jco-transpile';
import { readFile, writeFile, mkdir, mkdtemp } from 'node:fs/promises';
import { join, dirname } from 'node:path';
import { pathToFileURL } from 'node:url';

let raw = '';
for await (const c of process.stdin) raw += c;
const req = JSON.parse(raw);

const dir = await mkdtemp(join(process.cwd(), 'transpiled-'));
await writeFile(
  join(dir, 'host.mjs'),
  `export function log(level, message) { globalThis.__logs.push([level, message]); }
export function httpFetch(req) { return globalThis.__fetch(req); }
`,
);

globalThis.__fetch = (r) => {
  globalThis.__fetches.push({ ...r, body: Array.from(r.body) });
  if (r.url.includes('deny')) throw { tag: 'denied', val: 'not allowed' };
  if (r.url.includes('timeout')) throw { tag: 'timeout' };
  if (r.url.includes('toolarge')) throw { tag: 'too-large' };
  if (r.url.includes('fail')) throw { tag: 'failed', val: 'boom' };
  return {
    status: 200,
    headers: [['content-type', 'text/plain']],
    body: new TextEncoder().encode(`got ${r.url} cred=${r.credential}`),
  };
};

const { files } = await transpileBytes(await readFile(req.component), {
  name: 'tool',
  map: { 'maiden:tool/host': './host.mjs', 'maiden:tool/host@0.1.0': './host.mjs' },
});
for (const [name, bytes] of Object.entries(files)) {
  await mkdir(dirname(join(dir, name)), { recursive: true });
  await writeFile(join(dir, name), bytes);
}

let n = 0;
async function fresh() {
  globalThis.__logs = [];
  globalThis.__fetches = [];
  return import(pathToFileURL(join(dir, 'tool.js')).href + `?instance=${n++}`);
}

function classify(e) {
  if (typeof e === 'string') return { err: e };
  if (e && typeof e === 'object' && 'payload' in e && typeof e.payload === 'string') return { err: e.payload };
  return { trap: `${e?.constructor?.name}: ${e?.message ?? e}` };
}

function okResult(v) {
  const s = String(v);
  return { ok: s.length > 4096 ? s.slice(0, 64) : s, len: s.length };
}

const out = { results: [] };
const first = await fresh();
out.describe = first.describe();
out.schema = first.schema();
for (const call of req.calls) {
  let r;
  try {
    const m = await fresh();
    r = okResult(m[call.fn](call.input));
  } catch (e) {
    r = classify(e);
  }
  r.logs = globalThis.__logs;
  r.fetches = globalThis.__fetches;
  out.results.push(r);
}
process.stdout.write(JSON.stringify(out));
