package egress

// The twenty-seventh pass (docs/security-tests.md, docs/mutation/egress-gate.tsv
// and docs/mutation/egress-oauth.tsv): tests that close the twenty-third
// pass's open plants in the redactor's decoding pass, and kill plants in the
// gate's OAuth2 tokens no earlier test caught.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
)

// The decoded window starts maxLen-1 bytes before an escape: the longest
// pattern (a value's every-byte %XX form) ending on a decoded escape is
// found there and nowhere else.
func TestMutation27LongestFormEndingOnEscape(t *testing.T) {
	t.Parallel()
	const secret = "k7Qx-vault-27"
	r := newRedactor([]secretValue{{"T", secret}})
	all := percentAll([]byte(secret)) // ...%32%37: ends in '7'
	in := "v=" + all[:len(all)-1] + "&#55;;"
	if got := r.String(in); got != "v=[REDACTED:T];" {
		t.Errorf("the every-byte %%XX form whose last digit is &#55;: %q; want %q", got, "v=[REDACTED:T];")
	}
}

// A line break after exactly minB64Run (16) base64 characters is one
// inside base64: the value's base64 form broken there is found.
func TestMutation27Base64LineOf16(t *testing.T) {
	t.Parallel()
	const secret = "b64-line-secret-27"
	r := newRedactor([]secretValue{{"T", secret}})
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	for _, brk := range []string{"\n", "\r\n", `\n`} {
		in := b64[:16] + brk + b64[16:] + "\nend"
		if got := r.String(in); got != "[REDACTED:T]\nend" {
			t.Errorf("base64 broken after 16 characters by %q: %q; want %q", brk, got, "[REDACTED:T]\nend")
		}
	}
}

// A decimal numeric reference has up to 7 digits: "&#0000065;" is 'A', and
// U+F4240 (1000000) is reached only with all 7.
func TestMutation27SevenDigitReferences(t *testing.T) {
	t.Parallel()
	const secret = "tok-A-\U000F4240-27"
	r := newRedactor([]secretValue{{"T", secret}})
	for _, in := range []string{
		"x tok-&#0000065;-\U000F4240-27 y",
		"x tok-A-&#1000000;-27 y",
	} {
		if got := r.String(in); got != "x [REDACTED:T] y" {
			t.Errorf("r.String(%q) = %q; want %q", in, got, "x [REDACTED:T] y")
		}
	}
}

// "&quot" without ';' (as browsers read it) is '"'.
func TestMutation27QuotWithoutSemicolon(t *testing.T) {
	t.Parallel()
	const secret = `pa"55-word-27`
	r := newRedactor([]secretValue{{"T", secret}})
	in := `<p>pa&quot55-word-27</p>`
	if got := r.String(in); got != "<p>[REDACTED:T]</p>" {
		t.Errorf("r.String(%q) = %q; want %q", in, got, "<p>[REDACTED:T]</p>")
	}
}

// tokWorld is a token endpoint the test scripts (a.example.com, TLS on
// loopback), an API that accepts any bearer token not in reject and
// echoes the Authorization header it got, and a gate with a clock the
// test moves. The endpoint is the adversary here: its answers are what
// the test makes them.
type tokWorld struct {
	e        *env
	tok, api *server
	p        *Policy
	base     time.Time
	clock    atomic.Int64 // offset from base, in ns: the gate's time stands still unless the test moves it

	mu      sync.Mutex
	answer  func(rw http.ResponseWriter, r *http.Request, n int) // n counts token requests from 1
	n       int
	forms   []url.Values // each token request's form
	auths   []string     // each token request's Authorization header
	reject  map[string]bool
	apiSeen []string // each Authorization the API got
}

