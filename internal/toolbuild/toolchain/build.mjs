// maiden build driver. Embedded in the maiden binary (internal/toolbuild) and
// written next to the pinned node_modules it needs, so that ES module
// resolution finds the exact toolchain versions maiden tested against.
//
// Protocol: one JSON request on stdin, e.g.
//   {"kind":"wat","input":"/tmp/x/tool.wat","output":"/tmp/x/out.wasm",
//    "witPath":"/tmp/x/tool.wit","world":"tool"}
// kinds: "wat" (WAT core module -> component), "core" (core wasm ->
// component; "wasip1": true adds the preview1 reactor adapter), "js"
// (componentize-js), "wits" (components, one path apiece in "inputs"
// instead of "input" -> their WIT texts in the same order, written to
// output as one JSON array of strings; the first that cannot be read fails
// the request, its error naming it by index from 0 when there are several).
// On success the driver exits 0 having written `output`. On failure it prints
// exactly one line starting with ERROR_PREFIX to stderr and exits 1: the Go
// side shows that line to humans, so it must carry the underlying cause
// (wasm-tools' message, the WAT line, the JS syntax error) and no stack trace.

import { readFile, writeFile, mkdir, rename } from 'node:fs/promises';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';

// V8 compiles a WebAssembly module twice by default: a quick baseline
// (Liftoff) for every function, then an optimised tier (TurboFan) in
// background threads for the functions that run often. wasm-tools is
// megabytes of code that a WAT or Go tool's build runs for milliseconds:
// the second tier cost more CPU than it saved (the driver's CPU for a WAT
// build ~1.1 against ~0.5 seconds, internal/toolbuild's BenchmarkBuildWAT;
// a Go tool's ~1.2 against ~0.75). A JS build, whose splicer runs for
// seconds, costs the same either way (~11-15 s). Set here rather than on
// the command line so that a node without the flag warns instead of
// refusing to start; every wasm module is imported below, after this line.
setFlagsFromString('--liftoff-only');

const ERROR_PREFIX = 'maiden-toolbuild-error: ';

// The three exports every tool must provide (world `tool` in maiden-tool.wit);
// 0.2.0's output-schema is optional in JS (see OUTPUT_SCHEMA_ENTRY).
const TOOL_EXPORTS = ['describe', 'schema', 'execute'];

// The exports of a middleware (world `middleware` in maiden-middleware.wit).
// A module that exports handle and not execute is built as one.
const MIDDLEWARE_EXPORTS = ['describe', 'handle'];

class BuildError extends Error {}

function fail(msg) {
  throw new BuildError(msg);
}

// oneLine flattens anyhow-style multi-line errors ("x\n\nCaused by:\n 0: y")
// into "x: y" so the Go side can show a single line.
function oneLine(msg) {
  return String(msg)
    // Debug-printed byte arrays span lines; keep each on one line.
    .replace(/\[[^\]]*\]/g, (list) => list.replace(/\s+/g, ' '))
    .split('\n')
    .map((l) => l.trim().replace(/^\$/, '').replace(/^\d+: /, ''))
    .filter((l) => l !== '' && l !== 'Caused by:' && !/^at .*:\d+:\d+\)?$/.test(l))
    .join(': ')
    .replace(/:\s*:/g, ':')
    .replace(/\s+/g, ' ');
}

// watError turns the wast crate's Debug-formatted parse error into
// "WAT line L, column C: message (near `snippet`)". The crate's line/col are
// 0-based; editors are 1-based.
function watError(raw) {
  const s = String(raw);
  const pos = /line: (\d+), col: (\d+)/.exec(s);
  if (!pos) return oneLine(s);
  const kind = /kind: (?:Custom\()?"((?:[^"\\]|\\.)*)"/.exec(s);
  const snippet = /snippet: "((?:[^"\\]|\\.)*)"/.exec(s);
  let msg = `WAT line ${Number(pos[1]) + 1}, column ${Number(pos[2]) + 1}: `;
  msg += kind ? rustString(kind[1]) : 'syntax error';
  if (snippet) msg += ` (near \`${rustString(snippet[1]).trim()}\`)`;
  return msg;
}

