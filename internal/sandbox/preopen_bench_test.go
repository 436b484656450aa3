package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkPreopenSetup: what giving a call directories costs in process.
// The tool does no file I/O ({"op":"none"} is refused at once), so the
// difference between the sub-benchmarks is opening, checking and handing
// over the directories. Compare dirs=1 and dirs=32 with dirs=0.
func BenchmarkPreopenSetup(b *testing.B) {
	sb, err := sandbox.New(&sandbox.Options{CacheDir: testkit.CompileCache(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close() })
	tool := testkit.Component(b, "go/fsprobe")
	base := b.TempDir()
	for _, n := range []int{0, 1, 32} {
		var dirs []sandbox.Preopen
		for i := range n {
			d := filepath.Join(base, fmt.Sprintf("d%02d", i))
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
			dirs = append(dirs, sandbox.Preopen{HostPath: d, GuestPath: d, Write: i%2 == 0})
		}
		b.Run(fmt.Sprintf("dirs=%d", n), func(b *testing.B) {
			for b.Loop() {
				out, err := sb.Execute(context.Background(), sandbox.Call{Path: tool, Limits: benchLimits, Input: `{"op":"none"}`, Preopens: dirs})
				if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindTool {
					b.Fatalf("%+v, %v", out, err)
				}
			}
		})
	}
}

var benchLimits = sandbox.Limits{Timeout: 30e9, Memory: 128 << 20}