func newTokWorld(t *testing.T) *tokWorld {
	t.Helper()
	w := &tokWorld{reject: map[string]bool{}, base: time.Now()}
	w.tok = startServer(t, func(rw http.ResponseWriter, r *http.Request) {
		_, body := w.tok.lastRequest() // startServer read the body
		form, _ := url.ParseQuery(string(body))
		w.mu.Lock()
		w.n++
		n, answer := w.n, w.answer
		w.forms = append(w.forms, form)
		w.auths = append(w.auths, r.Header.Get("Authorization"))
		w.mu.Unlock()
		answer(rw, r, n)
	}, false)
	w.api = startServer(t, func(rw http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		w.mu.Lock()
		w.apiSeen = append(w.apiSeen, a)
		bad := w.reject[strings.TrimPrefix(a, "Bearer ")]
		w.mu.Unlock()
		if bad {
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(rw, "auth=%s", a)
	}, false)
	w.e = newEnv(t)
	w.e.gate = New(&Options{Resolver: w.e.res, Audit: w.e.audit.logger(),
		LookupSecret: func(n string) (string, bool) { v, ok := w.e.secrets[n]; return v, ok },
		Now:          func() time.Time { return w.base.Add(time.Duration(w.clock.Load())) }})
	w.e.res.set("api.example.com", "127.0.0.1")
	w.e.res.set("a.example.com", "127.0.0.1")
	w.e.secrets["API_TOKEN"] = "client-secret-27"
	w.setSpec(t, w.spec("/token"))
	return w
}

// spec is kind oauth2, client credentials, client "c27", at path of the
// token endpoint.
func (w *tokWorld) spec(path string) credential.Spec {
	return credential.Spec{Kind: credential.OAuth2, TokenURL: urlFor(w.tok, "a.example.com", path), ClientID: "c27"}
}

func (w *tokWorld) setSpec(t *testing.T, spec credential.Spec) {
	r := toolFor(t, w.api.port, w.tok.port)
	r.Hosts = append(r.Hosts, "a.example.com")
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com", "a.example.com"}, Source: "[secrets.API_TOKEN]", Credential: spec}}
	w.p = mustPolicy(t, r)
}

// tokens makes the endpoint answer request n with access token "at-27-n"
// for expires seconds, and the refresh token rotate(n) if not "".
func (w *tokWorld) tokens(expires int, rotate func(n int) string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.answer = func(rw http.ResponseWriter, _ *http.Request, n int) {
		m := map[string]any{"access_token": fmt.Sprintf("at-27-%d", n), "token_type": "Bearer", "expires_in": expires}
		if rotate != nil {
			if rt := rotate(n); rt != "" {
				m["refresh_token"] = rt
			}
		}
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(m)
	}
}

func (w *tokWorld) requests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *tokWorld) form(i int) url.Values {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.forms[i]
}

// fetch is a call of the tool with API_TOKEN attached.
func (w *tokWorld) fetch(t *testing.T) (*Response, *FetchError) {
	return w.e.gate.Fetch(ctxTimeout(t, 20*time.Second), w.p, withCred(get(urlFor(w.api, "api.example.com", "/v1")), "API_TOKEN"))
}

// lastAuth is the Authorization header the API got last.
func (w *tokWorld) lastAuth() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.apiSeen) == 0 {
		return ""
	}
	return w.apiSeen[len(w.apiSeen)-1]
}

// mustFetch is a call that succeeds and sends the API token want.
func (w *tokWorld) mustFetch(t *testing.T, want string) {
	t.Helper()
	resp, ferr := w.fetch(t)
	if ferr != nil {
		t.Fatalf("call: %v; want the API called with %s", ferr, want)
	}
	if got := w.lastAuth(); got != "Bearer "+want {
		t.Fatalf("the API got Authorization %q; want %q", got, "Bearer "+want)
	}
	if string(resp.Body) != "auth=Bearer [REDACTED:API_TOKEN]" {
		t.Fatalf("the tool got %q; want %q", resp.Body, "auth=Bearer [REDACTED:API_TOKEN]")
	}
}

