// bodyfetcher.js: a maiden:tool@0.2.0 JS tool. Input {"url", "body"?}: it
// POSTs body (text, sent as UTF-8) or GETs url, and returns the response as
// {status, len, bytes: the first 8 byte values, sum: all byte values added,
// text: the body decoded as UTF-8 when short}.
// Host should report: the bytes the server sent, each read with charCodeAt
// (bodies are strings with one character per byte in 0.2.0).
import { httpFetch } from "maiden:tool/host@0.2.0";

export function describe() {
  return "Fetches a URL and reports the body's bytes. A fixture for maiden's own tests.";
}

export function schema() {
  return JSON.stringify({ type: "object", properties: { url: { type: "string" }, body: { type: "string" } }, required: ["url"] });
}

export function outputSchema() {
  return JSON.stringify({ type: "object", properties: { status: { type: "integer" }, len: { type: "integer" } } });
}

// The helpers of maiden's JS template (templates/js/index.js).
function bodyBytes(body) {
  const bytes = new Uint8Array(body.length);
  for (let i = 0; i < body.length; i++) bytes[i] = body.charCodeAt(i);
  return bytes;
}

function bodyText(body) {
  return new TextDecoder().decode(bodyBytes(body));
}

function bodyFrom(data) {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let body = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    body += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
  }
  return body;
}

export function execute(input) {
  const { url, body } = JSON.parse(input);
  let resp;
  try {
    resp = httpFetch({
      method: body === undefined ? "GET" : "POST",
      url,
      headers: [],
      body: body === undefined ? "" : bodyFrom(body),
    });
  } catch (e) {
    throw new Error(`${e.payload?.tag}: ${e.payload?.val ?? ""}`);
  }
  const bytes = bodyBytes(resp.body);
  let sum = 0;
  for (const b of bytes) sum += b;
  return {
    status: resp.status,
    len: bytes.length,
    bytes: Array.from(bytes.subarray(0, 8)),
    sum,
    text: bytes.length <= 64 ? bodyText(resp.body) : "",
  };
}
