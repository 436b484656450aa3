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
// that read it and starts reading the parent's frames again only when the
// parent signals a cancel (cancel.go). A guest that computes without end
// must still be reached by the parent's cancel frame: the worker reads it,
// interrupts the guest and answers, and stays in the pool. The grace
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

// TestCancelSignalStates: the worker's reader for a call starts once, when
// the parent's signal or a question to the parent comes while the call
// runs, or as the call is armed if the signal came before; and the goroutine
// that served the call knows whether it still reads.
func TestCancelSignalStates(t *testing.T) {
	t.Parallel()
	signal := func(c *child) bool { // what the signal goroutine does
		c.cancelSignal.Store(true)
		return c.claimReader()
	}
	c := &child{}
	c.reader.Store(readerIdle)
	// A call with no cancel: nobody else reads; the server still does.
	if c.armReader() {
		t.Fatal("armed with no signal: a reader was started")
	}
	if !c.disarmReader() {
		t.Fatal("a call without a reader: the serving goroutine no longer reads")
	}
	// A signal during a call starts the reader, once.
	c.armReader()
	if !signal(c) {
		t.Fatal("a signal during a call started no reader")
	}
	if signal(c) || c.claimReader() {
		t.Fatal("a second reader was started for one call")
	}
	if c.disarmReader() {
		t.Fatal("a call whose reader was started: the serving goroutine still thinks it reads")
	}
	// That second signal is kept: the next call starts its reader at
	// once, the price of a late signal (never a reader missing).
	if !c.armReader() || c.disarmReader() {
		t.Fatal("a kept signal did not start the next call's reader")
	}
	// A signal between calls (its cancel frame behind the run frame the
	// server is still reading) starts the next call's reader as it is armed.
	if signal(c) {
		t.Fatal("a signal with no call armed started a reader")
	}
	if !c.armReader() {
		t.Fatal("the call armed after a signal did not start its reader")
	}
	if c.claimReader() || c.disarmReader() {
		t.Fatal("the reader started at arming was started again, or not seen at the end")
	}
	// A question to the parent (a fetch) starts the reader without a signal.
	c.armReader()
	if !c.claimReader() {
		t.Fatal("a fetch during a call started no reader")
	}
	if c.disarmReader() {
		t.Fatal("a call whose fetch started a reader: the serving goroutine still thinks it reads")
	}
}
