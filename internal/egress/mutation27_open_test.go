package egress

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
)

// The twenty-seventh pass's three open plants (docs/security-tests.md),
// closed: the token endpoint is asked of the caller's Authorizer like any
// request carrying the secret, a public client of the refresh grant sends
// no client authentication at all, and a call waiting for another's token
// request takes its refusal rather than asking again.

// TestMutation27TokenEndpointAuthorized: a caller whose authority (a card)
// allows the API but not the token endpoint gets no token: the Authorizer
// is asked about the token endpoint's host, port and credential before
// anything is sent to it, and its refusal names its own rule.
func TestMutation27TokenEndpointAuthorized(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	var mu sync.Mutex
	var asked []string
	authz := func(host string, port int, cred string) error {
		mu.Lock()
		asked = append(asked, fmt.Sprintf("%s:%d %s", host, port, cred))
		mu.Unlock()
		if host == "api.example.com" {
			return nil
		}
		return &Refusal{Rule: "card", Reason: "no card of agent a27 allows " + host}
	}
	req := withCred(get(urlFor(w.api, "api.example.com", "/v1")), "API_TOKEN")
	req.Authorize = authz
	_, ferr := w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, req)
	want := `credential "API_TOKEN": its token endpoint is not allowed: no card of agent a27 allows a.example.com (rule: card) (rule: oauth2-token)`
	if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleOAuth2Token || ferr.Message != want || w.requests() != 0 || w.tok.conns.Load() != 0 {
		t.Fatalf("a card refusing the token endpoint: %v, %d token requests, %d connections; want denied, rule %s, %q, nothing sent to it",
			ferr, w.requests(), w.tok.conns.Load(), RuleOAuth2Token, want)
	}
	mu.Lock()
	got := strings.Join(asked, ", ")
	mu.Unlock()
	if wantAsked := fmt.Sprintf("a.example.com:%d API_TOKEN", w.tok.port); !strings.Contains(got, wantAsked) {
		t.Fatalf("the Authorizer was asked about %q; want %q among them", got, wantAsked)
	}
	if w.lastAuth() != "" {
		t.Fatalf("the API got Authorization %q; want no request to it", w.lastAuth())
	}

	// The same caller with the token endpoint allowed gets its token.
	req.Authorize = func(string, int, string) error { return nil }
	resp, ferr := w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, req)
	if ferr != nil || resp.Status != 200 || w.lastAuth() != "Bearer at-27-1" {
		t.Fatalf("allowed: %v %v, the API got %q; want 200 with \"Bearer at-27-1\"", resp, ferr, w.lastAuth())
	}
}

// TestMutation27PublicClientSendsNoAuthentication: a public client of the
// refresh grant (no client secret) names itself in the form and sends no
// Authorization header (RFC 6749 3.2.1; an empty-password basic auth is
// client authentication an endpoint may refuse), while a confidential one
// sends its id and secret as basic auth, form-encoded (2.3.1), and not in
// the form.
func TestMutation27PublicClientSendsNoAuthentication(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	w.e.secrets["API_TOKEN"] = "rt-27-public"
	spec := w.spec("/token")
	spec.Grant = credential.GrantRefreshToken
	w.setSpec(t, spec)
	if resp, ferr := w.fetch(t); ferr != nil || resp.Status != 200 {
		t.Fatalf("public client: %v %v", resp, ferr)
	}
	w.mu.Lock()
	auth, form := w.auths[0], w.forms[0]
	w.mu.Unlock()
	wantForm := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt-27-public"}, "client_id": {"c27"}}
	if auth != "" || form.Encode() != wantForm.Encode() {
		t.Fatalf("public client's token request: Authorization %q, form %q; want no Authorization, form %q", auth, form.Encode(), wantForm.Encode())
	}

	w.e.secrets["API_TOKEN"] = "rt-27-conf"
	w.e.secrets["API_TOKEN"+credential.ClientSecretPart] = "s3cr&t 27"
	spec.ClientSecret = true
	w.setSpec(t, spec)
	if resp, ferr := w.fetch(t); ferr != nil || resp.Status != 200 {
		t.Fatalf("confidential client: %v %v", resp, ferr)
	}
	w.mu.Lock()
	auth, form = w.auths[len(w.auths)-1], w.forms[len(w.forms)-1]
	w.mu.Unlock()
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("c27:s3cr%26t+27"))
	wantForm = url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt-27-conf"}}
	if auth != wantAuth || form.Encode() != wantForm.Encode() {
		t.Fatalf("confidential client's token request: Authorization %q, form %q; want %q, form %q", auth, form.Encode(), wantAuth, wantForm.Encode())
	}
}

// TestMutation27WaiterTakesTheFlightsRefusal: a call that finds another
// call's token request under way waits for it and takes its outcome, a
// refusal too: the endpoint is asked once, not once more per waiter (a
// refused client would otherwise be asked again by every call that
// waited, each adding to the endpoint's view of a misbehaving client).
func TestMutation27WaiterTakesTheFlightsRefusal(t *testing.T) {
	w := newTokWorld(t)
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // a failing test does not leave the endpoint waiting
	w.mu.Lock()
	w.answer = func(rw http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			asked <- struct{}{}
			<-release
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(rw, `{"error":"invalid_client"}`)
	}
	w.mu.Unlock()
	waiting := make(chan string, 1)
	w.e.gate.waitingForToken = func(name string) { waiting <- name }

	type result struct {
		resp *Response
		ferr *FetchError
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() { r, e := w.fetch(t); first <- result{r, e} }()
	select {
	case <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("the first call's token request did not reach the endpoint")
	}
	go func() { r, e := w.fetch(t); second <- result{r, e} }()
	select {
	case name := <-waiting:
		if name != "API_TOKEN" {
			t.Fatalf("a waiter for %q; want API_TOKEN", name)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the second call did not wait for the first one's token request")
	}
	releaseOnce()
	want := `credential "API_TOKEN": the token endpoint "a.example.com" gave no access token: status 400 (error invalid_client) (rule: oauth2-token)`
	for i, ch := range []chan result{first, second} {
		r := <-ch
		if r.ferr == nil || r.ferr.Kind != FetchDenied || r.ferr.Rule != RuleOAuth2Token || r.ferr.Message != want {
			t.Fatalf("call %d: %v %v; want denied, rule %s, %q", i+1, r.resp, r.ferr, RuleOAuth2Token, want)
		}
	}
	if n := w.requests(); n != 1 {
		t.Fatalf("the endpoint was asked %d times for two calls, one waiting on the other; want 1", n)
	}
}
