package egress

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCapCountsTheRedactedBody: the size cap applies to the body the tool
// gets, after redaction. Counted on the server's bytes, an echo of the
// tool's padding and of the attached Authorization header turned from a
// body into too-large at a padding that told the tool the secret's length
// (the tool sees the marker, not the secret, so it can compute everything
// else). On the redacted body, the boundary is where the visible body is
// exactly the cap: nothing the tool could not compute without the secret.
func TestCapCountsTheRedactedBody(t *testing.T) {
	const cap = 1000
	e := newEnv(t)
	e.secrets["API_TOKEN"] = testSecret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Header.Get("X-Pad") + r.Header.Get("Authorization")))
	}, false)
	e.res.set("api.example.com", "127.0.0.1")
	rules := toolFor(t, s.port)
	rules.MaxResponseBytes = cap
	p := mustPolicy(t, rules)
	fetch := func(n int) (*Response, *FetchError) {
		req := get(urlFor(s, "api.example.com", "/echo"))
		req.Headers = []Header{{Name: "X-Pad", Value: strings.Repeat("a", n)}}
		req.Credential, req.HasCredential = "API_TOKEN", true
		return e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, req)
	}
	lo, hi := 0, cap // fetch(lo) answers, fetch(hi) is too large
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		_, ferr := fetch(mid)
		switch {
		case ferr == nil:
			lo = mid
		case ferr.Kind == FetchTooLarge:
			hi = mid
		default:
			t.Fatalf("padding %d: %v, want a body or too-large", mid, ferr)
		}
	}
	resp, ferr := fetch(lo)
	if ferr != nil {
		t.Fatalf("padding %d: %v", lo, ferr)
	}
	if strings.Contains(string(resp.Body), testSecret) {
		t.Fatalf("the echo was not redacted: %q", resp.Body)
	}
	// With the cap on the server's bytes, the last body that passed was
	// cap - len(secret) + len(marker) bytes long: the secret's length.
	if len(resp.Body) != cap {
		t.Fatalf("the largest body that passed is %d bytes visible (padding %d), want exactly the cap %d: where the cap refuses depends on the secret's length (%d)",
			len(resp.Body), lo, cap, len(testSecret))
	}
}
