package egress

// The twenty-eighth pass (docs/security-tests.md and
// docs/mutation/egress-tokenshare.tsv): tests that kill plants in the
// tokens instances share through a store (tokenshare.go) and in the parts
// of oauth.go the twenty-seventh pass did not plant. Another instance
// sharing the store, and whoever can read or write its rows, are the
// adversaries here, with the token endpoint.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
)

// instance is a new gate of w's world (a new maiden instance: nothing in
// memory) sharing tokens through store.
func (w *tokWorld) instance(store TokenStore) *Gate {
	return New(&Options{Resolver: w.e.res, Audit: w.e.audit.logger(), Tokens: store,
		LookupSecret: func(n string) (string, bool) { v, ok := w.e.secrets[n]; return v, ok },
		Now:          func() time.Time { return w.base.Add(time.Duration(w.clock.Load())) }})
}

// rowsOf is a copy of m's rows.
func (m *memTokens) rowsOf() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range m.rows {
		out[k] = bytes.Clone(v)
	}
	return out
}

// A shared row is one binding's: an instance whose binding names another
// token endpoint, client or grant, or whose client secret part was
// rotated, finds no token of the others' in the store and asks anew.
func TestMutation28SharedRowPerBinding(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	store := &memTokens{rows: map[string][]byte{}}
	w.e.secrets["API_TOKEN"+credential.ClientSecretPart] = "part-28-a"
	w.e.gate = w.instance(store)
	w.mustFetch(t, "at-27-1")
	steps := []struct {
		name string
		set  func(s *credential.Spec)
	}{
		{"another token endpoint", func(s *credential.Spec) { s.TokenURL = urlFor(w.tok, "a.example.com", "/token2") }},
		{"another client", func(s *credential.Spec) { s.ClientID = "c28-other" }},
		{"the refresh grant", func(s *credential.Spec) { s.Grant = credential.GrantRefreshToken }},
		{"the refresh grant with a client secret part", func(s *credential.Spec) { s.ClientSecret = true }},
		{"the client secret part rotated", func(*credential.Spec) {
			w.e.secrets["API_TOKEN"+credential.ClientSecretPart] = "part-28-b"
		}},
	}
	spec := w.spec("/token")
	for i, st := range steps {
		st.set(&spec)
		w.setSpec(t, spec)
		w.e.gate = w.instance(store)
		want := fmt.Sprintf("at-27-%d", i+2)
		resp, ferr := w.fetch(t)
		if ferr != nil || w.lastAuth() != "Bearer "+want || w.requests() != i+2 {
			t.Fatalf("%s: a new instance: %v, %d token requests, the API got %q; want a new token, %q", st.name, ferr, w.requests(), w.lastAuth(), "Bearer "+want)
		}
		if string(resp.Body) != "auth=Bearer [REDACTED:API_TOKEN]" {
			t.Fatalf("%s: the tool got %q", st.name, resp.Body)
		}
	}
	// The values are not in a row's name: a client secret part added or
	// rotated replaces the row of its binding.
	if n := len(store.rowsOf()); n != 4 {
		t.Errorf("the store holds %d rows; want 4, one per endpoint, client and grant", n)
	}
}

// A row is sealed afresh each time (a random nonce: two rows sealed
// under one key never share one), holds no token in the clear, and a row
// too short to be sealed (a store written by someone else) is no token:
// the instance asks the endpoint and replaces it.
func TestMutation28SharedRowSealing(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	store := &memTokens{rows: map[string][]byte{}}
	spec := w.spec("/token")
	row := shareRow(newTokenKey("API_TOKEN", spec, credential.Values{Value: w.e.secrets["API_TOKEN"]}))
	store.rows[row] = []byte("short")
	w.e.gate = w.instance(store)
	w.mustFetch(t, "at-27-1")
	first := store.rowsOf()[row]
	if len(first) < 12 || bytes.Equal(first, []byte("short")) || bytes.Contains(first, []byte("at-27-1")) {
		t.Fatalf("after a short row, the row is %q; want the token sealed in its place", first)
	}
	w.clock.Store(int64(59 * time.Minute))
	w.mustFetch(t, "at-27-2")
	second := store.rowsOf()[row]
	if bytes.Equal(first[:12], second[:12]) {
		t.Errorf("two rows sealed under one key share the nonce %x", first[:12])
	}
	if n := w.requests(); n != 2 {
		t.Errorf("%d token requests; want 2", n)
	}
}

