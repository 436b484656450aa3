package confine_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/confine"
)

// TestRunOutlivesThreadsEnding: a confined child (a wrapped CLI in a call,
// the probe before an MCP import starts) dies with maiden (its parent-death
// signal is SIGKILL), but not with the OS thread it was forked from:
// Linux sends that signal when the forking thread ends, and Go ends a
// thread whenever a goroutine locked to it returns, which maiden does on
// purpose (the journal's ingester at a Host's Close, every network
// namespace it makes). Here goroutines end threads all the time while
// Run's children sleep: forked from an ordinary thread of Go's, some were
// killed after 1-3 ms (3 runs in 10 of /bin/sleep 0.3).
func TestRunOutlivesThreadsEnding(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ended atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				done := make(chan struct{})
				go func() {
					runtime.LockOSThread() // returns locked: Go ends the thread
					close(done)
				}()
				<-done
				ended.Add(1)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 20 {
		res := run(t, confine.Spec{Path: "/bin/sleep", Args: []string{"0.2"}, Timeout: 30 * time.Second})
		if res.Signal != "" || res.ExitCode != 0 {
			t.Fatalf("run %d of /bin/sleep 0.2, while goroutines ended %d threads: %+v; want exit 0 (a signal here is the parent-death signal of a child forked from a thread that ended)",
				i, ended.Load(), res)
		}
	}
	t.Logf("20 confined runs while goroutines ended %d threads", ended.Load())
}
