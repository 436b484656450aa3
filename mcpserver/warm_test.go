package mcpserver

import (
	"testing"
	"time"
)

// TestWarmRunnersNeverMakeACallWait: a call whose runner is busy gets a new
// one at once; it never waits for another call to end (a pool that did
// would serialize the host's concurrent calls, and deadlock a call waiting
// for a human behind another).
func TestWarmRunnersNeverMakeACallWait(t *testing.T) {
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
