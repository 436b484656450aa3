package egress

// The twenty-third pass (docs/security-tests.md, docs/mutation/egress-gate.tsv):
// tests that kill plants in the network gate no earlier test caught.

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/credential"
)

// RedactorIfAny is nil only when it would change nothing, and otherwise
// hides the values of the policy's secrets.
func TestMutation23RedactorIfAny(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := mustPolicy(t, toolFor(t))
	if r := e.gate.RedactorIfAny(p); r != nil {
		t.Errorf("RedactorIfAny with API_TOKEN declared but without a value = non-nil; want nil (nothing to hide)")
	}
	e2 := newEnv(t)
	e2.secrets["API_TOKEN"] = "s3cr3t-value-23"
	r := e2.gate.RedactorIfAny(p)
	if r == nil {
		t.Fatalf("RedactorIfAny with API_TOKEN set = nil; want a redactor hiding its value")
	}
	if got := r("echo s3cr3t-value-23"); strings.Contains(got, "s3cr3t") {
		t.Errorf("RedactorIfAny(p)(echo) = %q; want the value hidden", got)
	}
}

// A refresh token the gate was given in exchange (rotated) is as secret as
// the configured one: an answer of the policy that shows it hides it.
func TestMutation23RotatedRefreshTokenRedacted(t *testing.T) {
	w := newRefreshWorld(t)
	echo := startServer(t, func(rw http.ResponseWriter, r *http.Request) {
		ts := w.as.refreshTokens()
		rw.Write([]byte("rotated=" + ts[len(ts)-1]))
	}, false)
	r := toolFor(t, w.api.port, w.as.port, echo.port)
	r.Hosts = append(r.Hosts, "a.example.com")
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com", "a.example.com"}, Source: "[secrets.API_TOKEN]", Credential: w.refreshSpec("web", true)}}
	w.p = mustPolicy(t, r)
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	ts := w.as.refreshTokens()
	if len(ts) != 2 || ts[1] == w.e.secrets["API_TOKEN"] {
		t.Fatalf("refresh tokens %d; want the configured one and a rotated one", len(ts))
	}
	resp, ferr := w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, get(urlFor(echo, "api.example.com", "/")))
	if ferr != nil {
		t.Fatal(ferr)
	}
	if bytes.Contains(resp.Body, []byte(ts[1])) || !bytes.Contains(resp.Body, []byte("rotated=[REDACTED:API_TOKEN]")) {
		t.Errorf("an answer showing the rotated refresh token reached the tool as %.60q...; want rotated=[REDACTED:API_TOKEN]", resp.Body)
	}
}

// A denial's message reaches the tool as a component string: made valid
// UTF-8 whatever the text, here an Authorizer's reason, and the rule of a
// Refusal that names none is "authority".
func TestMutation23DenialMessageValidUTF8(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t))
	for _, refusal := range []error{errors.New("card \xff\xfe refused"), &Refusal{Reason: "card \xff\xfe refused"}} {
		req := get("https://api.example.com/v1")
		req.Authorize = func(string, int, string) error { return refusal }
		_, ferr := e.gate.Fetch(ctxTimeout(t, 5*time.Second), p, req)
		if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleAuthority {
			t.Fatalf("an Authorizer's refusal %T: %v; want denied, rule authority", refusal, ferr)
		}
		if !utf8.ValidString(ferr.Message) || !strings.Contains(ferr.Message, "card \uFFFD refused") {
			t.Errorf("the denial's message %q is not valid UTF-8; want the bytes replaced by \\uFFFD", ferr.Message)
		}
	}
}

