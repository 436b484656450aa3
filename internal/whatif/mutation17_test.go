package whatif_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/whatif"
)

// This file is the seventeenth mutation pass's (docs/security-tests.md,
// "Seventeenth pass"): what a new card or a widened boundary would newly
// allow, said and counted as the wallet and the boundary decide it, and a
// proposed agent.toml's side of the replay.

// forGrants is gs (grant texts) as grants of a card for recipient.
func forGrants(t testing.TB, recipient string, ss ...string) []cards.Grant {
	t.Helper()
	out := gs(t, ss...)
	for i := range out {
		out[i].Recipient = recipient
	}
	return out
}

// TestBeyondKeepsToTheRecipients: what a new card adds is said against
// the grants of the wallet's cards that are for the agent (its name, "*"
// or none), as the wallet decides: a card's allowance, prohibition or
// ceiling for another recipient says nothing of the agent's calls, and a
// ceiling is listed with the agent's own grants of it only. A ceiling
// that covers the new grant adds no words; an exception of another class
// leaves a card's grant whole.
func TestBeyondKeepsToTheRecipients(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_mixed", "research", cards.Spec{LowerPos: append(append(forGrants(t, "ops", "tool:invoke pay --..."),
			forGrants(t, "research", "tool:invoke report --...")...), forGrants(t, "*", "tool:invoke search --...")...)}),
		card(t, "c_ban", "research", cards.Spec{UpperNeg: append(forGrants(t, "ops", "tool:invoke rm --..."),
			forGrants(t, "research", "tool:invoke wipe --...")...)}),
		card(t, "c_cap_ops", "research", cards.Spec{UpperPos: forGrants(t, "ops", "tool:invoke pay --to=alice"),
			LowerPos: forGrants(t, "research", "tool:invoke list")}),
		card(t, "c_fetch", "research", cards.Spec{LowerPos: gs(t, "tool:invoke fetch --..."), LowerNeg: gs(t, "fs:read /etc/**")}),
		card(t, "c_cap", "capped", cards.Spec{UpperPos: append(forGrants(t, "capped", "tool:invoke pay --to=*", "tool:invoke mail --..."),
			forGrants(t, "ops", "tool:invoke pay --...")...)}),
	}
	st := whatif.State{Now: now, Agents: []string{"research", "capped", "ops"}, Cards: cs}
	for _, tc := range []struct {
		name, agent string
		add         string
		want        string
		redundant   bool
	}{
		{"an allowance for another recipient is not the agent's", "research", "tool:invoke pay --to=bob",
			"tool:invoke pay with --to=bob (today nothing of pay)", false},
		{"an allowance for the agent by name is", "research", "tool:invoke report --week=1",
			"nothing new: tool:invoke report --week=1 is covered by tool:invoke report --...", true},
		{"an allowance for anyone is", "research", "tool:invoke search --q=cats",
			"nothing new: tool:invoke search --q=cats is covered by tool:invoke search --...", true},
		{"a prohibition for another recipient forbids nothing of the agent's", "research", "tool:invoke rm --path=/tmp/x",
			"tool:invoke rm with --path=/tmp/x (today nothing of rm)", false},
		{"a prohibition for the agent by name does", "research", "tool:invoke wipe --all",
			"nothing new: tool:invoke wipe --all is forbidden across the wallet by tool:invoke wipe --...", true},
		{"an exception of another class leaves the grant whole", "research", "tool:invoke fetch --url=https://example.com/",
			"nothing new: tool:invoke fetch --url=https://example.com/ is covered by tool:invoke fetch --...", true},
		{"inside the ceiling: no words of it", "capped", "tool:invoke pay --to=bob",
			"tool:invoke pay with --to=bob (today nothing of pay)", false},
		{"outside the ceiling: its grants for the agent, listed", "capped", "tool:invoke wire --to=bob",
			"tool:invoke wire with --to=bob (today nothing of wire); only as far as card c_cap's ceiling allows (tool:invoke pay --to=*, tool:invoke mail --...)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := grant.Parse(tc.add)
			if err != nil {
				t.Fatal(err)
			}
			lines, red := whatif.Beyond(st, tc.agent, []grant.Grant{g}, "")
			if diff := cmp.Diff([]string{tc.want}, lines); diff != "" || red != tc.redundant {
				t.Errorf("Beyond(%s, %q): lines (-want +got):\n%s\nredundant %v, want %v", tc.agent, tc.add, diff, red, tc.redundant)
			}
		})
	}
}

