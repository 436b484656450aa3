// probe.js: reports which JavaScript features the engine that
// componentize-js bundles (StarlingMonkey, SpiderMonkey inside) offers a
// tool. docs/writing-tools.md lists the missing ones; jsengine_test.go
// checks the list against what this returns, so the documentation cannot
// drift from the engine.
// Host should report: success, a JSON object of feature -> true/false.

const probes = {
  "Intl": () => typeof Intl !== "undefined",
  "Intl.DateTimeFormat": () => typeof Intl !== "undefined" && typeof Intl.DateTimeFormat === "function",
  "String.prototype.normalize": () => typeof "".normalize === "function" && "e\u0301".normalize("NFC") === "\u00e9",
  "String.prototype.localeCompare": () => typeof "".localeCompare === "function" && "a".localeCompare("b") < 0,
  "RegExp \\p{...} (Unicode property escapes)": () => new RegExp("\\p{L}", "u").test("é"),
  "RegExp named groups": () => new RegExp("(?<y>\\d+)").exec("42").groups.y === "42",
  "RegExp lookbehind": () => new RegExp("(?<=a)b").test("ab"),
  "TextEncoder": () => new TextEncoder().encode("é").length === 2,
  "TextDecoder": () => new TextDecoder().decode(new Uint8Array([0xc3, 0xa9])) === "é",
  "URL": () => new URL("https://a.example/b?c=d").searchParams.get("c") === "d",
  "atob/btoa": () => atob(btoa("hi")) === "hi",
  "structuredClone": () => structuredClone({ a: [1] }).a[0] === 1,
  "crypto.getRandomValues": () => crypto.getRandomValues(new Uint8Array(4)).length === 4,
  "crypto.subtle": () => typeof crypto.subtle === "object" && crypto.subtle !== null,
  "setTimeout": () => typeof setTimeout === "function",
  "fetch": () => typeof fetch === "function",
  "BigInt": () => BigInt(2) ** BigInt(64) === 18446744073709551616n,
  "WeakRef": () => typeof WeakRef === "function",
  "Array.prototype.toSorted": () => [2, 1].toSorted()[0] === 1,
  "Object.groupBy": () => typeof Object.groupBy === "function",
  "Promise.withResolvers": () => typeof Promise.withResolvers === "function",
  "eval": () => eval("1 + 1") === 2,
  "WebAssembly": () => typeof WebAssembly === "object",
  "Date.prototype.toLocaleDateString with a locale": () => typeof new Date(0).toLocaleDateString("de-DE") === "string",
};

export function describe() {
  return "Reports which JavaScript features the bundled engine offers.";
}

export function schema() {
  return JSON.stringify({ type: "object" });
}

export function execute(input) {
  const out = {};
  for (const [name, probe] of Object.entries(probes)) {
    try {
      out[name] = probe() === true;
    } catch (e) {
      out[name] = false;
    }
  }
  return JSON.stringify(out);
}
