package wasmtime

import (
	"testing"
	"time"
)

// TestEpochTickerStopsSoonAfterLastStore: once no store is open, the epoch
// ticker ends within a few ticks. Each tick wakes a thread of an otherwise
// idle process and, through its cgo call, the Go runtime's sysmon; a worker
// between sparse calls paid milliseconds of CPU a second for a ticker that
// went on for 200 ticks after each call (engine.go, idleTicks). And while a
// store is open the ticker keeps going, however long: its deadline and
// interruption need the ticks.
func TestEpochTickerStopsSoonAfterLastStore(t *testing.T) {
	f := newFixture(t, nil)
	running := func() bool {
		f.engine.tickMu.Lock()
		defer f.engine.tickMu.Unlock()
		return f.engine.tickRunning
	}
	s, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// Open well past the grace: the ticker must still run.
	for deadline := time.Now().Add(20 * idleTicks * time.Millisecond); time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if !running() {
		s.Close()
		t.Fatal("the epoch ticker stopped while a store was open")
	}
	s.Close()
	// Wait for the ticker to end (an event, with a deadline far beyond
	// any load), then see how many ticks it made with no store.
	for deadline := time.Now().Add(10 * time.Second); running(); {
		if time.Now().After(deadline) {
			t.Fatal("the epoch ticker still runs 10 s after the last store closed")
		}
		time.Sleep(time.Millisecond)
	}
	f.engine.tickMu.Lock()
	idle := f.engine.tickIdle
	f.engine.tickMu.Unlock()
	if idle > 5 {
		t.Errorf("the epoch ticker made %d ticks after the last store closed; want at most 5", idle)
	}
}