// A token endpoint's answer is its own word: only a 200 whose whole body
// (at most maxTokenResponse bytes, read to its end) is JSON giving a
// bearer token that can be sent as a header value gives a token; the
// refusal names the status and a registered error code, nothing else the
// endpoint wrote. The API is never called without a token.
func TestMutation27HostileTokenAnswers(t *testing.T) {
	const ok = `{"access_token":"at-27-hostile","token_type":"Bearer","expires_in":3600}`
	const prefix = `credential "API_TOKEN": the token endpoint "a.example.com" `
	pad := func(n int) string { return ok + strings.Repeat(" ", n-len(ok)) }
	for _, tc := range []struct {
		name   string
		answer func(rw http.ResponseWriter)
		want   string // the refusal's message; "" for a token
	}{
		{"redirect with a token in its body", func(rw http.ResponseWriter) {
			rw.Header().Set("Location", "https://api.example.com/v1")
			rw.WriteHeader(http.StatusFound)
			io.WriteString(rw, ok)
		}, prefix + "gave no access token: status 302"},
		{"401 with a token", func(rw http.ResponseWriter) {
			rw.WriteHeader(http.StatusUnauthorized)
			io.WriteString(rw, `{"access_token":"at-27-hostile","token_type":"Bearer","error":"invalid_client"}`)
		}, prefix + "gave no access token: status 401 (error invalid_client)"},
		{"expires_in as a string", func(rw http.ResponseWriter) {
			io.WriteString(rw, `{"access_token":"at-27-hostile","token_type":"Bearer","expires_in":"3600"}`)
		}, prefix + "gave no access token: status 200"},
		{"token type mac", func(rw http.ResponseWriter) {
			io.WriteString(rw, `{"access_token":"at-27-hostile","token_type":"mac"}`)
		}, prefix + "gave a token maiden cannot send as a bearer token"},
		{"token with a line break", func(rw http.ResponseWriter) {
			io.WriteString(rw, `{"access_token":"at-27\r\nX-Injected: 1","token_type":"bearer"}`)
		}, prefix + "gave a token maiden cannot send as a bearer token"},
		{"error code with a prefix", func(rw http.ResponseWriter) {
			rw.WriteHeader(http.StatusBadRequest)
			io.WriteString(rw, `{"error":"see https://evil.example/invalid_client"}`)
		}, prefix + "gave no access token: status 400"},
		{"error code with a suffix", func(rw http.ResponseWriter) {
			rw.WriteHeader(http.StatusBadRequest)
			io.WriteString(rw, `{"error":"invalid_client: call +1 555 0100"}`)
		}, prefix + "gave no access token: status 400"},
		{"invalid_grant to client credentials", func(rw http.ResponseWriter) {
			rw.WriteHeader(http.StatusBadRequest)
			io.WriteString(rw, `{"error":"invalid_grant"}`)
		}, prefix + "gave no access token: status 400 (error invalid_grant)"},
		{"answer of exactly the bound", func(rw http.ResponseWriter) {
			io.WriteString(rw, pad(maxTokenResponse))
		}, ""},
		{"answer one byte over the bound", func(rw http.ResponseWriter) {
			io.WriteString(rw, pad(maxTokenResponse+1))
		}, `credential "API_TOKEN": the token endpoint's answer could not be read`},
		{"answer cut short of its length", func(rw http.ResponseWriter) {
			rw.Header().Set("Content-Length", "1000")
			io.WriteString(rw, ok)
		}, `credential "API_TOKEN": the token endpoint's answer could not be read`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTokWorld(t)
			w.mu.Lock()
			w.answer = func(rw http.ResponseWriter, _ *http.Request, _ int) { tc.answer(rw) }
			w.mu.Unlock()
			resp, ferr := w.fetch(t)
			if tc.want == "" {
				if ferr != nil || string(resp.Body) != "auth=Bearer [REDACTED:API_TOKEN]" {
					t.Fatalf("got %v; want the token sent and the answer auth=Bearer [REDACTED:API_TOKEN]", ferr)
				}
				return
			}
			if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleOAuth2Token || ferr.Message != tc.want+" (rule: oauth2-token)" {
				t.Fatalf("got %v (message %q); want denied, rule %s, %q", ferr, ferrMessage(ferr), RuleOAuth2Token, tc.want)
			}
			if n := w.api.reqs.Load(); n != 0 {
				t.Errorf("the API was called %d times; want 0", n)
			}
		})
	}
}

func ferrMessage(ferr *FetchError) string {
	if ferr == nil {
		return ""
	}
	return ferr.Message
}

// A cached token is one binding's: another token endpoint, client, grant
// or client secret part of the same secret name is another token, asked
// for anew, never the one the gate holds for the binding before.
func TestMutation27TokenPerBinding(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	w.e.secrets["API_TOKEN"+credential.ClientSecretPart] = "part-27-a"
	w.mustFetch(t, "at-27-1")
	steps := []struct {
		name string
		set  func(s *credential.Spec)
	}{
		{"another token endpoint", func(s *credential.Spec) { s.TokenURL = urlFor(w.tok, "a.example.com", "/token2") }},
		{"another client", func(s *credential.Spec) { s.ClientID = "c27-other" }},
		{"the refresh grant", func(s *credential.Spec) { s.Grant = credential.GrantRefreshToken }},
		{"the refresh grant with a client secret part", func(s *credential.Spec) { s.ClientSecret = true }},
		{"the client secret part rotated", func(*credential.Spec) {
			w.e.secrets["API_TOKEN"+credential.ClientSecretPart] = "part-27-b"
		}},
	}
	// Each step changes one thing of the binding before.
	spec := w.spec("/token")
	for i, st := range steps {
		st.set(&spec)
		w.setSpec(t, spec)
		want := fmt.Sprintf("at-27-%d", i+2)
		resp, ferr := w.fetch(t)
		if ferr != nil || w.lastAuth() != "Bearer "+want {
			t.Fatalf("%s: %v, the API got %q; want a new token, %q", st.name, ferr, w.lastAuth(), "Bearer "+want)
		}
		if string(resp.Body) != "auth=Bearer [REDACTED:API_TOKEN]" {
			t.Fatalf("%s: the tool got %q", st.name, resp.Body)
		}
	}
}

