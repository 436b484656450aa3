package egress

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/maiden-run/maiden/internal/credential"
)

// authServer is a real OAuth 2.0 authorization server on loopback: the
// zitadel/oidc OpenID Provider with its example storage, which knows the
// client "sid1" (secret "verysecret") for the client credentials grant and
// issues tokens valid for five minutes. It answers as a.example.com. The
// wrapper only counts token requests and notes the tokens issued, so the
// API server below can accept exactly those.
type authServer struct {
	port     uint16
	srv      *httptest.Server
	st       *storage.Storage
	requests atomic.Int64
	mu       sync.Mutex
	issued   map[string]bool
	revoked  map[string]bool
	lastBody string
	// The refresh grant: each refresh token a token request sent, and
	// each one the server answered with (it rotates them).
	refreshSent, refreshIssued []string
	// expiresIn, when not 0, replaces the expires_in of every token the
	// server issues (a hostile or broken endpoint's lifetime).
	expiresIn atomic.Int64
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	as := &authServer{port: netip.MustParseAddrPort(l.Addr().String()).Port(), issued: map[string]bool{}, revoked: map[string]bool{}}
	issuer := "https://a.example.com:" + strconv.Itoa(int(as.port))
	// "web" is a confidential client (client_secret_basic), "native" a
	// public one; both may use refresh tokens.
	as.st = storage.NewStorageWithClients(storage.NewUserStore(issuer), map[string]*storage.Client{
		"web": storage.WebClient("web", "websecret"), "native": storage.NativeClient("native")})
	prov, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte("maiden test")), GrantTypeRefreshToken: true},
		as.st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	as.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth/token" {
			prov.ServeHTTP(w, r)
			return
		}
		as.requests.Add(1)
		r.ParseForm()
		rec := httptest.NewRecorder()
		prov.ServeHTTP(rec, r)
		var tr struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		}
		json.Unmarshal(rec.Body.Bytes(), &tr)
		as.mu.Lock()
		as.lastBody = rec.Body.String()
		if tr.AccessToken != "" {
			as.issued[tr.AccessToken] = true
		}
		if rt := r.PostForm.Get("refresh_token"); rt != "" {
			as.refreshSent = append(as.refreshSent, rt)
		}
		if tr.RefreshToken != "" {
			as.refreshIssued = append(as.refreshIssued, tr.RefreshToken)
		}
		as.mu.Unlock()
		body := rec.Body.Bytes()
		if n := as.expiresIn.Load(); n != 0 && tr.AccessToken != "" {
			var m map[string]any
			json.Unmarshal(body, &m)
			m["expires_in"] = n
			body, _ = json.Marshal(m)
			rec.Header().Del("Content-Length")
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	as.srv.Listener.Close()
	as.srv.Listener = l
	as.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	as.srv.TLS = &tls.Config{Certificates: []tls.Certificate{getPKI(t).leaf}}
	as.srv.StartTLS()
	t.Cleanup(as.srv.Close)
	return as
}

// valid reports whether tok is one the server issued and was not revoked.
func (as *authServer) valid(tok string) bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.issued[tok] && !as.revoked[tok]
}

