// fetchseq.js: fetches several URLs through the host's http-fetch, one
// after another in one call, and returns one line per request: "<status>
// <body>", or the fetch-error as "denied: <msg>", "timeout", "too-large" or
// "failed: <msg>". A refused request does not end the call.
//
// Input: {"urls": [url, ...], "credential"?: NAME} (the credential, if
// given, is attached to every request).
// Host should report: every answer in order, so a test can see what one
// call was allowed from its first request to its last (the call's wallet is
// pinned at its start).

import { httpFetch } from "maiden:tool/host@0.1.0";

export function describe() {
  return "Fetches URLs one after another and reports each answer. A fixture for maiden's own tests.";
}

export function schema() {
  return JSON.stringify({
    type: "object",
    properties: {
      urls: { type: "array", items: { type: "string" } },
      credential: { type: "string" },
    },
    required: ["urls"],
    additionalProperties: false,
  });
}

export function execute(input) {
  const obj = JSON.parse(input);
  const lines = [];
  for (const url of obj.urls) {
    const req = { method: "", url, headers: [], body: new Uint8Array(), credential: obj.credential };
    try {
      const resp = httpFetch(req);
      lines.push(`${resp.status} ${new TextDecoder().decode(resp.body)}`);
    } catch (e) {
      const fe = e.payload;
      if (!fe) throw e;
      lines.push(fe.val === undefined ? fe.tag : `${fe.tag}: ${fe.val}`);
    }
  }
  return lines.join("\n");
}
