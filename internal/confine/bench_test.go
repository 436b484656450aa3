//go:build linux

package confine_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/confine"
)

// BenchmarkTrue compares a confined run of /bin/true with a bare os/exec
// of it, in the same run (issue 13's budget: at most 1.5×).
func BenchmarkTrue(b *testing.B) {
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("confined", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			res, err := confine.Run(ctx, confine.Spec{Path: "/bin/true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		}
	})
}

// BenchmarkTrueInterleaved alternates the two, so that a machine whose
// load changes during the run weighs on both alike; it reports each one's
// mean and their ratio.
func BenchmarkTrueInterleaved(b *testing.B) {
	ctx := context.Background()
	var bare, confined time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := confine.Run(ctx, confine.Spec{Path: "/bin/true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		bare += t1.Sub(t0)
		confined += time.Since(t1)
	}
	b.ReportMetric(float64(bare.Microseconds())/float64(b.N), "exec-us/op")
	b.ReportMetric(float64(confined.Microseconds())/float64(b.N), "confined-us/op")
	b.ReportMetric(float64(confined)/float64(bare), "ratio")
}
