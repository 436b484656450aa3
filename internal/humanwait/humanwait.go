// Package humanwait is the one wait for a human's decision, shared by the
// approve middleware (an approval request) and request_sandbox_boundary (a
// boundary request). A waiting call registers under its request's ID with
// the Host's Waiters, so that a decision made through the same Host wakes
// it at once (Wake); one made elsewhere (the CLI, another instance) is
// seen at the next poll. The package knows nothing of the store: the
// caller's check reads the request's state at every wake.
//
//	done := waiters.Wait(ctx, agent, maxPending, id, wait, poll, inv.suspend, check)
package humanwait

import (
	"context"
	"sync"
	"time"
)

// DefaultPerOwner is how many calls of one owner (an agent) may wait for a
// human at once in one Host when Wait is given no bound (the host gives
// the agent's max_pending, whose default is the same). Each waiting call
// holds a goroutine and asks the store at every poll; identical calls
// share one request (and the store bounds an agent's distinct requests),
// so without this bound an agent repeating one call could pile up
// waiters, and store reads, without end. A call beyond it does not wait:
// its caller answers it pending with the request's ID at once, and the
// request stays for the human.
const DefaultPerOwner = 100

// Waiters are the calls of one Host waiting for a decision, by request
// ID. The zero value is ready.
type Waiters struct {
	mu     sync.Mutex
	m      map[string][]chan struct{}
	owners map[string]int // waiting calls by owner
}

// Wait waits for the request id to be settled: it registers the wait (so
// Wake reaches it), calls suspend (the call gives its admission turn back:
// a waiting call holds no slot a running call needs), then asks check once,
// and again at every wake, by Wake or every poll, until the wait (below zero: none at
// all) or ctx ends. check reports done when the request is settled; an
// error is the store failing, retried at the next poll (the wait's end
// bounds it). Wait returns true when check said done, false when the wait
// ended first. The admission turn is not taken again here. A call whose
// owner already has max calls waiting (DefaultPerOwner when max is 0) does
// not wait (false at once, suspend not called), as with a wait below zero.
func (w *Waiters) Wait(ctx context.Context, owner string, max int, id string, wait, poll time.Duration, suspend func(), check func(context.Context) (done bool, err error)) bool {
	if wait < 0 {
		return false
	}
	if max <= 0 {
		max = DefaultPerOwner
	}
	wake := w.add(owner, max, id)
	if wake == nil {
		return false
	}
	defer w.remove(owner, id, wake)
	suspend()
	// Asked once now that the waiter is registered: a decision (and its
	// Wake) made after the caller announced the request (OnApproval) but
	// before add is otherwise seen only at the next poll.
	if done, err := check(ctx); err == nil && done {
		return true
	}
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

// Waiting is how many calls of owner wait now.
func (w *Waiters) Waiting(owner string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.owners[owner]
}

// add registers a wait for id by owner, or returns nil when owner has max
// waits already.
func (w *Waiters) add(owner string, max int, id string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owners[owner] >= max {
		return nil
	}
	if w.m == nil {
		w.m = map[string][]chan struct{}{}
		w.owners = map[string]int{}
	}
	w.owners[owner]++
	ch := make(chan struct{}, 1)
	w.m[id] = append(w.m[id], ch)
	return ch
}

func (w *Waiters) remove(owner, id string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owners[owner]--; w.owners[owner] <= 0 {
		delete(w.owners, owner)
	}
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

// Wake wakes every call waiting for request id: each checks its request
// now rather than at its next poll.
func (w *Waiters) Wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.m[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
