package humanwait

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestWakeEndsTheWait: a decision through the same Host (Wake) reaches a
// waiting call at once, long before its poll (an hour); a store error is
// retried at the next wake; a request not yet settled keeps waiting; no
// wait at all below zero.
func TestWakeEndsTheWait(t *testing.T) {
	var w Waiters
	registered := make(chan struct{})
	asked := make(chan struct{})              // check was called
	answer := make(chan func() (bool, error)) // what it answers
	done := make(chan bool)
	go func() {
		done <- w.Wait(context.Background(), "agent", 0, "a1", time.Hour, time.Hour, func() { close(registered) }, func(context.Context) (bool, error) {
			asked <- struct{}{}
			return (<-answer)()
		})
	}()
	<-registered
	w.Wake("other")
	for _, reply := range []func() (bool, error){
		func() (bool, error) { return false, errors.New("store busy") },
		func() (bool, error) { return false, nil },
	} {
		w.Wake("a1")
		<-asked
		answer <- reply
	}
	w.Wake("a1")
	<-asked
	answer <- func() (bool, error) { return true, nil }
	if !<-done {
		t.Error("a settled request's wait returned false")
	}
	w.mu.Lock()
	left := len(w.m)
	w.mu.Unlock()
	if left != 0 {
		t.Errorf("%d waiters left behind", left)
	}
	if w.Wait(context.Background(), "agent", 0, "a2", -1, time.Hour, func() { t.Error("suspended with no wait") }, nil) {
		t.Error("a wait below zero returned true")
	}
}

// TestWaitsBoundedPerOwner: an owner (an agent) with its bound of calls
// waiting (the default when Wait is given none, or the one given: the
// agent's max_pending) gets no more: the next call returns false at once,
// without giving its turn back (suspend); another owner still waits; once
// one of the first owner's waits ends, it may wait again.
func TestWaitsBoundedPerOwner(t *testing.T) {
	for _, tc := range []struct{ given, bound int }{{0, DefaultPerOwner}, {3, 3}} {
		t.Run(fmt.Sprintf("given %d", tc.given), func(t *testing.T) { testWaitsBounded(t, tc.given, tc.bound) })
	}
}

func testWaitsBounded(t *testing.T, given, bound int) {
	var w Waiters
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	never := func(context.Context) (bool, error) { return false, nil }
	// wait starts a wait of owner on id and returns when it has registered
	// (suspend called) or ended, telling which.
	type started struct {
		suspended bool
		done      chan bool
	}
	wait := func(ctx context.Context, owner, id string) started {
		s := started{done: make(chan bool, 1)}
		reg := make(chan struct{})
		go func() {
			s.done <- w.Wait(ctx, owner, given, id, time.Hour, time.Hour, func() { close(reg) }, never)
		}()
		select {
		case <-reg:
			s.suspended = true
		case d := <-s.done:
			s.done <- d
		}
		return s
	}
	firstCtx, endFirst := context.WithCancel(ctx)
	defer endFirst()
	first := wait(firstCtx, "agent-a", "apr_0")
	if !first.suspended {
		t.Fatal("the first wait did not wait")
	}
	for i := 1; i < bound; i++ {
		if s := wait(ctx, "agent-a", "apr_same"); !s.suspended {
			t.Fatalf("wait %d of %d did not wait", i+1, bound)
		}
	}
	over := wait(ctx, "agent-a", "apr_same")
	if over.suspended {
		t.Fatalf("wait %d of one owner waited: the bound is %d", bound+1, bound)
	}
	if <-over.done {
		t.Error("a wait over the bound reported the request settled")
	}
	if s := wait(ctx, "agent-b", "apr_same"); !s.suspended {
		t.Error("another owner's wait was refused by agent-a's bound")
	}
	endFirst()
	if <-first.done {
		t.Error("a cancelled wait reported the request settled")
	}
	if s := wait(ctx, "agent-a", "apr_1"); !s.suspended {
		t.Error("after one of agent-a's waits ended, a new one did not wait")
	}
}

// TestDecisionBeforeTheWaiterRegistered: a decision made, and woken, after
// the caller announced the request but before Wait registered its waiter
// (a human quick on the inbox, a test deciding at OnApproval) ends the
// wait at once, not at the next poll: Wait asks check once as it starts.
func TestDecisionBeforeTheWaiterRegistered(t *testing.T) {
	var w Waiters
	w.Wake("a1") // nobody waits yet: lost
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	checks := 0
	done := w.Wait(ctx, "agent", 0, "a1", time.Hour, time.Hour, func() {}, func(context.Context) (bool, error) {
		checks++
		return true, nil // decided already
	})
	if !done || checks != 1 || ctx.Err() != nil {
		t.Fatalf("Wait for a request decided before the waiter registered: %v after %d checks (context: %v); want true at once, not at the next poll (an hour)", done, checks, ctx.Err())
	}
}