// A secret a caller put in a header itself (web_fetch) is held to the same
// rules as an attached credential: no byte range with it, no method
// override past its binding's methods. Both refused before anything is
// sent.
func TestMutation23HeaderSecretRangeAndOverride(t *testing.T) {
	e := newEnv(t)
	e.secrets["API_TOKEN"] = testSecret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, false)
	e.res.set("api.example.com", "127.0.0.1")
	rules := toolFor(t, s.port)
	rules.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Methods: []string{"GET"}, Source: "[secrets.API_TOKEN] (agent.toml:3)"}}
	p := mustPolicy(t, rules)
	for _, tc := range []struct {
		name, header, rule, reason string
	}{
		{"Range", "bytes=0-3", RuleRangeWithSecret, `header "Range" may not be sent with a secret`},
		{"X-HTTP-Method-Override", "DELETE", RuleCredentialDestination, `header "X-Http-Method-Override" may not be sent with credential "API_TOKEN"`},
	} {
		req := Request{URL: urlFor(s, "api.example.com", "/"), HeaderSecrets: []string{"API_TOKEN"},
			Headers: []Header{{Name: "X-Api-Key", Value: testSecret}, {Name: tc.name, Value: tc.header}}}
		_, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, req)
		if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != tc.rule || !strings.Contains(ferr.Message, tc.reason) {
			t.Errorf("a header secret with %s: %v; want denied by rule %s: %s", tc.name, ferr, tc.rule, tc.reason)
		}
	}
	if n := s.reqs.Load(); n != 0 {
		t.Errorf("refused requests reached the server %d times", n)
	}
}

// A byte range is of the body as it is stored: the gate asks for no coding
// then (the offsets would be the encoded body's), and a server that codes
// it anyway is refused, not decoded.
func TestMutation23RangeNotGzipped(t *testing.T) {
	e := newEnv(t)
	gz := gzipped(t, []byte("part of the file"), 1)
	var mu sync.Mutex
	var asked []string
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Range", "bytes 0-15/100")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(gz)
	}, false)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t, s.port))
	req := get(urlFor(s, "api.example.com", "/file"))
	req.Headers = []Header{{Name: "Range", Value: "bytes=0-15"}}
	resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, req)
	if ferr == nil || ferr.Kind != FetchFailed || ferr.Rule != RuleContentEncoding {
		t.Errorf("a gzipped answer to a byte range: %v %+v; want failed by rule content-encoding (not asked for, not decoded)", ferr, resp)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != "" {
		t.Errorf("a byte range was sent with Accept-Encoding %q; want none", asked)
	}
}

// The read stops a little past the cap (more than redaction could save),
// and a body longer than that is too-large: never cut there and handed on
// as if complete (with a secret's echo cut in two, its head unredacted).
func TestMutation23OverReadLimitTooLarge(t *testing.T) {
	e := newEnv(t)
	secret := strings.Repeat("0123456789abcdefghij", 100)
	e.secrets["API_TOKEN"] = secret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // no Content-Length: the cap is found by reading
		w.Write([]byte(strings.Repeat(secret+" ", 40)))
	}, false)
	e.res.set("api.example.com", "127.0.0.1")
	rules := toolFor(t, s.port)
	rules.MaxResponseBytes = 4096
	p := mustPolicy(t, rules)
	resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, get(urlFor(s, "api.example.com", "/")))
	if ferr == nil || ferr.Kind != FetchTooLarge {
		n := 0
		if resp != nil {
			n = len(resp.Body)
		}
		t.Fatalf("a body of %d bytes, 40 echoes of a 2000-byte secret, with a 4096-byte cap: %v, %d bytes; want too-large", 40*2001, ferr, n)
	}
}

