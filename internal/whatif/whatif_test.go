package whatif_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/whatif"
	"github.com/maiden-run/maiden/internal/whatif/whatiftest"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func gs(t testing.TB, ss ...string) []cards.Grant {
	t.Helper()
	var out []cards.Grant
	for _, s := range ss {
		g, err := grant.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		out = append(out, cards.Grant{Grant: g})
	}
	return out
}

// trail is whatiftest's: decisions recorded as the call path makes and
// writes them (the real-Host test in cmd/maiden checks the shapes against
// records a Host wrote).
type trail struct{ *whatiftest.Trail }

func newTrail(t testing.TB, cs []cards.Card, at time.Time) *trail {
	return &trail{whatiftest.NewTrail(t, cs, at)}
}

type (
	plan    = whatiftest.Plan
	preopen = whatiftest.Preopen
)

// recorded is a call's decision as its record keeps it.
var recorded = whatiftest.Recorded

func (tr *trail) replay(t *testing.T, change api.WhatIfChange) api.WhatIfReport {
	t.Helper()
	r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research", "ops", "idle"}, Cards: tr.Cards}, change)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, rec := range tr.Recs {
		r.Add(rec)
	}
	return r.Report()
}

func card(t testing.TB, id, holder string, s cards.Spec, parents ...string) cards.Card {
	return cards.Card{ID: id, Holder: holder, Spec: s, Parents: parents, Manager: "operator", Created: now.Add(-time.Hour)}
}

// world is a store's cards: research pays alice (c_pay), searches (c_search,
// which excepts --q=secret), fetches api.example.com with TOKEN (c_net) and
// reveals API_KEY (c_reveal); c_ban forbids tool:invoke rm for everyone
// holding it; ops holds c_ops_pay, derived from c_pay (revoking c_pay
// takes it too), and c_ops_all.
func world(t testing.TB) []cards.Card {
	return []cards.Card{
		card(t, "c_pay", "research", cards.Spec{LowerPos: gs(t, "tool:invoke pay --to=alice")}),
		card(t, "c_search", "research", cards.Spec{LowerPos: gs(t, "tool:invoke search --..."), LowerNeg: gs(t, "tool:invoke search --q=secret")}),
		card(t, "c_net", "research", cards.Spec{LowerPos: gs(t, "network:connect api.example.com:443", "secret:use TOKEN")}),
		card(t, "c_reveal", "research", cards.Spec{LowerPos: gs(t, "secret:reveal API_KEY")}),
		card(t, "c_rm", "research", cards.Spec{LowerPos: gs(t, "tool:invoke rm --...")}),
		card(t, "c_ban", "research", cards.Spec{UpperNeg: gs(t, "tool:invoke rm --path=/etc/**")}),
		card(t, "c_ops_pay", "ops", cards.Spec{LowerPos: gs(t, "tool:invoke pay --to=alice")}, "c_pay"),
		card(t, "c_ops_all", "ops", cards.Spec{LowerPos: gs(t, "tool:invoke report --...")}),
		{ID: "c_old", Holder: "research", Spec: cards.Spec{LowerPos: gs(t, "tool:invoke old")}, Created: now.Add(-2 * time.Hour), Revoked: now.Add(-time.Hour)},
	}
}

// calls records a trail of research's and ops's calls on today's cards.
func calls(t testing.TB, cs []cards.Card) *trail {
	tr := newTrail(t, cs, now.Add(-time.Minute))
	tr.Call("research", "pay", "--to=alice")
	tr.Call("research", "pay", "--to=alice")
	tr.Call("research", "pay", "--to=bob")
	tr.Call("research", "search", "--q=cats")
	tr.Call("research", "search", "--q=secret")
	tr.Call("research", "rm", "--path=/tmp/x")
	tr.Call("research", "rm", "--path=/etc/passwd")
	tr.Call("ops", "pay", "--to=alice")
	tr.Call("ops", "report", "--week=48")
	tr.Fetch("research", "fetcher", "api.example.com", 443, "TOKEN")
	tr.Fetch("research", "fetcher", "api.example.com", 443, "")
	tr.Fetch("research", "fetcher", "other.example.com", 443, "")
	tr.Fetch("research", "fetcher", "other.example.com", 443, "OTHER")
	tr.Reveal("research", "vault", "API_KEY", true)
	tr.Reveal("research", "vault", "API_KEY", false) // the binding refuses: not the cards'
	return tr
}

type flip struct {
	agent, tool string
	a2d, d2a    int
	targets     []string
}

