package sandbox

import (
	"runtime/debug"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmtime"
)

// TestFailedPostReturnFreesResult: a tool whose execute returns a result
// and whose post-return then traps (or runs into the deadline) must not
// make the host keep the result wasmtime lifted for it. postleak returns
// 40 MiB and then misbehaves in cabi_post_execute; five such calls in
// process must leave RSS where it was, not 200 MiB higher.
func TestFailedPostReturnFreesResult(t *testing.T) {
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "postleak")
	if _, err := sb.Load(t.Context(), path, defaultLimits); err != nil {
		t.Fatal(err)
	}
	for _, input := range []string{"trap", "spin"} {
		t.Run(input, func(t *testing.T) {
			// The trap's timeout is far past the call's work (40 MiB lifted,
			// ~0.3 s here); the spin's is short, since it is spent whole.
			lim := Limits{Timeout: time.Minute, Memory: 64 << 20}
			if input == "spin" {
				lim.Timeout = 300 * time.Millisecond
			}
			testkit.HeavyMemory(t)
			settle := func() uint64 {
				debug.FreeOSMemory()
				wasmtime.TrimHeap()
				return testkit.ProcStatus(t, "VmRSS")
			}
			// One call first: what the first call warms up for good
			// (code, spare memories) is not a leak.
			execute(t, sb, path, input, lim)
			rss0 := settle()
			const calls = 5
			for range calls {
				out := execute(t, sb, path, input, lim)
				want := KindTrap
				if input == "spin" {
					want = KindDeadline
				}
				if out.Failure == nil || out.Failure.Kind != want {
					t.Fatalf("outcome %+v, want kind %s", out.Failure, want)
				}
			}
			rss1 := settle()
			t.Logf("RSS %d -> %d MiB after %d calls", rss0>>20, rss1>>20, calls)
			if rss1 > rss0+100<<20 {
				t.Errorf("RSS grew by %d MiB over %d calls returning 40 MiB each: the lifted results were not freed", (rss1-rss0)>>20, calls)
			}
		})
	}
}