// The refresh token the gate sends is its lineage's latest: the one the
// endpoint last rotated to, kept when a later answer rotates nothing and
// when a token request fails, and carried to a new table that changes
// only the scopes; a table naming another endpoint or client starts from
// the configured one (the rotation is the old endpoint's and client's,
// never sent elsewhere).
func TestMutation27RefreshLineage(t *testing.T) {
	w := newTokWorld(t)
	w.e.secrets["API_TOKEN"] = "rt-27-0"
	spec := w.spec("/token")
	spec.Grant = credential.GrantRefreshToken
	w.setSpec(t, spec)
	w.mu.Lock()
	w.answer = func(rw http.ResponseWriter, _ *http.Request, n int) {
		if n == 4 {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		m := map[string]any{"access_token": fmt.Sprintf("at-27-%d", n), "token_type": "Bearer", "expires_in": 3600}
		if n == 1 || n == 6 || n == 7 {
			m["refresh_token"] = fmt.Sprintf("rt-27-%d", n)
		}
		json.NewEncoder(rw).Encode(m)
	}
	w.mu.Unlock()
	refuse := func(tok string) {
		w.mu.Lock()
		w.reject[tok] = true
		w.mu.Unlock()
	}
	sent := func(step string, i int, want string) {
		t.Helper()
		if n := w.requests(); n != i+1 {
			t.Fatalf("%s: %d token requests; want %d", step, n, i+1)
		}
		if got := w.form(i).Get("refresh_token"); got != want {
			t.Fatalf("%s: token request %d sent refresh token %q; want %q", step, i+1, got, want)
		}
	}
	w.mustFetch(t, "at-27-1")
	sent("first call", 0, "rt-27-0")
	refuse("at-27-1")
	w.mustFetch(t, "at-27-2")
	sent("after a 401", 1, "rt-27-1")
	refuse("at-27-2")
	w.mustFetch(t, "at-27-3")
	sent("after an answer that rotated nothing", 2, "rt-27-1")
	refuse("at-27-3")
	if _, ferr := w.fetch(t); ferr == nil || ferr.Rule != RuleOAuth2Token {
		t.Fatalf("the endpoint answering 503: %v; want rule %s", ferr, RuleOAuth2Token)
	}
	sent("the failed request", 3, "rt-27-1")
	w.mustFetch(t, "at-27-5")
	sent("after a failed request", 4, "rt-27-1")
	spec.TokenURL = urlFor(w.tok, "a.example.com", "/token2")
	w.setSpec(t, spec)
	w.mustFetch(t, "at-27-6")
	sent("another endpoint", 5, "rt-27-0")
	spec.ClientID = "c27-other"
	w.setSpec(t, spec)
	w.mustFetch(t, "at-27-7")
	sent("another client", 6, "rt-27-0")
	spec.Scopes = []string{"read"}
	w.setSpec(t, spec)
	w.mustFetch(t, "at-27-8")
	sent("other scopes", 7, "rt-27-7")
}

// A token is renewed a tenth of its life (at most a minute) before it
// expires, not sooner, and at that instant; an answer without expires_in
// (or 0) is a token for five minutes, not one that has already expired.
func TestMutation27RenewalInstants(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	w.mustFetch(t, "at-27-1")
	w.clock.Store(int64(59*time.Minute - time.Nanosecond))
	w.mustFetch(t, "at-27-1")
	w.clock.Store(int64(59 * time.Minute))
	w.mustFetch(t, "at-27-2")
	if n := w.requests(); n != 2 {
		t.Fatalf("%d token requests; want 2", n)
	}

	w = newTokWorld(t)
	w.tokens(0, nil)
	w.mustFetch(t, "at-27-1")
	w.mustFetch(t, "at-27-1")
	w.clock.Store(int64(4*time.Minute + 30*time.Second - time.Nanosecond))
	w.mustFetch(t, "at-27-1")
	w.clock.Store(int64(4*time.Minute + 30*time.Second))
	w.mustFetch(t, "at-27-2")
}

// The gate keeps at most maxRetired retired tokens; past the bound the
// one that expires first goes.
func TestMutation27RetiredBound(t *testing.T) {
	t.Parallel()
	base := time.Now()
	g := New(&Options{Now: func() time.Time { return base }})
	for i := range maxRetired + 1 {
		g.retire("API_TOKEN", fmt.Sprintf("r27-%d", i), base.Add(time.Hour+time.Duration(i)*time.Minute))
	}
	toks := g.retiredTokens("API_TOKEN")
	if len(toks) != maxRetired || slices.Contains(toks, "r27-0") || !slices.Contains(toks, fmt.Sprintf("r27-%d", maxRetired)) {
		t.Errorf("after %d retired tokens the gate keeps %d (r27-0, the first to expire, kept: %v); want %d, without r27-0",
			maxRetired+1, len(toks), slices.Contains(toks, "r27-0"), maxRetired)
	}
}

// memTokens is a TokenStore of one process: a lease is its mutex.
type memTokens struct {
	mu   sync.Mutex
	rows map[string][]byte
}

func (m *memTokens) LeaseToken(_ context.Context, key string, update func([]byte) ([]byte, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := update(m.rows[key])
	if err == nil && b != nil {
		m.rows[key] = b
	}
	return err
}

// A shared row is named without the scopes (so a rotated refresh token
// survives a change of them): a stored token asked for other scopes is
// not another instance's token to use.
func TestMutation27SharedTokenOfOtherScopes(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	store := &memTokens{rows: map[string][]byte{}}
	gate := func() *Gate {
		return New(&Options{Resolver: w.e.res, Audit: w.e.audit.logger(), Tokens: store,
			LookupSecret: func(n string) (string, bool) { v, ok := w.e.secrets[n]; return v, ok },
			Now:          func() time.Time { return w.base.Add(time.Duration(w.clock.Load())) }})
	}
	w.e.gate = gate()
	w.mustFetch(t, "at-27-1")
	w.e.gate = gate()
	spec := w.spec("/token")
	spec.Scopes = []string{"read"}
	w.setSpec(t, spec)
	w.mustFetch(t, "at-27-2")
	if got := w.form(1).Get("scope"); got != "read" {
		t.Errorf("the second instance asked for scope %q; want read", got)
	}
}

// The token URL is a URL of the policy and a POST of the secret's
// destinations: a port the policy does not open, or a binding of the
// endpoint's host for GET only, refuses the token request before
// anything is sent.
func TestMutation27TokenURLChecked(t *testing.T) {
	w := newTokWorld(t)
	w.tokens(3600, nil)
	check := func(what string, r Rules, want string) {
		t.Helper()
		w.p = mustPolicy(t, r)
		_, ferr := w.fetch(t)
		if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleOAuth2Token || ferr.Message != want || w.requests() != 0 || w.tok.conns.Load() != 0 {
			t.Fatalf("%s: %v, %d token requests, %d connections; want denied, rule %s, %q, nothing sent",
				what, ferr, w.requests(), w.tok.conns.Load(), RuleOAuth2Token, want)
		}
	}
	r := toolFor(t, w.api.port) // the token endpoint's port not opened
	r.Hosts = append(r.Hosts, "a.example.com")
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com", "a.example.com"}, Source: "[secrets.API_TOKEN]", Credential: w.spec("/token")}}
	check("a closed port", r, fmt.Sprintf(`credential "API_TOKEN": its token endpoint is not allowed: port %d is not allowed for this tool; it may use 443 and the ports in its http_ports (rule: port) (rule: oauth2-token)`, w.tok.port))
	r = toolFor(t, w.api.port, w.tok.port)
	r.Hosts = append(r.Hosts, "a.example.com")
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com", "a.example.com"}, Methods: []string{"GET"}, Source: "[secrets.API_TOKEN]", Credential: w.spec("/token")}}
	check("a binding for GET only", r, `credential "API_TOKEN": its token endpoint is not allowed: credential "API_TOKEN" may not be sent with method "POST": its binding [secrets.API_TOKEN] allows methods = ["GET"] (rule: credential-destination) (rule: oauth2-token)`)
}