func flips(rep api.WhatIfReport) []flip {
	var out []flip
	for _, g := range rep.Groups {
		f := flip{agent: g.Agent, tool: g.Tool, a2d: g.AllowedToDenied, d2a: g.DeniedToAllowed}
		for _, ex := range g.Examples {
			f.targets = append(f.targets, ex.Target)
		}
		out = append(out, f)
	}
	return out
}

// TestFlips: each change flips exactly the recorded decisions it should,
// each way, grouped by agent and tool, naming the question it flips.
func TestFlips(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change api.WhatIfChange
		want   []flip
	}{
		{"no change flips nothing", api.WhatIfChange{}, nil},
		{"revoking a card flips the calls it allowed, and its descendants' in other wallets",
			api.WhatIfChange{Revoke: []string{"c_pay"}},
			[]flip{
				{"ops", "pay", 1, 0, []string{"tool:invoke pay --to=alice"}},
				{"research", "pay", 2, 0, []string{"tool:invoke pay --to=alice", "tool:invoke pay --to=alice"}},
			}},
		{"revoking a derived card leaves its parent's calls alone",
			api.WhatIfChange{Revoke: []string{"c_ops_pay"}},
			[]flip{{"ops", "pay", 1, 0, []string{"tool:invoke pay --to=alice"}}}},
		{"adding a grant flips the calls it would have allowed",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke pay --to=*"}}},
			[]flip{{"research", "pay", 0, 1, []string{"tool:invoke pay --to=bob"}}}},
		{"a grant does not lift another card's exception or a wallet-wide prohibition",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke search --..."}, {Agent: "research", Grant: "tool:invoke rm --..."}}},
			[]flip{{"research", "search", 0, 1, []string{"tool:invoke search --q=secret"}}}},
		{"revoking a prohibition flips what it forbade",
			api.WhatIfChange{Revoke: []string{"c_ban"}},
			[]flip{{"research", "rm", 0, 1, []string{"tool:invoke rm --path=/etc/passwd"}}}},
		{"a grant to one agent flips none of another's calls",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "idle", Grant: "tool:invoke pay --..."}}},
			nil},
		{"revoking network and secret cards flips the fetches they allowed",
			api.WhatIfChange{Revoke: []string{"c_net"}},
			[]flip{{"research", "fetcher", 2, 0, []string{"network:connect api.example.com:443", "network:connect api.example.com:443"}}}},
		{"a destination granted flips a fetch, not one whose credential is still refused",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "network:connect other.example.com"}}},
			[]flip{{"research", "fetcher", 0, 1, []string{"network:connect other.example.com:443"}}}},
		{"destination and credential granted flip both fetches",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "network:connect other.example.com"}, {Agent: "research", Grant: "secret:use OTHER"}}},
			[]flip{{"research", "fetcher", 0, 2, []string{"network:connect other.example.com:443", "network:connect other.example.com:443"}}}},
		{"revoking the reveal card flips the reveal the binding let through",
			api.WhatIfChange{Revoke: []string{"c_reveal"}},
			[]flip{{"research", "vault", 1, 0, []string{"secret:reveal API_KEY"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := calls(t, world(t))
			rep := tr.replay(t, tc.change)
			if diff := cmp.Diff(tc.want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" {
				t.Errorf("flips (-want +got):\n%s", diff)
			}
			n := 0
			for _, f := range tc.want {
				n += f.a2d + f.d2a
			}
			if rep.Flips != n {
				t.Errorf("Flips = %d, want %d", rep.Flips, n)
			}
			// 15 records: the reveal the binding refused is not the cards'.
			if rep.Replayed != 14 || rep.Verified != 14 || rep.Skipped != 1 || len(rep.Inexact) != 0 || rep.Stale != 0 {
				t.Errorf("replayed %d, verified %d, skipped %d, inexact %d, stale %d: want 14, 14, 1, 0, 0",
					rep.Replayed, rep.Verified, rep.Skipped, len(rep.Inexact), rep.Stale)
			}
		})
	}
}

