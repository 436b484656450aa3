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
// Between agents (a review of tenant isolation: one agent's ~1,030
// concurrent calls of a slow tool filled the queue, and every other
// agent's calls were refused as overloaded, free turns or not): no agent
// holds more than perAgentQueue of the queue's places (three quarters of
// them), so another agent always finds a place; and a freed turn goes
// first to the waiting call whose agent runs the fewest calls, then by
// tool as above, so a newcomer waits for the next turn that frees, not
// behind the flood. One agent alone still has every turn, and the rule
// by tool is unchanged among its calls. Agent is the caller's
// (Call.Agent, the one its token authenticates), "" for an embedder's
// calls that name none.
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
	// perAgentQueue is how many of the max waiters one agent's calls may
	// be.
	perAgentQueue int
	// troubled, if set, names the tools whose calls run one at a time
	// (firstCalls.oneAtATime).
	troubled func(tool string) bool

	mu      sync.Mutex
	waiting int // calls in the queue, or granted and not yet counted as running
	running int
	byTool  map[string]int // running calls by tool
	byAgent map[string]int // running calls by agent
	// waitingBy is waiting by agent (calls in the queue, or granted and
	// not yet counted as running).
	waitingBy map[string]int
	queue     *list.List // of *admitWaiter, oldest first

	obs Observer // nil: no events
}

// admitWaiter is a call waiting for a turn; ready is closed once granted.
type admitWaiter struct {
	tool    string
	agent   string
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
	return &admission{turns: concurrent, perTool: perTool, max: queued, perAgentQueue: max(1, queued-queued/4),
		byTool: map[string]int{}, byAgent: map[string]int{}, waitingBy: map[string]int{}, queue: list.New()}
}

// enter waits for a turn for a call of tool by agent. The returned release
// must be called when the call is done.
func (a *admission) enter(ctx context.Context, tool, agent string) (release func(), err error) {
	if err := a.take(ctx, tool, agent); err != nil {
		return nil, err
	}
	return a.releaser(tool, agent), nil
}

// take waits for a turn for a call of tool, as enter does, without making
// a release function: the caller gives the turn back exactly once with
// give (the call path keeps the turn in its invocation, invocation.turn,
// so a call allocates no closure for it).
func (a *admission) take(ctx context.Context, tool, agent string) error {
	a.mu.Lock()
	if a.queue.Len() == 0 && a.fitsLocked(tool) {
		a.grantLocked(tool, agent)
		a.mu.Unlock()
		a.observe(0, +1)
		return nil
	}
	if a.waiting >= a.max || a.waitingBy[agent] >= a.perAgentQueue {
		err := fmt.Errorf("%w: %d calls running and %d waiting; retry later", ErrOverloaded, a.running, a.waiting)
		switch {
		case a.max == 0 && a.running < a.turns:
			err = fmt.Errorf("%w: tool %q already runs %d calls, its share of the %d turns, and no call may wait; retry later", ErrOverloaded, tool, a.shareLocked(tool), a.turns)
		case a.waiting < a.max:
			err = fmt.Errorf("%w: %d calls of this agent already wait, its share of the %d places (the rest are kept for other agents); retry later", ErrOverloaded, a.waitingBy[agent], a.max)
		}
		a.mu.Unlock()
		return err
	}
	w := &admitWaiter{tool: tool, agent: agent, ready: make(chan struct{})}
	e := a.queue.PushBack(w)
	a.waiting++
	a.waitingBy[agent]++
	// Turns may be free that the calls ahead cannot take (their tools are
	// at their share): this call may take one at once.
	a.dispatchLocked()
	a.mu.Unlock()
	a.observe(+1, 0)
	select {
	case <-w.ready:
		a.observe(-1, +1)
		a.doneWaiting(agent)
		return nil
	case <-ctx.Done():
		a.mu.Lock()
		if w.granted {
			// Granted as ctx ended: take the turn, then give it back.
			a.mu.Unlock()
			a.observe(-1, +1)
			a.doneWaiting(agent)
			a.give(tool, agent)
			return ctx.Err()
		}
		a.queue.Remove(e)
		a.mu.Unlock()
		a.observe(-1, 0)
		a.doneWaiting(agent)
		return ctx.Err()
	}
}

// doneWaiting counts a waiter of agent out of the queue's capacity, after
// its event: an observer's queued count never exceeds the limit.
func (a *admission) doneWaiting(agent string) {
	a.mu.Lock()
	a.waiting--
	if a.waitingBy[agent]--; a.waitingBy[agent] == 0 {
		delete(a.waitingBy, agent)
	}
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

func (a *admission) grantLocked(tool, agent string) {
	a.running++
	a.byTool[tool]++
	a.byAgent[agent]++
}

// releaser gives a call's turn back once (give).
func (a *admission) releaser(tool, agent string) func() {
	var once sync.Once
	return func() { once.Do(func() { a.give(tool, agent) }) }
}

// give gives back a turn take granted for a call of tool; the caller sees
// that it does so once. The event comes first, so that an observer's
// running count never exceeds the number of turns.
func (a *admission) give(tool, agent string) {
	a.observe(0, -1)
	a.mu.Lock()
	a.running--
	if a.byTool[tool]--; a.byTool[tool] == 0 {
		delete(a.byTool, tool)
	}
	if a.byAgent[agent]--; a.byAgent[agent] == 0 {
		delete(a.byAgent, agent)
	}
	a.dispatchLocked()
	a.mu.Unlock()
}

// dispatchLocked hands free turns to waiters: each time to the waiting call
// whose agent runs the fewest calls, then whose tool does (the oldest among
// equals), that still fits its tool's share.
func (a *admission) dispatchLocked() {
	for a.running < a.turns {
		var best *admitWaiter
		var bestE *list.Element
		for e := a.queue.Front(); e != nil; e = e.Next() {
			w := e.Value.(*admitWaiter)
			if !a.fitsLocked(w.tool) {
				continue
			}
			if best == nil || a.byAgent[w.agent] < a.byAgent[best.agent] ||
				a.byAgent[w.agent] == a.byAgent[best.agent] && a.byTool[w.tool] < a.byTool[best.tool] {
				best, bestE = w, e
			}
		}
		if best == nil {
			return
		}
		w := a.queue.Remove(bestE).(*admitWaiter)
		a.grantLocked(w.tool, w.agent)
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
