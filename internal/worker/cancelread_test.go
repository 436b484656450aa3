package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestCancelReachesComputingGuest: a worker runs a call on the goroutine
// that read it and starts reading the parent's frames again only once the
// call has run for readerDelay (child.go). A guest that computes without
// end must still be reached by the parent's cancel frame: the worker reads
// it, interrupts the guest and answers, and stays in the pool. The grace
// before the parent's kill is two minutes here, so a worker that never
// read the cancel would be killed (and replaced) only long after the bound
// below.
func TestCancelReachesComputingGuest(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1, Grace: 2 * time.Minute})
	loop := testkit.Component(t, "loop")
	l := sandbox.Limits{Timeout: 10 * time.Minute, Memory: 32 << 20}
	tl, err := p.Open(context.Background(), loop, l)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out sandbox.Outcome
		err error
	}
	res := make(chan result, 1)
	go func() {
		out, err := tl.Execute(ctx, sandbox.Call{Limits: l, Input: `{}`})
		res <- result{out, err}
	}()
	// Wait until the guest computes: its worker is busy and has burnt
	// 20 ms of CPU more than when it was taken (describe() ran before).
	var w *proc
	var cpu0 time.Duration
	for {
		if w == nil {
			p.mu.Lock()
			for b := range p.busy {
				w = b
			}
			p.mu.Unlock()
			if w != nil {
				cpu0 = processStat(w.pid).cpu
			}
		} else if processStat(w.pid).cpu-cpu0 > 20*time.Millisecond {
			break
		}
		select {
		case r := <-res:
			t.Fatalf("the loop returned before it was cancelled: %+v, %v", r.out, r.err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	start := time.Now()
	r := <-res
	took := time.Since(start)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v (outcome %+v), want context.Canceled", r.err, r.out)
	}
	if bound := testkit.Slack(t, 5*time.Second); took > bound {
		t.Fatalf("the cancelled call returned after %v (bound %v): the worker did not read the cancel", took, bound)
	}
	if r.out.WorkerLost {
		t.Fatalf("the worker was lost to the cancel: %+v", r.out)
	}
	p.mu.Lock()
	idle := append([]*proc(nil), p.idle...)
	p.mu.Unlock()
	if len(idle) != 1 || idle[0] != w {
		t.Fatalf("idle workers %v, want the cancelled call's worker %d, interrupted and kept", idle, w.pid)
	}
}

// TestReaderDelayWithinGrace: a cancel frame that comes early in a call is
// read only once the call has run for readerDelay (child.go), and the
// parent kills a worker that has not answered the cancel within its grace.
// readerDelay takes at most a third of the default grace, so that the
// interrupt and the answer have the rest even on a loaded machine and an
// early cancel does not cost the worker.
func TestReaderDelayWithinGrace(t *testing.T) {
	if readerDelay*3 > defaultGrace {
		t.Fatalf("readerDelay %v is more than a third of the default grace %v: an early cancel would leave too little time to interrupt and answer", readerDelay, defaultGrace)
	}
}
