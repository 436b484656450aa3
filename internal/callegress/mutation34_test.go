package callegress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/credential"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// wallet34 is agent a's wallet holding the cards grants spell.
func wallet34(t *testing.T, grants ...string) *cards.Wallet {
	t.Helper()
	var cs []cards.Card
	for i, s := range grants {
		g, err := grant.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, cards.Card{ID: "c" + strconv.Itoa(i), Holder: "a", Spec: cards.Spec{LowerPos: cards.Any(g)}})
	}
	return cards.NewWallet("a", time.Now(), cs)
}

// TestMutation34RulesCarryTheToolsEgress: the rules of a tool are its
// agent.toml entry whole: the ports, networks and response cap it set are
// the gate's, not the gate's defaults (a dropped http_ports lets the tool
// reach the default ports; a dropped cap lets it read 2 MiB).
func TestMutation34RulesCarryTheToolsEgress(t *testing.T) {
	cfg := loadConfig(t, `version = 1
[tools.weather]
path = "w.wasm"
http_allow = ["api.example.com"]
http_ports = [8443]
http_allow_cidrs = ["10.1.2.0/24"]
http_max_response_bytes = 4096
secrets = ["WEATHER_TOKEN"]
`)
	tool := mustTool(t, cfg)
	got := Rules(cfg, tool)
	want := egress.Rules{
		Hosts:            []string{"api.example.com"},
		Ports:            []uint16{8443},
		AllowCIDRs:       []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")},
		Secrets:          []string{"WEATHER_TOKEN"},
		MaxResponseBytes: 4096,
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Rules(weather) (-want +got):\n%s", diff)
	}
}

// TestMutation34SpecCarriesEveryField: how a secret is attached is its
// [secrets.NAME] table whole; a setting left out (an OAuth2 scope, the
// SigV4 session token) changes what the credential grants or proves.
func TestMutation34SpecCarriesEveryField(t *testing.T) {
	d := config.SecretDestination{
		Name: "K", Hosts: []string{"api.example.com"}, Kind: "oauth2",
		Header: "X-H", Template: "t {value}", Username: "u", Algorithm: "sha512",
		SignatureHeader: "X-Sig", TimestampHeader: "X-Ts", AccessKeyID: "AKID", Region: "eu-west-1",
		Service: "s3", SessionToken: true, CertFile: "/c.pem", TokenURL: "https://api.example.com/token",
		ClientID: "cid", Scopes: []string{"read"}, Grant: "refresh_token", ClientSecret: true,
	}
	want := credential.Spec{
		Kind: "oauth2", Header: "X-H", Template: "t {value}", Username: "u", Algorithm: "sha512",
		SignatureHeader: "X-Sig", TimestampHeader: "X-Ts", AccessKeyID: "AKID", Region: "eu-west-1",
		Service: "s3", SessionToken: true, CertFile: "/c.pem", TokenURL: "https://api.example.com/token",
		ClientID: "cid", Scopes: []string{"read"}, Grant: "refresh_token", ClientSecret: true,
	}
	if diff := cmp.Diff(want, Spec(d)); diff != "" {
		t.Errorf("Spec (-want +got):\n%s", diff)
	}
}

// TestMutation34NotingNotesEachDecision: Noting hands note every decision
// the wallet makes, as Decide returned it, in order (what a CONNECT
// tunnel's and a web_fetch request's audit records carry), the denial
// included.
func TestMutation34NotingNotesEachDecision(t *testing.T) {
	w := wallet34(t, "network:connect *.example.com:443")
	var noted []api.Decision
	authz := Noting(w, func(d api.Decision) { noted = append(noted, d) })
	err := authz("api.example.com", 443, "ROOT_KEY")
	var r *egress.Refusal
	if !errors.As(err, &r) || r.Rule != RuleSecretCard {
		t.Fatalf("Noting: %v; want refused by %s", err, RuleSecretCard)
	}
	b := decide.Basis{Wallet: w}
	want := []api.Decision{decide.Decide(b, decide.Connect("api.example.com", 443)).API(), decide.Decide(b, decide.Use("ROOT_KEY")).API()}
	if !slices.Equal(noted, want) {
		t.Errorf("noted %+v; want network:connect then secret:use, as Decide returned them: %+v", noted, want)
	}
	if Noting(nil, func(api.Decision) {}) != nil {
		t.Error("Noting(nil) asks the implicit agent's cards")
	}
}

