package mcpserver

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestWarmRunnersNeverMakeACallWait: a call whose runner is busy gets a new
// one at once; it never waits for another call to end (a pool that did
// would serialize the host's concurrent calls, and deadlock a call waiting
// for a human behind another).
func TestWarmRunnersNeverMakeACallWait(t *testing.T) {
	t.Parallel()
	w := newWarmRunners()
	x := 0
	w.run(func() { x = 1 }) // a runner, idle from now on
	if x != 1 {
		t.Fatal("run returned before its function ran")
	}
	release := make(chan struct{})
	started := make(chan struct{})
	blocked := make(chan struct{})
	go func() {
		w.run(func() { close(started); <-release })
		close(blocked)
	}()
	<-started
	ran := make(chan struct{})
	go w.run(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("a call waited for the runner of another call")
	}
	close(release)
	<-blocked
}

// TestWarmRunnersAfterABurst: a burst of concurrent calls, each on a
// runner of its own, leaves at most maxIdleRunners idle behind it, not
// one per call of the burst.
func TestWarmRunnersAfterABurst(t *testing.T) {
	t.Parallel()
	w := newWarmRunners()
	const burst = 4 * maxIdleRunners
	release := make(chan struct{})
	var started, ended sync.WaitGroup
	started.Add(burst)
	for range burst {
		ended.Go(func() { w.run(func() { started.Done(); <-release }) })
	}
	started.Wait() // every call of the burst holds a runner of its own
	close(release)
	ended.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for w.idle.Load() != maxIdleRunners {
		if n := w.idle.Load(); n > maxIdleRunners || time.Now().After(deadline) {
			t.Fatalf("%d runners idle after a burst of %d calls; want %d", n, burst, maxIdleRunners)
		}
		runtime.Gosched()
	}
}
