package builtin

import (
	"context"
	"os"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/safefs"
)

// BenchmarkRead compares fs_read of a 1 KiB file (JSON in, boundary check, roots, safefs, output value) with
// safefs.Read and os.ReadFile of the same file, measured in the same run.
func BenchmarkRead(b *testing.B) {
	dir, err := os.MkdirTemp("", "builtin-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p := dir + "/f"
	if err := os.WriteFile(p, make([]byte, 1024), 0o644); err != nil {
		b.Fatal(err)
	}
	bd := restricted([]boundary.Entry{sub(dir, boundary.Read)}, []string{dir + "/secrets"}, []string{".git"})
	in := []byte(`{"path":"` + p + `"}`)
	b.Run("os.ReadFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("safefs.Read", func(b *testing.B) {
		rs := roots(bd, p)
		for b.Loop() {
			if _, err := safefs.Read(rs, p, MaxReadBytes); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("FSRead", func(b *testing.B) {
		for b.Loop() {
			if _, err := FSRead(context.Background(), bd, nil, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
