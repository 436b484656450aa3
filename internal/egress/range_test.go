package egress

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRangeWithSecretRefused: a request that carries a secret (the
// credential, or a header secret) may not ask for byte ranges: redaction
// sees one response at a time, and an echoing server could return the
// secret a few bytes at a time, each piece shorter than any form the
// redactor matches. The request is refused before anything is sent, with
// its own rule; without a secret a range is the tool's to ask for.
func TestRangeWithSecretRefused(t *testing.T) {
	e := newEnv(t)
	e.secrets["API_TOKEN"] = testSecret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, false)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t, s.port))
	ctx := ctxTimeout(t, 10*time.Second)
	for _, tc := range []struct{ name, header string }{
		{"Range", "Range"}, {"lowercase range", "range"}, {"If-Range", "If-Range"}, {"CGI spelling", "If_Range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.reqs.Load()
			req := withCred(get(urlFor(s, "api.example.com", "/echo")), "API_TOKEN")
			req.Headers = []Header{{Name: tc.header, Value: "bytes=0-3"}}
			_, ferr := e.gate.Fetch(ctx, p, req)
			if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleRangeWithSecret || !strings.Contains(ferr.Message, "fetch the whole resource") {
				t.Fatalf("a %s request with a credential: %+v; want denied by %s", tc.header, ferr, RuleRangeWithSecret)
			}
			if s.reqs.Load() != before {
				t.Error("refused, but the server saw the request")
			}
		})
	}
	req := get(urlFor(s, "api.example.com", "/echo"))
	req.Headers = []Header{{Name: "Range", Value: "bytes=0-3"}}
	if _, ferr := e.gate.Fetch(ctx, p, req); ferr != nil {
		t.Errorf("a range request without a secret: %v", ferr)
	}
}