// TestMutation34FetchRecordsCallerAndRedacts: the gate's audit event of a
// call's http-fetch names the calling agent, and a value revealed to the
// tool during the call, put in the URL, is not logged.
func TestMutation34FetchRecordsCallerAndRedacts(t *testing.T) {
	const revealed = "rv-9c41f0e2d7"
	var log bytes.Buffer
	gate := egress.New(&egress.Options{Audit: slog.New(slog.NewJSONHandler(&log, nil))})
	pol, err := egress.NewPolicy("t", egress.Rules{Hosts: []string{"api.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithRecordRedactor(context.Background(), func(s string) string { return strings.ReplaceAll(s, revealed, "[REVEALED]") })
	_, ferr := Fetch(gate, pol, nil, "t", "agent-x", wallet34(t))(ctx, sandbox.FetchRequest{Method: "GET", URL: "https://api.example.com/v1/" + revealed})
	if ferr == nil || ferr.Kind != sandbox.FetchDenied {
		t.Fatalf("fetch: %+v; want refused by the wallet before the network", ferr)
	}
	var ev map[string]any
	if err := json.Unmarshal(log.Bytes(), &ev); err != nil {
		t.Fatalf("audit log %q: %v", log.String(), err)
	}
	if ev["agent"] != "agent-x" || ev["rule"] != RuleNetworkCard {
		t.Errorf("audit event %v; want agent agent-x, rule %s", ev, RuleNetworkCard)
	}
	if strings.Contains(log.String(), revealed) || !strings.Contains(log.String(), "[REVEALED]") {
		t.Errorf("audit event %s: the revealed value was logged", log.String())
	}
}

// TestMutation34ImplicitAgentAsksNoCards: a call of the implicit agent (no
// wallet) made under a Decisions list asks no card and notes nothing; its
// fetches are the policy's. The observer reports a response over the cap
// as allowed (the policy let it through), and the tool sees the gate's
// kind, too-large.
func TestMutation34ImplicitAgentAsksNoCards(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(bytes.Repeat([]byte("x"), 4096))
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	_, portText, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)
	pol, err := egress.NewPolicy("t", egress.Rules{
		Hosts: []string{"127.0.0.1"}, Ports: []uint16{uint16(port)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, MaxResponseBytes: 1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	var events []api.FetchEvent
	fetch := Fetch(egress.New(nil), pol, observer(func(e api.FetchEvent) { events = append(events, e) }), "t", "", nil)

	ctx, decided := Decisions(context.Background())
	resp, ferr := fetch(ctx, sandbox.FetchRequest{Method: "GET", URL: srv.URL + "/small"})
	if ferr != nil || resp.Status != 200 || string(resp.Body) != "ok" {
		t.Fatalf("the implicit agent's fetch: %+v %+v; want 200 ok (no card asked)", resp, ferr)
	}
	if got := decided(); len(got) != 0 {
		t.Errorf("the implicit agent's fetch noted %+v; want no decision", got)
	}
	_, ferr = fetch(context.Background(), sandbox.FetchRequest{Method: "GET", URL: srv.URL + "/big"})
	if ferr == nil || ferr.Kind != sandbox.FetchTooLarge {
		t.Errorf("a 4096-byte body over a 1024-byte cap: %+v; want kind %s", ferr, sandbox.FetchTooLarge)
	}
	if len(events) != 2 || !events[1].Allowed || events[1].Rule != egress.RuleTooLarge {
		t.Errorf("the observer saw %+v; want the too-large response reported allowed, rule %s", events, egress.RuleTooLarge)
	}
}

// TestMutation34PolicyCompileErrorIsReturned: a tool whose policy does not
// compile (its CA file no longer holds a certificate) gets the error, not
// a nil policy with no error.
func TestMutation34PolicyCompileErrorIsReturned(t *testing.T) {
	_, ca := testkit.TLSServer(t, http.NotFoundHandler(), "api.example.com") // its CA file, never dialled
	cfg := loadConfig(t, "version = 1\n[tools.weather]\npath = \"w.wasm\"\nhttp_allow = [\"api.example.com\"]\nhttp_ca_files = ["+strconv.Quote(ca)+"]\n")
	if err := os.WriteFile(ca, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ps Policies
	pol, err := ps.Of(cfg).Policy("a", mustTool(t, cfg), false)
	if pol != nil || !errors.Is(err, egress.ErrInvalidPolicy) {
		t.Errorf("Policy with a CA file holding no certificate = %v, %v; want nil and %v", pol, err, egress.ErrInvalidPolicy)
	}
}

// TestMutation34NarrowedPoliciesKeyedByAgentAndTool: agent "ab"'s binding
// of tool "c" and agent "a"'s of tool "bc" are two narrowings; neither is
// served the other's policy.
func TestMutation34NarrowedPoliciesKeyedByAgentAndTool(t *testing.T) {
	cfg := loadConfig(t, "version = 1\n[tools.weather]\npath = \"w.wasm\"\nhttp_allow = [\"a.example.com\", \"b.example.com\"]\n")
	c, bc := mustTool(t, cfg), mustTool(t, cfg)
	c.Name, c.HTTPAllow = "c", []string{"a.example.com"}
	bc.Name, bc.HTTPAllow = "bc", []string{"b.example.com"}
	var ps Policies
	set := ps.Of(cfg)
	if _, err := set.Policy("ab", c, true); err != nil {
		t.Fatal(err)
	}
	pol, err := set.Policy("a", bc, true)
	if err != nil {
		t.Fatal(err)
	}
	_, ferr := Fetch(egress.New(nil), pol, nil, "bc", "a", wallet34(t))(context.Background(), sandbox.FetchRequest{Method: "GET", URL: "https://a.example.com/"})
	if ferr == nil || ferr.Kind != sandbox.FetchDenied || !strings.Contains(ferr.Message, egress.RuleAllowlist) {
		t.Errorf("agent a's narrowing of bc fetching a.example.com (only ab's narrowing of c allows it): %+v; want refused by %s", ferr, egress.RuleAllowlist)
	}
}
