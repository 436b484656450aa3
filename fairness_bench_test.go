package maiden_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
)

// BenchmarkEchoUnderCrashStorm is issue 22's fifth finding as a benchmark:
// the echo tool's latency alone, then while eight clients call a tool that
// loses its worker on every call (testdata/tools/bigargs.wat: a host-call
// argument bomb), in one run with worker isolation. It reports both p99s and
// their ratio (the issue asks for at most 3x); before fair admission and the
// crash back-off, echo's p50 went from 15 ms to 1.44 s.
//
//	go test -run '^$' -bench EchoUnderCrashStorm -benchtime 200x -count 3 .
//
// troubled: the bomb already lost one worker (a call before the storm), so
// the storm meets a tool in trouble: one call at a time, its workers at
// SCHED_IDLE, started at SCHED_IDLE, and none of echo's warm workers taken.
// Measured in one session on a 2-core VM shared with other builds (the alone
// p99 itself ranged 0.8-185 ms), 03c0274 (fair admission and the back-off
// only) and this, alternating: the p99 ratio was 0.08-41x before (14 of 15
// runs above 3x), 0.01-6.5x after (17 of 18 runs at most 3x; the one above,
// a 11 ms storm p99, came with the heaviest load of the session).
//
// first-burst: the storm is the bomb's first calls. Before, nothing marked
// the tool before its first worker died, so up to its share (six of eight
// turns) of argument bombs ran at once at normal priority (1-110x echo's
// p99, 9 runs). Now a tool not yet proven (no call of it has ended keeping
// its worker) runs one call at a time (firstCalls.oneAtATime): one bomb at normal
// priority, then the tool is in trouble. 59d9656 and this, alternating, 10
// rounds of -count 3 at load 8-26: first-burst p99 ratio 0.79-49x before
// (median 7.6; 6 of 30 runs at most 3x; storm p99 4.9-226 ms), 0.06-6.8x
// after (median 2.6; 20 of 30 at most 3x; storm p99 1.8-10.3 ms). troubled,
// the same code on both: 0.01-8.0x before (27 of 30 at most 3x), 0.01-13x
// after (28 of 30), noise at that load.
func BenchmarkEchoUnderCrashStorm(b *testing.B) {
	b.Run("troubled", func(b *testing.B) { echoUnderCrashStorm(b, true) })
	b.Run("first-burst", func(b *testing.B) { echoUnderCrashStorm(b, false) })
}

func echoUnderCrashStorm(b *testing.B, troubled bool) {
	cfg := writeConfig(b, `version = 1
[tools.echo]
path = %q
[tools.bomb]
path = %q
memory_mb = 64
timeout_ms = 20000
`, "echo", "bigargs")
	h, err := maiden.New(cfg, &maiden.Options{CacheDir: b.TempDir(), Isolation: maiden.Workers})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	echo := func() time.Duration {
		start := time.Now()
		res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
		if err != nil || !res.OK {
			b.Fatalf("echo: %v %+v", err, res.Error)
		}
		return time.Since(start)
	}
	if troubled {
		if res, err := h.Call(ctx, maiden.Call{Tool: "bomb", Input: `{"body":true}`}); err != nil || res.OK {
			b.Fatalf("the bomb did not fail: %v %+v", err, res)
		}
	} else if _, err := h.Tools(ctx); err != nil { // compiled, nothing run
		b.Fatal(err)
	}
	echo() // compiled and warm
	n := max(b.N, 50)
	alone := make([]time.Duration, n)
	for i := range alone {
		alone[i] = echo()
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	kinds := map[maiden.ErrorKind]int{}
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := h.Call(ctx, maiden.Call{Tool: "bomb", Input: `{"body":true}`})
				if err == nil && res.Error != nil {
					mu.Lock()
					kinds[res.Error.Kind]++
					mu.Unlock()
				}
			}
		})
	}
	storm := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		storm = append(storm, echo())
	}
	b.StopTimer()
	close(stop)
	wg.Wait()

	p := func(ds []time.Duration, q float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(q*float64(len(s))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(p(alone, 0.5), "p50-alone-ms")
	b.ReportMetric(p(alone, 0.99), "p99-alone-ms")
	b.ReportMetric(p(storm, 0.5), "p50-storm-ms")
	b.ReportMetric(p(storm, 0.99), "p99-storm-ms")
	b.ReportMetric(p(storm, 0.99)/p(alone, 0.99), "p99-ratio")
	mu.Lock()
	b.Logf("bomb outcomes during the storm: %v", kinds)
	mu.Unlock()
}