// TestFileBuiltinRefusedPathDidNotRun: a file built-in's call whose path
// its fs card refused did not run (the path's fs decision decides whether
// it ran, as a fetch's credential does); revoking the card of its
// tool:invoke leaves it not run, so only the calls that ran flip, for
// each of fs_read, fs_write and fs_list.
func TestFileBuiltinRefusedPathDidNotRun(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_files", "research", cards.Spec{LowerPos: gs(t, "tool:invoke fs_read --...", "tool:invoke fs_write --...", "tool:invoke fs_list --...")}),
		card(t, "c_srv", "research", cards.Spec{LowerPos: gs(t, "fs:read /srv/**", "fs:write /srv/**")}),
	}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	var want []flip
	for _, c := range []struct{ tool, content string }{{builtin.ToolFSList, ""}, {builtin.ToolFSRead, ""}, {builtin.ToolFSWrite, "--content=x "}} {
		if !tr.Call("research", c.tool, c.content+"--path=/srv/a") || tr.Call("research", c.tool, c.content+"--path=/etc/x") {
			t.Fatalf("%s: want /srv/a allowed and /etc/x refused by the fs cards", c.tool)
		}
		want = append(want, flip{"research", c.tool, 1, 0, []string{"tool:invoke " + c.tool + " " + c.content + "--path=/srv/a"}})
	}
	rep := tr.replay(t, api.WhatIfChange{Revoke: []string{"c_files"}})
	if diff := cmp.Diff(want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" {
		t.Errorf("revoking c_files: flips (-want +got):\n%s\n(the calls of /etc/x never ran: their fs decision refused them)", diff)
	}
}

// boundaryRecord is a built-in's call record of session s1 as the call
// path writes it, at revision rev of the boundary (none when nil).
func boundaryRecord(seq int64, kind, tool, rendered string, rev any) api.AuditRecord {
	body := map[string]any{"session": "s1", "rendered": rendered, "kind": "tool_error", "message": "outside", "tool_kind": "builtin"}
	if rev != nil {
		body["boundary_revision"] = rev
	}
	b, _ := json.Marshal(body)
	return api.AuditRecord{Seq: seq, At: now.Add(time.Duration(seq) * time.Second), Kind: kind, Agent: "coder", Tool: tool, Body: b}
}

// replayBoundary replays recs over a session whose boundary had revisions
// revs, is now and would be after.
func replayBoundary(revs map[int64]boundary.Boundary, now, after boundary.Boundary, recs ...api.AuditRecord) (int, []api.WhatIfExample, int) {
	r := whatif.NewBoundaryReplay("s1", revs, now, after)
	for _, rec := range recs {
		r.Add(rec)
	}
	return r.Result()
}

func targets(ex []api.WhatIfExample) []string {
	var out []string
	for _, e := range ex {
		out = append(out, e.Target)
	}
	return out
}

