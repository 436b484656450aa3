// hello.js: greets {"name": ...}. Logs through the host's log import and
// writes a line to stdout with console.log.
// Host should report: success, output "Hello, <name>!", one info log line
// "greeting <name>"; the stdout line "hello.js: greeting <name>" goes wherever
// the host routes a tool's stdout (it is not part of the result).
// Bad JSON input makes JSON.parse throw: a tool error (kind tool). Input
// {"name": ..., "fail": "why"} throws new Error("why"): maiden's build turns
// a thrown Error into err(message), so the host reports kind tool with that
// message (without the wrapper componentize-js would trap).

import { log } from "maiden:tool/host@0.1.0";

export function describe() {
  return "Greets the person named in the input.";
}

export function schema() {
  return JSON.stringify({
    type: "object",
    properties: {
      name: { type: "string", description: "who to greet" },
      fail: { type: "string", description: "if set, fail with this message" },
    },
    required: ["name"],
  });
}

export function execute(input) {
  const { name, fail } = JSON.parse(input);
  if (fail !== undefined) {
    throw new Error(fail);
  }
  log("info", `greeting ${name}`);
  console.log(`hello.js: greeting ${name}`);
  return `Hello, ${name}!`;
}
