package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkPreopenWorker: a call with preopened directories runs in a
// worker started for it (its Landlock domain holds the directories); one
// without runs in a pooled worker. dirs=0 is the baseline.
func BenchmarkPreopenWorker(b *testing.B) {
	p := newPool(b, &Options{Size: 1})
	tool := testkit.Component(b, "go/fsprobe")
	lim := sandbox.Limits{Timeout: 30e9, Memory: 128 << 20}
	tl, err := p.Open(context.Background(), tool, lim)
	if err != nil {
		b.Fatal(err)
	}
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
				out, err := tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: `{"op":"none"}`, Preopens: dirs})
				if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindTool {
					b.Fatalf("%+v, %v", out, err)
				}
			}
		})
	}
}