// TestBoundaryReplayOfEachBuiltin: a widening that adds the network and
// /srv/app shows a refused call of each built-in a boundary decides:
// web_fetch needs the network, fs_read and fs_list read their path,
// fs_write writes it.
func TestBoundaryReplayOfEachBuiltin(t *testing.T) {
	b := restricted()
	b.Revision = 0
	after := b
	after.Network = true
	after.Entries = []boundary.Entry{{Path: "/srv/app", Access: boundary.Write, Match: boundary.Subtree}}
	n, ex, unknown := replayBoundary(map[int64]boundary.Boundary{0: b}, b, after,
		boundaryRecord(1, whatif.KindCallFailed, builtin.ToolWebFetch, "--url=https://example.com/", 0),
		boundaryRecord(2, whatif.KindCallFailed, builtin.ToolFSRead, "--path=/srv/app/a", 0),
		boundaryRecord(3, whatif.KindCallFailed, builtin.ToolFSList, "--path=/srv/app", 0),
		boundaryRecord(4, whatif.KindCallFailed, builtin.ToolFSWrite, "--content=x --path=/srv/app/b", 0))
	want := []string{"web_fetch: the network", "fs_read: read /srv/app/a", "fs_list: read /srv/app", "fs_write: write /srv/app/b"}
	if diff := cmp.Diff(want, targets(ex)); diff != "" || n != 4 || unknown != 0 {
		t.Errorf("calls %d, not replayable %d (want 4, 0), examples (-want +got):\n%s", n, unknown, diff)
	}
}

// TestBoundaryReplayExample: an example of a call the widening would have
// let run names its record (sequence, time, agent, tool, kind) and its
// need, refused by the boundary's revision it ran under and allowed
// after; at most api.MaxNewlyExamples are kept, every such call counted.
func TestBoundaryReplayExample(t *testing.T) {
	then := restricted() // revision 1
	now := then
	now.Revision = 2
	after := now
	after.Entries = []boundary.Entry{{Path: "/srv/app", Access: boundary.Write, Match: boundary.Subtree}}
	var recs []api.AuditRecord
	for i := range api.MaxNewlyExamples + 1 {
		recs = append(recs, boundaryRecord(int64(i+1), whatif.KindCallRefused, builtin.ToolFSWrite, fmt.Sprintf("--content=x --path=/srv/app/%d", i), 1))
	}
	n, ex, _ := replayBoundary(map[int64]boundary.Boundary{1: then, 2: now}, now, after, recs...)
	if n != api.MaxNewlyExamples+1 || len(ex) != api.MaxNewlyExamples {
		t.Fatalf("%d calls, %d examples; want %d calls and the first %d as examples", n, len(ex), api.MaxNewlyExamples+1, api.MaxNewlyExamples)
	}
	const target = "fs_write: write /srv/app/0"
	refused := api.Decision{Rule: "boundary", Reason: "outside the session's boundary (revision 1)", Target: target}
	want := api.WhatIfExample{Seq: 1, At: recs[0].At, Agent: "coder", Tool: builtin.ToolFSWrite, Record: whatif.KindCallRefused, Target: target,
		Recorded: refused, Before: refused, After: api.Decision{Allow: true, Rule: "boundary", Target: target}}
	if diff := cmp.Diff(want, ex[0]); diff != "" {
		t.Errorf("the first example (-want +got):\n%s", diff)
	}
}

// TestBoundaryReplayRecordWithoutRevision: a record naming no revision of
// the boundary it ran under is not replayable even when the session's
// history holds revision 0 (a missing revision is not revision 0).
func TestBoundaryReplayRecordWithoutRevision(t *testing.T) {
	b := restricted()
	b.Revision = 0
	after := b
	after.Entries = []boundary.Entry{{Path: "/srv/app", Access: boundary.Write, Match: boundary.Subtree}}
	n, ex, unknown := replayBoundary(map[int64]boundary.Boundary{0: b}, b, after,
		boundaryRecord(1, whatif.KindCallFailed, builtin.ToolFSWrite, "--content=x --path=/srv/app/a", nil))
	if n != 0 || len(ex) != 0 || unknown != 1 {
		t.Errorf("calls %d %q, not replayable %d; want 0 calls, 1 not replayable", n, targets(ex), unknown)
	}
}

