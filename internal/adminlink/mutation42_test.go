package adminlink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/store"
)

func config42(t *testing.T, body string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(p, []byte("version = 1\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMutation42AlwaysNeedsBothRules: a human is offered "always" only when
// the request was stored allowing it AND the approve rule of that name
// allows it now; a rule of that name that is not an approve rule (the rules
// reordered) or is gone offers nothing.
func TestMutation42AlwaysNeedsBothRules(t *testing.T) {
	cfg := config42(t, "[[middleware]]\nuse = \"ratelimit\"\nlimit = 10\nper = \"1m\"\n"+
		"[[middleware]]\nuse = \"approve\"\nallow_always = true\n"+
		"[[middleware]]\nuse = \"approve\"\nallow_always = false\n")
	for _, tc := range []struct {
		rule   string
		stored bool
		want   bool
	}{
		{"middleware[2]", true, true},
		{"middleware[2]", false, false}, // stored without always: never offered
		{"middleware[3]", true, false},  // the rule forbids it now
		{"middleware[1]", true, false},  // a ratelimit rule of that name
		{"middleware[9]", true, false},  // no rule of that name
	} {
		a := store.Approval{ID: "ap_1", Agent: "a", Tool: "pay", Rendered: "--to=bob", Middleware: tc.rule, AllowAlways: tc.stored}
		if got := Approval(a, cfg).AllowAlways; got != tc.want {
			t.Errorf("rule %s stored allow_always %v: the human is offered always = %v; want %v", tc.rule, tc.stored, got, tc.want)
		}
	}
	if got := Approval(store.Approval{Tool: "pay", Middleware: "middleware[2]", AllowAlways: true}, nil).AllowAlways; got {
		t.Errorf("no configuration: always offered")
	}
}

// TestMutation42AlwaysGrantIsTheCall: the always-grant names the tool and
// the call's whole rendering (a card for exactly this call), and only the
// tool when the call has no arguments.
func TestMutation42AlwaysGrantIsTheCall(t *testing.T) {
	a := store.Approval{Tool: "pay", Rendered: "--to=bob --amount=5"}
	if got, want := Approval(a, nil).AlwaysGrant, "approve:always pay --to=bob --amount=5"; got != want {
		t.Errorf("always-grant %q; want %q (exactly the call)", got, want)
	}
	if got, want := AlwaysGrant("pay", ""), "approve:always pay"; got != want {
		t.Errorf("always-grant of a call without arguments %q; want %q", got, want)
	}
}

// TestMutation42ApprovalShowsWhatItIsBoundTo: the human sees the stored
// policy's hosts and secrets each in their place, the input digest and the
// tool's digest; a policy that does not parse shows none.
func TestMutation42ApprovalShowsWhatItIsBoundTo(t *testing.T) {
	a := store.Approval{ID: "ap_1", Tool: "t", Digest: "sha256:in", Binding: store.Binding{ToolDigest: "cli:abc",
		Policy: `{"network":true,"hosts":["api.example"],"secrets":["KEY"]}`}}
	r := Approval(a, nil)
	if r.Policy == nil || strings.Join(r.Hosts, ",") != "api.example" || strings.Join(r.Secrets, ",") != "KEY" {
		t.Errorf("policy %+v hosts %q secrets %q; want the stored policy, hosts [api.example], secrets [KEY]", r.Policy, r.Hosts, r.Secrets)
	}
	if r.Digest != "sha256:in" || r.ToolDigest != "cli:abc" {
		t.Errorf("digest %q tool digest %q; want sha256:in and cli:abc", r.Digest, r.ToolDigest)
	}
	a.Policy = `{"hosts":`
	if r := Approval(a, nil); r.Policy != nil || len(r.Hosts) != 0 {
		t.Errorf("a policy that does not parse shown as %+v, hosts %q; want none", r.Policy, r.Hosts)
	}
}

// TestMutation42BoundaryRequestView: a pending request shows the agent's
// justification and no decision reason; a decided one the human's reason;
// an approved one the revision it made, any other the revision it asked on.
func TestMutation42BoundaryRequestView(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := boundary.Request{ID: "r1", Status: boundary.Pending, BaseRevision: 4, Revision: 5, Justification: "need /srv", Reason: "stale"}
	r := BoundaryApproval(store.BoundaryRequest{Handle: "bnd_1", Created: at, Request: q})
	if r.Reason != "need /srv" || r.DecisionReason != "" || r.Revision != 4 {
		t.Errorf("pending: reason %q decision reason %q revision %d; want the justification, no decision reason, revision 4", r.Reason, r.DecisionReason, r.Revision)
	}
	q.Status, q.Reason = boundary.Approved, "fine"
	r = BoundaryApproval(store.BoundaryRequest{Handle: "bnd_1", Request: q})
	if r.DecisionReason != "fine" || r.Revision != 5 {
		t.Errorf("approved: decision reason %q revision %d; want fine, 5", r.DecisionReason, r.Revision)
	}
	q.Status, q.Reason = boundary.Denied, "no"
	if r := BoundaryApproval(store.BoundaryRequest{Handle: "bnd_1", Request: q}); r.DecisionReason != "no" || r.Revision != 4 {
		t.Errorf("denied: decision reason %q revision %d; want no, 4", r.DecisionReason, r.Revision)
	}
	if got := BoundaryRequests([]store.BoundaryRequest{{Handle: "bnd_1", Request: boundary.Request{Status: boundary.Approved, Revision: 5}}})[0].Request.Revision; got != 5 {
		t.Errorf("boundary request's revision %d; want 5", got)
	}
}

// TestMutation42BoundaryHandle: only "bnd_" at the start makes an ID a
// boundary request's handle.
func TestMutation42BoundaryHandle(t *testing.T) {
	for id, want := range map[string]bool{"bnd_ab12": true, "ap_bnd_1": false, "bndx": false, "bnd": false, "": false} {
		if got := IsBoundaryHandle(id); got != want {
			t.Errorf("IsBoundaryHandle(%q) = %v; want %v", id, got, want)
		}
	}
}

// TestMutation42BoundaryBack: an operator's boundary reaches the store with
// its deny and protected lists, network and each entry's access as given.
func TestMutation42BoundaryBack(t *testing.T) {
	b := api.Boundary{Kind: "managed", Filesystem: "restricted", Deny: []string{"/srv/locked"}, Protected: []string{".git"},
		Entries: []api.BoundaryEntry{{Path: "/srv/a", Access: "read", Match: "subtree"}}}
	got := FromBoundary(b)
	if strings.Join(got.Deny, ",") != "/srv/locked" || strings.Join(got.Protected, ",") != ".git" || got.Network ||
		len(got.Entries) != 1 || got.Entries[0].Access != boundary.Read {
		t.Errorf("FromBoundary = %+v; want deny /srv/locked, protected .git, no network, /srv/a read", got)
	}
}

// TestMutation42CardAndSessionViews: what an operator reads to decide on a
// card or a session: a revoked card's revocation time (not its creation),
// each budget's limit, spent and left, a session's credential binding.
func TestMutation42CardAndSessionViews(t *testing.T) {
	created, revoked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	c := Card(cards.Card{ID: "c1", Holder: "a", Spec: cards.Spec{Budget: cards.Budget{cards.BudgetCalls: 10}}, Spent: cards.Budget{cards.BudgetCalls: 4}, Created: created, Revoked: revoked})
	if !c.Revoked.Equal(revoked) || !c.Created.Equal(created) {
		t.Errorf("card created %v revoked %v; want %v, %v", c.Created, c.Revoked, created, revoked)
	}
	if len(c.Budgets) != 1 || c.Budgets[0] != (api.CardBudget{Key: cards.BudgetCalls, Limit: 10, Spent: 4, Left: 6}) {
		t.Errorf("budgets %+v; want calls: limit 10, spent 4, left 6", c.Budgets)
	}
	if s := Session(store.Session{ID: "s1", Agent: "a", Credential: "tok:ab12"}); s.Credential != "tok:ab12" {
		t.Errorf("session credential %q; want tok:ab12", s.Credential)
	}
}
