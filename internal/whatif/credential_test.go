package whatif_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/whatif"
)

// TestFlipsOfImportCredentials: a call of an imported tool whose import
// sends a credential records the cards' secret:use of it (secret_use),
// asked once the call's tool:invoke allowed it; a replay asks it again.
// A recorded allowed one that a prohibition (or the revocation of its
// card) would deny flips, naming secret:use; a recorded denied one that a
// grant allows flips the other way; with no change nothing flips. A
// record made before secret_use was recorded replays as before, and one
// whose rewrite came after the credential was asked keeps the order.
func TestFlipsOfImportCredentials(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_shop", "research", cards.Spec{LowerPos: gs(t, "tool:invoke shop.pay --...")}),
		card(t, "c_key", "research", cards.Spec{LowerPos: gs(t, "secret:use SHOP_TOKEN")}),
		card(t, "c_ops", "ops", cards.Spec{LowerPos: gs(t, "tool:invoke shop.pay --...")}),
	}
	record := func(t *testing.T) *trail {
		tr := newTrail(t, cs, now.Add(-time.Minute))
		if out := tr.CallWith(plan{Agent: "research", Tool: "shop.pay", Rendered: []string{"--to=alice"}, Credential: "SHOP_TOKEN"}); out != "ran" {
			t.Fatalf("research's call: %s", out)
		}
		if out := tr.CallWith(plan{Agent: "research", Tool: "shop.pay", Rendered: []string{"--to=bob", "--memo=x --to=bob"}, Credential: "SHOP_TOKEN"}); out != "ran" {
			t.Fatalf("research's rewritten call: %s", out)
		}
		if out := tr.CallWith(plan{Agent: "ops", Tool: "shop.pay", Rendered: []string{"--to=carol"}, Credential: "SHOP_TOKEN"}); out != "refused" {
			t.Fatalf("ops's call: %s", out)
		}
		return tr
	}
	// The records' shapes: research's holds the allowed secret:use, ops's
	// the denial (and its decision on tool:invoke, allowed).
	tr := record(t)
	for i, want := range []bool{true, true, false} {
		var b struct {
			Decision  api.Decision  `json:"decision"`
			SecretUse *api.Decision `json:"secret_use"`
		}
		mustJSON(t, tr.Recs[i].Body, &b)
		if b.SecretUse == nil || b.SecretUse.Target != "secret:use SHOP_TOKEN" || b.SecretUse.Allow != want || !b.Decision.Allow {
			t.Fatalf("record %d: %s", i, tr.Recs[i].Body)
		}
	}
	for _, tc := range []struct {
		name     string
		change   api.WhatIfChange
		agent    string
		a2d, d2a int
	}{
		{"unchanged", api.WhatIfChange{}, "", 0, 0},
		{"its secret:use prohibited", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "secret:use SHOP_TOKEN", As: api.WhatIfDeny}}}, "research", 2, 0},
		{"its card revoked", api.WhatIfChange{Revoke: []string{"c_key"}}, "research", 2, 0},
		{"another secret prohibited", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "secret:use OTHER", As: api.WhatIfDeny}}}, "", 0, 0},
		{"its secret:use granted", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "ops", Grant: "secret:use SHOP_TOKEN"}}}, "ops", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research", "ops"}, Cards: cs}, tc.change)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range record(t).Recs {
				r.Add(rec)
			}
			rep := r.Report()
			if rep.Replayed != 3 || rep.Verified != 3 || len(rep.Inexact) != 0 {
				t.Fatalf("replayed %d, verified %d, inexact %+v: want 3 verified", rep.Replayed, rep.Verified, rep.Inexact)
			}
			if tc.agent == "" {
				if rep.Flips != 0 {
					t.Fatalf("%d flips: %+v", rep.Flips, rep.Groups)
				}
				return
			}
			if rep.Flips != tc.a2d+tc.d2a || len(rep.Groups) != 1 {
				t.Fatalf("flips %d, groups %+v", rep.Flips, rep.Groups)
			}
			g := rep.Groups[0]
			if g.Agent != tc.agent || g.Tool != "shop.pay" || g.AllowedToDenied != tc.a2d || g.DeniedToAllowed != tc.d2a {
				t.Fatalf("group %+v: want %s's shop.pay %d -> denied, %d -> allowed", g, tc.agent, tc.a2d, tc.d2a)
			}
			// Each example names the question that flips; the decisions
			// before and after are whether the call ran (of a rewritten
			// call: the last input's tool:invoke today, as for a flip of
			// its agent's own input).
			for _, ex := range g.Examples {
				flipped := ex.After
				if ex.After.Allow {
					flipped = ex.Before
				}
				if ex.Target != "secret:use SHOP_TOKEN" || flipped.Target != "secret:use SHOP_TOKEN" || ex.Before.Allow == ex.After.Allow {
					t.Errorf("example %+v: want the flip of secret:use SHOP_TOKEN", ex)
				}
			}
		})
	}
	t.Run("refused after a rewrite", func(t *testing.T) {
		// Asked again after a human's wait, on a wallet pinned anew, the
		// secret:use of a call a layer rewrote before its approve layer
		// may refuse it: the record holds the rewrite and the refusal.
		without := cs[:1] // c_shop only: no secret:use
		tr := newTrail(t, without, now.Add(-time.Minute))
		if out := tr.CallWith(plan{Agent: "research", Tool: "shop.pay", Rendered: []string{"--to=bob", "--memo=x --to=bob"}}); out != "ran" {
			t.Fatalf("the rewritten call: %s", out)
		}
		use := tr.Wallet("research").Decide(grant.SecretTarget("use", "SHOP_TOKEN")).API()
		var b map[string]any
		mustJSON(t, tr.Recs[0].Body, &b)
		b["secret_use"], b["kind"] = use, "denied"
		tr.Recs[0].Body, _ = json.Marshal(b)
		tr.Recs[0].Kind = whatif.KindCallRefused
		for _, tc := range []struct {
			change api.WhatIfChange
			flips  int
		}{{api.WhatIfChange{}, 0}, {api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "secret:use SHOP_TOKEN"}}}, 1}} {
			r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research"}, Cards: without}, tc.change)
			if err != nil {
				t.Fatal(err)
			}
			r.Add(tr.Recs[0])
			rep := r.Report()
			if rep.Replayed != 1 || rep.Verified != 1 || rep.Flips != tc.flips || tc.flips > 0 && rep.Groups[0].DeniedToAllowed != 1 {
				t.Errorf("change %+v: replayed %d, verified %d, flips %d %+v; want 1 verified, %d flip", tc.change, rep.Replayed, rep.Verified, rep.Flips, rep.Groups, tc.flips)
			}
		}
	})
	t.Run("records without secret_use replay as before", func(t *testing.T) {
		tr := record(t)
		for i := range tr.Recs {
			var b map[string]any
			mustJSON(t, tr.Recs[i].Body, &b)
			delete(b, "secret_use")
			tr.Recs[i].Body, _ = json.Marshal(b)
		}
		r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research", "ops"}, Cards: cs},
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "secret:use SHOP_TOKEN", As: api.WhatIfDeny}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range tr.Recs {
			r.Add(rec)
		}
		if rep := r.Report(); rep.Replayed != 3 || rep.Verified != 3 || rep.Flips != 0 {
			t.Errorf("replayed %d, verified %d, flips %d: want 3, 3, 0 (the tool:invoke decisions alone)", rep.Replayed, rep.Verified, rep.Flips)
		}
	})
}