// TestBoundaryReplayCallThatRanThen: a call the boundary it ran under
// allowed (it failed of its own accord) is not one the widening would let
// run, though the boundary was narrowed since and the widening allows it
// again.
func TestBoundaryReplayCallThatRanThen(t *testing.T) {
	wide := restricted(boundary.Entry{Path: "/srv/app", Access: boundary.Write, Match: boundary.Subtree}) // revision 1
	narrowed := restricted()
	narrowed.Revision = 2
	after := narrowed
	after.Entries = wide.Entries
	n, ex, unknown := replayBoundary(map[int64]boundary.Boundary{1: wide, 2: narrowed}, narrowed, after,
		boundaryRecord(1, whatif.KindCallFailed, builtin.ToolFSWrite, "--content=x --path=/srv/app/a", 1))
	if n != 0 || len(ex) != 0 || unknown != 0 {
		t.Errorf("calls %d %q, not replayable %d; want none: the call ran under revision 1", n, targets(ex), unknown)
	}
}

// TestBoundaryReplayRelativePaths: a relative path is the built-in's, in
// the workspace of the boundary the call ran under: one the deny roots of
// that boundary refused counts when the widening allows it; one the
// built-in refuses itself (not normalised, or leaving the workspace) never
// ran whatever the boundary, and does not count.
func TestBoundaryReplayRelativePaths(t *testing.T) {
	then := boundary.Boundary{Kind: boundary.Managed, Revision: 1, Filesystem: boundary.WorkspaceWrite, Workspace: "/work",
		Entries: []boundary.Entry{}, Deny: []string{"/work/private"}, Protected: []string{".git"}}
	now := boundary.Boundary{Kind: boundary.Managed, Revision: 2, Filesystem: boundary.Restricted, Entries: []boundary.Entry{}}
	after := now
	after.Entries = []boundary.Entry{{Path: "/", Access: boundary.Write, Match: boundary.Subtree}}
	var recs []api.AuditRecord
	for i, p := range []string{"private/x", "a/../../srv/app/x", "../srv/app/y", ".."} {
		recs = append(recs, boundaryRecord(int64(i+1), whatif.KindCallFailed, builtin.ToolFSWrite, "--content=x --path="+p, 1))
	}
	n, ex, unknown := replayBoundary(map[int64]boundary.Boundary{1: then, 2: now}, now, after, recs...)
	if diff := cmp.Diff([]string{"fs_write: write /work/private/x"}, targets(ex)); diff != "" || n != 1 || unknown != 0 {
		t.Errorf("calls %d, not replayable %d (want 1, 0), examples (-want +got):\n%s", n, unknown, diff)
	}
}

// TestBoundaryBeyondOfSubtrees: the words of a subtree expansion say what
// today's boundary allows of the whole subtree: a write under a directory
// of which today only the directory itself may be read is not "today read
// only" (nothing inside it may be read today); the whole filesystem reads
// "under /**".
func TestBoundaryBeyondOfSubtrees(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    boundary.Boundary
		x    boundary.Entry
		want string
	}{
		{"write under a directory readable only itself", restricted(boundary.Entry{Path: "/opt", Access: boundary.Read, Match: boundary.Exact}),
			boundary.Entry{Path: "/opt", Access: boundary.Write, Match: boundary.Subtree}, "write under /opt/** (today nothing there)"},
		{"the whole filesystem", restricted(boundary.Entry{Path: "/srv", Access: boundary.Read, Match: boundary.Subtree}),
			boundary.Entry{Path: "/", Access: boundary.Read, Match: boundary.Subtree}, "read under /** (today nothing there)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, red := whatif.BoundaryBeyond(tc.b, boundary.Expansion{Entries: []boundary.Entry{tc.x}})
			if diff := cmp.Diff([]string{tc.want}, lines); diff != "" || red {
				t.Errorf("lines (-want +got):\n%s\nredundant %v, want false", diff, red)
			}
		})
	}
}

// configFile is the name the proposed configuration's refusals give it.
const configFile = "agent.toml.new"

// systemCard is a card agent.toml installed (a sync's).
func systemCard(t testing.TB, id, holder string, grants ...string) cards.Card {
	return cards.Card{ID: id, Holder: holder, Spec: cards.Spec{LowerPos: gs(t, grants...)}, Manager: "system", System: true, Created: now.Add(-2 * time.Hour)}
}

