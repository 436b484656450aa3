package callegress

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
)

// TestAuthorizer: the hook the gate asks at fetch time decides
// network:connect on the exact host and port it is given (IP literals
// too, IPv6 as the gate spells it) and secret:use on the credential, and
// a denial names its rule and the grant to paste.
func TestAuthorizer(t *testing.T) {
	var specs []cards.Card
	for i, s := range []string{
		"network:connect *.example.com:443",
		"network:connect 127.0.0.1",
		"network:connect [::1]:8443",
		"secret:use API_*",
	} {
		g, err := grant.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, cards.Card{ID: "c" + string(rune('0'+i)), Holder: "a", Spec: cards.Spec{LowerPos: cards.Any(g)}})
	}
	authz := Authorizer(cards.NewWallet("a", time.Now(), specs))
	for _, tc := range []struct {
		host, cred string
		port       int
		rule       string // "" allowed
		paste      string
	}{
		{"api.example.com", "", 443, "", ""},
		{"api.example.com", "", 8443, RuleNetworkCard, "'network:connect api.example.com:8443'"},
		{"example.com", "", 443, RuleNetworkCard, "'network:connect example.com:443'"},
		{"a.b.example.com", "", 443, RuleNetworkCard, ""},
		{"127.0.0.1", "", 9, "", ""},
		{"127.0.0.2", "", 9, RuleNetworkCard, ""},
		{"::1", "", 8443, "", ""},
		{"::1", "", 443, RuleNetworkCard, "'network:connect [::1]:443'"},
		{"api.example.com", "API_TOKEN", 443, "", ""},
		{"api.example.com", "ROOT_KEY", 443, RuleSecretCard, "'secret:use ROOT_KEY'"},
		{"evil.test", "API_TOKEN", 443, RuleNetworkCard, ""},
	} {
		err := authz(tc.host, tc.port, tc.cred)
		var r *egress.Refusal
		switch {
		case tc.rule == "" && err != nil:
			t.Errorf("%s:%d %q: %v", tc.host, tc.port, tc.cred, err)
		case tc.rule != "" && (!errors.As(err, &r) || r.Rule != tc.rule || !strings.Contains(r.Reason, "grant it: maiden cards grant -agent a "+tc.paste)):
			t.Errorf("%s:%d %q: %v; want rule %s naming %s", tc.host, tc.port, tc.cred, err, tc.rule, tc.paste)
		}
	}
	if Authorizer(nil) != nil {
		t.Error("the implicit agent (no wallet) got a hook")
	}
}

// BenchmarkWalletAuthorizer is the card check one http-fetch with a
// credential costs a declared agent: network:connect and secret:use on a
// wallet of 40 cards (the matching grants last).
func BenchmarkWalletAuthorizer(b *testing.B) {
	var cs []cards.Card
	for i := range 38 {
		g, _ := grant.Parse("network:connect h" + string(rune('a'+i%26)) + ".example.org")
		cs = append(cs, cards.Card{ID: "x", Holder: "a", Spec: cards.Spec{LowerPos: cards.Any(g)}})
	}
	for _, s := range []string{"network:connect *.example.com", "secret:use API_TOKEN"} {
		g, _ := grant.Parse(s)
		cs = append(cs, cards.Card{ID: "y", Holder: "a", Spec: cards.Spec{LowerPos: cards.Any(g)}})
	}
	authz := Authorizer(cards.NewWallet("a", time.Now(), cs))
	b.ReportAllocs()
	for b.Loop() {
		if err := authz("api.example.com", 443, "API_TOKEN"); err != nil {
			b.Fatal(err)
		}
	}
}
