//go:build linux

package confine_test

import (
	"context"
	"os/exec"
	"testing"

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