// mintRefresh is a refresh token of client for user id1, as a code flow
// with offline_access would have given it.
func (as *authServer) mintRefresh(t *testing.T, client string) string {
	t.Helper()
	_, rt, _, err := as.st.CreateAccessAndRefreshTokens(t.Context(), &storage.AuthRequest{ApplicationID: client, UserID: "id1", Scopes: []string{"offline_access"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// accessTokens are every access token the server issued.
func (as *authServer) accessTokens() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	var out []string
	for tok := range as.issued {
		out = append(out, tok)
	}
	return out
}

// refreshTokens are every refresh token the server issued or was sent.
func (as *authServer) refreshTokens() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return append(slices.Clone(as.refreshSent), as.refreshIssued...)
}

func (as *authServer) revokeAll() {
	as.mu.Lock()
	defer as.mu.Unlock()
	for tok := range as.issued {
		as.revoked[tok] = true
	}
}

// oauthWorld is the authorization server, an API at api.example.com that
// accepts its tokens (401 otherwise) and echoes the Authorization header,
// and a gate with a clock the test moves.
type oauthWorld struct {
	as    *authServer
	api   *server
	e     *env
	p     *Policy
	clock atomic.Int64 // offset from now, in ns
	apiOK atomic.Int64

	mu      sync.Mutex
	apiSeen strings.Builder // every request the API received: headers, body

	// /v1/seen-later: arrived is closed when it is asked, and it answers
	// (what /v1/seen would) once hold is closed.
	arrived, hold chan struct{}
}

// seen is everything the API was sent.
func (w *oauthWorld) seen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.apiSeen.String()
}

func newOAuthWorld(t *testing.T, secret string) *oauthWorld {
	w := &oauthWorld{as: startAuthServer(t), arrived: make(chan struct{}), hold: make(chan struct{})}
	w.api = startServer(t, func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/seen-later" {
			close(w.arrived)
			select {
			case <-w.hold:
			case <-r.Context().Done():
				return
			}
			rw.Write([]byte(w.seen()))
			return
		}
		if r.URL.Path == "/v1/seen" {
			// What the API was sent so far, to anyone (an API's
			// request log): the access token in it.
			rw.Write([]byte(w.seen()))
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		r.Header.Write(&w.apiSeen)
		w.apiSeen.WriteString(r.URL.String() + "\n" + string(b) + "\n")
		w.mu.Unlock()
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !w.as.valid(tok) {
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.apiOK.Add(1)
		fmt.Fprintf(rw, "ok Authorization: %s", r.Header.Get("Authorization"))
	}, false)
	w.e = newEnv(t)
	w.e.gate = New(&Options{Resolver: w.e.res, Audit: w.e.audit.logger(),
		LookupSecret: func(n string) (string, bool) { v, ok := w.e.secrets[n]; return v, ok },
		Now:          func() time.Time { return time.Now().Add(time.Duration(w.clock.Load())) }})
	w.e.res.set("api.example.com", "127.0.0.1")
	w.e.res.set("a.example.com", "127.0.0.1")
	w.e.secrets["API_TOKEN"] = secret
	r := toolFor(t, w.api.port, w.as.port)
	r.Hosts = append(r.Hosts, "a.example.com")
	spec := credential.Spec{Kind: credential.OAuth2, TokenURL: "https://a.example.com:" + strconv.Itoa(int(w.as.port)) + "/oauth/token", ClientID: "sid1"}
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com", "a.example.com"}, Source: "[secrets.API_TOKEN]", Credential: spec}}
	w.p = mustPolicy(t, r)
	return w
}

func (w *oauthWorld) fetch(t *testing.T) (*Response, *FetchError) {
	return w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, withCred(get(urlFor(w.api, "api.example.com", "/v1/x")), "API_TOKEN"))
}

// TestOAuth2ClientCredentials against zitadel/oidc's provider: the host
// obtains one token for 50 concurrent first calls, reuses it, refreshes
// it ahead of its expiry, takes exactly one new token when the API answers
// 401 to 50 concurrent calls, and never lets the tool see it.
func TestOAuth2ClientCredentials(t *testing.T) {
	w := newOAuthWorld(t, "verysecret")
	w.concurrent(t, 50)
	if n := w.as.requests.Load(); n != 1 {
		t.Fatalf("50 concurrent first calls made %d token requests, want 1", n)
	}
	resp, ferr := w.fetch(t)
	if ferr != nil || w.as.requests.Load() != 1 {
		t.Fatalf("a later call: %v, %d token requests", ferr, w.as.requests.Load())
	}
	if !bytes.Contains(resp.Body, []byte("Authorization: Bearer [REDACTED:API_TOKEN]")) {
		t.Errorf("the tool saw the access token: %s", resp.Body)
	}
	// The API revokes the token: 50 concurrent calls get 401, and exactly
	// one new token serves all their retries.
	w.as.revokeAll()
	w.concurrent(t, 50)
	if n := w.as.requests.Load(); n != 2 {
		t.Fatalf("50 calls refused with 401 made %d token requests in all, want 2", n)
	}
	// Ahead of expiry (5 min, refreshed 30 s early): a new token before sending.
	w.clock.Store(int64(4*time.Minute + 45*time.Second))
	if _, ferr := w.fetch(t); ferr != nil || w.as.requests.Load() != 3 {
		t.Fatalf("near expiry: %v, %d token requests, want 3", ferr, w.as.requests.Load())
	}
	if w.e.gate.TokenRequests("API_TOKEN") != 3 {
		t.Errorf("gate counted %d token requests", w.e.gate.TokenRequests("API_TOKEN"))
	}
	for _, tok := range w.as.accessTokens() {
		if bytes.Contains(resp.Body, []byte(tok)) {
			t.Error("the tool saw an access token")
		}
		if strings.Contains(w.e.audit.raw(), tok) || strings.Contains(w.e.audit.raw(), "verysecret") {
			t.Error("the audit log holds a token or the client secret")
		}
	}
}

