package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The value of every secret in these tests: it must never appear in an
// audit event, a denial or anything the tool sees unredacted.
const cardsSecretValue = "s3cr3t-value-never-logged"

// hits counts the requests a test server received, per Host header and
// path: the proof that a refused request never reached it.
type hits struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *hits) add(host string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[host]++
}

func (h *hits) get(host string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[host]
}

// cardsWorld is a real TLS server on loopback answering as api.example.com
// and other.example.com, and the fetcher tools allowed both by agent.toml.
type cardsWorld struct {
	port  string
	hits  *hits
	ca    string
	audit *testkit.SyncBuffer
	obs   *recorder
}

func newCardsWorld(t *testing.T) *cardsWorld {
	w := &cardsWorld{hits: &hits{}, audit: &testkit.SyncBuffer{}, obs: &recorder{maxRunning: 1 << 20, maxQueued: 1 << 20}}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		w.hits.add(host)
		fmt.Fprintf(rw, "host=%s path=%s auth=%v", host, r.URL.Path, r.Header.Get("Authorization") != "")
	}), "api.example.com", "other.example.com")
	u, _ := url.Parse(srv.URL)
	w.port, w.ca = u.Port(), ca
	return w
}

// config is agent.toml: the two fetchers allowed both hosts on the
// server's port, secrets TOKEN (unbound) and WEATHER (bound to
// api.example.com, GET, /v1/), then extra.
func (w *cardsWorld) config(extra string) string {
	return `version = 1
[tools.fetcher]
path = %[1]q
http_allow = ["api.example.com", "other.example.com"]
http_ports = [` + w.port + `]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["` + w.ca + `"]
secrets = ["TOKEN", "WEATHER"]
[tools.fetchseq]
path = %[2]q
http_allow = ["api.example.com", "other.example.com"]
http_ports = [` + w.port + `]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["` + w.ca + `"]

[secrets.WEATHER]
hosts = ["api.example.com"]
methods = ["GET"]
path_prefixes = ["/v1/"]
` + extra
}

func (w *cardsWorld) host(t *testing.T, extra string) *maiden.Host {
	return w.hostIn(t, extra, maiden.InProcess)
}

func (w *cardsWorld) hostIn(t *testing.T, extra string, iso maiden.Isolation) *maiden.Host {
	return newHostWith(t, w.config(extra), maiden.Options{
		Isolation:    iso,
		Resolver:     testkit.Loopback("api.example.com", "other.example.com"),
		LookupSecret: func(string) (string, bool) { return cardsSecretValue, true },
		Audit:        slog.New(slog.NewJSONHandler(w.audit, nil)),
		Observer:     w.obs,
	}, "js/fetcher", "js/fetchseq")
}

