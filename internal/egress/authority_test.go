package egress

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestAuthorizerNarrowsAtFetchTime: a request's Authorizer is asked with
// the normalised host, the port and the credential name, only after the
// policy allowed the request; its refusal is kind denied with its rule
// (or "authority"), one audit event, and nothing reaches the server.
func TestAuthorizerNarrowsAtFetchTime(t *testing.T) {
	e := newEnv(t)
	e.secrets["API_TOKEN"] = testSecret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, false)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t, s.port))
	ctx := ctxTimeout(t, 10*time.Second)

	type ask struct {
		host string
		port int
		cred string
	}
	var asked []ask
	refuse := func(host string, port int, cred string) error {
		asked = append(asked, ask{host, port, cred})
		return &Refusal{Rule: "network-card", Reason: "no card allows network:connect " + host}
	}
	req := withCred(get(urlFor(s, "API.Example.COM.", "/x?q=1")), "API_TOKEN")
	req.Authorize, req.Caller = refuse, "research"
	_, ferr := e.gate.Fetch(ctx, p, req)
	if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != "network-card" ||
		ferr.Message != "no card allows network:connect api.example.com (rule: network-card)" {
		t.Fatalf("refused by the authorizer: %+v", ferr)
	}
	if len(asked) != 1 || asked[0] != (ask{"api.example.com", int(s.port), "API_TOKEN"}) {
		t.Errorf("authorizer asked %+v", asked)
	}

	// Not asked when the policy refuses first: the policy's denial names
	// the agent.toml key, which no card can change.
	asked = nil
	req = get(urlFor(s, "evil.example.com", "/"))
	req.Authorize = refuse
	if _, ferr := e.gate.Fetch(ctx, p, req); ferr == nil || ferr.Rule != RuleAllowlist || len(asked) != 0 {
		t.Errorf("policy refusal: %+v, asked %+v", ferr, asked)
	}

	// Any other error is rule "authority"; a nil error allows.
	req = get(urlFor(s, "api.example.com", "/"))
	req.Authorize = func(string, int, string) error { return errors.New("not today") }
	if _, ferr := e.gate.Fetch(ctx, p, req); ferr == nil || ferr.Rule != RuleAuthority || ferr.Message != "not today (rule: authority)" {
		t.Errorf("plain error: %+v", ferr)
	}
	if s.reqs.Load() != 0 || s.conns.Load() != 0 {
		t.Fatalf("refused requests reached the server: %d requests, %d connections", s.reqs.Load(), s.conns.Load())
	}
	req.Authorize = func(string, int, string) error { return nil }
	if resp, ferr := e.gate.Fetch(ctx, p, req); ferr != nil || resp.Status != 200 {
		t.Errorf("allowed: %+v, %+v", resp, ferr)
	}
	evs := e.audit.events(t)
	if len(evs) != 4 {
		t.Fatalf("%d audit events for 4 requests", len(evs))
	}
	if evs[0]["rule"] != "network-card" || evs[0]["decision"] != "deny" || evs[0]["credential"] != "API_TOKEN" || evs[0]["agent"] != "research" {
		t.Errorf("audit event of the refusal: %v", evs[0])
	}
	if _, named := evs[1]["agent"]; named {
		t.Errorf("a request without a caller names one: %v", evs[1])
	}
	if strings.Contains(e.audit.raw(), testSecret) {
		t.Error("the audit log holds the secret's value")
	}
}

