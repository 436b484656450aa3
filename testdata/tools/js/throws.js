// throws.js: execute throws an Error.
// Host should report: a tool error (kind tool) with the message
// "this tool always fails". maiden's build wraps execute so that a thrown
// Error becomes err(message); without the wrapper componentize-js aborts
// (a trap) on anything but a thrown string.

export function describe() {
  return "Always fails with a thrown Error.";
}

export function schema() {
  return JSON.stringify({ type: "object" });
}

export function execute(input) {
  throw new Error("this tool always fails");
}
