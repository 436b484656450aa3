package worker

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// BenchmarkSpinStall measures what this machine takes from a thread that
// never sleeps, the floor under a polling worker call's tail (bench/README.md,
// "Where the worker call's tail comes from"): b.N milliseconds of a locked
// thread reading the clock in a loop, counting each gap over stallMin
// between two readings as a stall (an interrupt, the hypervisor running
// something else, a preemption). spinners-1 is one such thread;
// spinners-N one per CPU, every CPU busy, as a worker call's two ends are
// while both poll. Reports stalls/s (per thread), mean-stall-ns, and lost-%
// (the share of each thread's time in stalls).
//
//	go test ./internal/worker -run '^$' -bench '^BenchmarkSpinStall$' -benchtime 2000x
func BenchmarkSpinStall(b *testing.B) {
	for _, n := range []int{1, runtime.NumCPU()} {
		b.Run(fmt.Sprintf("spinners-%d", n), func(b *testing.B) {
			type result struct {
				stalls int
				lost   time.Duration
			}
			res := make([]result, n)
			var wg sync.WaitGroup
			span := time.Duration(b.N) * time.Millisecond
			b.ResetTimer()
			for i := range n {
				wg.Go(func() {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					start := time.Now()
					last := start
					for last.Sub(start) < span {
						now := time.Now()
						if d := now.Sub(last); d > stallMin {
							res[i].stalls++
							res[i].lost += d
						}
						last = now
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			var stalls int
			var lost time.Duration
			for _, r := range res {
				stalls += r.stalls
				lost += r.lost
			}
			secs := span.Seconds() * float64(n)
			b.ReportMetric(float64(stalls)/secs, "stalls/s")
			if stalls > 0 {
				b.ReportMetric(float64(lost)/float64(stalls), "mean-stall-ns")
			}
			b.ReportMetric(100*lost.Seconds()/secs, "lost-%")
		})
	}
}

// stallMin is the shortest gap BenchmarkSpinStall counts: a loop round
// with a clock reading takes well under a microsecond.
const stallMin = 3 * time.Microsecond
