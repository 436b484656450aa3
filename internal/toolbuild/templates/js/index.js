// A maiden tool in JavaScript: one ES module exporting describe(), schema()
// and execute(input). `maiden build` turns it into a WebAssembly component
// with componentize-js; see README.md.
//
// Host functions: log(level, message) with level "debug" | "info" | "warn" |
// "error", and httpFetch(request), the only road to the network. The import
// needs the version suffix.
import { log } from "maiden:tool/host@0.1.0";

export function describe() {
  return "Echoes a message back, in upper case if asked to shout.";
}

// The JSON Schema agents are shown for the input.
export function schema() {
  return JSON.stringify({
    type: "object",
    properties: {
      message: { type: "string", description: "the text to echo back" },
      shout: { type: "boolean", description: "reply in upper case" },
    },
    required: ["message"],
  });
}

// input is the JSON text the agent sent. Return a string or any JSON value;
// throw to return an error the agent sees.
export function execute(input) {
  const { message, shout } = JSON.parse(input);
  if (typeof message !== "string" || message === "") {
    throw new Error("message is empty");
  }
  log("info", `echoing ${message.length} characters`);
  return { reply: shout ? message.toUpperCase() : message };
}
