package wasmtime

// #include "shim.h"
import "C"

import (
	"container/heap"
	"sync"
	"time"
)

// deadlines is an engine's one timer for the deadlines of all its stores.
// The epoch is the engine's: when any store's deadline passes the epoch
// advances, and every running guest's epoch check (maiden_epoch_callback)
// compares its own store's deadline, so one timer at the earliest deadline
// serves them all. A store adds its deadline and removes it at Close, under
// a mutex; the timer is reset only when a new deadline is earlier than the
// one it is set for, or when it fires. With calls of equal timeouts that is
// about once a timeout, not once a call: each call's deadline is later than
// the one the timer is set for, until it fires (for nothing, its store long
// closed) and the next call sets it again (a store's own time.AfterFunc was
// a Go timer a call, and arming one, the earliest of an otherwise idle
// process, had Go wake an idle thread to watch it: bench/README.md, "No
// timer a call").
type deadlines struct {
	e  *Engine
	mu sync.Mutex
	h  deadlineHeap
	// timer fires at armed (CLOCK_MONOTONIC ns, 0: not set); a timer that
	// is set for a deadline that has gone since (its store closed) fires
	// for nothing and sets itself for the next one.
	timer *time.Timer
	armed int64
}

type deadlineEntry struct {
	ns    int64
	index int
}

type deadlineHeap []*deadlineEntry

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].ns < h[j].ns }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *deadlineHeap) Push(x any) {
	en := x.(*deadlineEntry)
	en.index = len(*h)
	*h = append(*h, en)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	en := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	en.index = -1
	return en
}

// add registers a deadline at ns (CLOCK_MONOTONIC) in en, which must not be
// registered already.
func (d *deadlines) add(en *deadlineEntry, ns int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	en.ns = ns
	heap.Push(&d.h, en)
	if d.armed == 0 || ns < d.armed {
		d.setLocked(ns)
	}
}

// remove unregisters en if it is registered.
func (d *deadlines) remove(en *deadlineEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if en.index >= 0 && en.index < len(d.h) && d.h[en.index] == en {
		heap.Remove(&d.h, en.index)
	}
}

// setLocked sets the timer for ns.
func (d *deadlines) setLocked(ns int64) {
	wait := time.Duration(ns - int64(C.maiden_monotonic_ns()))
	d.armed = ns
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.fire)
	} else {
		d.timer.Reset(wait)
	}
}

// fire advances the epoch if a registered deadline has passed by the clock
// the epoch callback reads (early, as Go's timer and that clock can
// disagree by a little, it waits for the rest), drops the deadlines that
// have passed, and sets the timer for the next one.
func (d *deadlines) fire() {
	d.mu.Lock()
	now := int64(C.maiden_monotonic_ns())
	passed := false
	for len(d.h) > 0 && d.h[0].ns <= now {
		heap.Pop(&d.h)
		passed = true
	}
	d.armed = 0
	if len(d.h) > 0 {
		d.setLocked(d.h[0].ns)
	}
	d.mu.Unlock()
	if passed {
		d.e.IncrementEpoch()
	}
}
