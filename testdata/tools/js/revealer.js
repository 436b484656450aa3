// revealer.js: a maiden:tool@0.3.0 tool in JavaScript (it imports reveal
// from maiden:tool/host@0.3.0, so maiden build targets 0.3.0). Its input is
// a handle; it asks the host to reveal it, logs the answer and returns it.
// A refusal (reveal's err) is thrown by the binding as an error whose
// payload is the host's message; the tool returns it as its own error.
// Host should report: ok(value) when its reveal allows, else the tool error
// "refused: <message>"; a revealed value redacted wherever the call's
// redactor knows it.

import { log, reveal } from "maiden:tool/host@0.3.0";

export function describe() {
  return "Reveals the secret handle it is given and echoes the value.";
}

export function schema() {
  return JSON.stringify({ type: "string" });
}

export function execute(input) {
  let value;
  try {
    value = reveal(input);
  } catch (e) {
    throw new Error(`refused: ${e.payload ?? e}`);
  }
  log("info", value);
  return value;
}