// Redaction that keeps the body's length (a secret as long as its marker)
// still changed it: the server's ETag and digests describe bytes the tool
// never gets, and go.
func TestMutation23SameLengthRedactionDropsDescriptions(t *testing.T) {
	e := newEnv(t)
	secret := "abcdefghij0123456789" // as long as "[REDACTED:API_TOKEN]"
	e.secrets["API_TOKEN"] = secret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"etag-of-the-secret"`)
		w.Header().Set("Digest", "sha-256=xyz")
		w.Write([]byte("token=" + secret))
	}, false)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t, s.port))
	resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, get(urlFor(s, "api.example.com", "/")))
	if ferr != nil {
		t.Fatal(ferr)
	}
	if string(resp.Body) != "token=[REDACTED:API_TOKEN]" {
		t.Fatalf("body %q", resp.Body)
	}
	if et, dg := header(resp.Headers, "ETag"), header(resp.Headers, "Digest"); et != "" || dg != "" {
		t.Errorf("a body redacted to its own length kept ETag %q, Digest %q; want both gone", et, dg)
	}
}

// A query's escapes have two hex digits (net/url checks the path's, not
// the query's): a '%' with one is refused, not sent for a server to guess.
func TestMutation23QueryEscapesChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t))
	for _, tc := range []struct{ url, rule, reason string }{
		{"https://api.example.com/a?q=%4z", RuleURL, `query contains a '%' that does not start a %XX escape`},
		{"https://api.example.com/a?q=%4", RuleURL, `query contains a '%' that does not start a %XX escape`},
	} {
		_, ferr := e.gate.Fetch(ctxTimeout(t, 5*time.Second), p, get(tc.url))
		if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != tc.rule || !strings.Contains(ferr.Message, tc.reason) {
			t.Errorf("%s: %v; want denied by rule %s: %s", tc.url, ferr, tc.rule, tc.reason)
		}
	}
}

// The one coding the gate asks for is decoded in whatever case the server
// names it (codings are case-insensitive, RFC 9110 8.4.1).
func TestMutation23GzipInAnyCase(t *testing.T) {
	e := newEnv(t)
	gz := gzipped(t, []byte("decoded body"), 1)
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "GZip")
		w.Write(gz)
	}, false)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t, s.port))
	resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, get(urlFor(s, "api.example.com", "/")))
	if ferr != nil || string(resp.Body) != "decoded body" {
		t.Errorf("a body coded \"GZip\": %v %+v; want \"decoded body\"", ferr, resp)
	}
}

// The authority is the port asked for unless it is the scheme's own: https
// on port 80 keeps ":80" (sent without it, the request would go to 443).
func TestMutation23CheckedHostKeepsOtherSchemesPort(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://api.example.com:80/":  "api.example.com:80",
		"http://localhost:443/":        "localhost:443",
		"https://api.example.com:443/": "api.example.com",
		"http://localhost:80/":         "localhost",
	} {
		if got, ok := CheckedHost(raw); !ok || got != want {
			t.Errorf("CheckedHost(%q) = %q, %v; want %q", raw, got, ok, want)
		}
	}
}

// Port 0 is no port (rule url, before any rule of the policy), and a DEL
// or a line feed in a header value is refused by the gate (header-invalid) like any other
// control character, before anything is sent.
func TestMutation23PortZeroAndDelRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t))
	del := get("https://api.example.com/")
	del.Headers = []Header{{Name: "X-A", Value: "a\x7fb"}}
	lf := get("https://api.example.com/")
	lf.Headers = []Header{{Name: "X-A", Value: "a\nb"}}
	for _, tc := range []struct {
		name         string
		req          Request
		rule, reason string
	}{
		{"port 0", get("https://api.example.com:0/"), RuleURL, `port "0" is not a decimal number from 1 to 65535`},
		{"DEL", del, RuleHeaderInvalid, `value of header "X-A" contains a control character at byte 1`},
		{"LF", lf, RuleHeaderInvalid, `value of header "X-A" contains a line break (CR or LF) at byte 1`},
	} {
		_, ferr := e.gate.Fetch(ctxTimeout(t, 5*time.Second), p, tc.req)
		if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != tc.rule || !strings.Contains(ferr.Message, tc.reason) {
			t.Errorf("%s: %v; want denied by rule %s: %s", tc.name, ferr, tc.rule, tc.reason)
		}
	}
}

// Two bindings of one secret (Rules.Intersect keeps both sides'): the
// narrower decides what may go with it. A method bound by either refuses a
// method override and a _method parameter (after ';' too, in any case, or
// hidden by an escape that does not decode), and a path
// escaped twice in either case is refused; the first non-bearer binding
// decides how the credential is attached.
func TestMutation23TwoBindingsOfOneSecret(t *testing.T) {
	var mu sync.Mutex
	var got []string
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Key")+"|"+r.Header.Get("Authorization"))
		mu.Unlock()
	}, false)
	e := newEnv(t)
	e.res.set("api.example.com", "127.0.0.1")
	e.secrets["API_TOKEN"] = "tok-two-bindings-0123456789"
	r := toolFor(t, s.port)
	r.SecretDestinations = []SecretDestination{
		{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Methods: []string{"GET"}, PathPrefixes: []string{"/v1/"}, Source: "[secrets.API_TOKEN] (tool)",
			Credential: credential.Spec{Kind: credential.Header, Header: "X-Key"}},
		{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Source: "[secrets.API_TOKEN] (caller)",
			Credential: credential.Spec{Kind: credential.Basic, Username: "u"}},
	}
	p := mustPolicy(t, r)
	ctx := ctxTimeout(t, 10*time.Second)
	for _, tc := range []struct {
		name, path string
		headers    []Header
		want       string
	}{
		{"X-HTTP-Method-Override", "/v1/x", []Header{{Name: "X-HTTP-Method-Override", Value: "DELETE"}}, `header "X-Http-Method-Override" may not be sent with credential "API_TOKEN"`},
		{"_method after ';'", "/v1/x?a=1;_method=DELETE", nil, "a _method parameter (or an escape that does not decode) in the query"},
		{"_METHOD", "/v1/x?_METHOD=DELETE", nil, "a _method parameter (or an escape that does not decode) in the query"},
		{"an escape that does not decode", "/v1/x", []Header{{Name: "Content-Type", Value: "application/x-www-form-urlencoded"}}, "a _method parameter (or an escape that does not decode) in the form body"},
		{"an upper-case escape escaped twice", "/v1/%252Fadmin", nil, "it is escaped twice"},
	} {
		req := Request{URL: urlFor(s, "api.example.com", tc.path), Headers: tc.headers}
		if tc.headers != nil && tc.headers[0].Name == "Content-Type" {
			req.Body = []byte("%zz=1&a=2")
		}
		_, ferr := e.gate.Fetch(ctx, p, withCred(req, "API_TOKEN"))
		if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleCredentialDestination || !strings.Contains(ferr.Message, tc.want) {
			t.Errorf("%s: %v; want denied by rule credential-destination: %s", tc.name, ferr, tc.want)
		}
	}
	if _, ferr := e.gate.Fetch(ctx, p, withCred(get(urlFor(s, "api.example.com", "/v1/x")), "API_TOKEN")); ferr != nil {
		t.Fatal(ferr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "tok-two-bindings-0123456789|" {
		t.Errorf("the server got %q (X-Key|Authorization); want only the allowed request, its value in X-Key (the first binding's kind)", got)
	}
}

// An HMAC credential's signature header may come only from maiden: a
// request attaching another credential of the tool may not carry it, and
// a kind's part with an empty value is as missing as an unset one.
func TestMutation23SignatureHeaderWithAnotherCredential(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, false)
	e := newEnv(t)
	e.res.set("api.example.com", "127.0.0.1")
	e.secrets["API_TOKEN"] = "tok-bearer-0123456789"
	e.secrets["SIGNER"] = "whsec_0123456789"
	e.secrets["AWS"] = "aws-secret-key-0123456789"
	e.secrets["AWS"+credential.SessionTokenPart] = ""
	r := toolFor(t, s.port)
	r.Secrets = []string{"API_TOKEN", "SIGNER", "AWS"}
	r.SecretDestinations = []SecretDestination{
		{Secret: "SIGNER", Hosts: []string{"api.example.com"}, Source: "[secrets.SIGNER]",
			Credential: credential.Spec{Kind: credential.HMAC, Algorithm: "sha256", SignatureHeader: "X-Sig", TimestampHeader: "X-Ts"}},
		{Secret: "AWS", Hosts: []string{"api.example.com"}, Source: "[secrets.AWS]",
			Credential: credential.Spec{Kind: credential.SigV4, AccessKeyID: "AKIDEXAMPLE", Region: "us-east-1", Service: "s3", SessionToken: true}},
	}
	p := mustPolicy(t, r)
	ctx := ctxTimeout(t, 10*time.Second)
	replay := withCred(Request{URL: urlFor(s, "api.example.com", "/"), Headers: []Header{{Name: "X-Sig", Value: "learnt"}}}, "API_TOKEN")
	_, ferr := e.gate.Fetch(ctx, p, replay)
	if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleHeaderRefused || !strings.Contains(ferr.Message, `it carries the signature of credential "SIGNER"`) {
		t.Errorf("X-Sig with credential API_TOKEN attached: %v; want denied by rule header-refused naming SIGNER", ferr)
	}
	_, ferr = e.gate.Fetch(ctx, p, withCred(get(urlFor(s, "api.example.com", "/")), "AWS"))
	if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleCredentialMissing || !strings.Contains(ferr.Message, `needs the secret "AWS`+credential.SessionTokenPart+`"`) {
		t.Errorf("sigv4 with an empty session token: %v; want denied by rule credential-missing naming the part", ferr)
	}
	if n := s.reqs.Load(); n != 0 {
		t.Errorf("refused requests reached the server %d times", n)
	}
}

// A secret at the very end of the text is found: a four-byte one by the
// main scan, a shorter one by the scan of short secrets, and either as
// the whole text.
func TestMutation23SecretAtTheEnd(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"wxyz", "q7"} {
		r := newRedactor([]secretValue{{"API_TOKEN", v}})
		if got := r.String("token=" + v); got != "token=[REDACTED:API_TOKEN]" {
			t.Errorf("the %d-byte secret at the end of %q: %q; want token=[REDACTED:API_TOKEN]", len(v), "token="+v, got)
		}
		if got := r.String(v); got != "[REDACTED:API_TOKEN]" {
			t.Errorf("the %d-byte secret as the whole text: %q; want [REDACTED:API_TOKEN]", len(v), got)
		}
	}
}

// A client certificate is presented only over https: a kind mtls
// credential asked for over plain http (to loopback, the one place plain
// http goes) is refused before anything is sent.
func TestMutation23MTLSNotOverPlainHTTP(t *testing.T) {
	certFile, keyPEM := clientCert(t)
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, true)
	e := newEnv(t)
	e.res.set("localhost", "127.0.0.1")
	e.secrets["API_TOKEN"] = keyPEM
	r := toolFor(t, s.port)
	r.Hosts = []string{"localhost"}
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"localhost"}, Source: "[secrets.API_TOKEN]",
		Credential: credential.Spec{Kind: credential.MTLS, CertFile: certFile}}}
	p := mustPolicy(t, r)
	_, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, withCred(get(urlFor(s, "localhost", "/")), "API_TOKEN"))
	if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleCredentialKind || !strings.Contains(ferr.Message, "can only be presented over https") {
		t.Errorf("kind mtls over plain http: %v; want denied by rule credential-kind", ferr)
	}
	if n := s.reqs.Load(); n != 0 {
		t.Errorf("the refused request reached the server %d times", n)
	}
}

// The limits on what a tool sends are inclusive: a URL of exactly 8 KiB, a
// header name of exactly 256 bytes, a method of 32 and 64 headers pass, one
// more is refused.
func TestMutation23LimitsInclusive(t *testing.T) {
	t.Parallel()
	base := "https://api.example.com/"
	if _, d := normalizeURL(base + strings.Repeat("a", maxURLLen-len(base))); !d.Allow {
		t.Errorf("a URL of exactly %d bytes: %s; want allowed", maxURLLen, d.Reason)
	}
	if _, d := normalizeURL(base + strings.Repeat("a", maxURLLen-len(base)+1)); d.Allow || d.Rule != RuleURL {
		t.Errorf("a URL of %d bytes: %+v; want refused by rule url", maxURLLen+1, d)
	}
	if _, d := checkHeaders([]Header{{Name: strings.Repeat("x", maxHeaderName), Value: "v"}}); !d.Allow {
		t.Errorf("a header name of exactly %d bytes: %s; want allowed", maxHeaderName, d.Reason)
	}
	if _, d := checkHeaders([]Header{{Name: strings.Repeat("x", maxHeaderName+1), Value: "v"}}); d.Allow || d.Rule != RuleHeaderInvalid {
		t.Errorf("a header name of %d bytes: %+v; want refused by rule header-invalid", maxHeaderName+1, d)
	}
	if _, d := checkMethod(strings.Repeat("M", maxMethodLength)); !d.Allow {
		t.Errorf("a method of exactly %d bytes: %s; want allowed", maxMethodLength, d.Reason)
	}
	hs := make([]Header, maxHeaders)
	for i := range hs {
		hs[i] = Header{Name: "X-H" + strings.Repeat("h", i), Value: "v"}
	}
	if _, d := checkHeaders(hs); !d.Allow {
		t.Errorf("exactly %d headers: %s; want allowed", maxHeaders, d.Reason)
	}
}