// fetch calls the fetcher as agent: GET (or method) of host+path, with
// credential cred if not "".
func (w *cardsWorld) fetch(t *testing.T, h *maiden.Host, agent, method, host, path, cred string) maiden.Result {
	t.Helper()
	in := map[string]any{"url": "https://" + host + ":" + w.port + path}
	if method != "" {
		in["method"] = method
	}
	if cred != "" {
		in["credential"] = cred
	}
	b, _ := json.Marshal(in)
	res, err := h.Call(context.Background(), maiden.Call{Agent: agent, Tool: "fetcher", Input: string(b)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// events are the audit events written so far.
func (w *cardsWorld) events(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(w.audit.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// lastEvent checks that the last audit event and the last Observer event
// are a denial by rule.
func (w *cardsWorld) lastDenial(t *testing.T, rule string) {
	t.Helper()
	evs := w.events(t)
	if len(evs) == 0 {
		t.Fatal("no audit event")
	}
	ev := evs[len(evs)-1]
	if ev["decision"] != "deny" || ev["rule"] != rule {
		t.Errorf("audit event: %v; want a denial by rule %s", ev, rule)
	}
	w.obs.mu.Lock()
	defer w.obs.mu.Unlock()
	if n := len(w.obs.fetches); n == 0 || w.obs.fetches[n-1].Allowed || w.obs.fetches[n-1].Rule != rule {
		t.Errorf("observer saw %+v; want a denial by rule %s", w.obs.fetches, rule)
	}
}

func denied(res maiden.Result, parts ...string) bool {
	if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied {
		return false
	}
	for _, p := range parts {
		if !strings.Contains(res.Error.Message, p) {
			return false
		}
	}
	return true
}

// TestNetworkCardsAtFetchTime: for a declared agent every http-fetch must
// also be allowed by a network:connect card of its wallet (host and port),
// and a credential by a secret:use card, on top of agent.toml; a refusal
// names the grant to paste, is audited once and reported to the Observer
// with its rule, and nothing reaches the server.
func TestNetworkCardsAtFetchTime(t *testing.T) {
	t.Parallel()
	w := newCardsWorld(t)
	tool := `"tool:invoke fetcher --...", `
	h := w.host(t, `
[agents.none]
tools = ["fetcher"]
grants = [`+tool+`]
[agents.apionly]
tools = ["fetcher"]
grants = [`+tool+`"network:connect api.example.com", "secret:use TOKEN"]
[agents.wrongport]
tools = ["fetcher"]
grants = [`+tool+`"network:connect api.example.com:443"]
[agents.withport]
tools = ["fetcher"]
grants = [`+tool+`"network:connect api.example.com:`+w.port+`"]
[agents.nosecret]
tools = ["fetcher"]
grants = [`+tool+`"network:connect *"]
[agents.fenced]
tools = ["fetcher"]
grants = [`+tool+`"network:connect *"]
`)
	pasteable := func(agent, host string) string {
		return "grant it: maiden cards grant -agent " + agent + " 'network:connect " + host + ":" + w.port + "'"
	}
	// Allowed by http_allow, no network card.
	if res := w.fetch(t, h, "none", "", "api.example.com", "/", ""); !denied(res, `no card of agent "none" allows network:connect api.example.com:`+w.port, pasteable("none", "api.example.com"), "rule: network-card") {
		t.Errorf("no network card: %+v", res)
	}
	w.lastDenial(t, maiden.RuleNetworkCard)
	if ev := w.events(t)[0]; ev["agent"] != "none" {
		t.Errorf("the audit event does not name the agent: %v", ev)
	}

	// A card for host A does not allow host B.
	if res := w.fetch(t, h, "apionly", "", "api.example.com", "/", ""); !res.OK || !strings.Contains(res.Output, "host=api.example.com") {
		t.Errorf("card for api.example.com: %+v", res)
	}
	if res := w.fetch(t, h, "apionly", "", "other.example.com", "/", ""); !denied(res, pasteable("apionly", "other.example.com")) {
		t.Errorf("card for A used for B: %+v", res)
	}
	w.lastDenial(t, maiden.RuleNetworkCard)

	// The port is part of the grant.
	if res := w.fetch(t, h, "wrongport", "", "api.example.com", "/", ""); !denied(res, pasteable("wrongport", "api.example.com")) {
		t.Errorf("card for port 443 used for %s: %+v", w.port, res)
	}
	if res := w.fetch(t, h, "withport", "", "api.example.com", "/", ""); !res.OK {
		t.Errorf("card for the port: %+v", res)
	}

	// A credential needs secret:use.
	if res := w.fetch(t, h, "nosecret", "", "other.example.com", "/", ""); !res.OK {
		t.Errorf("no credential: %+v", res)
	}
	if res := w.fetch(t, h, "nosecret", "", "other.example.com", "/", "TOKEN"); !denied(res, "grant it: maiden cards grant -agent nosecret 'secret:use TOKEN'", "rule: secret-card") {
		t.Errorf("credential without secret:use: %+v", res)
	}
	w.lastDenial(t, maiden.RuleSecretCard)
	if res := w.fetch(t, h, "apionly", "", "api.example.com", "/", "TOKEN"); !res.OK || !strings.Contains(res.Output, "auth=true") {
		t.Errorf("credential with secret:use: %+v", res)
	}

	// The fenced agent also holds an operator's card whose upper-negative
	// grant forbids other.example.com, whatever else allows it (the store
	// holds the agents once the host has made its first call).
	st, err := store.Open(context.Background(), h.Config().StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	api, _ := grant.Parse("network:connect api.example.com")
	fence, _ := grant.Parse("network:connect other.example.com")
	if _, err := st.Grant(context.Background(), "fenced", cards.Spec{LowerPos: cards.Any(api), UpperNeg: cards.Any(fence)}); err != nil {
		t.Fatal(err)
	}

	// A ceiling in another card of the wallet holds at fetch time too.
	if res := w.fetch(t, h, "fenced", "", "other.example.com", "/", ""); !denied(res, "upper-negative", "rule: network-card") {
		t.Errorf("upper-negative network grant: %+v", res)
	}
	if res := w.fetch(t, h, "fenced", "", "api.example.com", "/", ""); !res.OK {
		t.Errorf("fenced agent, other host: %+v", res)
	}

	// Cards narrow agent.toml, never widen it: a network:connect * card
	// does not open a host outside http_allow.
	if res := w.fetch(t, h, "nosecret", "", "elsewhere.example.com", "/", ""); !denied(res, "rule: allowlist") {
		t.Errorf("host outside http_allow: %+v", res)
	}

	// Requests reached the server only when allowed: api.example.com for
	// apionly (2), withport, fenced; other.example.com for nosecret once.
	if got := w.hits.get("api.example.com"); got != 4 {
		t.Errorf("api.example.com received %d requests, want 4", got)
	}
	if got := w.hits.get("other.example.com"); got != 1 {
		t.Errorf("other.example.com received %d requests, want 1", got)
	}
	// One audit event per request, none with the secret's value.
	if n := len(w.events(t)); n != 11 {
		t.Errorf("%d audit events for 11 requests:\n%s", n, w.audit.String())
	}
	if strings.Contains(w.audit.String(), cardsSecretValue) {
		t.Error("the audit log holds a secret value")
	}
}

// TestSecretDestinations: a secret bound by [secrets.NAME] in agent.toml
// goes only to its hosts, with its methods, under its path prefixes, for a
// declared agent holding every card and for the implicit agent alike; a
// refusal names the binding and happens before any byte reaches the other
// host. A secret without a binding goes wherever its tool may fetch.
func TestSecretDestinations(t *testing.T) {
	t.Parallel()
	w := newCardsWorld(t)
	declared := w.host(t, `
[agents.full]
tools = ["fetcher"]
grants = ["tool:invoke fetcher --...", "network:connect *", "secret:use *"]
`)
	implicit := w.host(t, "")
	for _, tc := range []struct {
		h     *maiden.Host
		agent string
	}{{declared, "full"}, {implicit, ""}} {
		name := tc.agent
		if name == "" {
			name = "implicit"
		}
		t.Run(name, func(t *testing.T) {
			apiBefore, otherBefore := w.hits.get("api.example.com"), w.hits.get("other.example.com")
			eventsBefore := len(w.events(t))
			binding := "[secrets.WEATHER] (agent.toml:"
			if res := w.fetch(t, tc.h, tc.agent, "", "api.example.com", "/v1/forecast", "WEATHER"); !res.OK || !strings.Contains(res.Output, "auth=true") {
				t.Errorf("bound destination: %+v", res)
			}
			for _, bad := range []struct{ what, method, host, path, want string }{
				{"another allowed host", "", "other.example.com", "/v1/forecast", `may not be sent to host "other.example.com": its binding ` + binding},
				{"a wrong method", "POST", "api.example.com", "/v1/forecast", `may not be sent with method "POST": its binding ` + binding},
				{"a path outside the prefixes", "", "api.example.com", "/v2/forecast", `may not be sent to path "/v2/forecast": its binding ` + binding},
				{"the prefix without its slash", "", "api.example.com", "/v1", `may not be sent to path "/v1"`},
				{"a dot segment", "", "api.example.com", "/v1/../admin", `"." or ".." segment`},
				{"an escaped dot segment", "", "api.example.com", "/v1/%2e%2e/admin", `"." or ".." segment`},
				{"a servlet dot segment", "", "api.example.com", "/v1/..;/admin", `"." or ".." segment`},
				{"an escaped slash", "", "api.example.com", "/v1%2f..%2fadmin", `"." or ".." segment`},
				{"double escaping", "", "api.example.com", "/v1/%252e%252e/admin", "escaped twice"},
				{"a backslash", "", "api.example.com", `/v1/%5c..%5cadmin`, "backslash"},
			} {
				res := w.fetch(t, tc.h, tc.agent, bad.method, bad.host, bad.path, "WEATHER")
				if !denied(res, `credential "WEATHER"`, bad.want, "rule: credential-destination") {
					t.Errorf("%s: %+v", bad.what, res)
				}
				w.lastDenial(t, "credential-destination")
			}
			// The same requests without the credential, or with the unbound
			// one, are the tool's to make.
			if res := w.fetch(t, tc.h, tc.agent, "", "other.example.com", "/v1/forecast", ""); !res.OK {
				t.Errorf("no credential: %+v", res)
			}
			if res := w.fetch(t, tc.h, tc.agent, "POST", "other.example.com", "/v2", "TOKEN"); !res.OK || !strings.Contains(res.Output, "auth=true") {
				t.Errorf("unbound secret: %+v", res)
			}
			if got := w.hits.get("api.example.com") - apiBefore; got != 1 {
				t.Errorf("api.example.com received %d requests, want the 1 allowed", got)
			}
			if got := w.hits.get("other.example.com") - otherBefore; got != 2 {
				t.Errorf("other.example.com received %d requests, want the 2 without WEATHER", got)
			}
			if n := len(w.events(t)) - eventsBefore; n != 13 {
				t.Errorf("%d audit events for 13 requests", n)
			}
			if strings.Contains(w.audit.String(), cardsSecretValue) {
				t.Error("the audit log holds a secret value")
			}
		})
	}
}

// TestImplicitAgentNeedsNoCards: without [agents] no card is asked at
// fetch time (the implicit agent holds every card); only agent.toml's own
// rules, secret destinations included, apply.
func TestImplicitAgentNeedsNoCards(t *testing.T) {
	t.Parallel()
	w := newCardsWorld(t)
	h := w.host(t, "")
	for _, host := range []string{"api.example.com", "other.example.com"} {
		if res := w.fetch(t, h, "", "", host, "/", "TOKEN"); !res.OK || !strings.Contains(res.Output, "auth=true") {
			t.Errorf("%s: %+v", host, res)
		}
	}
	if res := w.fetch(t, h, "", "", "elsewhere.example.com", "/", ""); !denied(res, "rule: allowlist") {
		t.Errorf("outside http_allow: %+v", res)
	}
	for _, ev := range w.events(t) {
		if ev["agent"] != maiden.DefaultAgent {
			t.Errorf("audit event of the implicit agent: %v", ev)
		}
	}
}

// TestFetchWalletPinnedPerCall: a call's http-fetches are decided on the
// wallet pinned when the call was authorized. A card revoked while a call
// runs (here by the server, between two requests of one call) still
// allows that call's later requests; the next call is denied.
func TestFetchWalletPinnedPerCall(t *testing.T) {
	t.Parallel()
	w := &cardsWorld{hits: &hits{}, audit: &testkit.SyncBuffer{}, obs: &recorder{maxRunning: 1 << 20, maxQueued: 1 << 20}}
	var revoke func() error
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.add(r.URL.Path)
		if r.URL.Path == "/revoke" {
			if err := revoke(); err != nil {
				http.Error(rw, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprintf(rw, "path=%s", r.URL.Path)
	}), "api.example.com", "other.example.com")
	u, _ := url.Parse(srv.URL)
	w.port, w.ca = u.Port(), ca
	h := w.host(t, `
[agents.seq]
tools = ["fetchseq"]
grants = ["tool:invoke fetchseq --..."]
`)
	ctx := context.Background()
	call := func() maiden.Result {
		t.Helper()
		base := "https://api.example.com:" + w.port
		in, _ := json.Marshal(map[string]any{"urls": []string{base + "/revoke", base + "/after"}})
		res, err := h.Call(ctx, maiden.Call{Agent: "seq", Tool: "fetchseq", Input: string(in)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// No network card yet: both requests refused, nothing sent.
	if res := call(); !res.OK || strings.Count(res.Output, "denied: no card of agent \"seq\" allows network:connect api.example.com") != 2 {
		t.Fatalf("before the grant: %+v", res)
	}
	st, err := store.Open(ctx, h.Config().StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, _ := grant.Parse("network:connect api.example.com")
	card, err := st.Grant(ctx, "seq", cards.Spec{LowerPos: cards.Any(g)})
	if err != nil {
		t.Fatal(err)
	}
	revoke = func() error {
		_, err := st.Revoke(ctx, store.Operator(), card.ID)
		return err
	}
	// The server revokes the card on the call's first request; the second
	// request of the same call is still allowed.
	if res := call(); !res.OK || res.Output != "200 path=/revoke\n200 path=/after" {
		t.Fatalf("the call that saw the revocation: %+v", res)
	}
	// The next call is decided on the new wallet.
	if res := call(); !res.OK || strings.Count(res.Output, "denied: no card of agent \"seq\" allows network:connect api.example.com") != 2 {
		t.Fatalf("the next call: %+v", res)
	}
	if w.hits.get("/revoke") != 1 || w.hits.get("/after") != 1 {
		t.Errorf("server saw /revoke %d and /after %d times, want 1 each", w.hits.get("/revoke"), w.hits.get("/after"))
	}
}

// TestSecretDestinationsAgreeWithEgress: config and the gate (which
// imports no config) apply the same rule to path prefixes, so every
// agent.toml that loads compiles into policies.
func TestSecretDestinationsAgreeWithEgress(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"/", "/v1", "/v1/", "/a;b=c/", "/~user/x:y@z", "/a-b_c.d!$&'()*+,=", "/...", "/.well-known/", "/a/..b/",
		"", "v1", "/v1/../", "/v1/./", "/..;x/", "/%2e", "/a b", "/a?b", "/a#b", `/a\b`, "/é",
		"/" + strings.Repeat("a", 1023), "/" + strings.Repeat("a", 1024),
	} {
		src := fmt.Sprintf("version = 1\n[tools.t]\npath = \"t.wasm\"\nsecrets = [\"S\"]\n[secrets.S]\nhosts = [\"a.example.com\"]\npath_prefixes = [%q]\n", p)
		_, cerr := config.Parse("agent.toml", []byte(src), t.TempDir())
		configOK := cerr == nil || !strings.Contains(cerr.Error(), "path_prefixes")
		egressOK := egress.PathPrefixProblem(p) == ""
		if configOK != egressOK {
			t.Errorf("prefix %q: config accepts %v (%v), egress accepts %v", p, configOK, cerr, egressOK)
		}
	}
}

// TestFetchAuthorityInWorkers: with worker isolation the fetch relay runs
// in the parent under the same pinned wallet and secret bindings.
func TestFetchAuthorityInWorkers(t *testing.T) {
	t.Parallel()
	w := newCardsWorld(t)
	h := w.hostIn(t, `
[agents.apionly]
tools = ["fetcher"]
grants = ["tool:invoke fetcher --...", "network:connect api.example.com", "secret:use WEATHER"]
`, maiden.Workers)
	if res := w.fetch(t, h, "apionly", "", "api.example.com", "/v1/x", "WEATHER"); !res.OK || !strings.Contains(res.Output, "auth=true") {
		t.Errorf("allowed: %+v", res)
	}
	if res := w.fetch(t, h, "apionly", "", "other.example.com", "/", ""); !denied(res, "grant it: maiden cards grant -agent apionly 'network:connect other.example.com:"+w.port+"'") {
		t.Errorf("no card for the host: %+v", res)
	}
	w.lastDenial(t, maiden.RuleNetworkCard)
	if res := w.fetch(t, h, "apionly", "", "api.example.com", "/v2/x", "WEATHER"); !denied(res, "[secrets.WEATHER]", "rule: credential-destination") {
		t.Errorf("outside the binding: %+v", res)
	}
	if got := w.hits.get("api.example.com") + w.hits.get("other.example.com"); got != 1 {
		t.Errorf("the server received %d requests, want 1", got)
	}
}
