package maiden_test

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestApprovalNotUsedUpByBudgetRefusal: ARCHITECTURE.md ("Durable
// approval") says an approval is consumed right before the run, "so a
// call refused by a later layer does not use it up". The budget stage
// runs after the consumption (runApproved): a human-approved call that
// its card's budget then refuses never runs, and its approval must stay
// approved (usable once the budget allows), not be left started (and,
// after a restart, marked interrupted as if it had run).
func TestApprovalNotUsedUpByBudgetRefusal(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
when = 'args.message == "x"'
reason = "x needs a human"
[agents.a]
tools = ["echo"]
grants = [{ grant = "tool:invoke echo --...", budget = "calls=1" }]
`, maiden.Options{}, "echo")
	ctx := context.Background()
	// Spend the card's one call on a call that needs no approval.
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"y"}`}); !res.OK {
		t.Fatalf("first call: %+v", res.Error)
	}
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"x"}`, ApprovalWait: -1})
	if res.OK || res.Error.Kind != maiden.KindPending || res.Error.Approval == "" {
		t.Fatalf("want pending, got %+v %+v", res, res.Error)
	}
	id := res.Error.Approval
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"x"}`, ApprovalWait: -1})
	wantKind(t, res, maiden.KindDenied, "budget-exhausted")
	if r := approvalOf(t, h, id); r.State != "approved" {
		t.Fatalf("approval %s is %s after a call the budget refused (the tool never ran), want approved", id, r.State)
	}
}