// rustString reads the body of a Rust Debug-formatted string: \u{1b}, \n,
// \t, \r, \0, \\, \" and \'. Read as JSON, a snippet holding a control
// character (\u{1b}) threw "Bad Unicode escape" and the syntax error was
// lost; the characters it gives back are escaped where maiden shows them.
function rustString(s) {
  const simple = { n: '\n', t: '\t', r: '\r', 0: '\0', '\\': '\\', '"': '"', "'": "'" };
  return s.replace(/\\(?:u\{([0-9a-fA-F]{1,6})\}|(.))/g, (_, hex, c) => {
    if (hex !== undefined) {
      const cp = parseInt(hex, 16);
      return cp <= 0x10ffff ? String.fromCodePoint(cp) : '\uFFFD';
    }
    return simple[c] ?? c;
  });
}

async function wasmTools() {
  return import('@bytecodealliance/jco-transpile/wasm-tools');
}

async function reactorAdapter() {
  const { preview1AdapterReactorPath } = await import('@bytecodealliance/jco');
  return readFile(preview1AdapterReactorPath());
}

// importsWasip1 reports whether a core module imports anything from
// wasi_snapshot_preview1, in which case it needs the reactor adapter.
function importsWasip1(core) {
  let mod;
  try {
    mod = new WebAssembly.Module(core);
  } catch {
    // Let wasm-tools produce the real validation error later.
    return false;
  }
  return WebAssembly.Module.imports(mod).some((i) => i.module === 'wasi_snapshot_preview1');
}

async function coreToComponent(core, req, wasip1) {
  const { componentEmbed, componentNew } = await wasmTools();
  const witSource = await readFile(req.witPath, 'utf8');
  let embedded;
  try {
    embedded = await componentEmbed({ binary: core, witSource, world: req.world });
  } catch (e) {
    fail(`embedding WIT world ${req.world}: ${oneLine(e.message ?? e)}`);
  }
  const adapters = wasip1 ? [['wasi_snapshot_preview1', await reactorAdapter()]] : [];
  try {
    return await componentNew(embedded, adapters);
  } catch (e) {
    fail(`creating component: ${oneLine(e.message ?? e)}`);
  }
}

async function buildWAT(req) {
  const { parse } = await wasmTools();
  let core;
  try {
    core = await parse(await readFile(req.input, 'utf8'));
  } catch (e) {
    fail(watError(e.message ?? e));
  }
  return coreToComponent(core, req, importsWasip1(core));
}

async function buildCore(req) {
  return coreToComponent(await readFile(req.input), req, !!req.wasip1);
}

// jsLocation converts an oxc byte offset into "line L, column C".
function jsLocation(code, offset) {
  const before = Buffer.from(code).subarray(0, offset).toString();
  const lines = before.split('\n');
  return `line ${lines.length}, column ${lines[lines.length - 1].length + 1}`;
}

// checkJS parses the tool's source before the 10+ second componentize run, so
// that syntax errors and missing exports come back fast and with a position
// (componentize-js only says "encountered [N] errors").
async function checkJS(code) {
  const oxc = (await import('oxc-parser')).default;
  const res = await oxc.parseAsync('tool.js', code, { sourceType: 'module' });
  if (res.errors.length > 0) {
    const e = res.errors[0];
    const at = e.labels?.length ? ` at ${jsLocation(code, e.labels[0].start)}` : '';
    fail(`JS syntax error${at}: ${e.message}`);
  }
  const names = new Set();
  for (const exp of res.module.staticExports) {
    for (const entry of exp.entries) {
      if (entry.exportName?.name) names.add(entry.exportName.name);
    }
  }
  if (names.has('handle') && !names.has('execute')) {
    const missing = MIDDLEWARE_EXPORTS.filter((n) => !names.has(n));
    if (missing.length > 0) {
      fail(`JS source does not export ${missing.join(', ')} (a middleware must export describe() and handle(event))`);
    }
    return 'middleware';
  }
  const missing = TOOL_EXPORTS.filter((n) => !names.has(n));
  if (missing.length > 0) {
    fail(`JS source does not export ${missing.join(', ')} (a tool must export describe(), schema() and execute(input); a middleware describe() and handle(event))`);
  }
  return 'tool';
}

