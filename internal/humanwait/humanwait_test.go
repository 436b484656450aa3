package humanwait

import (
	"context"
	"errors"
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
		done <- w.Wait(context.Background(), "a1", time.Hour, time.Hour, func() { close(registered) }, func(context.Context) (bool, error) {
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
	if w.Wait(context.Background(), "a2", -1, time.Hour, func() { t.Error("suspended with no wait") }, nil) {
		t.Error("a wait below zero returned true")
	}
}