// TestOAuth2HostileExpiresIn: the token endpoint's expires_in is its own
// word, and a lifetime that does not fit a time.Duration in nanoseconds
// (more than some 292 years) must not wrap around: to a negative lifetime,
// which made every call ask for a new token (the endpoint hammered, the
// cache useless), or to one of a fraction of a second. However long the
// endpoint says, a token is used for at most maxTokenLife before the host
// asks again; a 401 still replaces it sooner.
func TestOAuth2HostileExpiresIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		secs int64
	}{
		{"wraps negative", 9223372037},      // * 1e9 is past math.MaxInt64
		{"wraps to 0.29s", 18446744074},     // * 1e9 wraps to 290448384 ns
		{"largest int64", math.MaxInt64},    // the most JSON can say here
		{"ten years", 10 * 365 * 24 * 3600}, // fits, but beyond the bound
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOAuthWorld(t, "verysecret")
			w.as.expiresIn.Store(tc.secs)
			for i := range 3 {
				if _, ferr := w.fetch(t); ferr != nil {
					t.Fatalf("call %d: %v", i, ferr)
				}
			}
			if n := w.as.requests.Load(); n != 1 {
				t.Fatalf("expires_in %d: 3 calls made %d token requests, want 1 (the token cached)", tc.secs, n)
			}
			w.clock.Store(int64(maxTokenLife - 2*time.Minute))
			if _, ferr := w.fetch(t); ferr != nil || w.as.requests.Load() != 1 {
				t.Fatalf("before the bound: %v, %d token requests, want 1", ferr, w.as.requests.Load())
			}
			w.clock.Store(int64(maxTokenLife))
			if _, ferr := w.fetch(t); ferr != nil || w.as.requests.Load() != 2 {
				t.Fatalf("expires_in %d, %s later: %v, %d token requests, want 2 (a token is used for at most %s)",
					tc.secs, maxTokenLife, ferr, w.as.requests.Load(), maxTokenLife)
			}
		})
	}
}

// TestOAuth2TokenRedactedFromEveryAnswer: an access token is redacted not
// only from the answer to the request it was attached to, but from every
// answer of the policy: here the API shows a later request, which carries
// no credential, the requests it was sent (the token in them).
func TestOAuth2TokenRedactedFromEveryAnswer(t *testing.T) {
	w := newOAuthWorld(t, "verysecret")
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	resp, ferr := w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, get(urlFor(w.api, "api.example.com", "/v1/seen")))
	if ferr != nil {
		t.Fatal(ferr)
	}
	toks := w.as.accessTokens()
	if len(toks) != 1 {
		t.Fatalf("%d access tokens issued, want 1", len(toks))
	}
	if bytes.Contains(resp.Body, []byte(toks[0])) {
		t.Fatalf("a request without the credential got the access token back: %s", resp.Body)
	}
	if !bytes.Contains(resp.Body, []byte("Authorization: Bearer [REDACTED:API_TOKEN]")) {
		t.Errorf("the API's log, as the tool got it, has no redacted token: %s", resp.Body)
	}
}

