// Package cpuclock reads this process's CPU time for benchmarks that
// report cpu-ns/op beside ns/op: on a machine whose cores other work
// shares, the wall time per operation includes waiting for a core, the CPU
// time (every thread's, the garbage collector's and the kernel's page
// faults included) does not. It starts no goroutine and imports nothing
// of maiden, so any test may use it, the single-goroutine packages that
// run without the race detector too (internal/testkit's
// TestNoRacePackagesStartNoGoroutine).
package cpuclock

import (
	"testing"
	"time"
)

// Report reports the CPU time per operation since start (a Now) as
// cpu-ns/op; nothing when b ran no operation.
func Report(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(Now()-start)/float64(b.N), "cpu-ns/op")
	}
}