// replayConfig replays tr's records on change with cfg as the proposed
// agent.toml, over cs and the agents research and ops.
func replayConfig(t *testing.T, tr *trail, cs []cards.Card, change api.WhatIfChange, cfg *whatif.Config) api.WhatIfReport {
	t.Helper()
	r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research", "ops"}, Cards: cs, After: cfg}, change)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, rec := range tr.Recs {
		r.Add(rec)
	}
	return r.Report()
}

// afterCards is each example's after decision's card, by group.
func afterCards(rep api.WhatIfReport) []string {
	var out []string
	for _, g := range rep.Groups {
		for _, ex := range g.Examples {
			out = append(out, g.Tool+": "+ex.After.Card)
		}
	}
	return out
}

// TestConfigSystemCardsAsTheNextSync: a proposed agent.toml's system
// grants replace the agent's system cards as the next sync would: a grant
// whose system card is revoked (in the store, or by the change) is
// installed anew as a new system card, and the new cards are named in the
// order the sync makes them (by their spec), numbered from 1.
func TestConfigSystemCardsAsTheNextSync(t *testing.T) {
	revoked := systemCard(t, "c_sys_pay", "research", "tool:invoke pay --...")
	revoked.Revoked = now.Add(-time.Hour)
	cs := []cards.Card{revoked, systemCard(t, "c_sys_mail", "research", "tool:invoke mail --...")}
	tools := map[string]whatif.ConfigTool{"pay": {}, "mail": {}}
	for _, c := range "abcdef" {
		tools["t"+string(c)] = whatif.ConfigTool{}
	}
	t.Run("a revoked system card the file still declares", func(t *testing.T) {
		tr := newTrail(t, cs, now.Add(-time.Minute))
		tr.Call("research", "pay", "--to=bob") // refused: the card is revoked
		cfg := &whatif.Config{File: configFile, Agents: map[string]whatif.ConfigAgent{"research": {
			System: []cards.Spec{revoked.Spec, cs[1].Spec}, Tools: tools}}}
		rep := replayConfig(t, tr, cs, api.WhatIfChange{}, cfg)
		want := []flip{{"research", "pay", 0, 1, []string{"tool:invoke pay --to=bob"}}}
		if diff := cmp.Diff(want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" {
			t.Errorf("flips (-want +got):\n%s\n(the sync installs the revoked card's grant anew)", diff)
		}
	})
	t.Run("a system card the change revokes and the file still declares", func(t *testing.T) {
		tr := newTrail(t, cs, now.Add(-time.Minute))
		tr.Call("research", "mail", "--to=bob") // allowed by c_sys_mail
		cfg := &whatif.Config{File: configFile, Agents: map[string]whatif.ConfigAgent{"research": {
			System: []cards.Spec{cs[1].Spec}, Tools: tools}}}
		rep := replayConfig(t, tr, cs, api.WhatIfChange{Revoke: []string{"c_sys_mail"}}, cfg)
		if len(rep.Groups) != 0 {
			t.Errorf("flips %+v; want none: the sync after the revocation installs the file's grant anew", rep.Groups)
		}
	})
	t.Run("a system grant whose budget changed", func(t *testing.T) {
		// The sync revokes the card of the old budget with the cards
		// derived from it, and installs the grant with the new one.
		sys := systemCard(t, "c_sys_pay", "research", "tool:invoke pay --...")
		sys.Budget = cards.Budget{"calls": 10}
		cs := []cards.Card{sys, card(t, "c_ops_pay", "ops", cards.Spec{LowerPos: gs(t, "tool:invoke pay --to=alice")}, "c_sys_pay")}
		tr := newTrail(t, cs, now.Add(-time.Minute))
		tr.Call("research", "pay", "--to=bob")
		tr.Call("ops", "pay", "--to=alice")
		spec := sys.Spec
		spec.Budget = cards.Budget{"calls": 20}
		cfg := &whatif.Config{File: configFile, Agents: map[string]whatif.ConfigAgent{
			"research": {System: []cards.Spec{spec}, Tools: tools}, "ops": {Tools: tools}}}
		rep := replayConfig(t, tr, cs, api.WhatIfChange{}, cfg)
		want := []flip{{"ops", "pay", 1, 0, []string{"tool:invoke pay --to=alice"}}}
		if diff := cmp.Diff(want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" {
			t.Errorf("flips (-want +got):\n%s\n(ops's card derived from the card of the old budget goes with it)", diff)
		}
	})
	t.Run("new system cards are named in the sync's order", func(t *testing.T) {
		tr := newTrail(t, cs, now.Add(-time.Minute))
		var specs []cards.Spec
		for _, c := range "fedcba" {
			tool := "t" + string(c)
			tr.Call("research", tool, "--x=1") // refused: no card
			specs = append(specs, cards.Spec{LowerPos: gs(t, "tool:invoke "+tool+" --...")})
		}
		cfg := &whatif.Config{File: configFile, Agents: map[string]whatif.ConfigAgent{"research": {System: specs, Tools: tools}}}
		rep := replayConfig(t, tr, cs, api.WhatIfChange{}, cfg)
		var want []string
		for i, c := range "abcdef" {
			want = append(want, fmt.Sprintf("t%c: (system card %d of research in %s)", c, i+1, configFile))
		}
		if diff := cmp.Diff(want, afterCards(rep)); diff != "" {
			t.Errorf("the cards allowing the calls with the file (-want +got):\n%s", diff)
		}
	})
}