// TestHeaderSecretsPassTheCredentialChecks: a secret a host-side caller
// (web_fetch) put in a header itself passes every check a credential
// passes before anything is resolved or sent: declared, within its
// [secrets.NAME] destination, and allowed by the caller's authority asked
// with its name, not only the request's.
func TestHeaderSecretsPassTheCredentialChecks(t *testing.T) {
	e := newEnv(t)
	e.secrets["API_TOKEN"] = testSecret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, false)
	e.res.set("api.example.com", "127.0.0.1")
	e.res.set("other.example.com", "127.0.0.1")
	rules := toolFor(t, s.port)
	rules.Hosts = append(rules.Hosts, "other.example.com")
	rules.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Source: "[secrets.API_TOKEN] (agent.toml:3)"}}
	p := mustPolicy(t, rules)
	ctx := ctxTimeout(t, 10*time.Second)
	withHeaderSecret := func(host, name string) Request {
		return Request{URL: urlFor(s, host, "/"), Headers: []Header{{Name: "X-Api-Key", Value: testSecret}}, HeaderSecrets: []string{name}}
	}
	// The network is allowed to everyone; the secret is not.
	secretCard := func(_ string, _ int, cred string) error {
		if cred != "" {
			return &Refusal{Rule: "secret-card", Reason: "no card allows secret:use " + cred}
		}
		return nil
	}
	carded := withHeaderSecret("api.example.com", "API_TOKEN")
	carded.Authorize = secretCard
	for _, tc := range []struct {
		name string
		req  Request
		rule string
	}{
		{"to a host outside its destination", withHeaderSecret("other.example.com", "API_TOKEN"), RuleCredentialDestination},
		{"not declared", withHeaderSecret("api.example.com", "STOLEN"), RuleCredentialUndeclared},
		{"no card allows the secret", carded, "secret-card"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ferr := e.gate.Fetch(ctx, p, tc.req)
			if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != tc.rule {
				t.Fatalf("got %+v, want denied by rule %s", ferr, tc.rule)
			}
		})
	}
	if s.reqs.Load() != 0 || s.conns.Load() != 0 {
		t.Fatalf("refused requests reached the server: %d requests, %d connections", s.reqs.Load(), s.conns.Load())
	}
	if _, ferr := e.gate.Fetch(ctx, p, withHeaderSecret("api.example.com", "API_TOKEN")); ferr != nil {
		t.Errorf("the header secret to its own destination: %+v", ferr)
	}
}

// TestSecretDestinationGate: a bound secret is attached only to its hosts,
// methods and paths; anywhere else the request is refused before anything
// is resolved or sent, naming the binding.
func TestSecretDestinationGate(t *testing.T) {
	e := newEnv(t)
	e.secrets["API_TOKEN"] = testSecret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, false)
	e.res.set("api.example.com", "127.0.0.1").set("other.example.com", "127.0.0.1").set("a.example.com", "127.0.0.1")
	rules := toolFor(t, s.port)
	rules.Hosts = append(rules.Hosts, "other.example.com", "a.example.com")
	rules.SecretDestinations = []SecretDestination{{
		Secret: "API_TOKEN", Hosts: []string{"api.example.com", "a.example.com"},
		Methods: []string{"GET", "PUT"}, PathPrefixes: []string{"/v1/", "/upload"},
		Source: "[secrets.API_TOKEN] (agent.toml:7)",
	}}
	p := mustPolicy(t, rules)
	ctx := ctxTimeout(t, 10*time.Second)

	for _, tc := range []struct {
		method, host, path string
		want               string // "" allowed
	}{
		{"", "api.example.com", "/v1/x", ""},
		{"PUT", "a.example.com", "/upload", ""},
		{"GET", "a.example.com", "/upload/a/b", ""},
		{"", "api.example.com", "/v1/a%20b", ""},
		{"", "other.example.com", "/v1/x", `may not be sent to host "other.example.com": its binding [secrets.API_TOKEN] (agent.toml:7) allows hosts = ["api.example.com", "a.example.com"]`},
		{"POST", "api.example.com", "/v1/x", `may not be sent with method "POST": its binding [secrets.API_TOKEN] (agent.toml:7) allows methods = ["GET", "PUT"]`},
		{"get", "api.example.com", "/v1/x", `method "get"`},
		{"", "api.example.com", "/v2/x", `may not be sent to path "/v2/x": its binding [secrets.API_TOKEN] (agent.toml:7) allows path_prefixes = ["/v1/", "/upload"]`},
		{"", "api.example.com", "/v1", `path "/v1"`},
		{"", "api.example.com", "/uploads", `path "/uploads"`},
		{"", "api.example.com", "/V1/x", `path "/V1/x"`},
		{"", "api.example.com", "/v1/./x", `"." or ".." segment`},
		{"", "api.example.com", "/v1/../x", `"." or ".." segment`},
		{"", "api.example.com", "/v1/%2E%2e/x", `"." or ".." segment`},
		{"", "api.example.com", "/v1/..;a=b/x", `"." or ".." segment`},
		{"", "api.example.com", "/v1%2F..%2Fx", `"." or ".." segment`},
		{"", "api.example.com", "/v1/%252e%252e/x", "escaped twice"},
		{"", "api.example.com", "/v1/%255c", "escaped twice"},
		{"", "api.example.com", "/v1/%5C..%5Cx", "backslash"},
	} {
		before := s.reqs.Load()
		req := withCred(get(urlFor(s, tc.host, tc.path)), "API_TOKEN")
		req.Method = tc.method
		resp, ferr := e.gate.Fetch(ctx, p, req)
		switch {
		case tc.want == "" && ferr != nil:
			t.Errorf("%s %s%s: %v", tc.method, tc.host, tc.path, ferr)
		case tc.want == "" && (resp.Status != 200 || s.reqs.Load() != before+1):
			t.Errorf("%s %s%s: status %d, server saw %d", tc.method, tc.host, tc.path, resp.Status, s.reqs.Load()-before)
		case tc.want != "" && (ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleCredentialDestination ||
			!strings.Contains(ferr.Message, tc.want) || !strings.HasSuffix(ferr.Message, "(rule: credential-destination)")):
			t.Errorf("%s %s%s: %+v\nwant a denial containing %s", tc.method, tc.host, tc.path, ferr, tc.want)
		case tc.want != "" && s.reqs.Load() != before:
			t.Errorf("%s %s%s: refused, but the server saw the request", tc.method, tc.host, tc.path)
		}
	}
	if n := e.res.lookups("other.example.com"); n != 0 {
		t.Errorf("other.example.com was resolved %d times for a refused credential", n)
	}
	// Without the credential the same host is the tool's to reach.
	if _, ferr := e.gate.Fetch(ctx, p, get(urlFor(s, "other.example.com", "/v2"))); ferr != nil {
		t.Errorf("no credential: %v", ferr)
	}
	if strings.Contains(e.audit.raw(), testSecret) {
		t.Error("the audit log holds the secret's value")
	}
	for _, ev := range e.audit.events(t) {
		if ev["decision"] == "deny" && (ev["rule"] != RuleCredentialDestination || ev["credential"] != "API_TOKEN") {
			t.Errorf("audit event: %v", ev)
		}
	}
}

