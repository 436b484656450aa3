package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestRevokedCallerEndsItsWait: a call waiting for a human (an approval,
// a boundary request) whose token is revoked while it waits, or whose
// agent a reload removes, stops waiting at the wait's next poll, with no
// human answering: it ends denied naming why (the revoked token's ID, the
// removed agent), nothing run; its request is left pending for the human,
// and the agent has no call waiting any more. The wait is an hour and the
// poll 10 ms, so a call that kept waiting until a human answered or the
// wait timed out is caught by the test's own deadline.
func TestRevokedCallerEndsItsWait(t *testing.T) {
	const body = `version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
when = 'tool == "t"'
[agents.a]
tools = ["t", "request_sandbox_boundary"]
grants = ["tool:invoke t --...", "tool:invoke request_sandbox_boundary --..."]
[agents.a.boundary]
network = false
fs = [{ path = "/srv/work", access = "read", match = "subtree" }]
[agents.b]
tools = ["t"]
grants = ["tool:invoke t --..."]
`
	component := testkit.Component(t, "logger")
	boundaryInput := fmt.Sprintf(`{"id":"r1","expansion":{"filesystem":{"entries":[{"path":%q,"access":"read","scope":"subtree"}]}},"justification":"reads there"}`,
		filepath.Join(t.TempDir(), "more"))
	for _, c := range []struct {
		name, tool, input string
		removeAgent       bool // else revoke the token
	}{
		{name: "approval, token revoked", tool: "t", input: "{}"},
		{name: "boundary request, token revoked", tool: "request_sandbox_boundary", input: boundaryInput},
		{name: "approval, agent removed", tool: "t", input: "{}", removeAgent: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := fmt.Sprintf(body, component)
			h, _ := testHost(t, dir, cfg, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: 10 * time.Millisecond})
			defer h.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st, _, err := h.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tok, info, err := st.MintToken(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			asked := make(chan string, 1)
			done := make(chan Result, 1)
			callCtx, stopCall := context.WithCancel(ctx)
			defer stopCall()
			go func() {
				res, err := h.Call(callCtx, Call{Agent: "a", Tool: c.tool, Input: c.input, Credential: TokenCredential(tok), Session: "s1",
					ApprovalWait: time.Hour, OnApproval: func(r ApprovalRequest) { asked <- r.ID }})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			var id string
			select {
			case id = <-asked:
			case res := <-done:
				t.Fatalf("the call did not wait for a human: %+v", res.Error)
			}
			want := "token revoked: the agent token this call was made with (ID " + info.ID + ")"
			if c.removeAgent {
				h.SetConfig(testConfig(t, dir, strings.ReplaceAll(cfg, "[agents.a", "[agents.c")))
				want = `agent removed: agent "a" was removed`
			} else if err := st.RevokeToken(ctx, info.ID); err != nil {
				t.Fatal(err)
			}
			var res Result
			select {
			case res = <-done:
			case <-time.After(30 * time.Second):
				stopCall()
				<-done
				t.Fatalf("the call still waited 30 s after its caller lost its authority (poll 10 ms, wait 1 h), with no human answering")
			}
			if res.OK || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, want) || res.Error.Approval != id {
				t.Fatalf("%+v, want denied (request %s): %s", res.Error, id, want)
			}
			if n := h.waiters.Waiting("a"); n != 0 {
				t.Errorf("agent a still has %d calls waiting", n)
			}
			// Nobody answered: the request waits for the human still.
			if c.tool == "t" {
				a, err := st.Approval(ctx, id)
				if err != nil || a.State != store.ApprovalPending {
					t.Errorf("the approval request is %q (%v), want pending", a.State, err)
				}
			} else {
				r, err := st.BoundaryRequest(ctx, id)
				if err != nil || r.Request.Status != boundary.Pending {
					t.Errorf("the boundary request is %q (%v), want pending", r.Request.Status, err)
				}
			}
		})
	}
}
