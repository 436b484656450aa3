// A maiden tool in JavaScript: one ES module exporting describe(), schema(),
// execute(input) and optionally outputSchema(). `maiden build` turns it into
// a WebAssembly component with componentize-js; see README.md.
//
// Host functions: log(level, message) with level "debug" | "info" | "warn" |
// "error", and httpFetch(request), the only road to the network. The import
// needs the version suffix. A secret handle in the input (what an agent's
// {"$secret": "NAME"} becomes) is passed on as httpFetch's credential; to
// reveal its value instead, import everything from "maiden:tool/host@0.3.0",
// which adds reveal(handle) (see README.md).
import { log } from "maiden:tool/host@0.2.0";

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

// The JSON Schema of execute's result, shown to MCP clients. Optional:
// return "" (or leave it out) to declare none.
export function outputSchema() {
  return JSON.stringify({
    type: "object",
    properties: { reply: { type: "string" } },
    required: ["reply"],
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

// httpFetch bodies (request and response) are strings with one character per
// byte: character i is byte body.charCodeAt(i) (0..255). An ASCII body,
// such as most JSON, reads as is; these helpers convert the rest.

// bodyBytes returns the bytes a body stands for.
function bodyBytes(body) {
  const bytes = new Uint8Array(body.length);
  for (let i = 0; i < body.length; i++) bytes[i] = body.charCodeAt(i);
  return bytes;
}

// bodyText decodes a UTF-8 body into text: JSON.parse(bodyText(resp.body)).
function bodyText(body) {
  return new TextDecoder().decode(bodyBytes(body));
}

// bodyFrom makes a request body from text (sent as UTF-8) or bytes.
function bodyFrom(data) {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let body = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    body += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
  }
  return body;
}