// TestSecretDestinationsIntersect: intersected rules keep every binding of
// both sides (each must allow), and only for secrets both sides declare.
func TestSecretDestinationsIntersect(t *testing.T) {
	a := Rules{Hosts: []string{"api.example.com", "b.example.com"}, Secrets: []string{"T", "U"},
		SecretDestinations: []SecretDestination{{Secret: "T", Hosts: []string{"api.example.com", "b.example.com"}}, {Secret: "U", Hosts: []string{"b.example.com"}}}}
	b := Rules{Hosts: []string{"api.example.com", "b.example.com"}, Secrets: []string{"T"},
		SecretDestinations: []SecretDestination{{Secret: "T", Hosts: []string{"b.example.com"}, Methods: []string{"GET"}}}}
	got := a.Intersect(b)
	if len(got.SecretDestinations) != 2 || got.SecretDestinations[0].Secret != "T" || got.SecretDestinations[1].Secret != "T" {
		t.Fatalf("intersection: %+v", got.SecretDestinations)
	}
	p, err := NewPolicy("t", got)
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := normalizeURL("https://api.example.com/")
	if d := p.checkDestination("T", tg, "GET"); d.Allow {
		t.Error("api.example.com is allowed by one side's binding only, and passed")
	}
	tg, _ = normalizeURL("https://b.example.com/")
	if d := p.checkDestination("T", tg, "GET"); !d.Allow {
		t.Errorf("allowed by both: %+v", d)
	}
	if d := p.checkDestination("T", tg, "POST"); d.Allow {
		t.Error("POST is refused by one side's binding, and passed")
	}
}

