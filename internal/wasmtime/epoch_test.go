package wasmtime

import (
	"runtime"
	"testing"
	"time"
)

// TestNoEpochTickerWhileIdle: nothing of the engine runs on a clock. A
// store, open or closed, with or without a deadline, leaves no goroutine
// behind: the epoch advances at a store's deadline (the engine's one
// timer, deadlines.go) and on Interrupt only. A ticker advancing it every millisecond woke a thread of
// an otherwise idle process each time and, through its cgo call, the Go
// runtime's sysmon; a worker between sparse calls paid milliseconds of CPU
// a second for it.
func TestNoEpochTickerWhileIdle(t *testing.T) {
	f := newFixture(t, nil)
	before := runtime.NumGoroutine()
	for _, deadline := range []time.Time{{}, time.Now().Add(time.Hour)} {
		s, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20, Deadline: deadline})
		if err != nil {
			t.Fatal(err)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("deadline %v: %d goroutines with a store open, %d before", deadline, n, before)
		}
		s.Close()
		if n := f.engine.deadlines.pending(); n != 0 {
			t.Errorf("deadline %v: %d deadlines registered after the store closed", deadline, n)
		}
	}
	if n := f.engine.stores.Load(); n != 0 {
		t.Errorf("%d stores counted after closing all", n)
	}
}

// TestEarlierDeadlineSetsTheSharedTimer: the engine has one timer for all
// its stores' deadlines, set for the earliest. A store opened with a
// deadline an hour away, then a call with a 100 ms deadline in another
// store: the call must still stop at its own deadline, which needs the
// timer moved earlier. Closing the stores leaves no deadline registered.
func TestEarlierDeadlineSetsTheSharedTimer(t *testing.T) {
	f := newFixture(t, nil)
	late, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20, Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	c := f.component(t, "loop")
	// Should the timer stay set for the hour, a watchdog advances the
	// engine's epoch after 3 s (the loop then finds its deadline passed),
	// so that the test fails on the time taken instead of hanging.
	wd := time.AfterFunc(3*time.Second, late.Interrupt)
	defer wd.Stop()
	s := f.loopUntilDeadline(t, c, 2*time.Second, " behind one an hour away")
	late.Close()
	s.Close()
	if n := f.engine.deadlines.pending(); n != 0 {
		t.Errorf("%d deadlines registered after every store closed", n)
	}
	// Many stores in turn, as calls: each deadline goes at Close.
	for range 1000 {
		st, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20, Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	if n := f.engine.deadlines.pending(); n != 0 {
		t.Errorf("%d deadlines registered after 1000 stores opened and closed", n)
	}
}

// pending is how many deadlines the engine has registered.
func (d *deadlines) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.h)
}
