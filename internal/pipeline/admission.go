package pipeline

import (
	"container/list"
	"context"
	"fmt"
	"runtime"
	"sync"
)

// admission bounds how many calls run at once and how many may wait, and
// shares the turns fairly between tools. A waiting call holds no sandbox
// resources; one beyond the queue is refused at once, so overload shows up
// as a clear error rather than as latency that grows without bound.
//
// Fairness (issue 22, finding 5: eight calls of a tool that killed its
// worker every call took all the turns, and a harmless tool's p50 went from
// 15 ms to 1.44 s): no tool runs more than perTool of the turns at once
// (three quarters of them, from four turns up), so a tool that arrives
// finds a free turn while another floods; and a freed turn goes to the
// waiting call whose tool runs the fewest calls, the oldest first among
// equals, so no tool starves behind another's queue.
//
// A tool in trouble (its last call lost its worker process: backoff.go)
// runs one call at a time until a call keeps its worker: each of its calls
// costs a worker's death and a replacement's start, CPU that a share of
// six turns would take from every other tool at once (the crash storm's
// echo p99 went 5-12x its p99 alone with the share alone). So does a
// WebAssembly tool not yet proven (no call of it has ended keeping its
// worker): its first burst is not a storm of six (firstCalls.oneAtATime).
type admission struct {
	turns   int // calls that may run at once
	perTool int // calls of one tool that may run at once
	max     int // waiters allowed
	// troubled, if set, names the tools whose calls run one at a time
	// (firstCalls.oneAtATime).
	troubled func(tool string) bool

	mu      sync.Mutex
	waiting int // calls in the queue, or granted and not yet counted as running
	running int
	byTool  map[string]int // running calls by tool
	queue   *list.List     // of *admitWaiter, oldest first

	obs Observer // nil: no events
}

// admitWaiter is a call waiting for a turn; ready is closed once granted.
type admitWaiter struct {
	tool    string
	ready   chan struct{}
	granted bool
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
	perTool := concurrent
	if concurrent >= 4 {
		perTool = concurrent - concurrent/4
	}
	return &admission{turns: concurrent, perTool: perTool, max: queued, byTool: map[string]int{}, queue: list.New()}
}

// enter waits for a turn for a call of tool. The returned release must be
// called when the call is done.
func (a *admission) enter(ctx context.Context, tool string) (release func(), err error) {
	if err := a.take(ctx, tool); err != nil {
		return nil, err
	}
	return a.releaser(tool), nil
}

// take waits for a turn for a call of tool, as enter does, without making
// a release function: the caller gives the turn back exactly once with
// give (the call path keeps the turn in its invocation, invocation.turn,
// so a call allocates no closure for it).
func (a *admission) take(ctx context.Context, tool string) error {
	a.mu.Lock()
	if a.queue.Len() == 0 && a.fitsLocked(tool) {
		a.grantLocked(tool)
		a.mu.Unlock()
		a.observe(0, +1)
		return nil
	}
	if a.waiting >= a.max {
		err := fmt.Errorf("%w: %d calls running and %d waiting; retry later", ErrOverloaded, a.running, a.waiting)
		if a.max == 0 && a.running < a.turns {
			err = fmt.Errorf("%w: tool %q already runs %d calls, its share of the %d turns, and no call may wait; retry later", ErrOverloaded, tool, a.shareLocked(tool), a.turns)
		}
		a.mu.Unlock()
		return err
	}
	w := &admitWaiter{tool: tool, ready: make(chan struct{})}
	e := a.queue.PushBack(w)
	a.waiting++
	// Turns may be free that the calls ahead cannot take (their tools are
	// at their share): this call may take one at once.
	a.dispatchLocked()
	a.mu.Unlock()
	a.observe(+1, 0)
	select {
	case <-w.ready:
		a.observe(-1, +1)
		a.doneWaiting()
		return nil
	case <-ctx.Done():
		a.mu.Lock()
		if w.granted {
			// Granted as ctx ended: take the turn, then give it back.
			a.mu.Unlock()
			a.observe(-1, +1)
			a.doneWaiting()
			a.give(tool)
			return ctx.Err()
		}
		a.queue.Remove(e)
		a.mu.Unlock()
		a.observe(-1, 0)
		a.doneWaiting()
		return ctx.Err()
	}
}

// doneWaiting counts a waiter out of the queue's capacity, after its event:
// an observer's queued count never exceeds the limit.
func (a *admission) doneWaiting() {
	a.mu.Lock()
	a.waiting--
	a.mu.Unlock()
}

// fitsLocked reports whether a call of tool may take a turn now.
func (a *admission) fitsLocked(tool string) bool {
	return a.running < a.turns && a.byTool[tool] < a.shareLocked(tool)
}

// shareLocked is how many calls of tool may run at once now.
func (a *admission) shareLocked(tool string) int {
	if a.troubled != nil && a.troubled(tool) {
		return 1
	}
	return a.perTool
}

func (a *admission) grantLocked(tool string) {
	a.running++
	a.byTool[tool]++
}

// releaser gives a call's turn back once (give).
func (a *admission) releaser(tool string) func() {
	var once sync.Once
	return func() { once.Do(func() { a.give(tool) }) }
}

// give gives back a turn take granted for a call of tool; the caller sees
// that it does so once. The event comes first, so that an observer's
// running count never exceeds the number of turns.
func (a *admission) give(tool string) {
	a.observe(0, -1)
	a.mu.Lock()
	a.running--
	if a.byTool[tool]--; a.byTool[tool] == 0 {
		delete(a.byTool, tool)
	}
	a.dispatchLocked()
	a.mu.Unlock()
}

// dispatchLocked hands free turns to waiters: each time to the waiting call
// whose tool runs the fewest calls (the oldest among equals) and still fits
// its share.
func (a *admission) dispatchLocked() {
	for a.running < a.turns {
		var best *list.Element
		for e := a.queue.Front(); e != nil; e = e.Next() {
			w := e.Value.(*admitWaiter)
			if !a.fitsLocked(w.tool) {
				continue
			}
			if best == nil || a.byTool[w.tool] < a.byTool[best.Value.(*admitWaiter).tool] {
				best = e
			}
		}
		if best == nil {
			return
		}
		w := a.queue.Remove(best).(*admitWaiter)
		a.grantLocked(w.tool)
		w.granted = true
		close(w.ready)
	}
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
	return a.running + a.waiting
}
