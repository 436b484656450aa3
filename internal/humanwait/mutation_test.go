package humanwait

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestPollSeesADecisionMadeElsewhere: a decision made outside this Host
// (no Wake) is seen at a poll: the request settled at the third check ends
// the wait as decided, long before the wait's end.
func TestPollSeesADecisionMadeElsewhere(t *testing.T) {
	var w Waiters
	var checks atomic.Int32
	done := w.Wait(context.Background(), "agent", 0, "a1", 30*time.Second, time.Millisecond, func() {}, func(context.Context) (bool, error) {
		return checks.Add(1) >= 3, nil
	})
	if !done || checks.Load() != 3 {
		t.Fatalf("Wait = %v after %d checks; want settled at the third poll", done, checks.Load())
	}
}

// TestWaitEndsAtItsLength: a wait nobody decides ends when its length is
// up (1 ms here), unsettled, not when the caller's context does.
func TestWaitEndsAtItsLength(t *testing.T) {
	var w Waiters
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if w.Wait(ctx, "agent", 0, "a1", time.Millisecond, time.Hour, func() {}, func(context.Context) (bool, error) { return false, nil }) {
		t.Fatal("a wait nobody decided returned settled")
	}
	if ctx.Err() != nil {
		t.Fatal("a wait of 1 ms ended only with the caller's context (30 s)")
	}
	if n := w.Waiting("agent"); n != 0 {
		t.Fatalf("%d waits still counted after the wait ended", n)
	}
}

// TestWakeDuringACheckIsNotLost: a decision made while the waiter is in
// its check (so not receiving) makes it check again at once; more wakes
// than the waiter takes never block the Host's Wake.
func TestWakeDuringACheckIsNotLost(t *testing.T) {
	var w Waiters
	registered := make(chan struct{})
	asked := make(chan struct{})
	answer := make(chan bool)
	done := make(chan bool)
	go func() {
		done <- w.Wait(context.Background(), "agent", 0, "a1", time.Hour, time.Hour, func() { close(registered) }, func(context.Context) (bool, error) {
			asked <- struct{}{}
			return <-answer, nil
		})
	}()
	<-registered
	w.Wake("a1")
	<-asked // in its check now
	w.Wake("a1")
	w.Wake("a1") // the waiter takes one wake at a time: this one is dropped, not waited for
	answer <- false
	<-asked // the wake during the check was kept: checked again at once
	answer <- true
	if !<-done {
		t.Fatal("a settled request's wait returned false")
	}
	w.Wake("a1") // nobody waits: nothing to do
}

// TestWaitersHammer: many calls of several owners waiting on a few
// requests, woken, polled and counted at once (run with -race); every
// wait ends decided and nothing is left registered or counted.
func TestWaitersHammer(t *testing.T) {
	var w Waiters
	var settled sync.Map
	var wg sync.WaitGroup
	var decided atomic.Int32
	const waiters = 24
	for i := range waiters {
		id, owner := fmt.Sprintf("apr_%d", i%3), fmt.Sprintf("agent-%d", i%4)
		wg.Go(func() {
			if w.Wait(context.Background(), owner, 0, id, time.Minute, time.Millisecond, func() {}, func(context.Context) (bool, error) {
				_, ok := settled.Load(id)
				return ok, nil
			}) {
				decided.Add(1)
			}
		})
	}
	var side sync.WaitGroup
	stop := make(chan struct{})
	side.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range 4 {
				w.Waiting(fmt.Sprintf("agent-%d", i))
			}
			w.Wake("apr_1")
		}
	})
	for i := range 3 {
		id := fmt.Sprintf("apr_%d", i)
		settled.Store(id, true)
		w.Wake(id)
	}
	wg.Wait()
	close(stop)
	side.Wait()
	if decided.Load() != waiters {
		t.Fatalf("%d of %d waits ended decided", decided.Load(), waiters)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.m) != 0 || len(w.owners) != 0 {
		t.Fatalf("left behind: %d requests, %d owners counted", len(w.m), len(w.owners))
	}
}

// TestWaitLastsItsLength: a wait of one second nobody decides ends after
// that second, not after two. The bound past it is testkit.Slack's: on a
// loaded machine (make test's) a wait of the right length may end late for
// want of a CPU, and the bound loosens rather than fail it.
func TestWaitLastsItsLength(t *testing.T) {
	var w Waiters
	start := time.Now()
	w.Wait(context.Background(), "agent", 0, "a1", time.Second, time.Hour, func() {}, func(context.Context) (bool, error) { return false, nil })
	if d := time.Since(start); d < time.Second || d >= time.Second+testkit.Slack(t, 900*time.Millisecond) {
		t.Fatalf("a wait of 1s ended after %v", d)
	}
}
