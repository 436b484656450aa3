//go:build linux

package confine_test

import (
	"context"
	"net"
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

// BenchmarkTrueNetwork is a confined /bin/true with a proxy port: as root,
// the run gets its own network namespace and relay (netns_linux.go), the
// cost of which this shows against a run without network.
func BenchmarkTrueNetwork(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		port int
	}{{"no-network", 0}, {"network", ln.Addr().(*net.TCPAddr).Port}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := confine.Run(ctx, confine.Spec{Path: "/bin/true", ProxyPort: c.port})
				if err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
			}
		})
	}
}
