package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
)

// TestSessionOpenBounded: session_open opens at most the bound of live
// sessions per agent (store.DefaultMaxSessions; 2 here): the next call is
// denied naming the agent, the bound and what to do, and opens nothing;
// ending one of its sessions lets it open another.
func TestSessionOpenBounded(t *testing.T) {
	h, _ := testHost(t, t.TempDir(), `version = 1
[agents.a]
tools = ["session_open"]
grants = ["tool:invoke session_open --..."]
`, &Options{Isolation: api.InProcess})
	defer h.Close(context.Background())
	h.kinds.backends.bi.maxSessions = 2
	ctx := context.Background()
	open := func() Result {
		t.Helper()
		res, err := h.Call(ctx, Call{Agent: "a", Tool: "session_open", Input: "{}", Credential: "stdio"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	opened := func() string {
		t.Helper()
		res := open()
		var out struct{ Session string }
		if !res.OK || json.Unmarshal([]byte(res.Output), &out) != nil || out.Session == "" {
			t.Fatalf("session_open: %+v %s", res.Error, res.Output)
		}
		return out.Session
	}
	refused := func(why string) {
		t.Helper()
		res := open()
		if res.OK || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, `agent "a" already holds 2 live sessions`) ||
			!strings.Contains(res.Error.Message, "end some") {
			t.Fatalf("%s: %+v %s, want denied naming agent a, the bound of 2 and what to do", why, res.Error, res.Output)
		}
	}
	first := opened()
	opened()
	refused("the third session of a bound of 2")
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := st.Sessions(ctx, "a"); err != nil || len(list) != 2 {
		t.Fatalf("%d sessions of agent a (%v), want 2: the refused call opened none", len(list), err)
	}
	if err := h.EndSession(ctx, first); err != nil {
		t.Fatal(err)
	}
	opened()
	refused("full again")
}

// TestSessionOpenBindsAsItCreates: session_open's session is bound to the
// caller's credential in the write that creates it (store.OpenSessionWithin),
// not by a change of sessions after it: such a change moves the sessions
// generation every process keeps its sessions on and, on PostgreSQL, waits
// for every instance's feed (up to its lease while one hangs), where a
// creation waits for no one.
func TestSessionOpenBindsAsItCreates(t *testing.T) {
	h, _ := testHost(t, t.TempDir(), `version = 1
[agents.a]
tools = ["session_open"]
grants = ["tool:invoke session_open --..."]
`, &Options{Isolation: api.InProcess})
	defer h.Close(context.Background())
	ctx := context.Background()
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gen, ok := st.(interface {
		SessionsGeneration(context.Context) (int64, error)
	})
	if !ok {
		t.Fatalf("the store %T has no SessionsGeneration", st)
	}
	before, err := gen.SessionsGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "session_open", Input: "{}", Credential: "token:0123456789abcdef"})
	var out struct{ Session string }
	if err != nil || !res.OK || json.Unmarshal([]byte(res.Output), &out) != nil || out.Session == "" {
		t.Fatalf("session_open: %v %+v %s", err, res.Error, res.Output)
	}
	if ss, err := st.Session(ctx, out.Session); err != nil || ss.Credential != "token:0123456789abcdef" {
		t.Fatalf("the new session is bound to %q (%v), want the caller's token", ss.Credential, err)
	}
	if after, err := gen.SessionsGeneration(ctx); err != nil || after != before {
		t.Fatalf("session_open moved the sessions generation %d -> %d (%v): its binding was a change of sessions, not part of the creation", before, after, err)
	}
}
