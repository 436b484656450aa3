// hello.js: greets {"name": ...}. Logs through the host's log import and
// writes a line to stdout with console.log.
// Host should report: success, output "Hello, <name>!", one info log line
// "greeting <name>"; the stdout line "hello.js: greeting <name>" goes wherever
// the host routes a tool's stdout (it is not part of the result).
// Bad JSON input makes JSON.parse throw: a tool error (kind tool).

import { log } from "maiden:tool/host@0.1.0";

export function describe() {
  return "Greets the person named in the input.";
}

export function schema() {
  return JSON.stringify({
    type: "object",
    properties: { name: { type: "string", description: "who to greet" } },
    required: ["name"],
  });
}

export function execute(input) {
  const { name } = JSON.parse(input);
  log("info", `greeting ${name}`);
  console.log(`hello.js: greeting ${name}`);
  return `Hello, ${name}!`;
}