// TestOAuth2TokenRedactedFromAnswersInFlight: a token the gate obtains
// while another request of the policy is in flight is redacted from that
// request's answer too, though its redactor was built before the token
// existed: here the API holds a request without the credential until a
// second request has brought it the first token, then shows it what it
// was sent.
func TestOAuth2TokenRedactedFromAnswersInFlight(t *testing.T) {
	w := newOAuthWorld(t, "verysecret")
	type answer struct {
		resp *Response
		ferr *FetchError
	}
	later := make(chan answer, 1)
	go func() {
		resp, ferr := w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, get(urlFor(w.api, "api.example.com", "/v1/seen-later")))
		later <- answer{resp, ferr}
	}()
	<-w.arrived
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	close(w.hold)
	a := <-later
	if a.ferr != nil {
		t.Fatal(a.ferr)
	}
	toks := w.as.accessTokens()
	if len(toks) != 1 {
		t.Fatalf("%d access tokens issued, want 1", len(toks))
	}
	if bytes.Contains(a.resp.Body, []byte(toks[0])) {
		t.Fatalf("the answer of a request in flight when the token was obtained holds it: %s", a.resp.Body)
	}
	if !bytes.Contains(a.resp.Body, []byte("Authorization: Bearer [REDACTED:API_TOKEN]")) {
		t.Errorf("the API's log, as the tool got it, has no redacted token: %s", a.resp.Body)
	}
}

// TestOAuth2Refusals: a wrong client secret, a token endpoint that is down
// and one outside the secret's destinations are denied with the rule
// oauth2-token and a reason, never the endpoint's body; the API is never
// called.
func TestOAuth2Refusals(t *testing.T) {
	t.Run("wrong client secret", func(t *testing.T) {
		w := newOAuthWorld(t, "wrong-secret")
		_, ferr := w.fetch(t)
		if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleOAuth2Token || !strings.Contains(ferr.Message, "gave no access token: status ") {
			t.Fatalf("got %v", ferr)
		}
		w.as.mu.Lock()
		body := w.as.lastBody
		w.as.mu.Unlock()
		var e struct {
			Desc string `json:"error_description"`
		}
		json.Unmarshal([]byte(body), &e)
		t.Logf("endpoint body %q; refusal %q", body, ferr.Message)
		if body == "" || strings.Contains(ferr.Message, body) || e.Desc != "" && strings.Contains(ferr.Message, e.Desc) || strings.Contains(ferr.Message, "{") {
			t.Errorf("the refusal quotes the endpoint's body: %s", ferr.Message)
		}
		assertNoKeyMaterial(t, "the refusal", ferr.Error(), "wrong-secret", "verysecret")
		assertNoKeyMaterial(t, "the audit log", w.e.audit.raw(), "wrong-secret", "verysecret")
		if w.apiOK.Load() != 0 || w.api.reqs.Load() != 0 {
			t.Error("the API was called without a token")
		}
	})
	t.Run("endpoint down", func(t *testing.T) {
		w := newOAuthWorld(t, "verysecret")
		w.as.srv.Close()
		_, ferr := w.fetch(t)
		if ferr == nil || ferr.Rule != RuleOAuth2Token || !strings.Contains(ferr.Message, "could not be reached") {
			t.Fatalf("got %v", ferr)
		}
		assertNoKeyMaterial(t, "the refusal", ferr.Error(), "verysecret")
		if w.api.reqs.Load() != 0 {
			t.Error("the API was called")
		}
	})
	t.Run("endpoint outside destinations", func(t *testing.T) {
		w := newOAuthWorld(t, "verysecret")
		r := toolFor(t, w.api.port, w.as.port)
		r.Hosts = append(r.Hosts, "a.example.com")
		spec := credential.Spec{Kind: credential.OAuth2, TokenURL: "https://a.example.com:" + strconv.Itoa(int(w.as.port)) + "/oauth/token", ClientID: "sid1"}
		r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Source: "[secrets.API_TOKEN]", Credential: spec}}
		w.p = mustPolicy(t, r)
		_, ferr := w.fetch(t)
		if ferr == nil || ferr.Rule != RuleOAuth2Token || !strings.Contains(ferr.Message, "rule: credential-destination") {
			t.Fatalf("got %v", ferr)
		}
		if w.as.requests.Load() != 0 {
			t.Error("the token endpoint was called")
		}
	})
}