// refusal is a flip's example as the operator reads its after side.
type refusal struct{ agent, tool, rule, reason string }

// TestConfigBindingsDecide: with a proposed agent.toml, a call is refused
// when its agent is not declared or its tool not bound there (an
// import's tool by its import's binding, NAME.TOOL under NAME), a fetch
// when its destination is not in the binding's http_allow (a pattern
// matching the host) on 443 or a listed port, or its credential not in
// the binding's secrets; each refusal says which, naming the file, tool
// and agent. What the file still allows flips nothing.
func TestConfigBindingsDecide(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_research", "research", cards.Spec{LowerPos: gs(t, "tool:invoke pay --...", "tool:invoke old --...", "tool:invoke jira.search --...",
			"network:connect api.example.com:443", "network:connect api.example.com:8443", "secret:use TOKEN")}),
		card(t, "c_ops", "ops", cards.Spec{LowerPos: gs(t, "tool:invoke report --...")}),
	}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	for _, ok := range []bool{
		tr.Call("research", "pay", "--to=bob"),
		tr.Call("research", "old", "--x=1"),
		tr.Call("research", "jira.search", "--q=x"),
		tr.Call("ops", "report", "--week=1"),
		tr.Fetch("research", "fetcher", "api.example.com", 443, "TOKEN"),
		tr.Fetch("research", "fetcher", "api.example.com", 8443, ""),
		tr.Fetch("research", "narrow", "api.example.com", 443, ""),
		tr.Fetch("research", "nosecret", "api.example.com", 443, "TOKEN"),
	} {
		if !ok {
			t.Fatal("want every recorded call and fetch allowed today")
		}
	}
	cfg := &whatif.Config{File: configFile, Agents: map[string]whatif.ConfigAgent{"research": {Tools: map[string]whatif.ConfigTool{
		"pay":      {},
		"jira":     {},
		"fetcher":  {HTTPAllow: []string{"*.example.com"}, Ports: []int{8443}, Secrets: []string{"TOKEN"}},
		"narrow":   {HTTPAllow: []string{"other.example.com"}},
		"nosecret": {HTTPAllow: []string{"api.example.com"}},
	}}}}
	rep := replayConfig(t, tr, cs, api.WhatIfChange{}, cfg)
	var got []refusal
	for _, g := range rep.Groups {
		if g.DeniedToAllowed != 0 {
			t.Errorf("%s's %s: %d denied -> allowed; want none", g.Agent, g.Tool, g.DeniedToAllowed)
		}
		for _, ex := range g.Examples {
			got = append(got, refusal{g.Agent, g.Tool, ex.After.Rule, ex.After.Reason})
		}
	}
	want := []refusal{
		{"ops", "report", whatif.PolicyConfig, `agent "ops" is not declared in agent.toml.new`},
		{"research", "narrow", whatif.PolicyConfig, `api.example.com:443 is not in tools.narrow.http_allow (or its ports) as agent.toml.new binds it to agent "research"`},
		{"research", "nosecret", whatif.PolicyConfig, `secret TOKEN is not in tools.nosecret.secrets as agent.toml.new binds it to agent "research"`},
		{"research", "old", whatif.PolicyConfig, `tool "old" is not bound to agent "research" in agent.toml.new (agents.research.tools)`},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(refusal{})); diff != "" {
		t.Errorf("the calls the file refuses, and why (-want +got):\n%s", diff)
	}
}

