package whatif_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/whatif"
)

// asked records an approval request as the approve layer writes it: no
// always-card covered the call, so a human was asked.
func (tr *trail) asked(agent, tool, rendered, rule, toolDigest, policy string) {
	tr.Add(whatif.KindApproval, agent, tool, map[string]any{"event": "requested", "approval": "apr_" + rendered, "rule": rule,
		"reason": "a human decides", "rendered": rendered, "tool_digest": toolDigest, "policy": json.RawMessage(policy)})
}

// TestAskedCallsReplayAsAlways: an approval request replays as the
// approve:always question its approve layer asked, so a grant of
// approve:always flips exactly the asked calls it would have let through:
// of the same binding (a card minted from an approval counts only for the
// tool and policy it was shown), of a rule that may be approved always,
// not the calls an always-card of today already covered.
func TestAskedCallsReplayAsAlways(t *testing.T) {
	policy := `{"hosts":["api.example.com"]}`
	key := whatif.BindingKey("sha256:aaaa", policy)
	cs := []cards.Card{
		card(t, "c_pay", "research", cards.Spec{LowerPos: gs(t, "tool:invoke pay --...")}),
		card(t, "c_always_alice", "research", cards.Spec{LowerPos: gs(t, "approve:always pay --to=alice"), Bound: key}),
	}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	tr.asked("research", "pay", "--to=bob", "big-payments", "sha256:aaaa", policy)
	tr.asked("research", "pay", "--to=carol", "big-payments", "sha256:aaaa", policy)
	tr.asked("research", "pay", "--to=bob", "big-payments", "sha256:bbbb", policy) // another version of the tool
	tr.asked("research", "pay", "--to=bob", "never-always", "sha256:aaaa", policy) // a rule with allow_always = false
	tr.asked("research", "pay", "--to=alice", "big-payments", "sha256:aaaa", policy)
	tr.Add(whatif.KindApproval, "research", "pay", map[string]any{"event": "approved", "approval": "apr_x"}) // a decision: not a question
	allowAlways := func(rule string) bool { return rule != "never-always" }
	replay := func(t *testing.T, change api.WhatIfChange) api.WhatIfReport {
		r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research"}, Cards: cs, AllowAlways: allowAlways}, change)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range tr.Recs {
			r.Add(rec)
		}
		return r.Report()
	}
	for _, tc := range []struct {
		name   string
		change api.WhatIfChange
		want   []flip
	}{
		{"no change", api.WhatIfChange{}, nil},
		{"an always-card bound as the approval: the asked calls of that binding it covers",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "approve:always pay --to=*", Bound: key}}},
			[]flip{{"research", "pay", 0, 2, []string{"approve:always pay --to=bob", "approve:always pay --to=carol"}}}},
		{"an always-card of one call",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "approve:always pay --to=bob", Bound: key}}},
			[]flip{{"research", "pay", 0, 1, []string{"approve:always pay --to=bob"}}}},
		{"an operator's unbound always-card covers every version of the tool",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "approve:always pay --to=bob"}}},
			[]flip{{"research", "pay", 0, 2, []string{"approve:always pay --to=bob", "approve:always pay --to=bob"}}}},
		{"a tool:invoke grant approves nothing always",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke pay --to=*"}}}, nil},
		{"revoking today's always-card: the asked call it covers was asked anyway",
			api.WhatIfChange{Revoke: []string{"c_always_alice"}},
			[]flip{{"research", "pay", 1, 0, []string{"approve:always pay --to=alice"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := replay(t, tc.change)
			if diff := cmp.Diff(tc.want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" {
				t.Errorf("flips (-want +got):\n%s", diff)
			}
			if rep.Asked != 4 || rep.Skipped != 1 || rep.Replayed != 0 {
				t.Errorf("asked %d, skipped %d, replayed %d: want 4, 1, 0", rep.Asked, rep.Skipped, rep.Replayed)
			}
			for _, g := range rep.Groups {
				for _, ex := range g.Examples {
					if ex.Record != whatif.KindApproval || ex.Recorded.Rule != "asked" || ex.Recorded.Allow {
						t.Errorf("example %+v: want an approval record, recorded as asked", ex)
					}
				}
			}
		})
	}
}

// TestBeyondWallet: what a new card adds is said against the wallet it
// joins: its live allowances (not revoked or expired cards, not another
// agent's, not an always-card bound to another version of the tool, not
// one its own card makes exceptions to), its prohibitions (a grant they
// cover allows nothing) and its ceiling.
func TestBeyondWallet(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_pay", "research", cards.Spec{LowerPos: gs(t, "tool:invoke pay --to=alice")}),
		card(t, "c_search", "research", cards.Spec{LowerPos: gs(t, "tool:invoke search --..."), LowerNeg: gs(t, "tool:invoke search --q=secret")}),
		card(t, "c_ban", "research", cards.Spec{UpperNeg: gs(t, "tool:invoke rm --...")}),
		card(t, "c_fs", "research", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}),
		card(t, "c_always", "research", cards.Spec{LowerPos: gs(t, "approve:always pay --...")}),
		card(t, "c_always_old", "research", cards.Spec{LowerPos: gs(t, "approve:always wire --..."), Bound: "tool=old"}),
		{ID: "c_gone", Holder: "research", Spec: cards.Spec{LowerPos: gs(t, "tool:invoke old --...")}, Created: now.Add(-2 * time.Hour), Revoked: now.Add(-time.Hour)},
		{ID: "c_expired", Holder: "research", Spec: cards.Spec{LowerPos: gs(t, "tool:invoke late --..."), Expires: now.Add(-time.Minute)}, Created: now.Add(-2 * time.Hour)},
		card(t, "c_ops", "ops", cards.Spec{LowerPos: gs(t, "tool:invoke report --...")}),
		card(t, "c_cap", "capped", cards.Spec{UpperPos: gs(t, "tool:invoke pay --to=alice")}),
	}
	st := whatif.State{Now: now, Agents: []string{"research", "ops", "capped"}, Cards: cs}
	for _, tc := range []struct {
		name, agent, bound string
		add                []string
		want               []string
		redundant          bool
	}{
		{"wider than today", "research", "", []string{"tool:invoke pay --to=*"},
			[]string{"tool:invoke pay with any --to= (today only --to=alice)"}, false},
		{"redundant", "research", "", []string{"tool:invoke pay --to=alice", "fs:read /srv/app/x"},
			[]string{"nothing new: tool:invoke pay --to=alice is covered by tool:invoke pay --to=alice", "nothing new: fs:read /srv/app/x is covered by fs:read /srv/**"}, true},
		{"one new grant of two is not redundant", "research", "", []string{"tool:invoke pay --to=alice", "fs:write /srv/app/**"},
			[]string{"nothing new: tool:invoke pay --to=alice is covered by tool:invoke pay --to=alice", "write under /srv/app/** (today read only)"}, false},
		{"a card with exceptions does not cover", "research", "", []string{"tool:invoke search --q=secret"},
			[]string{"tool:invoke search --q=secret (today only tool:invoke search --...)"}, false},
		{"a prohibition leaves nothing new", "research", "", []string{"tool:invoke rm --path=/tmp/x"},
			[]string{"nothing new: tool:invoke rm --path=/tmp/x is forbidden across the wallet by tool:invoke rm --..."}, true},
		{"revoked and expired cards allow nothing today", "research", "", []string{"tool:invoke old", "tool:invoke late"},
			[]string{"tool:invoke old with no arguments (today nothing of old)", "tool:invoke late with no arguments (today nothing of late)"}, false},
		{"another agent's card is not in the wallet", "research", "", []string{"tool:invoke report --week=1"},
			[]string{"tool:invoke report with --week=1 (today nothing of report)"}, false},
		{"an unbound always-card covers a bound one", "research", "tool=new", []string{"approve:always pay --to=bob"},
			[]string{"nothing new: approve:always pay --to=bob is covered by approve:always pay --..."}, true},
		{"an always-card of another binding does not", "research", "tool=new", []string{"approve:always wire --to=bob"},
			[]string{"approve:always wire with --to=bob (today nothing of wire)"}, false},
		{"an always-card of the same binding does", "research", "tool=old", []string{"approve:always wire --to=bob"},
			[]string{"nothing new: approve:always wire --to=bob is covered by approve:always wire --..."}, true},
		{"outside the ceiling", "capped", "", []string{"tool:invoke pay --to=bob"},
			[]string{"tool:invoke pay with --to=bob (today nothing of pay); only as far as card c_cap's ceiling allows (tool:invoke pay --to=alice)"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var add []grant.Grant
			for _, g := range gs(t, tc.add...) {
				add = append(add, g.Grant)
			}
			lines, red := whatif.Beyond(st, tc.agent, add, tc.bound)
			if diff := cmp.Diff(tc.want, lines); diff != "" || red != tc.redundant {
				t.Errorf("lines (-want +got):\n%s\nredundant %v, want %v", diff, red, tc.redundant)
			}
		})
	}
}

