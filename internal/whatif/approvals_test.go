package whatif_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/whatif"
	"github.com/maiden-run/maiden/internal/whatif/whatiftest"
)

// TestApproveAnswersReplayExactly: an approve layer's verdict records the
// cards' answer to approve:always (the always-card that let the call
// through, or the denial that had it ask a human), and a replay of the
// unchanged cards asks each again, on the binding it was asked under (an
// always-card's own; the request's the verdict names), about the input the
// layer saw (before a later rewrite, or after an earlier one), and
// reproduces it exactly: verified, none inexact. Where the record does
// not say the binding (a standing approval by a card bound to nothing, an
// answer whose request is outside the window), the binding whose wallet
// has the revision the answer names is the one it was asked under. A
// record altered to name another card is inexact.
func TestApproveAnswersReplayExactly(t *testing.T) {
	policyA, policyB := `{"v":"a"}`, `{"v":"b"}`
	keyA, keyB := whatif.BindingKey("sha256:aaaa", policyA), whatif.BindingKey("sha256:bbbb", policyB)
	cs := []cards.Card{
		card(t, "c_pay", "research", cards.Spec{LowerPos: gs(t, "tool:invoke pay --...")}),
		card(t, "c_alice", "research", cards.Spec{LowerPos: gs(t, "approve:always pay --to=alice"), Bound: keyA}),
		card(t, "c_bob", "research", cards.Spec{LowerPos: gs(t, "approve:always pay --to=bob"), Bound: keyB}),
		card(t, "c_carol", "research", cards.Spec{LowerPos: gs(t, "approve:always pay --to=carol")}), // granted, bound to nothing
	}
	type call struct {
		inputs  []string
		at      int
		b       string // "a" or "b"
		request string
		yes     bool // an always-card said yes
	}
	calls := []call{
		{[]string{"--to=alice"}, 0, "a", "apr_1", true},
		{[]string{"--to=bob"}, 0, "a", "apr_2", false}, // c_bob is another binding's
		{[]string{"--to=bob"}, 0, "b", "apr_3", true},
		{[]string{"--to=alice"}, 0, "b", "apr_4", false},
		{[]string{"--to=carol"}, 0, "b", "apr_5", true},
		{[]string{"--to=dave", "--to=alice"}, 1, "a", "apr_6", true},  // after a rewrite: asked about alice
		{[]string{"--to=alice", "--to=dave"}, 0, "a", "apr_7", true},  // before one: asked about alice
		{[]string{"--to=alice", "--to=dave"}, 1, "a", "apr_8", false}, // after it: about dave
	}
	record := func() *trail {
		tr := newTrail(t, cs, now.Add(-time.Minute))
		for _, c := range calls {
			digest, policy := "sha256:aaaa", policyA
			if c.b == "b" {
				digest, policy = "sha256:bbbb", policyB
			}
			if got := tr.ApproveLayer(whatiftest.Approved{Agent: "research", Tool: "pay", Inputs: c.inputs, At: c.at, ToolDigest: digest, Policy: policy, Request: c.request}); got != c.yes {
				t.Fatalf("%+v: the always-card said %v", c, got)
			}
		}
		return tr
	}
	replay := func(tr *trail, change api.WhatIfChange) api.WhatIfReport {
		r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research"}, Cards: cs}, change)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range tr.Recs {
			r.Add(rec)
		}
		return r.Report()
	}
	tr := record()
	rep := replay(tr, api.WhatIfChange{})
	if len(rep.Inexact) != 0 || rep.Stale != 0 || rep.Verified != rep.Replayed || rep.Flips != 0 || rep.Skipped != 0 {
		t.Fatalf("unchanged: replayed %d, verified %d, stale %d, skipped %d, flips %d, inexact %+v: want every decision verified",
			rep.Replayed, rep.Verified, rep.Stale, rep.Skipped, rep.Flips, rep.Inexact)
	}
	if want := 2 * len(calls); rep.Replayed != want {
		t.Errorf("replayed %d decisions, want %d: each call's tool:invoke and its approve layer's answer", rep.Replayed, want)
	}
	if rep.Standing != 5 || rep.Asked != 3 {
		t.Errorf("standing %d, asked %d: want 5, 3", rep.Standing, rep.Asked)
	}
	// Revoking c_alice: the three standing approvals by it now ask.
	if rep := replay(tr, api.WhatIfChange{Revoke: []string{"c_alice"}}); rep.Flips != 3 || len(rep.Inexact) != 0 {
		t.Errorf("revoking c_alice: %d flips, inexact %+v: want 3", rep.Flips, rep.Inexact)
	}

	t.Run("request outside the window", func(t *testing.T) {
		tr := record()
		var kept []api.AuditRecord
		for _, rec := range tr.Recs {
			var b struct{ Approval string }
			json.Unmarshal(rec.Body, &b)
			if rec.Kind == whatif.KindApproval && b.Approval == "apr_2" {
				continue
			}
			kept = append(kept, rec)
		}
		tr.Recs = kept
		rep := replay(tr, api.WhatIfChange{})
		if len(rep.Inexact) != 0 || rep.Stale != 0 || rep.Verified != rep.Replayed || rep.Asked != 2 {
			t.Errorf("verified %d of %d, stale %d, asked %d, inexact %+v: want all verified, 2 asked", rep.Verified, rep.Replayed, rep.Stale, rep.Asked, rep.Inexact)
		}
	})
	t.Run("altered answer", func(t *testing.T) {
		tr := record()
		for i, rec := range tr.Recs {
			if rec.Kind != whatif.KindCallAdmitted {
				continue
			}
			var b map[string]any
			mustJSON(t, rec.Body, &b)
			v := b["middleware"].([]any)[0].(map[string]any)
			v["decision"].(map[string]any)["card"] = "c_pay"
			tr.Recs[i].Body, _ = json.Marshal(b)
			break
		}
		rep := replay(tr, api.WhatIfChange{})
		if len(rep.Inexact) != 1 || rep.Inexact[0].Recorded.Card != "c_pay" || rep.Inexact[0].Before.Card != "c_alice" {
			t.Errorf("inexact %+v: want the altered answer", rep.Inexact)
		}
	})
}
