package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmtime"
)

// TestShutdownWaitsForALoad: Shutdown must not free the engine while Open
// or Execute is loading a tool with it (compiling, or reading the compiled
// code back from the disk cache). A full root run once crashed with
// SIGSEGV in TestCloseWithCallsInFlight: Close had returned while a call
// was still in Open's cache load, which was not counted as in flight. Here
// the load is held inside the contract check, with the freshly compiled
// component live, and Shutdown is asked to finish: it must say calls are
// still running rather than free the engine, and finish once the load
// ends.
func TestShutdownWaitsForALoad(t *testing.T) {
	t.Parallel()
	echo := testkit.Component(t, "echo")
	for _, entry := range []string{"Open", "Execute"} {
		t.Run(entry, func(t *testing.T) {
			sb, err := New(&Options{CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			inCheck, release := make(chan struct{}), make(chan struct{})
			check := sb.cache.check
			sb.cache.check = func(comp *wasmtime.Component) error {
				close(inCheck)
				<-release
				return check(comp)
			}
			loaded := make(chan error, 1)
			go func() {
				if entry == "Open" {
					_, err := sb.Open(context.Background(), echo, defaultLimits)
					loaded <- err
					return
				}
				_, err := sb.Execute(context.Background(), Call{Path: echo, Limits: defaultLimits, Input: `{"message":"hi"}`})
				loaded <- err
			}()
			<-inCheck
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- sb.Shutdown(ctx) }()
			select {
			case err = <-shut:
			case <-time.After(30 * time.Second):
				// Freeing under the load can also block in the cache's close
				// (the load's entry is not ready): that is the same bug.
				t.Fatalf("Shutdown during %s's load did not return within 30 s of its 100 ms deadline: it went on to free the engine under the load", entry)
			}
			if err == nil || !errors.Is(err, context.DeadlineExceeded) {
				// The engine is freed under the load: never let it go on.
				t.Fatalf("Shutdown during %s's load = %v, want calls still running (context deadline exceeded): it freed the engine under a load", entry, err)
			}
			close(release)
			// Shutdown began during the load: what runs after it (describe,
			// execute) is refused as closed.
			if err := <-loaded; err != nil && !errors.Is(err, api.ErrClosed) {
				t.Fatalf("%s after Shutdown began: %v, want nil or ErrClosed", entry, err)
			}
			if err := sb.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown after the load: %v", err)
			}
		})
	}
}