// TestStandingApprovalsReplay: a call an always-card let skip an approve
// layer (its record's verdict names the card) replays as the
// approve:always question on the card's binding: revoking the card flips
// it to asking a human; a change elsewhere flips nothing; a verdict naming
// a card the store does not hold is passed over.
func TestStandingApprovalsReplay(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_pay", "research", cards.Spec{LowerPos: gs(t, "tool:invoke pay --...")}),
		card(t, "c_always", "research", cards.Spec{LowerPos: gs(t, "approve:always pay --to=*"), Bound: "tool=x policy=sha256:y"}),
		card(t, "c_other", "research", cards.Spec{LowerPos: gs(t, "approve:always wire --...")}),
	}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	admitted := func(rendered, detail string) {
		d := recorded(cards.NewWallet("research", now, cs).Decide(grant.ToolTarget("pay", nil)))
		tr.Add(whatif.KindCallAdmitted, "research", "pay", map[string]any{"rendered": rendered, "decision": &d,
			"middleware": []map[string]string{{"rule": "middleware[1]", "use": "approve", "verdict": "pass", "detail": detail}}})
	}
	admitted("--to=bob", "approved always by card c_always")
	admitted("--to=carol", "approved always by card c_gone") // a card the store does not hold
	for _, tc := range []struct {
		name   string
		change api.WhatIfChange
		want   []flip
	}{
		{"no change", api.WhatIfChange{}, nil},
		{"revoking the always-card", api.WhatIfChange{Revoke: []string{"c_always"}},
			[]flip{{"research", "pay", 1, 0, []string{"approve:always pay --to=bob"}}}},
		{"revoking another always-card", api.WhatIfChange{Revoke: []string{"c_other"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research"}, Cards: cs}, tc.change)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range tr.Recs {
				r.Add(rec)
			}
			rep := r.Report()
			if diff := cmp.Diff(tc.want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" {
				t.Errorf("flips (-want +got):\n%s", diff)
			}
			if rep.Standing != 1 || rep.Replayed != 2 {
				t.Errorf("standing %d, replayed %d: want 1, 2", rep.Standing, rep.Replayed)
			}
			for _, g := range rep.Groups {
				for _, ex := range g.Examples {
					if ex.Recorded.Rule != api.RuleApprovedAlways || ex.Recorded.Card != "c_always" || ex.After.Allow {
						t.Errorf("example %+v: want the standing approval of c_always, refused after", ex)
					}
				}
			}
		})
	}
}
