package maiden_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
)

// TestApprovalRequestsBoundedPerAgent: an agent that varies its input
// cannot fill the human's inbox. With its bound of requests pending
// (config.DefaultMaxPending, or its max_pending in agent.toml, below or
// above the default), a new question is refused (denied, naming the
// bound; nothing stored, nothing run); repeating one already asked still
// gets its request; agent b still asks; once a human decides one, a asks
// again.
func TestApprovalRequestsBoundedPerAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		keys  string
		bound int
	}{{"", config.DefaultMaxPending}, {"max_pending = 3\n", 3}, {"max_pending = 104\n", 104}} {
		t.Run(fmt.Sprintf("bound %d", tc.bound), func(t *testing.T) {
			t.Parallel()
			testApprovalRequestsBounded(t, tc.keys, tc.bound)
		})
	}
}

func testApprovalRequestsBounded(t *testing.T, keys string, bound int) {
	h := approvalHost(t, keys+`[agents.b]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`)
	ctx := context.Background()
	call := func(agent, msg string) maiden.Result {
		return mustCall(t, h, maiden.Call{Agent: agent, Tool: "echo", Input: `{"message":"` + msg + `"}`, ApprovalWait: -1})
	}
	var first string
	for i := range bound {
		res := call("a", fmt.Sprintf("pay %d", i))
		wantKind(t, res, maiden.KindPending, "")
		if i == 0 {
			first = res.Error.Approval
		}
	}
	res := call("a", "pay more")
	wantKind(t, res, maiden.KindDenied, fmt.Sprintf("agent a already has %d approval requests waiting for a human", bound))
	if res.Error.Approval != "" {
		t.Errorf("the refused call names request %s", res.Error.Approval)
	}
	pend, err := h.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) != bound {
		t.Fatalf("%d requests pending, want %d: the refused one was stored", len(pend), bound)
	}
	res = call("a", "pay 0")
	wantKind(t, res, maiden.KindPending, "")
	if res.Error.Approval != first {
		t.Errorf("repeating a question already asked got request %s, want %s", res.Error.Approval, first)
	}
	wantKind(t, call("b", "pay 1"), maiden.KindPending, "")
	if _, err := h.Decide(ctx, first, maiden.Answer{Approve: false, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	wantKind(t, call("a", "pay more"), maiden.KindPending, "")
	if n := len(trail(t, h, "call-admitted")); n != 0 {
		t.Errorf("%d calls ran", n)
	}
}
