package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestDecideOnceAcrossInstances: an operator approving a request through
// one instance while another denies it through a second: exactly one
// decision is taken, the other is refused (ErrApprovalState), and the
// request stays as the one taken left it; a denial reported as taken is
// never overwritten by an approval. Fifty requests, each decided at once
// from both sides.
func TestDecideOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		target := be.target(t)
		a, b := open(t, target, nil), open(t, target, nil)
		for i := range 50 {
			req, err := a.CreateApproval(ctx, Approval{Agent: "a", Tool: "pay", Digest: "d" + strconv.Itoa(i), Middleware: "approve#1",
				Expires: time.Now().Add(time.Hour)}, 0)
			if err != nil {
				t.Fatal(err)
			}
			var approveErr, denyErr error
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Go(func() { <-start; _, approveErr = a.Decide(ctx, req.ID, true, "operator:ann", "yes") })
			wg.Go(func() { <-start; _, denyErr = b.Decide(ctx, req.ID, false, "operator:bob", "no") })
			close(start)
			wg.Wait()
			if (approveErr == nil) == (denyErr == nil) {
				t.Fatalf("request %d approved by ann and denied by bob at once: approve %v, deny %v; want exactly one taken, the other ErrApprovalState", i, approveErr, denyErr)
			}
			want, lost := ApprovalApproved, denyErr
			if approveErr != nil {
				want, lost = ApprovalDenied, approveErr
			}
			if !errors.Is(lost, ErrApprovalState) {
				t.Fatalf("request %d: the decision not taken failed with %v; want ErrApprovalState", i, lost)
			}
			if got, err := a.Approval(ctx, req.ID); err != nil || got.State != want {
				t.Fatalf("request %d is %q (%v) after the decision taken left it %q", i, got.State, err, want)
			}
		}
	})
}