// A token the API refused is not taken from the store again, whoever
// stored it: an instance that finds it there after a 401 asks for a new
// one, and an instance still holding it in memory takes the new one from
// the store without a token request of its own.
func TestMutation28SharedStaleToken(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	store := &memTokens{rows: map[string][]byte{}}
	a := w.instance(store)
	w.e.gate = a
	w.mustFetch(t, "at-27-1")
	w.mu.Lock()
	w.reject["at-27-1"] = true
	w.mu.Unlock()
	w.e.gate = w.instance(store)
	w.mustFetch(t, "at-27-2")
	if n := w.requests(); n != 2 {
		t.Fatalf("the second instance, after a 401: %d token requests; want 2", n)
	}
	w.e.gate = a
	w.mustFetch(t, "at-27-2")
	if n := w.requests(); n != 2 {
		t.Errorf("the first instance, after a 401, made a token request (%d in all); want the stored at-27-2", n)
	}
}

// errTokens is a TokenStore that fails (or shares nothing) before any
// update runs.
type errTokens struct{ err error }

func (s errTokens) LeaseToken(context.Context, string, func([]byte) ([]byte, error)) error {
	return s.err
}

// Through a store: the endpoint's refusal is the one the tool reads (not
// the store's) and leaves no row; a store that shares nothing leaves the
// gate to ask the endpoint itself; a store that fails refuses the call
// before anything is sent.
func TestMutation28SharedRefusals(t *testing.T) {
	w := newTokWorld(t)
	w.mu.Lock()
	w.answer = func(rw http.ResponseWriter, _ *http.Request, _ int) {
		rw.WriteHeader(http.StatusBadRequest)
		rw.Write([]byte(`{"error":"invalid_client"}`))
	}
	w.mu.Unlock()
	store := &memTokens{rows: map[string][]byte{}}
	w.e.gate = w.instance(store)
	const want = `credential "API_TOKEN": the token endpoint "a.example.com" gave no access token: status 400 (error invalid_client) (rule: oauth2-token)`
	if _, ferr := w.fetch(t); ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleOAuth2Token || ferr.Message != want {
		t.Fatalf("the endpoint refusing, through a store: %v (message %q); want denied, %q", ferr, ferrMessage(ferr), want)
	}
	if n := len(store.rowsOf()); n != 0 {
		t.Errorf("a refused token request left %d rows; want 0", n)
	}

	w = newTokWorld(t)
	w.tokens(3600, nil)
	w.e.gate = w.instance(errTokens{ErrNotShared})
	w.mustFetch(t, "at-27-1")
	w.mustFetch(t, "at-27-1")
	if n := w.requests(); n != 1 {
		t.Errorf("a store that shares nothing: %d token requests; want 1", n)
	}

	w = newTokWorld(t)
	w.tokens(3600, nil)
	w.e.gate = w.instance(errTokens{errors.New("connection refused")})
	const failed = `credential "API_TOKEN": the shared token store failed (rule: oauth2-token)`
	if _, ferr := w.fetch(t); ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleOAuth2Token || ferr.Message != failed {
		t.Fatalf("a failing store: %v (message %q); want denied, %q", ferr, ferrMessage(ferr), failed)
	}
	if n, m := w.requests(), w.api.reqs.Load(); n != 0 || m != 0 {
		t.Errorf("a failing store: %d token requests, %d API calls; want none", n, m)
	}
}

// The token request is what RFC 6749 asks for, to the byte: a form body
// of its length (not chunked) with the grant and the scopes, JSON asked
// for, the endpoint's host and port as Host, and client_secret_basic with
// both parts form-encoded first (2.3.1); a token for scopes is reused for
// them.
func TestMutation28TokenRequestAsSent(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	w.e.secrets["API_TOKEN"] = "s%28:+/&= é"
	spec := w.spec("/token")
	spec.ClientID = "c 28:x"
	spec.Scopes = []string{"read", "write"}
	w.setSpec(t, spec)
	w.mustFetch(t, "at-27-1")
	w.mustFetch(t, "at-27-1")
	if n := w.requests(); n != 1 {
		t.Errorf("two calls with scopes made %d token requests; want 1", n)
	}
	r, body := w.tok.lastRequest()
	const form = "grant_type=client_credentials&scope=read+write"
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape("c 28:x")+":"+url.QueryEscape("s%28:+/&= é")))
	got := fmt.Sprintf("body %q, Content-Length %d, Transfer-Encoding %q, Content-Type %q, Accept %q, Host %q, Authorization %q",
		body, r.ContentLength, r.TransferEncoding, r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.Host, r.Header.Get("Authorization"))
	want := fmt.Sprintf("body %q, Content-Length %d, Transfer-Encoding %q, Content-Type %q, Accept %q, Host %q, Authorization %q",
		form, len(form), []string(nil), "application/x-www-form-urlencoded", "application/json", fmt.Sprintf("a.example.com:%d", w.tok.port), wantAuth)
	if got != want {
		t.Errorf("the token request:\n got %s\nwant %s", got, want)
	}
	if strings.Contains(r.Header.Get("Authorization"), base64.StdEncoding.EncodeToString([]byte("c 28:x:s%28"))) {
		t.Errorf("the client id and secret were sent unencoded")
	}

	// Without scopes, no scope parameter (an empty one is not "none" to
	// every endpoint).
	w = newTokWorld(t)
	w.tokens(3600, nil)
	w.mustFetch(t, "at-27-1")
	if _, body := w.tok.lastRequest(); string(body) != "grant_type=client_credentials" {
		t.Errorf("without scopes the token request's body is %q; want %q", body, "grant_type=client_credentials")
	}
}

