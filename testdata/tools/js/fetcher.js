// fetcher.js: fetches a URL through the host's http-fetch and returns
// "<status> <body>". A fetch-error becomes a tool error: "denied: <msg>",
// "timeout", "too-large" or "failed: <msg>" (the same strings as
// fetcher.wat).
//
// Input, either:
//   - a JSON object {"url": ..., "credential"?: NAME, "method"?: ...,
//     "headers"?: [[name, value], ...], "body"?: text} (what maiden's host
//     passes, since it accepts only JSON input); or
//   - raw text, as fetcher.wat takes it: the URL, or "CRED=NAME URL"
//     (sandbox-level tests pass raw text).
// Host should report: the response, or (since the tool then fails) the
// gate's refusal as kind denied.

import { httpFetch } from "maiden:tool/host@0.1.0";

export function describe() {
  return "Fetches a URL through the host and returns its status and body.";
}

export function schema() {
  return JSON.stringify({
    type: "object",
    properties: {
      url: { type: "string" },
      credential: { type: "string" },
      method: { type: "string" },
      headers: { type: "array", items: { type: "array", items: { type: "string" }, minItems: 2, maxItems: 2 } },
      body: { type: "string" },
    },
    required: ["url"],
    additionalProperties: false,
  });
}

function parse(input) {
  const req = { method: "", url: input, headers: [], body: new Uint8Array(), credential: undefined };
  let obj;
  try {
    obj = JSON.parse(input);
  } catch (_) {
    obj = undefined;
  }
  if (obj !== null && typeof obj === "object") {
    req.url = obj.url;
    req.credential = obj.credential;
    req.method = obj.method || "";
    req.headers = obj.headers || [];
    req.body = new TextEncoder().encode(obj.body || "");
    return req;
  }
  if (input.startsWith("CRED=")) {
    const space = input.indexOf(" ");
    if (space < 0) throw 'bad input: want "CRED=NAME URL" or a URL';
    req.credential = input.slice(5, space);
    req.url = input.slice(space + 1);
  }
  return req;
}

export function execute(input) {
  const req = parse(input);
  let resp;
  try {
    resp = httpFetch(req);
  } catch (e) {
    // The bindings throw result errors with the fetch-error in e.payload:
    // { tag: "denied" | "timeout" | "too-large" | "failed", val?: string }.
    const fe = e.payload;
    if (!fe) throw e;
    throw fe.val === undefined ? fe.tag : `${fe.tag}: ${fe.val}`;
  }
  return `${resp.status} ${new TextDecoder().decode(resp.body)}`;
}
