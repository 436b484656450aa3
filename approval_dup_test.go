package maiden_test

import (
	"context"
	"sync"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestIdenticalCallsShareOneRequest: "Identical calls share one request"
// (internal/store, DefaultMaxPending): an agent that sends the same call
// many times at once must put one question before the human, not one per
// copy (each approval of which would run the call once more).
func TestIdenticalCallsShareOneRequest(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
when = 'args.message != "warm"'
reason = "every call needs a human"
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`, maiden.Options{}, "echo")
	ctx := context.Background()
	// A first call that needs no human: the tool's first calls are
	// admitted one at a time (firstCalls), later ones side by side.
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"warm"}`}); !res.OK {
		t.Fatal(res.Error)
	}
	const n = 8
	start := make(chan struct{})
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 250"}`, ApprovalWait: -1})
			if err != nil || res.OK || res.Error.Kind != maiden.KindPending {
				t.Errorf("call %d: %+v %v, want pending", i, res, err)
				return
			}
			ids[i] = res.Error.Approval
		})
	}
	close(start)
	wg.Wait()
	pend, err := h.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) != 1 {
		got := []string{}
		for _, p := range pend {
			got = append(got, p.ID)
		}
		t.Fatalf("%d identical concurrent calls made %d pending requests %v (the calls got %v), want 1", n, len(pend), got, ids)
	}
}