// A lifetime the endpoint gives is bounded at maxTokenLife to the second:
// a token "for ever" is renewed a minute before a day has passed, not a
// second later.
func TestMutation28LifeBoundToTheSecond(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(1<<40, nil)
	w.mustFetch(t, "at-27-1")
	w.clock.Store(int64(maxTokenLife - time.Minute - time.Nanosecond))
	w.mustFetch(t, "at-27-1")
	w.clock.Store(int64(maxTokenLife - time.Minute))
	w.mustFetch(t, "at-27-2")
}

// A shared row is one secret's: two secrets of one endpoint and client
// (two users' refresh tokens of one application, say) have a row each, so
// that the refresh token the endpoint rotated for one is never replaced
// by the other's row, and a new instance sends neither the spent
// configured refresh token nor the other secret's.
func TestMutation28SharedRowPerSecretName(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, func(n int) string { return fmt.Sprintf("rt-28-%d", n) })
	w.e.secrets["API_TOKEN"] = "rt-28-a0"
	w.e.secrets["API_TOKEN_B"] = "rt-28-b0"
	spec := w.spec("/token")
	spec.Grant = credential.GrantRefreshToken
	r := toolFor(t, w.api.port, w.tok.port)
	r.Hosts = append(r.Hosts, "a.example.com")
	r.Secrets = append(r.Secrets, "API_TOKEN_B")
	for _, name := range []string{"API_TOKEN", "API_TOKEN_B"} {
		r.SecretDestinations = append(r.SecretDestinations, SecretDestination{Secret: name, Hosts: []string{"api.example.com", "a.example.com"}, Source: "[secrets." + name + "]", Credential: spec})
	}
	w.p = mustPolicy(t, r)
	store := &memTokens{rows: map[string][]byte{}}
	call := func(g *Gate, name, want string) {
		t.Helper()
		resp, ferr := g.Fetch(ctxTimeout(t, 20*time.Second), w.p, withCred(get(urlFor(w.api, "api.example.com", "/v1")), name))
		if ferr != nil || w.lastAuth() != "Bearer "+want || string(resp.Body) != "auth=Bearer [REDACTED:"+name+"]" {
			t.Fatalf("%s: %v, the API got %q; want %q", name, ferr, w.lastAuth(), "Bearer "+want)
		}
	}
	first := w.instance(store)
	call(first, "API_TOKEN", "at-27-1")
	call(first, "API_TOKEN_B", "at-27-2")
	if got := w.form(1).Get("refresh_token"); got != "rt-28-b0" {
		t.Fatalf("API_TOKEN_B's first token request sent refresh token %q; want rt-28-b0", got)
	}
	if n := len(store.rowsOf()); n != 2 {
		t.Errorf("two secrets: %d rows; want 2", n)
	}
	call(w.instance(store), "API_TOKEN", "at-27-1")
	if n := w.requests(); n != 2 {
		t.Fatalf("a new instance made a token request for API_TOKEN, sending refresh token %q; want the stored at-27-1 (2 requests, %d made)",
			w.form(n-1).Get("refresh_token"), n)
	}
}

// The rotated refresh token is the store's across a change of scopes
// (a row is named without them): a new instance whose table asks for
// other scopes sends the refresh token another instance stored, not the
// spent configured one.
func TestMutation28SharedLineageAcrossScopes(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, func(n int) string { return fmt.Sprintf("rt-28-%d", n) })
	w.e.secrets["API_TOKEN"] = "rt-28-0"
	spec := w.spec("/token")
	spec.Grant = credential.GrantRefreshToken
	w.setSpec(t, spec)
	store := &memTokens{rows: map[string][]byte{}}
	w.e.gate = w.instance(store)
	w.mustFetch(t, "at-27-1")
	spec.Scopes = []string{"read"}
	w.setSpec(t, spec)
	w.e.gate = w.instance(store)
	w.mustFetch(t, "at-27-2")
	if f := w.form(1); f.Get("refresh_token") != "rt-28-1" || f.Get("scope") != "read" {
		t.Errorf("a new instance asking for scope read sent refresh token %q, scope %q; want rt-28-1, read", f.Get("refresh_token"), f.Get("scope"))
	}
}
