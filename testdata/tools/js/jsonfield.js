// jsonfield.js: a benchmark fixture (bench/compare, workload "json"), the JS
// twin of testdata/tools/jsonfield.wat. execute parses its input with
// JSON.parse and returns the top-level "target" member, which must be a
// string, as JSON text ("yes" with its quotes).
// Host should report: success and that text; err(...) if there is none.

export function describe() {
  return 'Returns the top-level "target" string of a JSON object, as JSON text. A benchmark fixture.';
}

export function schema() {
  return JSON.stringify({
    type: "object",
    properties: { target: { type: "string" } },
    required: ["target"],
  });
}

export function execute(input) {
  const target = JSON.parse(input).target;
  if (typeof target !== "string") {
    throw 'no top-level "target" string in the input';
  }
  return JSON.stringify(target);
}
