package egress

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
)

// refreshSpec is kind oauth2 with the refresh token grant for client, at
// w's authorization server.
func (w *oauthWorld) refreshSpec(client string, clientSecret bool) credential.Spec {
	return credential.Spec{Kind: credential.OAuth2, TokenURL: "https://a.example.com:" + strconv.Itoa(int(w.as.port)) + "/oauth/token",
		ClientID: client, Grant: credential.GrantRefreshToken, ClientSecret: clientSecret}
}

// setSpec makes API_TOKEN a credential of spec.
func (w *oauthWorld) setSpec(t *testing.T, spec credential.Spec) {
	r := toolFor(t, w.api.port, w.as.port)
	r.Hosts = append(r.Hosts, "a.example.com")
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com", "a.example.com"}, Source: "[secrets.API_TOKEN]", Credential: spec}}
	w.p = mustPolicy(t, r)
}

// newRefreshWorld is an oauthWorld whose API_TOKEN is a refresh token of
// the confidential client "web", its client secret in API_TOKEN_CLIENT_SECRET.
func newRefreshWorld(t *testing.T) *oauthWorld {
	w := newOAuthWorld(t, "")
	w.e.secrets["API_TOKEN"] = w.as.mintRefresh(t, "web")
	w.e.secrets["API_TOKEN"+credential.ClientSecretPart] = "websecret"
	w.setSpec(t, w.refreshSpec("web", true))
	return w
}

