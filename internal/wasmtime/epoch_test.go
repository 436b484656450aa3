package wasmtime

import (
	"runtime"
	"testing"
	"time"
)

// TestNoEpochTickerWhileIdle: nothing of the engine runs on a clock. A
// store, open or closed, with or without a deadline, leaves no goroutine
// behind: the epoch advances at a store's deadline (its timer) and on
// Interrupt only. A ticker advancing it every millisecond woke a thread of
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
		if s.timer != nil {
			t.Errorf("deadline %v: the deadline's timer outlives the store", deadline)
		}
	}
	if n := f.engine.stores.Load(); n != 0 {
		t.Errorf("%d stores counted after closing all", n)
	}
}
