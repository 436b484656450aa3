package maiden

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// admission bounds how many calls run at once and how many may wait. A
// waiting call holds no sandbox resources; one beyond the queue is refused at
// once, so overload shows up as a clear error rather than as latency that
// grows without bound.
type admission struct {
	slots chan struct{}

	mu      sync.Mutex
	waiting int
	max     int // waiters allowed

	obs Observer // nil: no events
}

func newAdmission(concurrent, queued int) *admission {
	if concurrent <= 0 {
		concurrent = max(4, 4*runtime.GOMAXPROCS(0))
	}
	switch {
	case queued == 0:
		queued = DefaultMaxQueued
	case queued < 0:
		queued = 0
	}
	return &admission{slots: make(chan struct{}, concurrent), max: queued}
}

// enter waits for a turn. The returned release must be called when the call
// is done.
func (a *admission) enter(ctx context.Context) (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		a.observe(0, +1)
		return a.release, nil
	default:
	}
	a.mu.Lock()
	if a.waiting >= a.max {
		a.mu.Unlock()
		return nil, fmt.Errorf("%w: %d calls running and %d waiting; retry later", ErrOverloaded, cap(a.slots), a.max)
	}
	a.waiting++
	a.mu.Unlock()
	a.observe(+1, 0)
	defer func() {
		a.mu.Lock()
		a.waiting--
		a.mu.Unlock()
	}()
	select {
	case a.slots <- struct{}{}:
		a.observe(-1, +1)
		return a.release, nil
	case <-ctx.Done():
		a.observe(-1, 0)
		return nil, ctx.Err()
	}
}

// release gives a turn back. The event comes first, so that an observer's
// running count never exceeds the number of turns.
func (a *admission) release() {
	a.observe(0, -1)
	<-a.slots
}

// observe reports a change in the waiting and running counts.
func (a *admission) observe(queued, running int) {
	if a.obs != nil {
		a.obs.Admission(AdmissionEvent{Queued: queued, Running: running})
	}
}

// active is how many calls are running or waiting.
func (a *admission) active() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.slots) + a.waiting
}
