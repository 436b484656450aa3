package admin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/cardtools"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// TestCardBuiltinsAsAgent runs the card built-ins' operations as the root
// runs them, through admin acting as the agent on a real SQLite store: a
// derivation to a declared agent and its attenuation rule, a recipient the
// configuration does not declare, strict input, a card the agent does not
// hold, what cards_list shows, and a revocation's cascade.
func TestCardBuiltinsAsAgent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(file, []byte("version = 1\n[agents.parent]\n[agents.child]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, a := range []string{"parent", "child", "stranger"} {
		if err := st.EnsureAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	grantTo := func(agent, text string) string {
		t.Helper()
		g, err := grant.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Grant(ctx, agent, cards.Spec{LowerPos: cards.Any(g)})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	grantTo("parent", "card:derive *")
	grantTo("parent", "card:install child") // placing a card in child's wallet (CARDS.md, Install)
	grantTo("parent", "card:revoke *")
	weather := grantTo("parent", "tool:invoke weather --...")
	g, _ := grant.Parse("tool:invoke metered --...")
	meteredCard, err := st.Grant(ctx, "parent", cards.Spec{LowerPos: cards.Any(g), Budget: cards.Budget{"calls": 5}})
	if err != nil {
		t.Fatal(err)
	}
	metered := meteredCard.ID
	inspect := grantTo("parent", "card:inspect "+weather)
	childs := grantTo("child", "tool:invoke other --...")
	w, err := st.Wallet(ctx, "parent", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	as := adminlink.As(st, cfg, w).(*AgentState)
	run := func(tool, input string) (any, *cardtools.Refusal) {
		t.Helper()
		out, r, err := cardtools.Tools[tool].Run(ctx, as, []byte(input))
		if err != nil {
			t.Fatalf("%s %s: %v", tool, input, err)
		}
		return out, r
	}
	if _, r := run("cards_derive", `{"card":"`+weather+`","to":"stranger","grants":["tool:invoke weather --city=Paris"]}`); r == nil || r.Kind != api.KindInput || !strings.Contains(r.Message, `no agent "stranger" in `) {
		t.Errorf("derive to an agent the configuration does not declare: %+v, want kind input", r)
	}
	if _, r := run("cards_derive", `{"card":"`+weather+`","to":"child","grants":["tool:invoke other --..."]}`); r == nil || r.Kind != api.KindDenied {
		t.Errorf("derive beyond the parent: %+v, want kind denied", r)
	}
	if _, r := run("cards_derive", `{"card":"`+weather+`","to":"child","grants":["tool:invoke weather --city=Paris"],"extra":1}`); r == nil || r.Kind != api.KindInput {
		t.Errorf("an unknown field: %+v, want kind input", r)
	}
	if _, r := run("cards_derive", `{"card":"`+weather+`","to":"child","grants":["tool:invok weather"]}`); r == nil || r.Kind != api.KindInput || !strings.Contains(r.Message, "grants[0]") {
		t.Errorf("a malformed grant: %+v, want kind input naming grants[0]", r)
	}
	// Budgets: a wider one than the parent has is denied
	// (budget-too-broad), a malformed one is the input's fault, one within
	// it is the child's.
	if _, r := run("cards_derive", `{"card":"`+metered+`","to":"child","grants":["tool:invoke metered --..."],"budget":"calls=6"}`); r == nil || r.Kind != api.KindDenied ||
		!strings.Contains(r.Message, "budget-too-broad: the child's calls=6 is more than card "+metered+" has left (5 of 5)") {
		t.Errorf("derive a wider budget: %+v, want denied budget-too-broad", r)
	}
	if _, r := run("cards_derive", `{"card":"`+metered+`","to":"child","grants":["tool:invoke metered --..."],"budget":"calls=x"}`); r == nil || r.Kind != api.KindInput || !strings.Contains(r.Message, "cards_derive: budget: bad budget") {
		t.Errorf("derive a malformed budget: %+v, want kind input", r)
	}
	if out, r := run("cards_derive", `{"card":"`+metered+`","to":"child","grants":["tool:invoke metered --..."],"budget":"calls=2"}`); r != nil {
		t.Errorf("derive calls=2 of 5: %+v", r)
	} else if c, err := st.Card(ctx, out.(map[string]any)["id"].(string)); err != nil || c.Budget["calls"] != 2 {
		t.Errorf("the derived card's budget: %v, %v", c.Budget, err)
	}
	// Another agent's card and a card that does not exist are answered
	// alike.
	for _, id := range []string{childs, "nope"} {
		for tool, input := range map[string]string{
			"cards_derive":   `{"card":"` + id + `","to":"child","grants":["tool:invoke other"]}`,
			"cards_transfer": `{"card":"` + id + `","to":"parent"}`,
		} {
			if _, r := run(tool, input); r == nil || r.Kind != api.KindDenied || !strings.Contains(r.Message, `agent "parent" holds no card "`+id+`"`) {
				t.Errorf("%s of card %s: %+v, want denied: holds no card", tool, id, r)
			}
		}
	}
	out, r := run("cards_derive", `{"card":"`+weather+`","to":"child","grants":["tool:invoke weather --city=Paris"]}`)
	if r != nil {
		t.Fatalf("derive: %+v", r)
	}
	child := out.(map[string]any)["id"].(string)
	// cards_list shows the parent's own cards its card:inspect allows: the
	// weather card only.
	out, r = run("cards_list", `{}`)
	if got := out.(map[string]any)["cards"].([]api.Card); r != nil || len(got) != 1 || got[0].ID != weather {
		t.Errorf("cards_list: %+v %+v, want only card %s (inspect card %s)", out, r, weather, inspect)
	}
	if _, r := run("cards_revoke", `{"card":"nope"}`); r == nil || r.Kind != api.KindDenied || !strings.Contains(r.Message, "holds neither it nor any card it was derived from") {
		t.Errorf("revoking an unknown card: %+v", r)
	}
	out, r = run("cards_revoke", `{"card":"`+weather+`"}`)
	if r != nil || out.(map[string]any)["revoked"] != 2 {
		t.Errorf("revoking the parent card: %v %+v, want 2 revoked (it and %s)", out, r, child)
	}
}
