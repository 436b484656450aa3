// Package egress is the gate behind a tool's http-fetch: the only road from a
// tool to the network. [Rules] say what one call may reach; a [Policy] is
// Rules compiled (CA files parsed, connection pools kept); a [Gate] checks
// each [Request] against a policy, sends the ones it allows, caps and
// redacts the [Response], and writes one audit event per request.
//
//	rules := egress.Rules{Hosts: []string{"api.example.com"}, Secrets: []string{"API_TOKEN"}}
//	p, err := egress.NewPolicy("weather", rules.Intersect(cardRules))
//	g := egress.New(&egress.Options{Audit: logger})
//	resp, ferr := g.Fetch(ctx, p, egress.Request{URL: "https://api.example.com/v1", Credential: "API_TOKEN", HasCredential: true})
//	redact := g.Redactor(p) // for the tool's logs, output and errors
//
// The package knows no configuration format and no runner: it imports
// neither config nor the sandbox. The root package builds a tool's Rules
// from agent.toml and adapts the sandbox's http-fetch values to Request and
// Response (egress.go). [Rules.Intersect] only narrows (hosts, ports,
// ranges, secrets and CA files intersected, the smaller body cap), so the
// rules of a call can be the tool's policy ∩ what the caller may do.
//
// # The seed's promise, in order
//
// Every check below happens before anything is sent, and the first four
// before any DNS lookup:
//
//  1. The URL's host must be on the tool's http_allow: an exact host, or a
//     single-label wildcard "*.example.com" (a.example.com, not example.com,
//     not a.b.example.com). Rule "allowlist".
//  2. https is required; plain http only to loopback. Rule "https-required".
//  3. A credential NAME must be in the tool's secrets, even if
//     MAIDEN_SECRET_<NAME> exists in the environment. Rule
//     "credential-undeclared".
//     Then the request must be one every [SecretDestination] of that
//     secret allows (host, method, path prefix): rule
//     "credential-destination", naming the binding's Source.
//  4. Its value comes from MAIDEN_SECRET_<NAME> and is attached as
//     "Authorization: Bearer <value>". Rules "credential-missing",
//     "credential-invalid".
//  5. Redirects are never followed: the gate calls http.Transport.RoundTrip,
//     which has no redirect logic, so a 3xx is an ordinary response.
//
// Between steps 3 and 4 (after the policy's checks of the request, those
// below included; before the credential's value is checked and attached,
// and before any DNS lookup), a request's [Authorizer]
// (Request.Authorize), if set, decides it on the caller's
// behalf from the normalised host, the port and the credential name. The
// gate knows nothing of who the caller is or why: the root package fills
// the hook from the calling agent's permission cards (network:connect,
// secret:use), so authority can only narrow what the policy allows. Its
// refusal is kind denied with the rule the hook names ("authority" if it
// names none), audited like any other.
//
// The request spends from the call's deadline (ctx): DNS, connect, TLS,
// headers and body all stop at it and the tool gets "timeout". The decoded
// response body is capped (2 MiB by default); one byte more is "too-large".
// The cap counts the body the tool gets, after redaction (the server's
// bytes are read up to 64 KiB further when a secret could be redacted), so
// where an echo turns too-large says nothing of a secret's length.
//
// # Beyond the seed (maiden's own promises)
//
// Parse, normalise, check, then build the outgoing request only from the
// normalised parts (scheme, host, port, path, query; the fragment is
// dropped). The host that was checked is the host whose addresses are
// dialled, the TLS server name and the Host header.
//
//   - "url": the URL must be an absolute http(s) URL that the standard
//     library parses unambiguously: at most 8 KiB, no opaque form, a host,
//     a canonical decimal port, well-formed %XX escapes in path and query
//     (other bytes that may not appear raw there are escaped; existing
//     escapes are kept, so "%2F" stays "%2F").
//   - "userinfo": "user@host" is refused, so https://api.example.com@evil/
//     cannot pass for api.example.com.
//   - "host-syntax": after lowercasing and removing one trailing dot the host
//     must be plain ASCII letters, digits, '-' and '.' with no empty labels
//     ([NormalizeHostPattern] decides, the same canonical form agent.toml's
//     entries get), or an IP literal in canonical form. Non-ASCII hosts are refused because Go maps them through IDNA,
//     so a look-alike could dial an allowed name; percent-escaped hosts and
//     numeric spellings of IPv4 ("2130706433", "0x7f.1", "127.1") are
//     refused because resolvers read them as addresses.
//   - "ip-literal": an IP literal is allowed only if that exact address is
//     listed in http_allow; its address must still pass the address rules.
//   - "port": only 443, or a port listed in http_ports. Plain http to
//     loopback uses port 80 unless it says otherwise, and that port must be
//     listed too: maiden never infers a port grant from the scheme.
//   - "method": the method must be an HTTP token of at most 32 bytes ("" means
//     GET); CONNECT is refused because the transport turns its response into
//     a raw tunnel.
//   - "header-invalid": header names must be tokens and values must not
//     contain CR, LF, NUL or other control characters (tab is allowed); at
//     most 64 headers and 64 KiB in all.
//   - "header-refused": a tool may not set Authorization,
//     Proxy-Authorization, Cookie, Host, Connection, Upgrade, Keep-Alive,
//     TE, Trailer, Transfer-Encoding, Content-Length, HTTP2-Settings,
//     Accept-Encoding, Proxy or any Proxy-* header, nor, on a request that
//     does not attach it, the signature header of one of its kind hmac
//     credentials (a signature it learnt would replay the signed request).
//     Names are compared after canonicalisation and after mapping '_' to
//     '-' (CGI servers treat the two alike, which is how "Proxy" became
//     httpoxy).
//   - Address rules: the allowed name is resolved once per connection and
//     every answer is classified by netguard against the IANA
//     special-purpose registries; the connection is refused if ANY answer is
//     special and not inside the tool's http_allow_cidrs. The rule is
//     netguard's: "loopback", "private-range", "link-local", "metadata",
//     "cgnat", "unique-local", "multicast", "documentation", ... A mixed
//     answer is refused rather than filtered, because a name that resolves
//     partly inside the operator's network is a misconfiguration or an
//     attack, and filtering would hide both. Only the checked addresses are
//     dialled (in order, until one connects): DNS rebinding between the
//     check and the connection cannot happen because there is no second
//     lookup. Plain http additionally requires every answer to be loopback
//     ("https-required"), and loopback itself needs an allowance such as
//     127.0.0.0/8 in http_allow_cidrs.
//   - The environment's proxy settings (HTTPS_PROXY and friends) are never
//     used.
//   - Redaction: the values of the tool's secrets, and their common
//     encodings (base64 std and URL, padded and raw, at each of the three
//     byte alignments; hex; percent-escaped, the reserved bytes or every
//     byte; JSON-escaped), are replaced by "[REDACTED:NAME]" in response
//     headers and body before the tool sees them. Matching ignores ASCII
//     case, so a server that echoes a value upper- or lower-cased (or its
//     hex or escapes in either case) is caught; a value with non-ASCII
//     letters is also searched in its Unicode upper and lower case. A line
//     break inside base64 text (LF or CRLF, raw or as the \n and \r\n of a
//     JSON string, after at least 16 base64 characters and before one: MIME
//     base64 as openssl base64 or Python's base64.encodebytes write it,
//     every 64 or 76 characters) is searched as if it were not there, and
//     a match replaces the break with the rest. Text holding '&' or '\' is also searched with one
//     level of HTML character references ("&#47;", "&#x2F;", "&sol;",
//     "&#43;", "&amp;") and backslash escapes ("\u002f", "\u002B", any
//     character as \uXXXX with surrogate pairs, "\x3c", "\/", "\"")
//     decoded, in any mix, because which characters an encoder escapes is
//     its own choice (html/template, encoding/json, JavaScript); a match
//     there replaces the escaped bytes it came from. The whole capped body
//     is redacted at once, so a value split across network reads is still
//     found. [Gate.Redactor] does the same for the tool's logs, output and
//     errors. Overlapping matches are merged, so no fragment of a match
//     survives.
//   - Lengths: the headers the tool gets describe the body it gets. A
//     server's Content-Length counts the secret's bytes (98 for "got " and
//     a 94-byte secret, which the tool sees as "got [REDACTED:NAME]"), so
//     Content-Length is replaced by the length of the redacted body. When
//     redaction changed the body, the headers computed from the server's
//     bytes are dropped: Content-Range (its complete length), ETag (some
//     servers write the length into it, W/"62-..."), Content-MD5, Digest,
//     Content-Digest and Repr-Digest (a digest lets the tool test guesses
//     of the secret). A response without a body (HEAD, 204, 304) describes
//     one the gate never saw, which may hold a secret, so it loses all of
//     these and its Content-Length. The audit event's byte count is the
//     server's.
//   - Server text: every string that came from the server passes the
//     redactor before it reaches the tool, a fetch error or the audit event:
//     header names and values, the body, and any message that can quote the
//     server (an unasked-for Content-Encoding, a malformed status or header
//     line, a certificate name in a TLS error). It is redacted before it is
//     shortened for a message, so a cut cannot split a secret out of reach.
//     Messages are valid UTF-8 whatever bytes the server sent. Denials are
//     the gate's words about the tool's request, made before anything is
//     sent, and are not redacted.
//   - Header encoding ("header-encoding"): the tool receives header values
//     as strings, so a response whose header value is not valid UTF-8
//     (legal obs-text, such as a Latin-1 file name in Content-Disposition)
//     is refused as a fetch error naming the header and the offset of the
//     first bad byte. Any re-encoding (Latin-1 to UTF-8, escapes) would hand
//     the tool a value the server did not send, indistinguishable from one
//     it did; refusing is unambiguous. The check runs after redaction.
//   - Final answers only ("upgrade"): a 101 Switching Protocols is refused
//     as a fetch error at once and its connection closed, never handed to
//     the tool (net/http returns a 101's raw connection as the body and
//     stops watching the request's context, so a server could otherwise
//     hold the call past its deadline). Interim 1xx responses are skipped
//     by the transport within the header size limit. Every read of a
//     response body is also closed at the call's deadline, whatever the
//     server sends.
//   - Content coding: the gate asks for gzip itself and decodes it as the
//     body is read, when every Content-Encoding line together names gzip
//     once (the standard library's decoding reads only the first line and
//     deletes the rest, so a body gzipped twice would reach the tool still
//     gzipped); the cap counts decoded bytes, so a gzip bomb stops at
//     cap+1 bytes of output and never inflates further.
//     A tool may not choose the coding (Accept-Encoding is refused), and a
//     non-empty body in any coding the gate did not ask for is refused
//     ("content-encoding"): redaction can only see bytes it can read.
//   - One structured audit event per request, allowed or refused: tool,
//     the caller (Request.Caller, "agent", when given), method, normalised host, port, path without query, credential name,
//     decision, rule, reason, status, bytes, address dialled, duration.
//     Never a secret value, never the query string.
//
// Outcomes that are not policy decisions have rules too, for the audit
// event: "allowed" (sent, response returned), "timeout", "too-large",
// "content-encoding", "header-encoding", "upgrade", "resolve" (DNS failed)
// and "failed".
//
// # What maiden does not promise
//
// An allowed host can still receive whatever the tool sends it, including
// the tool's input: the gate bounds reach and credential custody, not
// intent. A credential attached to a request is, by design, sent to that
// host. Redaction is a guard against an allowed server echoing a secret by
// accident (an error page or an echo endpoint repeating the Authorization
// header, a JSON or HTML page escaping it); it is not a defence against a
// server colluding with the tool. That server already holds the secret,
// which the operator's allowlist trusted it with, and can hand it back
// encoded in a way no redactor knows (two levels of escaping, encryption).
// Encoded forms shorter than four characters are not redacted (they would
// match ordinary text), so a secret of only a few bytes is reliably
// redacted only in raw form. Response trailers are not passed to the
// tool. Redaction sees one response at a time, so a request that carries
// a secret may not ask for byte ranges (Range, If-Range: rule
// range-with-secret), which could return the secret in pieces shorter than
// any form it matches.
//
// # Connections
//
// Each (Gate, Policy) pair has its own connection pool, so a connection
// dialled and checked for one tool's policy is never reused for another's.
// A reused connection goes to the address that was checked when it was
// dialled. The transport dials with a context detached from the request's
// cancellation (so the connection can serve a later request); the gate
// passes the call's deadline to its dialer as a context value, so a dial
// (DNS, connect, TLS handshake) still ends, and its connection is closed,
// at the deadline of the call that asked for it (or after 30 s, whichever
// is first). A connection's reads and writes are bounded by the deadline of
// the request using it: the transport watches that request's context, and
// the gate closes the body at the deadline itself for the one case the
// transport does not (a 101's hijacked connection, refused anyway).
// HTTP/1.1 only.
package egress
