package egress

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCredentialOverrideRefused (the fourth review): a binding that narrows
// a secret's methods or path prefixes is checked against the request line,
// while common servers run another method or path when a header or a
// _method parameter says so (X-HTTP-Method-Override: DELETE on a POST;
// X-Original-URL: /admin on /v1/...). A request carrying such a secret may
// not send them: refused by rule credential-destination, naming the header
// or parameter, before the server is reached. Without the credential, or
// with a binding that narrows only hosts, they pass.
func TestCredentialOverrideRefused(t *testing.T) {
	var hits atomic.Int64
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("ok"))
	}, false)
	e := newEnv(t)
	e.res.set("api.example.com", "127.0.0.1")
	e.secrets["API_TOKEN"], e.secrets["OPEN_TOKEN"] = "tok-override-0123456789", "tok-open-0123456789"
	r := toolFor(t, s.port)
	r.Secrets = []string{"API_TOKEN", "OPEN_TOKEN"}
	r.SecretDestinations = []SecretDestination{
		{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Methods: []string{"GET", "POST"}, PathPrefixes: []string{"/v1/"}, Source: "[secrets.API_TOKEN] (agent.toml:3)"},
		{Secret: "OPEN_TOKEN", Hosts: []string{"api.example.com"}, Source: "[secrets.OPEN_TOKEN] (agent.toml:7)"},
	}
	p := mustPolicy(t, r)
	ctx := ctxTimeout(t, 10*time.Second)
	form := []Header{{Name: "Content-Type", Value: "application/x-www-form-urlencoded; charset=utf-8"}}
	req := func(method, path string, headers []Header, body string) Request {
		return Request{Method: method, URL: urlFor(s, "api.example.com", path), Headers: headers, Body: []byte(body)}
	}
	for _, tc := range []struct {
		name string
		req  Request
		want string // in the refusal
	}{
		{"X-HTTP-Method-Override", req("POST", "/v1/items", []Header{{Name: "X-HTTP-Method-Override", Value: "DELETE"}}, "{}"), `"X-Http-Method-Override"`},
		{"X-Method-Override", req("POST", "/v1/items", []Header{{Name: "x-method-override", Value: "DELETE"}}, "{}"), `"X-Method-Override"`},
		{"X-HTTP-Method", req("POST", "/v1/items", []Header{{Name: "X-HTTP-Method", Value: "PUT"}}, "{}"), `"X-Http-Method"`},
		{"X-Original-URL", req("GET", "/v1/items", []Header{{Name: "X-Original-URL", Value: "/admin/users"}}, ""), `"X-Original-Url"`},
		{"X-Rewrite-URL", req("GET", "/v1/items", []Header{{Name: "X-Rewrite-URL", Value: "/admin/users"}}, ""), `"X-Rewrite-Url"`},
		{"_method in the query", req("POST", "/v1/items?a=1&_method=DELETE", nil, "{}"), "in the query"},
		{"_method escaped in the query", req("POST", "/v1/items?%5Fmethod=DELETE", nil, "{}"), "in the query"},
		{"_method in a form body", req("POST", "/v1/items", form, "a=1&_method=DELETE"), "in the form body"},
		{"X_HTTP_Method_Override (the CGI spelling)", req("POST", "/v1/items", []Header{{Name: "X_HTTP_Method_Override", Value: "DELETE"}}, "{}"), `"X_http_method_override"`},
		{"_method in a form body typed in capitals", req("POST", "/v1/items", []Header{{Name: "Content-Type", Value: "Application/X-WWW-Form-URLEncoded"}}, "_method=DELETE"), "in the form body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			_, ferr := e.gate.Fetch(ctx, p, withCred(tc.req, "API_TOKEN"))
			if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleCredentialDestination || !strings.Contains(ferr.Message, tc.want) {
				t.Fatalf("got %v, want denied by %s naming %s", ferr, RuleCredentialDestination, tc.want)
			}
			if hits.Load() != before {
				t.Fatal("the server was reached")
			}
			t.Logf("%s", ferr.Message)
			// The same request without a credential, or with one bound
			// to hosts only, goes out.
			if _, ferr := e.gate.Fetch(ctx, p, tc.req); ferr != nil {
				t.Errorf("without a credential: %v", ferr)
			}
			if _, ferr := e.gate.Fetch(ctx, p, withCred(tc.req, "OPEN_TOKEN")); ferr != nil {
				t.Errorf("with a secret bound to hosts only: %v", ferr)
			}
		})
	}
	// The request line's own method and path, and a form without _method,
	// are what the binding is for.
	if _, ferr := e.gate.Fetch(ctx, p, withCred(req("POST", "/v1/items?method=x", form, "a=1&method=DELETE"), "API_TOKEN")); ferr != nil {
		t.Errorf("a form without _method: %v", ferr)
	}
}