// TestFlipExamples: an example shows the decision before and after the
// change, the deciding card of each, and the record it replays.
func TestFlipExamples(t *testing.T) {
	rep := calls(t, world(t)).replay(t, api.WhatIfChange{Revoke: []string{"c_pay"}})
	ex := rep.Groups[1].Examples[0]
	if ex.Agent != "research" || ex.Tool != "pay" || ex.Record != whatif.KindCallAdmitted || ex.Seq != 1 {
		t.Errorf("example %+v: want research's first pay call, call-admitted, seq 1", ex)
	}
	if !ex.Before.Allow || ex.Before.Card != "c_pay" || ex.After.Allow || ex.After.Rule != "no card" || !strings.Contains(ex.After.Fix, "maiden cards grant -agent research") {
		t.Errorf("example before %+v after %+v: want allowed by c_pay, then denied by no card with a fix", ex.Before, ex.After)
	}
	if !ex.Recorded.Allow || ex.Recorded.Card != "c_pay" {
		t.Errorf("example recorded %+v: want the record's decision", ex.Recorded)
	}
}

// TestExamplesBounded: a group counts every flip and keeps three examples
// of each way.
func TestExamplesBounded(t *testing.T) {
	tr := newTrail(t, world(t), now)
	for i := range 10 {
		tr.Call("research", "pay", "--to=alice")
		tr.Call("research", "pay", fmt.Sprintf("--to=bob%d", i))
	}
	rep := tr.replay(t, api.WhatIfChange{Revoke: []string{"c_pay"}, Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke pay --to=bob*"}}})
	if len(rep.Groups) != 1 {
		t.Fatalf("groups %+v", rep.Groups)
	}
	g := rep.Groups[0]
	if g.AllowedToDenied != 10 || g.DeniedToAllowed != 10 || len(g.Examples) != 6 || rep.Flips != 20 {
		t.Errorf("group %d/%d with %d examples, %d flips: want 10/10 with 6, 20", g.AllowedToDenied, g.DeniedToAllowed, len(g.Examples), rep.Flips)
	}
}

// TestInexactAndStale: a record made on today's wallet whose recorded
// decision the replay does not reproduce is listed as inexact (here a
// record altered to name another card); one made on another revision of
// the wallet is stale, and counted as changed since when today's cards
// already decide it otherwise, which is no flip of the change.
func TestInexactAndStale(t *testing.T) {
	cs := world(t)
	old := newTrail(t, cs[:1], now.Add(-time.Hour)) // only c_pay then
	old.Call("research", "pay", "--to=alice")
	old.Call("research", "search", "--q=cats") // refused then, allowed now
	tr := calls(t, cs)
	tr.Recs = append(old.Recs, tr.Recs...)
	var body map[string]any
	json.Unmarshal(tr.Recs[2].Body, &body)
	body["decision"].(map[string]any)["card"] = "c_search"
	tr.Recs[2].Body, _ = json.Marshal(body)
	rep := tr.replay(t, api.WhatIfChange{})
	if rep.Stale != 2 || rep.ChangedSince != 1 || rep.Flips != 0 {
		t.Errorf("stale %d, changed since %d, flips %d: want 2, 1, 0", rep.Stale, rep.ChangedSince, rep.Flips)
	}
	if len(rep.Inexact) != 1 || rep.Inexact[0].Recorded.Card != "c_search" || rep.Inexact[0].Before.Card != "c_pay" {
		t.Errorf("inexact %+v: want the altered record", rep.Inexact)
	}
}

// TestBadChange: a change that names an unknown or revoked card, an
// unknown agent, or a bad grant is refused with the error that says so.
func TestBadChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change api.WhatIfChange
		err    error
		msg    string
	}{
		{"unknown card", api.WhatIfChange{Revoke: []string{"c_nope"}}, whatif.ErrUnknownCard, "-revoke c_nope: the store holds no card of that ID"},
		{"revoked card", api.WhatIfChange{Revoke: []string{"c_old"}}, whatif.ErrRevoked, "-revoke c_old: the card was revoked at"},
		{"unknown agent", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "nobody", Grant: "tool:invoke x"}}}, whatif.ErrUnknownAgent, "-agent nobody: no agent of that name"},
		{"bad grant", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:fly x"}}}, whatif.ErrBadGrant, `-grant "tool:fly x" for agent research`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := whatif.New(whatif.State{Now: now, Agents: []string{"research", "ops"}, Cards: world(t)}, tc.change)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("New: %v, want %v containing %q", err, tc.err, tc.msg)
			}
		})
	}
}

