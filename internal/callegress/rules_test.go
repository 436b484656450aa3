package callegress

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/credential"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// loadConfig writes agent.toml (and the empty component file its tools
// name) in a temporary directory and loads it.
func loadConfig(t *testing.T, toml string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.wasm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(file, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRulesCarrySecretDestinations: a tool's egress rules carry each of
// its secrets' [secrets.NAME] destination whole (hosts, methods, path
// prefixes, how it is attached), and declare no secret the tool does not.
func TestRulesCarrySecretDestinations(t *testing.T) {
	cfg := loadConfig(t, `version = 1
[tools.weather]
path = "w.wasm"
http_allow = ["api.example.com", "other.example.com"]
secrets = ["WEATHER_TOKEN"]

[secrets.WEATHER_TOKEN]
hosts = ["api.example.com"]
methods = ["GET"]
path_prefixes = ["/v1/"]
kind = "header"
header = "X-Api-Key"
`)
	tool, _ := cfg.Tool("weather")
	got := Rules(cfg, tool)
	if !slices.Equal(got.Secrets, []string{"WEATHER_TOKEN"}) {
		t.Errorf("Rules declare secrets %q, want only the tool's [WEATHER_TOKEN]", got.Secrets)
	}
	want := []egress.SecretDestination{{
		Secret: "WEATHER_TOKEN", Hosts: []string{"api.example.com"}, Methods: []string{"GET"}, PathPrefixes: []string{"/v1/"},
		Credential: credential.Spec{Kind: credential.Header, Header: "X-Api-Key"},
	}}
	if diff := cmp.Diff(want, got.SecretDestinations, cmpIgnoreSource); diff != "" {
		t.Errorf("SecretDestinations (-want +got):\n%s", diff)
	}
}

var cmpIgnoreSource = cmp.Transformer("noSource", func(d egress.SecretDestination) egress.SecretDestination {
	d.Source = ""
	return d
})

// TestPoliciesFollowTheirConfiguration: a configuration's policies are
// compiled for it, never served to the next one, and a policy narrowed
// for one agent is never served to another. Each request below is refused
// before any network: by the allowlist when the policy does not allow its
// host, else by the wallet, which holds no network card.
func TestPoliciesFollowTheirConfiguration(t *testing.T) {
	wide := loadConfig(t, "version = 1\n[tools.weather]\npath = \"w.wasm\"\nhttp_allow = [\"a.example.com\", \"b.example.com\"]\n")
	narrow := loadConfig(t, "version = 1\n[tools.weather]\npath = \"w.wasm\"\nhttp_allow = [\"b.example.com\"]\n")
	gate := egress.New(nil)
	var events []api.FetchEvent
	obs := observer(func(e api.FetchEvent) { events = append(events, e) })
	ruleFor := func(pol *egress.Policy, host string) string {
		t.Helper()
		_, ferr := Fetch(gate, pol, obs, "weather", "a", cards.NewWallet("a", time.Now(), nil))(context.Background(),
			sandbox.FetchRequest{Method: "GET", URL: "https://" + host + "/"})
		if ferr == nil || ferr.Kind != sandbox.FetchDenied {
			t.Fatalf("https://%s/: %+v, want refused before the network", host, ferr)
		}
		e := events[len(events)-1]
		if e.Allowed || e.Tool != "weather" {
			t.Errorf("https://%s/: the observer saw %+v, want a refusal of weather's request", host, e)
		}
		return e.Rule
	}

	var ps Policies
	s1 := ps.Of(wide)
	p1, err := s1.Policy("a", mustTool(t, wide), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := ruleFor(p1, "a.example.com"); got != RuleNetworkCard {
		t.Fatalf("the first configuration's policy: rule %q for a.example.com, want %q (past its allowlist)", got, RuleNetworkCard)
	}
	s2 := ps.Of(narrow)
	p2, err := s2.Policy("a", mustTool(t, narrow), false)
	if err != nil {
		t.Fatal(err)
	}
	if s2 == s1 || p2 == p1 {
		t.Fatal("the next configuration was served the previous one's policies")
	}
	if got := ruleFor(p2, "a.example.com"); got != egress.RuleAllowlist {
		t.Errorf("after the configuration dropped a.example.com: rule %q, want %q", got, egress.RuleAllowlist)
	}

	// Two agents' bindings narrow the tool each its own way.
	forA, forB := mustTool(t, wide), mustTool(t, wide)
	forA.HTTPAllow, forB.HTTPAllow = []string{"a.example.com"}, []string{"b.example.com"}
	set := ps.Of(wide)
	pa, errA := set.Policy("agent-a", forA, true)
	pb, errB := set.Policy("agent-b", forB, true)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if got := ruleFor(pb, "a.example.com"); got != egress.RuleAllowlist {
		t.Errorf("agent-b's narrowed policy: rule %q for a.example.com, which only agent-a's binding allows; want %q", got, egress.RuleAllowlist)
	}
	if got := ruleFor(pa, "a.example.com"); got != RuleNetworkCard {
		t.Errorf("agent-a's narrowed policy: rule %q for a.example.com, want %q", got, RuleNetworkCard)
	}
}

func mustTool(t *testing.T, cfg *config.Config) config.Tool {
	t.Helper()
	tool, ok := cfg.Tool("weather")
	if !ok {
		t.Fatal("no tool weather")
	}
	return tool
}

// observer reports fetch events to a function.
type observer func(api.FetchEvent)

func (observer) Admission(api.AdmissionEvent) {}
func (observer) CallDone(api.CallEvent)       {}
func (o observer) Fetch(e api.FetchEvent)     { o(e) }