// TestOAuth2ReplacedTokenRedactedUntilItExpires: an access token the gate
// replaced ahead of its expiry (refreshed 30 s early) is still valid at
// its issuer until it expires, and an API that shows what it was sent
// (its request log) still has it. It is redacted from every answer until
// then, as the token in use is: the redactor held the current token only,
// so the tool read the one before in the clear.
func TestOAuth2ReplacedTokenRedactedUntilItExpires(t *testing.T) {
	w := newOAuthWorld(t, "verysecret")
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	w.clock.Store(int64(4*time.Minute + 45*time.Second)) // within the 30 s ahead of its expiry
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	toks := w.as.accessTokens()
	if len(toks) != 2 {
		t.Fatalf("%d access tokens issued, want 2 (the first refreshed ahead of its expiry)", len(toks))
	}
	body := seenHoldsNoToken(t, w, toks)
	if n := bytes.Count(body, []byte("Authorization: Bearer [REDACTED:API_TOKEN]")); n != 2 {
		t.Errorf("%d redacted tokens in the API's log, want both: %s", n, body)
	}
	// Once it has expired it is no longer looked for.
	w.clock.Store(int64(5*time.Minute + time.Second))
	w.e.gate.retiredMu.Lock()
	kept := len(w.e.gate.retired)
	w.e.gate.retiredMu.Unlock()
	if _, ferr := w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, get(urlFor(w.api, "api.example.com", "/v1/seen"))); ferr != nil {
		t.Fatal(ferr)
	}
	w.e.gate.retiredMu.Lock()
	left := len(w.e.gate.retired)
	w.e.gate.retiredMu.Unlock()
	if kept != 1 || left != 0 {
		t.Errorf("retired tokens: %d before the first one expired, %d after; want 1, then 0", kept, left)
	}
}

// TestOAuth2EvictedTokenRedactedUntilItExpires: a changed [secrets.NAME]
// table (here its scopes) is another token; the gate forgets the one it
// held, which its issuer still accepts until it expires, so that one is
// redacted until then too.
func TestOAuth2EvictedTokenRedactedUntilItExpires(t *testing.T) {
	w := newOAuthWorld(t, "verysecret")
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	r := toolFor(t, w.api.port, w.as.port)
	r.Hosts = append(r.Hosts, "a.example.com")
	spec := credential.Spec{Kind: credential.OAuth2, TokenURL: "https://a.example.com:" + strconv.Itoa(int(w.as.port)) + "/oauth/token", ClientID: "sid1", Scopes: []string{"openid"}}
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com", "a.example.com"}, Source: "[secrets.API_TOKEN]", Credential: spec}}
	w.p = mustPolicy(t, r)
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	toks := w.as.accessTokens()
	if len(toks) != 2 {
		t.Fatalf("%d access tokens issued, want 2 (one per table)", len(toks))
	}
	seenHoldsNoToken(t, w, toks)
}

// seenHoldsNoToken fetches the API's log of the requests it was sent (as
// the tool gets it) and fails the test if it holds any of toks, access
// tokens still valid at their issuer; it returns the log.
func seenHoldsNoToken(t *testing.T, w *oauthWorld, toks []string) []byte {
	t.Helper()
	resp, ferr := w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, get(urlFor(w.api, "api.example.com", "/v1/seen")))
	if ferr != nil {
		t.Fatal(ferr)
	}
	for _, tok := range toks {
		if bytes.Contains(resp.Body, []byte(tok)) {
			t.Errorf("the API's log, as the tool got it, holds an access token still valid at its issuer: %s", resp.Body)
		}
	}
	return resp.Body
}
