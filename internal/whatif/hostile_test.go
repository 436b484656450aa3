package whatif_test

import (
	"encoding/json"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/whatif"
)

// TestRecordsNoVersionWritesArePassedOver (hostile review of the
// what-if): a call record holding a decision for the call but none for an
// input before a rewrite (a shape no version of maiden writes: an edited
// trail, a record cut by hand) is passed over as one the replay cannot
// read (skipped), as every other unreadable record is, and the replay
// goes on to the next. Before, the replay read that missing decision's
// component first and panicked: one such record stopped maiden audit
// whatif, and the server's view of what a card would newly allow.
func TestRecordsNoVersionWritesArePassedOver(t *testing.T) {
	cs := world(t)
	r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research", "ops"}, Cards: cs}, api.WhatIfChange{Revoke: []string{"c_pay"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, body := range []map[string]any{
		{"rendered": "--to=alice", "decision": map[string]any{"allow": true, "card": "c_pay"}, "before_rewrite": []map[string]any{{"rendered": "--to=bob"}}},
		{"rendered": "--to=alice", "decision": map[string]any{"allow": true, "card": "c_pay"}, "before_rewrite": []any{nil}},
	} {
		b, _ := json.Marshal(body)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("record %s: the replay panicked: %v", b, p)
				}
			}()
			r.Add(api.AuditRecord{Seq: int64(i + 1), Kind: whatif.KindCallAdmitted, Agent: "research", Tool: "pay", Body: b})
		}()
	}
	ok, _ := json.Marshal(map[string]any{"rendered": "--to=alice", "decision": map[string]any{"allow": true, "card": "c_pay"}})
	r.Add(api.AuditRecord{Seq: 3, Kind: whatif.KindCallAdmitted, Agent: "research", Tool: "pay", Body: ok})
	if rep := r.Report(); rep.Skipped != 2 || rep.Replayed != 1 || rep.Flips != 1 {
		t.Fatalf("skipped %d, replayed %d, flips %d; want the 2 unreadable records skipped and the third replayed and flipped", rep.Skipped, rep.Replayed, rep.Flips)
	}
}

// TestFetchHeaderSecretsReplay (hostile review of the what-if): a fetch
// whose caller put secrets in headers itself (web_fetch's secret headers)
// records the gate's questions in its order: the destination and each
// header secret's secret:use, then the destination and the credential's
// secret:use, up to the first refusal. The replay asks them again in that
// order, so a grant of a header secret's secret:use flips the requests it
// refused and a prohibition the ones it allowed. A list that stops at an
// allowed decision before the last question (agent.toml's own rules
// refused the request in between) or that names another question is
// passed over. Before, every such record was passed over (more than two
// decisions, or a secret:use with no credential named).
func TestFetchHeaderSecretsReplay(t *testing.T) {
	cs := world(t)
	const dest = "network:connect api.example.com:443"
	conn := map[string]any{"allow": true, "card": "c_net", "target": dest}
	use := func(name string, allow bool) map[string]any {
		if allow {
			return map[string]any{"allow": true, "card": "c_net", "target": "secret:use " + name}
		}
		return map[string]any{"allow": false, "rule": "no card", "reason": "no card allows secret:use " + name, "target": "secret:use " + name}
	}
	bodies := []map[string]any{
		{"header_secrets": []string{"HK"}, "decisions": []any{conn, use("HK", false)}},
		{"header_secrets": []string{"TOKEN"}, "decisions": []any{conn, use("TOKEN", true), conn}},
		{"header_secrets": []string{"TOKEN"}, "decisions": []any{conn, use("TOKEN", true)}}, // cut by agent.toml's rules
		{"header_secrets": []string{"TOKEN"}, "credential": "HK", "decisions": []any{conn, use("TOKEN", true), conn, use("HK", false)}},
		{"header_secrets": []string{"TOKEN"}, "decisions": []any{conn, use("OTHER", false)}}, // another question
	}
	for _, tc := range []struct {
		name     string
		change   api.WhatIfChange
		a2d, d2a int
	}{
		{"no change", api.WhatIfChange{}, 0, 0},
		{"secret:use HK granted", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "secret:use HK"}}}, 0, 2},
		{"secret:use TOKEN prohibited", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "secret:use TOKEN", As: api.WhatIfDeny}}}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research", "ops"}, Cards: cs}, tc.change)
			if err != nil {
				t.Fatal(err)
			}
			for i, body := range bodies {
				body["method"], body["host"] = "GET", "api.example.com"
				b, _ := json.Marshal(body)
				r.Add(api.AuditRecord{Seq: int64(i + 1), Kind: whatif.KindFetch, Agent: "research", Tool: "web_fetch", Body: b})
			}
			rep := r.Report()
			var a2d, d2a int
			for _, g := range rep.Groups {
				a2d, d2a = a2d+g.AllowedToDenied, d2a+g.DeniedToAllowed
			}
			if rep.Replayed != 3 || rep.Skipped != 2 || a2d != tc.a2d || d2a != tc.d2a {
				t.Fatalf("replayed %d, skipped %d, %d allowed -> denied, %d denied -> allowed; want 3 replayed, 2 skipped, %d and %d",
					rep.Replayed, rep.Skipped, a2d, d2a, tc.a2d, tc.d2a)
			}
		})
	}
}
