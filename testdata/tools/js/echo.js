// echo.js: the JS reference tool; execute returns its input unchanged.
// Host should report: success, output == input. Its imports are what every
// componentize-js tool imports (maiden:tool/host plus the WASI 0.2
// interfaces the JS engine needs), which is what the host must allow.

export function describe() {
  return "Echoes its input back unchanged. A fixture for maiden's own tests.";
}

export function schema() {
  return JSON.stringify({
    type: "object",
    properties: { message: { type: "string" } },
    required: ["message"],
  });
}

export function execute(input) {
  return input;
}
