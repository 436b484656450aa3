package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/humanwait"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestApprovalWaitersBoundedPerAgent: as many identical calls of agent a
// as its max_pending (5 here) wait for a human in one Host (the default,
// humanwait.DefaultPerOwner, is humanwait's own test); the next one does not
// wait but is answered pending with the same request at once (it returns
// while its context is live, though it asked to wait an hour); agent b's
// call still waits. Then the human approves: exactly one of a's calls
// runs, and every waiter is gone.
func TestApprovalWaitersBoundedPerAgent(t *testing.T) {
	dir := t.TempDir()
	body := fmt.Sprintf(`version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
[agents.a]
tools = ["t"]
grants = ["tool:invoke t --..."]
max_pending = 5
[agents.b]
tools = ["t"]
grants = ["tool:invoke t --..."]
`, testkit.Component(t, "logger"))
	const bound = 5
	h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: time.Hour})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// registered waits until agent has n calls waiting (an event the
	// Host's waiters show; OnApproval comes just before a call registers).
	registered := func(agent string, n int) {
		t.Helper()
		waitFor(t, func() bool { return h.waiters.Waiting(agent) == n })
	}
	var wg sync.WaitGroup
	results := make(chan Result, bound+1)
	wait := func(agent string) string {
		asked := make(chan string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.Call(ctx, Call{Agent: agent, Tool: "t", Input: `{}`, ApprovalWait: time.Hour,
				OnApproval: func(r ApprovalRequest) { asked <- r.ID }})
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
		return <-asked
	}
	id := wait("a")
	for range bound - 1 {
		if got := wait("a"); got != id {
			t.Fatalf("an identical call waits on %s, want %s", got, id)
		}
	}
	registered("a", bound)
	over, err := h.Call(ctx, Call{Agent: "a", Tool: "t", Input: `{}`, ApprovalWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the call over the bound waited until its context ended: %v", ctx.Err())
	}
	if over.Error == nil || over.Error.Kind != KindPending || over.Error.Approval != id {
		t.Fatalf("the call over the bound: %+v, want pending on %s", over.Error, id)
	}
	bid := wait("b")
	registered("b", 1)
	if _, err := decideRequest(ctx, h, id, admin.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := decideRequest(ctx, h, bid, admin.Answer{Approve: false, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	ran := 0
	for res := range results {
		if res.OK {
			ran++
		} else if res.Error.Kind != KindPending && res.Error.Kind != KindDenied {
			t.Errorf("a waiting call ended %+v", res.Error)
		}
	}
	if ran != 1 {
		t.Errorf("%d calls ran after one approval, want 1", ran)
	}
	if ctx.Err() != nil {
		t.Fatal("the calls were ended by the test's deadline, not by the decisions")
	}
	if n := h.waiters.Waiting("a") + h.waiters.Waiting("b"); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}

// TestMaxPendingDefaultsAgree: the host always passes the agent's
// max_pending (config.DefaultMaxPending when unset), but the store's and
// humanwait's own defaults, for a caller that passes none, must be the
// same bound.
func TestMaxPendingDefaultsAgree(t *testing.T) {
	for name, n := range map[string]int{"store.DefaultMaxPending": store.DefaultMaxPending, "humanwait.DefaultPerOwner": humanwait.DefaultPerOwner} {
		if n != config.DefaultMaxPending {
			t.Errorf("%s is %d, config.DefaultMaxPending %d: want one bound", name, n, config.DefaultMaxPending)
		}
	}
}