// TestSecretDestinationInvalid: a binding that could never match, or
// whose prefix has no single spelling, is refused when the policy is
// compiled rather than silently matching nothing.
func TestSecretDestinationInvalid(t *testing.T) {
	for _, d := range []SecretDestination{
		{Secret: "T"},
		{Secret: "", Hosts: []string{"a.example.com"}},
		{Secret: "T", Hosts: []string{"A.example.com"}},
		{Secret: "T", Hosts: []string{"a.example.com"}, Methods: []string{""}},
		{Secret: "T", Hosts: []string{"a.example.com"}, Methods: []string{"G T"}},
		{Secret: "T", Hosts: []string{"a.example.com"}, PathPrefixes: []string{"v1/"}},
		{Secret: "T", Hosts: []string{"a.example.com"}, PathPrefixes: []string{"/v1/%2e"}},
		{Secret: "T", Hosts: []string{"a.example.com"}, PathPrefixes: []string{"/v1/../"}},
		{Secret: "T", Hosts: []string{"a.example.com"}, PathPrefixes: []string{"/v1?x"}},
	} {
		if _, err := NewPolicy("t", Rules{Secrets: []string{"T"}, SecretDestinations: []SecretDestination{d}}); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%+v: %v", d, err)
		}
	}
}

// BenchmarkAllowedRequestBound is BenchmarkAllowedRequest with the
// credential bound to its destination (host, method, path prefix) and an
// Authorizer asked: compare the two from the same run.
func BenchmarkAllowedRequestBound(b *testing.B) {
	e := newEnv(b)
	e.secrets["API_TOKEN"] = testSecret
	s := startServer(b, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"ok":true}`)) }, false)
	e.res.set("api.example.com", "127.0.0.1")
	rules := toolFor(b, s.port)
	rules.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Methods: []string{"GET"}, PathPrefixes: []string{"/v1/"}, Source: "[secrets.API_TOKEN]"}}
	p := mustPolicy(b, rules)
	req := withCred(get(urlFor(s, "api.example.com", "/v1/ping?q=1")), "API_TOKEN")
	req.Authorize = func(host string, port int, cred string) error { return nil }
	ctx := ctxTimeout(b, time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		resp, ferr := e.gate.Fetch(ctx, p, req)
		if ferr != nil || resp.Status != 200 {
			b.Fatal(ferr)
		}
	}
}

// FuzzSecretDestinationPath: whatever path a tool writes, if the gate lets
// a credential bound to "/v1/" go with it, then every way a server
// commonly reads that path (decoded once or twice, backslashes as
// slashes, ";parameters" dropped, dot segments resolved) is still under
// /v1/.
func FuzzSecretDestinationPath(f *testing.F) {
	for _, s := range []string{
		"/v1/x", "/v1/../admin", "/v1/%2e%2e/admin", "/v1/..;/admin", "/v1%2f..%2fadmin", "/v1/%252e%252e/a",
		`/v1/%5c..%5cadmin`, "/v1/.%2e/a", "/v1/%2E./a", "/v1//../a", "/v1/a/../../b", "/v1/;/../a", "/v1/%3b/..",
		"/v1/x%00/../..", "/v1/%u002e%u002e/", "/v1/..%00/a", "/v1/%c0%ae%c0%ae/a", "/v1/a%2f%2e%2e%2f%2e%2e/b",
	} {
		f.Add(s)
	}
	p, err := NewPolicy("t", Rules{Hosts: []string{"api.example.com"}, Secrets: []string{"T"},
		SecretDestinations: []SecretDestination{{Secret: "T", Hosts: []string{"api.example.com"}, PathPrefixes: []string{"/v1/"}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string) {
		tg, d := normalizeURL("https://api.example.com" + path)
		if !d.Allow || !p.checkDestination("T", tg, "GET").Allow {
			return
		}
		once, err := url.PathUnescape(tg.path)
		if err != nil {
			t.Fatalf("allowed %q, whose path %q does not decode", path, tg.path)
		}
		twice, err := url.PathUnescape(once)
		if err != nil {
			twice = once
		}
		for _, read := range []string{once, twice, strings.ReplaceAll(once, `\`, "/"), stripParams(once)} {
			if c := resolveDots(read); !strings.HasPrefix(c, "/v1/") {
				t.Fatalf("allowed %q (sent as %q); a server can read it as %q", path, tg.path, c)
			}
		}
	})
}

// resolveDots removes dot segments as RFC 3986 section 5.2.4 does, keeping
// a trailing slash.
func resolveDots(p string) string {
	var out []string
	segs := strings.Split(p, "/")
	for i, s := range segs {
		switch s {
		case ".":
			if i == len(segs)-1 {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if i == len(segs)-1 {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

func stripParams(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	return strings.Join(segs, "/")
}
