// jq-lite: a maiden tool in JavaScript that selects part of a JSON document
// with a small path language, a pure transform with no host calls.
//
//   {"data": {"a": {"b": [{"c": 42}]}}, "path": "a.b[0].c"}  →  42
//
// Paths: `.name` or `name` (a key), `["any key"]`, `[0]` (an index; negative
// counts from the end), `.` or "" (the whole document). Like jq, a missing
// key or index gives null; indexing a string, number, boolean or null with a
// key, or an object with an index, is an error.

export function describe() {
  return "Selects a value from a JSON document by path, like a tiny jq: " +
    'path "a.b[0].c" on {"a":{"b":[{"c":42}]}} gives 42. Missing keys give null.';
}

export function schema() {
  return JSON.stringify({
    type: "object",
    properties: {
      data: { description: "the JSON document to select from" },
      path: { type: "string", description: 'path such as "a.b[0].c", "items[-1]" or "[\\"odd key\\"]"; "." is the whole document' },
    },
    required: ["data", "path"],
  });
}

export function execute(input) {
  const { data, path } = JSON.parse(input);
  if (typeof path !== "string") throw new Error("path must be a string");
  let v = data;
  for (const step of parsePath(path)) {
    v = select(v, step, path);
  }
  return JSON.stringify(v === undefined ? null : v);
}

function typeName(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

function select(v, step, path) {
  if (v === null || v === undefined) return null;
  if (typeof step === "number") {
    if (!Array.isArray(v)) throw new Error(`cannot index ${typeName(v)} with [${step}] (in path ${path})`);
    const i = step < 0 ? v.length + step : step;
    return i >= 0 && i < v.length ? v[i] : null;
  }
  if (typeName(v) !== "object") throw new Error(`cannot index ${typeName(v)} with "${step}" (in path ${path})`);
  return Object.prototype.hasOwnProperty.call(v, step) ? v[step] : null;
}

// parsePath turns "a.b[0][\"x y\"]" into ["a", "b", 0, "x y"].
function parsePath(path) {
  const steps = [];
  let i = 0;
  const fail = (why) => {
    throw new Error(`bad path ${JSON.stringify(path)} at character ${i + 1}: ${why}`);
  };
  if (path === "" || path === ".") return steps;
  while (i < path.length) {
    const c = path[i];
    if (c === "[") {
      const end = path.indexOf("]", i);
      if (end < 0) fail("missing ]");
      const inner = path.slice(i + 1, end).trim();
      if (inner.startsWith('"')) {
        // A quoted key; JSON string syntax (a ] inside needs no escape).
        let j = i + 1 + path.slice(i + 1).indexOf('"') + 1;
        while (j < path.length && path[j] !== '"') j += path[j] === "\\" ? 2 : 1;
        if (j >= path.length) fail("unterminated string");
        let key;
        try {
          key = JSON.parse(path.slice(path.indexOf('"', i), j + 1));
        } catch {
          fail("bad string");
        }
        const close = path.indexOf("]", j);
        if (close < 0 || path.slice(j + 1, close).trim() !== "") fail("expected ] after the key");
        steps.push(key);
        i = close + 1;
      } else if (/^-?\d+$/.test(inner)) {
        steps.push(Number(inner));
        i = end + 1;
      } else {
        fail("expected an index or a quoted key inside [ ]");
      }
    } else if (c === ".") {
      i++;
      if (i < path.length && path[i] === "[") continue;
      if (i >= path.length) fail("expected a key after .");
      i = readName(path, i, steps, fail);
    } else if (steps.length === 0) {
      i = readName(path, i, steps, fail);
    } else {
      fail(`unexpected ${JSON.stringify(c)}`);
    }
  }
  return steps;
}

function readName(path, i, steps, fail) {
  const m = /^[A-Za-z_$][\w$-]*/.exec(path.slice(i));
  if (!m) fail("expected a key (letters, digits, _ or -), or [\"quoted key\"]");
  steps.push(m[0]);
  return i + m[0].length;
}