// ENTRY wraps the tool's module. componentize-js turns a thrown value into
// err(...) only when it is a string: a thrown Error object makes the
// generated bindings abort, which the host sees as a trap. Tool authors write
// `throw new Error(...)`, so the entry converts it to its message. Non-string
// results are JSON-encoded for the same reason (anything else aborts).
const ENTRY_HELPERS = `import * as tool from './tool.js';

function isError(e) {
  // Cross-realm safe: instanceof fails for errors made by the bindings.
  return e instanceof Error || Object.prototype.toString.call(e) === '[object Error]';
}

function toErr(e) {
  if (typeof e === 'string') throw e;
  if (isError(e)) throw e.name && e.name !== 'Error' ? e.name + ': ' + String(e.message) : String(e.message);
  let s;
  try { s = JSON.stringify(e); } catch { s = undefined; }
  throw s ?? String(e);
}

function toOk(v) {
  if (typeof v === 'string') return v;
  return JSON.stringify(v) ?? '';
}
`;

const ENTRY = ENTRY_HELPERS + `
export function describe() { return toOk(tool.describe()); }
export function schema() { return toOk(tool.schema()); }
export function execute(input) {
  let r;
  try {
    r = tool.execute(input);
  } catch (e) {
    toErr(e);
  }
  if (r !== null && typeof r === 'object' && typeof r.then === 'function') {
    return r.then(toOk, toErr);
  }
  return toOk(r);
}
`;

// OUTPUT_SCHEMA_ENTRY is added for maiden:tool@0.2.0, whose world exports
// output-schema: a tool that does not export outputSchema() declares none.
const OUTPUT_SCHEMA_ENTRY = `
export function outputSchema() {
  return typeof tool.outputSchema === 'function' ? toOk(tool.outputSchema()) : '';
}
`;

// MIDDLEWARE_ENTRY wraps a middleware's module the way ENTRY wraps a tool's:
// a thrown value becomes err(message), a non-string verdict is JSON-encoded.
const MIDDLEWARE_ENTRY = ENTRY_HELPERS + `
export function describe() { return toOk(tool.describe()); }
export function handle(event) {
  let r;
  try {
    r = tool.handle(event);
  } catch (e) {
    toErr(e);
  }
  if (r !== null && typeof r === 'object' && typeof r.then === 'function') {
    return r.then(toOk, toErr);
  }
  return toOk(r);
}
`;

// INIT_DATA_MIB caps the memory of wizer, which runs a JavaScript tool's
// top-level code while componentize-js builds it. Like the snapshot run of
// a Go tool's init (preinit.go, 1 GiB), a top level that allocates without
// bound then fails at the cap, where it took wasm32's 4 GiB (3.8 GB
// resident and a minute of CPU, measured, before the engine said out of
// memory). The cap is wizer's RLIMIT_DATA, which counts the guest's linear
// memory as it grows (committed pages, not the reservation); a JS tool's
// ordinary build peaks near 110 MiB there. It is set on wizer alone: node
// itself, whose wasm memories grow by copying, needs more.
const INIT_DATA_MIB = 1024;

