package admin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/statetest"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/whatif"
)

// This file is the fourteenth mutation pass's (docs/security-tests.md,
// "Fourteenth pass"): the operator's view of what a card would newly
// allow, kept between views, answers the question asked.

// askPay appends n records of approval requests of agent's calls of pay
// --to=to, asked by rule under the binding of toolDigest and policy, as
// the approve layer writes them, and waits until they are in the chain.
func askPay(t testing.TB, s *State, agent, to, rule, toolDigest, policy string, n int) {
	t.Helper()
	for i := range n {
		body, _ := json.Marshal(map[string]any{"event": "requested", "approval": "apr_" + to + string(rune('a'+i)), "rule": rule,
			"rendered": "--to=" + to, "tool_digest": toolDigest, "policy": json.RawMessage(policy)})
		if err := s.st.Journal().Append(store.AuditRecord{At: time.Now(), Kind: store.AuditApproval, Actor: "agent:" + agent, Agent: agent, Tool: "pay", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.st.Journal().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestNewlyReplayKeyedByTheQuestion: a kept replay answers only the
// question it was built for: another agent (whose wallet has the same
// revision), another grant, another binding of the always-card, or the
// same store under another configuration (whose approve rule may not be
// approved always) is a replay of its own, not the kept one's answer.
func TestNewlyReplayKeyedByTheQuestion(t *testing.T) {
	ctx := context.Background()
	since := time.Now().Add(-time.Hour)
	newlyOf := func(t *testing.T, s *State, agent, grant, bound string, want int, why string) {
		t.Helper()
		np, err := s.NewlyPossible(ctx, agent, []string{grant}, bound, since)
		if err != nil {
			t.Fatal(err)
		}
		if np.Calls != want {
			t.Fatalf("%s: NewlyPossible(%s, %q, bound %q) = %d calls; want %d", why, agent, grant, bound, np.Calls, want)
		}
	}
	newly := func(t *testing.T, s *State, grant, bound string, want int, why string) {
		t.Helper()
		newlyOf(t, s, "research", grant, bound, want, why)
	}
	t.Run("agent", func(t *testing.T) {
		// Neither holds a card: their wallets have the same revision.
		s := newlyStore(t)
		refusePay(t, s, "research", "bob", 3)
		refusePay(t, s, "ops", "bob", 1)
		newlyOf(t, s, "research", "tool:invoke pay --to=bob", "", 3, "research's view")
		newlyOf(t, s, "ops", "tool:invoke pay --to=bob", "", 1, "then ops's, of the same card")
	})
	t.Run("grants", func(t *testing.T) {
		s := newlyStore(t)
		refusePay(t, s, "research", "bob", 3)
		refusePay(t, s, "research", "carol", 2)
		newly(t, s, "tool:invoke pay --to=bob", "", 3, "a card allowing bob")
		newly(t, s, "tool:invoke pay --to=carol", "", 2, "then one allowing carol")
	})
	policy := `{"v":"a"}`
	keyA, keyB := whatif.BindingKey("sha256:aaaa", policy), whatif.BindingKey("sha256:bbbb", policy)
	t.Run("bound", func(t *testing.T) {
		s := newlyStore(t)
		askPay(t, s, "research", "bob", "middleware[1]", "sha256:aaaa", policy, 2)
		newly(t, s, "approve:always pay --to=bob", keyA, 2, "an always-card of the requests' binding")
		newly(t, s, "approve:always pay --to=bob", keyB, 0, "then one of another binding")
	})
	t.Run("configuration", func(t *testing.T) {
		s := newlyStore(t)
		askPay(t, s, "research", "bob", "middleware[1]", "sha256:aaaa", policy, 2)
		file := filepath.Join(t.TempDir(), "agent.toml")
		src := "version = 1\n[agents.research]\n[agents.ops]\n[[middleware]]\nuse = \"approve\"\nwhen = 'true'\nallow_always = false\n"
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		newly(t, s, "approve:always pay --to=bob", keyA, 2, "no configuration: every rule may be approved always")
		// The same store, as a Host reloaded with a file whose rule may not.
		newly(t, &State{st: s.st, cfg: cfg}, "approve:always pay --to=bob", keyA, 0, "then a configuration whose middleware[1] has allow_always = false")
	})
}

// TestWhatIfWindowIsExact: the what-if and the view of what a card would
// newly allow count the calls of their window exactly: none recorded
// before its start (though the trail is read from a minute before it),
// every one recorded in its first minute.
func TestWhatIfWindowIsExact(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	refusePay(t, s, "research", "bob", 2)
	since := time.Now()
	refusePay(t, s, "research", "bob", 3)
	rep, err := s.WhatIf(ctx, api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke pay --to=bob"}}}, since)
	if err != nil || rep.Flips != 3 || rep.Replayed != 3 {
		t.Errorf("WhatIf since the third call: %d replayed, %d flips, %v; want the 3 calls of the window", rep.Replayed, rep.Flips, err)
	}
	np, err := s.NewlyPossible(ctx, "research", []string{"tool:invoke pay --to=bob"}, "", since)
	if err != nil || np.Calls != 3 {
		t.Errorf("NewlyPossible since the third call: %d calls, %v; want the 3 of the window", np.Calls, err)
	}
}

// TestWhatIfConfigKeepsWebFetchsAddressRanges: a proposed agent.toml
// whose web_fetch binding opens an address range (http_allow_cidrs)
// allows a recorded fetch of an address in it, as egress does: the same
// file proposed again flips nothing. Before the range was read from the
// binding, a what-if told the operator that the file refuses the fetch.
func TestWhatIfConfigKeepsWebFetchsAddressRanges(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	c, err := s.Grant(ctx, "research", CardSpec{Allow: []string{"network:connect 10.1.2.3:443"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"decisions": []map[string]any{{"allow": true, "card": c.ID, "target": "network:connect 10.1.2.3:443"}}})
	if err := s.st.Journal().Append(store.AuditRecord{At: time.Now(), Kind: store.AuditFetch, Actor: "agent:research", Agent: "research", Tool: "web_fetch", Body: body}); err != nil {
		t.Fatal(err)
	}
	if err := s.st.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "agent.toml")
	src := `version = 1
[agents.research.boundary]
network = true
[agents.research.tools.web_fetch]
http_allow = ["api.example.com"]
http_allow_cidrs = ["10.0.0.0/8"]
[agents.ops]
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.WhatIfConfig(ctx, api.WhatIfChange{}, cfg, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 1 || rep.Flips != 0 {
		t.Errorf("web_fetch of 10.1.2.3:443 under a file opening 10.0.0.0/8: replayed %d, %d flips %+v; want it replayed, no flip", rep.Replayed, rep.Flips, rep.Groups)
	}
}

// TestNewlyReplayExpires: a kept replay is used for newlyTTL at most: a
// view asked later is a new replay over its own window, which no longer
// counts the calls recorded before that window's start.
func TestNewlyReplayExpires(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	refusePay(t, s, "research", "bob", 2)
	change := api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke pay --to=bob"}}}
	calls := func(since, now time.Time) int {
		t.Helper()
		st, err := s.whatIfState(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.newlyReplay(ctx, st, change, since, now)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range rep.Groups {
			n += g.DeniedToAllowed
		}
		return n
	}
	now := time.Now()
	if n := calls(now.Add(-time.Hour), now); n != 2 {
		t.Fatalf("the first view: %d calls; want 2", n)
	}
	later := now.Add(newlyTTL + time.Second)
	if n := calls(now, later); n != 0 {
		t.Errorf("a view %v later, of a window starting after the 2 calls: %d calls; want 0 (the kept replay is too old to use)", newlyTTL+time.Second, n)
	}
}

// TestWhatIfConfigRefusesTheImplicitAgent: a proposed agent.toml that
// declares no [agents] runs every call as the implicit agent, allowed
// everything, which the cards do not decide: the what-if refuses it
// rather than answer that it would refuse every recorded call.
func TestWhatIfConfigRefusesTheImplicitAgent(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	refusePay(t, s, "research", "bob", 1)
	file := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(file, []byte("version = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.WhatIfConfig(ctx, api.WhatIfChange{}, cfg, time.Now().Add(-time.Hour))
	if !errors.Is(err, ErrWhatIfConfig) || !strings.Contains(err.Error(), "declares no [agents]") {
		t.Errorf("WhatIfConfig of a file without [agents]: %v (%d flips); want ErrWhatIfConfig saying it declares no [agents]", err, rep.Flips)
	}
}

// TestDecideAlwaysNamesTheTool: an always-card's grant, edited by the
// human, must name the approved call's tool exactly: a wildcard tool that
// covers the call (and every other tool's) is refused, nothing decided
// and no card installed.
func TestDecideAlwaysNamesTheTool(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	req := statetest.Approval(t, path, statetest.Request{Agent: "research", Session: "s1", Tool: "echo", Rendered: "--message=hi",
		Digest: strings.Repeat("ab", 32), Rule: "middleware[1]", Reason: "asks a human", AllowAlways: true, ExpiresIn: time.Hour})
	file := filepath.Join(t.TempDir(), "agent.toml")
	src := "version = 1\n[agents.research]\n[[middleware]]\nuse = \"approve\"\nwhen = 'true'\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	o, err := OpenStore(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	s := &State{st: o.st, cfg: cfg} // middleware[1] may be approved always
	for _, g := range []string{"approve:always * --...", "approve:always ec* --message=hi"} {
		_, err := s.Decide(ctx, req.ID, Answer{Approve: true, Always: true, Grant: g})
		if !errors.Is(err, ErrAlwaysRefused) || !strings.Contains(err.Error(), "must name the tool echo exactly") {
			t.Errorf("always with %q: %v; want ErrAlwaysRefused: it must name the tool echo exactly", g, err)
		}
	}
	cur, err := s.Approval(ctx, req.ID)
	if err != nil || cur.State != store.ApprovalPending {
		t.Errorf("the request after the refusals: %s, %v; want still pending", cur.State, err)
	}
	if cs, err := s.Cards(ctx, "research"); err != nil || len(cs) != 0 {
		t.Errorf("research's cards after the refusals: %+v, %v; want none", cs, err)
	}
}