// TestConfigAsksAboutTheFilesComponent: with a proposed agent.toml that
// runs the tool as another component, a call is asked about that
// component, the input before each rewrite too; a record naming no
// component (made before records named one) is asked as it was.
func TestConfigAsksAboutTheFilesComponent(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_a", "research", cards.Spec{LowerPos: gs(t, "tool:invoke echo@"+compA+" --message=a")}),
		card(t, "c_b", "research", cards.Spec{LowerPos: gs(t, "tool:invoke echo@"+compB+" --...")}),
	}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	// A's call rewritten from a to b: a allowed (c_a), b refused.
	if out := tr.CallWith(plan{Agent: "research", Tool: "echo", Comp: compA, Rendered: []string{"--message=a", "--message=b"}}); out != "refused" {
		t.Fatalf("the rewritten call: %s; want refused", out)
	}
	if tr.CallOf("research", "echo", "--message=c", "") {
		t.Fatal("a call of no known component: allowed; want refused (every grant names a digest)")
	}
	cfg := &whatif.Config{File: configFile, Agents: map[string]whatif.ConfigAgent{"research": {Tools: map[string]whatif.ConfigTool{"echo": {Component: compB}}}}}
	// Without c_a, only B's grant decides: the rewritten call runs as B.
	rep := replayConfig(t, tr, cs, api.WhatIfChange{Revoke: []string{"c_a"}}, cfg)
	want := []flip{{"research", "echo", 0, 1, []string{"tool:invoke echo --message=b"}}}
	if diff := cmp.Diff(want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" {
		t.Errorf("flips (-want +got):\n%s", diff)
	}
}

// TestConfigReplaysRevealsByTheFilesBinding: with a proposed agent.toml,
// a reveal follows the file's binding: one today's binding refused (its
// cards never asked) is replayed, and flips to allowed where the file
// reveals the secret and a card allows it; one it let through flips to
// refused where the file no longer reveals it. Both are counted replayed.
func TestConfigReplaysRevealsByTheFilesBinding(t *testing.T) {
	cs := []cards.Card{card(t, "c_reveal", "research", cards.Spec{LowerPos: gs(t, "secret:reveal API_KEY")})}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	if !tr.Reveal("research", "vault", "API_KEY", true) || tr.Reveal("research", "safe", "API_KEY", false) {
		t.Fatal("want vault's reveal allowed, safe's refused by its binding")
	}
	cfg := &whatif.Config{File: configFile, Agents: map[string]whatif.ConfigAgent{"research": {Tools: map[string]whatif.ConfigTool{
		"vault": {Secrets: []string{"API_KEY"}},
		"safe":  {Secrets: []string{"API_KEY"}, Reveal: []string{"API_KEY"}},
	}}}}
	rep := replayConfig(t, tr, cs, api.WhatIfChange{}, cfg)
	want := []flip{
		{"research", "safe", 0, 1, []string{"secret:reveal API_KEY"}},
		{"research", "vault", 1, 0, []string{"secret:reveal API_KEY"}},
	}
	if diff := cmp.Diff(want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" || rep.Replayed != 2 || rep.Skipped != 0 {
		t.Errorf("replayed %d, skipped %d (want 2, 0); flips (-want +got):\n%s", rep.Replayed, rep.Skipped, diff)
	}
}