// cappedWizer is the path of a script that runs wizer with its data capped
// (INIT_DATA_MIB), written beside this driver (where the toolchain's own
// executables are: a temp directory may not allow executing), atomically.
async function cappedWizer() {
  const { default: wizer } = await import('@bytecodealliance/wizer');
  const quoted = `'${String(wizer).replaceAll("'", "'\\''")}'`;
  const path = join(dirname(fileURLToPath(import.meta.url)), 'wizer-capped');
  const tmp = `${path}.${process.pid}`;
  await writeFile(tmp, `#!/bin/sh\nulimit -d ${INIT_DATA_MIB * 1024} || exit 126\nexec ${quoted} "$@"\n`, { mode: 0o755 });
  await rename(tmp, path);
  return path;
}

async function buildJS(req) {
  const code = await readFile(req.input, 'utf8');
  const kind = await checkJS(code);
  const srcDir = join(req.workDir, 'src');
  await mkdir(srcDir, { recursive: true });
  await writeFile(join(srcDir, 'tool.js'), code);
  let entry = ENTRY + (req.outputSchema ? OUTPUT_SCHEMA_ENTRY : '');
  let witPath = req.witPath;
  let world = req.world;
  if (kind === 'middleware') {
    if (!req.middlewareWit) fail('this maiden cannot build middleware from JS (no middleware WIT in the request)');
    entry = MIDDLEWARE_ENTRY;
    witPath = join(req.workDir, 'middleware.wit');
    await writeFile(witPath, req.middlewareWit);
    world = req.middlewareWorld;
  }
  await writeFile(join(srcDir, 'maiden-entry.js'), entry);
  const { componentize } = await import('@bytecodealliance/componentize-js');
  try {
    const { component } = await componentize({
      sourcePath: join(srcDir, 'maiden-entry.js'),
      witPath,
      worldName: world,
      // Without this the engine imports wasi:http for fetch(), which maiden
      // refuses: the only network road is the host's http-fetch.
      disableFeatures: ['http', 'fetch-event'],
      wizerBin: await cappedWizer(),
    });
    return component;
  } catch (e) {
    // The wizer path in the message is a toolchain detail, not the user's.
    let msg = oneLine(String(e.message ?? e).replace(/ \(wizer \([^)]*\)\)/, ''));
    if (/out of memory|memory allocation|SIGABRT/.test(msg)) {
      msg += ` (maiden build runs a JavaScript tool's top-level code with its memory capped at ${INIT_DATA_MIB} MiB: allocate in execute instead, under the tool's memory_mb)`;
    }
    fail(msg);
  }
}

// witsOf prints the WIT world of each component in req.inputs, in one
// process for all of them (a node start costs more than printing a world).
async function witsOf(req) {
  const inputs = req.inputs;
  if (!Array.isArray(inputs) || inputs.length === 0 || !inputs.every((p) => typeof p === 'string')) {
    fail('"wits" request needs "inputs", a non-empty array of component paths');
  }
  const { componentWit } = await wasmTools();
  const out = [];
  for (const [i, input] of inputs.entries()) {
    const which = inputs.length > 1 ? `component ${i}: ` : '';
    try {
      out.push(await componentWit(await readFile(input)));
    } catch (e) {
      fail(`${which}reading component WIT: ${oneLine(e.message ?? e)}`);
    }
  }
  return JSON.stringify(out);
}

async function main() {
  let raw = '';
  for await (const chunk of process.stdin) raw += chunk;
  const req = JSON.parse(raw);
  let out;
  switch (req.kind) {
    case 'wat':
      out = await buildWAT(req);
      break;
    case 'core':
      out = await buildCore(req);
      break;
    case 'js':
      out = await buildJS(req);
      break;
    case 'wits':
      out = await witsOf(req);
      break;
    default:
      fail(`unknown request kind ${JSON.stringify(req.kind)}`);
  }
  await mkdir(dirname(req.output), { recursive: true });
  await writeFile(req.output, out);
}

try {
  await main();
} catch (e) {
  const msg = e instanceof BuildError ? e.message : `internal error: ${oneLine(e?.stack ?? e)}`;
  process.stderr.write(ERROR_PREFIX + msg.replace(/\n/g, ' ') + '\n');
  process.exitCode = 1;
}