func (w *oauthWorld) concurrent(t *testing.T, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for range n {
		wg.Go(func() {
			resp, ferr := w.fetch(t)
			switch {
			case ferr != nil:
				errs <- ferr.Error()
			case resp.Status != 200:
				errs <- "status " + strconv.Itoa(resp.Status)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// assertNoKeyMaterial fails if text holds any of the values.
func assertNoKeyMaterial(t *testing.T, what, text string, values ...string) {
	t.Helper()
	for _, v := range values {
		if v != "" && strings.Contains(text, v) {
			t.Errorf("%s holds key material %.8q...: %s", what, v, text)
		}
	}
}

// TestOAuth2RefreshToken against zitadel/oidc's provider, which rotates
// refresh tokens on every use: 50 concurrent first calls make one refresh;
// near expiry the rotated refresh token (the configured one is dead by
// then) gets a new access token; a 401 to 50 concurrent calls makes
// exactly one refresh; a refresh token never reaches the API; a revoked
// refresh token and a token endpoint that is down are denied with rule
// oauth2-token and a reason, never the endpoint's body, and the API is not
// called.
func TestOAuth2RefreshToken(t *testing.T) {
	w := newRefreshWorld(t)
	configured := w.e.secrets["API_TOKEN"]
	w.concurrent(t, 50)
	if n := w.as.requests.Load(); n != 1 {
		t.Fatalf("50 concurrent first calls made %d token requests, want 1", n)
	}
	if got := w.as.refreshTokens(); len(got) != 2 || got[0] != configured || got[1] == configured {
		t.Fatalf("the first refresh sent/was given %v; want the configured token, then a rotated one", got)
	}
	// Near expiry: the configured refresh token was rotated away, so only
	// the rotated one can succeed.
	w.clock.Store(int64(4*time.Minute + 45*time.Second))
	if _, ferr := w.fetch(t); ferr != nil || w.as.requests.Load() != 2 {
		t.Fatalf("near expiry: %v, %d token requests, want 2", ferr, w.as.requests.Load())
	}
	w.as.mu.Lock()
	sent := slices2(w.as.refreshSent)
	w.as.mu.Unlock()
	if sent[1] == configured {
		t.Fatal("the second refresh sent the configured refresh token, not the rotated one")
	}
	// The API refuses the access token: exactly one refresh for 50 calls.
	w.as.revokeAll()
	w.concurrent(t, 50)
	if n := w.as.requests.Load(); n != 3 {
		t.Fatalf("50 calls refused with 401 made %d token requests in all, want 3", n)
	}
	resp, ferr := w.fetch(t)
	if ferr != nil || !bytes.Contains(resp.Body, []byte("Authorization: Bearer [REDACTED:API_TOKEN]")) {
		t.Fatalf("the tool saw: %v %s", ferr, resp.Body)
	}
	for _, rt := range w.as.refreshTokens() {
		if strings.Contains(w.seen(), rt) || bytes.Contains(resp.Body, []byte(rt)) {
			t.Fatalf("refresh token %q reached the API or the tool", rt)
		}
	}
	assertNoKeyMaterial(t, "the audit log", w.e.audit.raw(), append(w.as.refreshTokens(), "websecret")...)

	// The authorization server revokes the current refresh token: the next
	// refresh is denied, saying why, without the endpoint's body.
	issued := w.as.refreshTokens()
	w.as.st.RevokeToken(t.Context(), issued[len(issued)-1], "id1", "web")
	w.clock.Store(int64(9*time.Minute + 45*time.Second))
	apiBefore := w.api.reqs.Load()
	_, ferr = w.fetch(t)
	if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleOAuth2Token ||
		!strings.Contains(ferr.Message, "(error invalid_grant): the refresh token was refused (revoked or expired); set a new one in MAIDEN_SECRET_API_TOKEN") {
		t.Fatalf("a revoked refresh token: %v", ferr)
	}
	w.as.mu.Lock()
	body := w.as.lastBody
	w.as.mu.Unlock()
	if body == "" || strings.Contains(ferr.Message, body) || strings.Contains(ferr.Message, "{") {
		t.Errorf("the refusal quotes the endpoint's body %q: %s", body, ferr.Message)
	}
	assertNoKeyMaterial(t, "the refusal", ferr.Message, append(w.as.refreshTokens(), "websecret")...)
	if w.api.reqs.Load() != apiBefore {
		t.Error("the API was called without a token")
	}

	// The token endpoint is down.
	w.as.srv.Close()
	_, ferr = w.fetch(t)
	if ferr == nil || ferr.Rule != RuleOAuth2Token || !strings.Contains(ferr.Message, "could not be reached") {
		t.Fatalf("endpoint down: %v", ferr)
	}
	assertNoKeyMaterial(t, "the refusal", ferr.Message, append(w.as.refreshTokens(), "websecret")...)
	if w.api.reqs.Load() != apiBefore {
		t.Error("the API was called without a token")
	}
}

func slices2(s []string) []string { return append([]string(nil), s...) }

// TestOAuth2RefreshPublicClient: a public client (no client_secret part)
// names itself in the form and does not authenticate.
func TestOAuth2RefreshPublicClient(t *testing.T) {
	w := newOAuthWorld(t, "")
	w.e.secrets["API_TOKEN"] = w.as.mintRefresh(t, "native")
	w.setSpec(t, w.refreshSpec("native", false))
	if resp, ferr := w.fetch(t); ferr != nil || resp.Status != 200 {
		t.Fatalf("%v %v", resp, ferr)
	}
	// The confidential client without its secret is refused.
	w.e.secrets["API_TOKEN"] = w.as.mintRefresh(t, "web")
	w.setSpec(t, w.refreshSpec("web", false))
	if _, ferr := w.fetch(t); ferr == nil || ferr.Rule != RuleOAuth2Token {
		t.Fatalf("web without its secret: %v", ferr)
	}
}

// cachedTokens is how many token caches the gate keeps for name.
func cachedTokens(g *Gate, name string) int {
	n := 0
	g.tokens.Range(func(k, _ any) bool {
		if k.(tokenKey).name == name {
			n++
		}
		return true
	})
	return n
}

// TestOAuth2Rotation: when the operator rotates the secret (a new refresh
// token in MAIDEN_SECRET_API_TOKEN) or changes its [secrets.NAME] table,
// the next call gets a token with the new credential, the old cache is
// evicted at once, and the old access token is never sent again.
func TestOAuth2Rotation(t *testing.T) {
	w := newRefreshWorld(t)
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	old := w.as.accessTokens()
	seenBefore := len(w.seen())

	rotated := w.as.mintRefresh(t, "web")
	w.e.secrets["API_TOKEN"] = rotated
	for range 3 {
		if _, ferr := w.fetch(t); ferr != nil {
			t.Fatal(ferr)
		}
	}
	w.as.mu.Lock()
	sent := slices2(w.as.refreshSent)
	w.as.mu.Unlock()
	if w.as.requests.Load() != 2 || sent[len(sent)-1] != rotated {
		t.Fatalf("after the rotation: %d token requests, last refresh token sent %q, want 2 and the new one", w.as.requests.Load(), sent[len(sent)-1])
	}
	if n := cachedTokens(w.e.gate, "API_TOKEN"); n != 1 {
		t.Errorf("%d token caches for the secret after its rotation, want 1 (the old one evicted)", n)
	}
	after := w.seen()[seenBefore:]
	assertNoKeyMaterial(t, "what the API received after the rotation", after, old...)

	// The table changes (a scope added): a new token, the old evicted.
	spec := w.refreshSpec("web", true)
	spec.Scopes = []string{"offline_access"}
	w.setSpec(t, spec)
	if _, ferr := w.fetch(t); ferr != nil || w.as.requests.Load() != 3 {
		t.Fatalf("after the table changed: %v, %d token requests, want 3", ferr, w.as.requests.Load())
	}
	if n := cachedTokens(w.e.gate, "API_TOKEN"); n != 1 {
		t.Errorf("%d token caches after the table changed, want 1", n)
	}
}
