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
	defer func() {
		a.mu.Lock()
		a.waiting--
		a.mu.Unlock()
	}()
	select {
	case a.slots <- struct{}{}:
		return a.release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *admission) release() { <-a.slots }

// active is how many calls are running or waiting.
func (a *admission) active() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.slots) + a.waiting
}
