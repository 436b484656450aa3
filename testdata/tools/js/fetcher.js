// fetcher.js: fetches the URL given as input through the host's http-fetch
// and returns "<status> <body>". A fetch-error becomes a tool error:
// "denied: <msg>", "timeout", "too-large" or "failed: <msg>" (the same
// strings as fetcher.wat). Input "CRED=NAME URL" asks the host to attach the
// secret named NAME.
// Host should report: today "denied: network not yet available" (kind tool).

import { httpFetch } from "maiden:tool/host@0.1.0";

export function describe() {
  return "Fetches the URL given as input and returns its status and body.";
}

export function schema() {
  return JSON.stringify({
    type: "string",
    description: "URL to fetch, optionally prefixed with CRED=NAME and a space",
  });
}

export function execute(input) {
  let url = input;
  let credential = undefined;
  if (input.startsWith("CRED=")) {
    const space = input.indexOf(" ");
    if (space < 0) throw 'bad input: want "CRED=NAME URL" or a URL';
    credential = input.slice(5, space);
    url = input.slice(space + 1);
  }
  let resp;
  try {
    resp = httpFetch({ method: "", url, headers: [], body: new Uint8Array(), credential });
  } catch (e) {
    // The bindings throw result errors with the fetch-error in e.payload:
    // { tag: "denied" | "timeout" | "too-large" | "failed", val?: string }.
    const fe = e.payload;
    if (!fe) throw e;
    throw fe.val === undefined ? fe.tag : `${fe.tag}: ${fe.val}`;
  }
  return `${resp.status} ${new TextDecoder().decode(resp.body)}`;
}
