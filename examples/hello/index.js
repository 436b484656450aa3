// hello: the smallest useful maiden tool, in JavaScript.
//
// A tool exports describe(), schema() and execute(input). The host passes
// execute the call's input as JSON text; whatever execute returns is the
// tool's output, and whatever it throws is its error.
import { log } from "maiden:tool/host@0.2.0";

export function describe() {
  return "Greets someone by name. Use it to check that maiden runs tools.";
}

export function schema() {
  return JSON.stringify({
    type: "object",
    properties: {
      name: { type: "string", description: "who to greet" },
    },
    required: ["name"],
    additionalProperties: false,
  });
}

export function execute(input) {
  const { name } = JSON.parse(input);
  if (typeof name !== "string" || name.trim() === "") {
    throw new Error("name must be a non-empty string");
  }
  log("info", `greeting ${name}`);
  return JSON.stringify({ greeting: `Hello, ${name}!` });
}
