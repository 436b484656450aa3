package cardtools

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// TestCardTools runs the operations on a real SQLite store as the agent:
// who sees which tool, a derivation to a declared agent and its
// attenuation rule, a recipient the configuration does not declare, strict
// input, and a revocation's cascade.
func TestCardTools(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, a := range []string{"parent", "child"} {
		if err := st.EnsureAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	var weather string
	for _, text := range []string{"card:derive *", "card:revoke *", "tool:invoke weather --..."} {
		g, err := grant.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Grant(ctx, "parent", cards.Spec{LowerPos: cards.Any(g)})
		if err != nil {
			t.Fatal(err)
		}
		weather = c.ID // the last: tool:invoke weather
	}
	w, err := st.Wallet(ctx, "parent", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for verb, want := range map[string]bool{"derive": true, "revoke": true, "inspect": false, "transfer": false} {
		if got := MayUse(w, verb); got != want {
			t.Errorf("MayUse(%s) = %v, want %v", verb, got, want)
		}
	}
	env := Env{Store: st, Wallet: w, Recipient: func(to string) *Refusal {
		if to != "child" {
			return &Refusal{Kind: api.KindInput, Message: "no agent " + to}
		}
		return nil
	}}
	run := func(tool, input string) (any, *Refusal) {
		t.Helper()
		out, r, err := Tools[tool].Run(ctx, env, []byte(input))
		if err != nil {
			t.Fatalf("%s %s: %v", tool, input, err)
		}
		return out, r
	}
	if _, r := run("cards_derive", `{"card":"`+weather+`","to":"stranger","grants":["tool:invoke weather --city=Paris"]}`); r == nil || r.Kind != api.KindInput {
		t.Errorf("derive to an undeclared agent: %+v, want kind input", r)
	}
	if _, r := run("cards_derive", `{"card":"`+weather+`","to":"child","grants":["tool:invoke other --..."]}`); r == nil || r.Kind != api.KindDenied {
		t.Errorf("derive beyond the parent: %+v, want kind denied", r)
	}
	if _, r := run("cards_derive", `{"card":"`+weather+`","to":"child","grants":["tool:invoke weather --city=Paris"],"extra":1}`); r == nil || r.Kind != api.KindInput {
		t.Errorf("an unknown field: %+v, want kind input", r)
	}
	out, r := run("cards_derive", `{"card":"`+weather+`","to":"child","grants":["tool:invoke weather --city=Paris"]}`)
	if r != nil {
		t.Fatalf("derive: %+v", r)
	}
	child := out.(map[string]any)["id"].(string)
	if _, r := run("cards_revoke", `{"card":"nope"}`); r == nil || r.Kind != api.KindDenied || !strings.Contains(r.Message, "holds neither it nor any card it was derived from") {
		t.Errorf("revoking an unknown card: %+v", r)
	}
	out, r = run("cards_revoke", `{"card":"`+weather+`"}`)
	if r != nil || out.(map[string]any)["revoked"] != 2 {
		t.Errorf("revoking the parent card: %v %+v, want 2 revoked (it and %s)", out, r, child)
	}
}
