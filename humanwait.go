package maiden

import (
	"context"
	"sync"
	"time"
)

// waitForHuman is the one wait for a human's decision, shared by the
// approve middleware (an approval request, middleware_approve.go) and
// request_sandbox_boundary (a boundary request, sessionbuiltins.go). It
// tells the caller what it waits for (Call.OnApproval, with view), gives the
// call's admission turn back (a waiting call holds no slot a running call
// needs), and asks check for the request's state at every wake: a decision
// through this Host (Decide wakes the waiter at once, by id), a poll
// (Options.ApprovalPoll; another process may have decided), until the wait
// ends (Call.ApprovalWait, else Options.ApprovalWait, else
// DefaultApprovalWait; below zero, no wait at all) or ctx does.
//
// check reports done when the request is settled (the caller has kept what
// it read); an error is the store failing, retried at the next poll (the
// wait's end bounds it). waitForHuman returns true when check said done,
// false when the wait ended first: the caller answers kind pending with the
// request's ID, and the request stays for a human. The admission turn is not
// taken again here: each caller does, for the outcomes that go on to run.
func (h *Host) waitForHuman(ctx context.Context, inv *invocation, id string, view ApprovalRequest, check func(context.Context) (done bool, err error)) bool {
	wait := inv.call.ApprovalWait
	if wait == 0 {
		wait = h.opts.ApprovalWait
	}
	if wait == 0 {
		wait = DefaultApprovalWait
	}
	if inv.call.OnApproval != nil {
		inv.call.OnApproval(view)
	}
	if wait < 0 {
		return false
	}
	poll := h.opts.ApprovalPoll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	wake := h.waiters.add(id)
	defer h.waiters.remove(id, wake)
	inv.suspend()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		case <-wake:
		case <-ticker.C:
		}
		done, err := check(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			continue
		}
		if done {
			return true
		}
	}
}

// waiters are the calls of one Host waiting for a decision: Decide wakes
// them at once instead of at their next poll.
type waiters struct {
	mu sync.Mutex
	m  map[string][]chan struct{}
}

func (w *waiters) add(id string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string][]chan struct{}{}
	}
	w.m[id] = append(w.m[id], ch)
	w.mu.Unlock()
	return ch
}

func (w *waiters) remove(id string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.m[id]
	for i, c := range list {
		if c == ch {
			w.m[id] = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(w.m[id]) == 0 {
		delete(w.m, id)
	}
}

func (w *waiters) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.m[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