func mustJSON(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestFlipsOfRewritesAndDirectories: a call a middleware rewrote records
// the decision on the agent's own input beside the rewritten one's, and
// a call in a session records the fs decisions of its preopens; a change
// that revokes the card that allowed the agent's input, or the card (or
// adds the prohibition) that decided a directory, flips the call, its
// example naming the decision that flips. A record that cut its lists is
// counted as partial.
func TestFlipsOfRewritesAndDirectories(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_fs", "research", cards.Spec{LowerPos: gs(t, "fs:read /srv/**", "fs:write /srv/work/**")}),
		card(t, "c_any", "research", cards.Spec{LowerPos: gs(t, "tool:invoke mail --cc=* --to=*")}),
		card(t, "c_mail", "research", cards.Spec{LowerPos: gs(t, "tool:invoke mail --to=*", "tool:invoke build --...")}),
	}
	record := func() *trail {
		tr := newTrail(t, cs, now.Add(-time.Minute))
		if out := tr.CallWith(plan{Agent: "research", Tool: "mail", Rendered: []string{"--cc=all --to=bob", "--to=bob"}}); out != "ran" {
			t.Fatalf("mail: %s", out)
		}
		out := tr.CallWith(plan{Agent: "research", Tool: "build", Rendered: []string{"--target=x"}, Dirs: []preopen{{Dir: "/srv/work", Write: true}, {Dir: "/srv/data"}}})
		if out != "ran fs:read /srv/work/**=true fs:write /srv/work/**=true fs:read /srv/data/**=true" {
			t.Fatalf("build: %s", out)
		}
		return tr
	}
	for _, tc := range []struct {
		name     string
		change   api.WhatIfChange
		tool     string
		target   string
		card     string // the card that decided before
		afterWhy string // the rule after
	}{
		{"unchanged", api.WhatIfChange{}, "", "", "", ""},
		{"revoking the card that allowed the agent's input", api.WhatIfChange{Revoke: []string{"c_any"}}, "mail", "tool:invoke mail --cc=all --to=bob", "c_mail", "no card"},
		{"revoking the card that allowed a directory", api.WhatIfChange{Revoke: []string{"c_fs"}}, "build", "fs:read /srv/work/**", "c_fs", "no card"},
		{"a prohibition reaching inside a writable directory", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "fs:write /srv/work/.git/**", As: api.WhatIfDeny}}},
			"build", "fs:write /srv/work/**", "c_fs", "card (what-if deny card of research): upper-negative fs:write /srv/work/.git/**"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := record()
			r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research"}, Cards: cs}, tc.change)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range tr.Recs {
				r.Add(rec)
			}
			rep := r.Report()
			if rep.Replayed != 2 || rep.Verified != 2 || len(rep.Inexact) != 0 || rep.Partial != 0 {
				t.Fatalf("replayed %d, verified %d, inexact %+v, partial %d: want 2 verified", rep.Replayed, rep.Verified, rep.Inexact, rep.Partial)
			}
			if tc.tool == "" {
				if rep.Flips != 0 {
					t.Fatalf("unchanged: %d flips %+v", rep.Flips, rep.Groups)
				}
				return
			}
			if rep.Flips != 1 || len(rep.Groups) != 1 || rep.Groups[0].Tool != tc.tool || rep.Groups[0].AllowedToDenied != 1 {
				t.Fatalf("flips %d, groups %+v: want %s's call allowed -> denied", rep.Flips, rep.Groups, tc.tool)
			}
			ex := rep.Groups[0].Examples[0]
			if ex.Record != whatif.KindCallAdmitted || ex.Target != tc.target || !ex.Before.Allow || ex.Before.Card != tc.card || ex.After.Allow || ex.After.Rule != tc.afterWhy {
				t.Errorf("example %+v\nwant record %s, target %q, allowed by %s before, denied by %q after", ex, whatif.KindCallAdmitted, tc.target, tc.card, tc.afterWhy)
			}
			if ex.Recorded.Target != "" && ex.Recorded.Target != tc.target || !ex.Recorded.Allow {
				t.Errorf("example's recorded decision %+v: want the allowed one of %s", ex.Recorded, tc.target)
			}
		})
	}
	t.Run("partial", func(t *testing.T) {
		tr := record()
		for i := range tr.Recs {
			var b map[string]any
			mustJSON(t, tr.Recs[i].Body, &b)
			b[[]string{"before_rewrite_truncated", "fs_truncated"}[i]] = true
			tr.Recs[i].Body, _ = json.Marshal(b)
		}
		rep := tr.replay(t, api.WhatIfChange{})
		if rep.Partial != 2 || rep.Verified != 2 || rep.Flips != 0 {
			t.Errorf("partial %d, verified %d, flips %d: want 2, 2, 0", rep.Partial, rep.Verified, rep.Flips)
		}
	})
}
