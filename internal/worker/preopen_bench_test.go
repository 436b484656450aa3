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
// worker started for those directories (its Landlock domain holds them),
// reused while they stay the same; one without runs in a pooled worker.
// dirs=0 is the baseline; new-dir-each-call starts a worker every time.
func BenchmarkPreopenWorker(b *testing.B) {
	p := newPool(b, &Options{Size: 1, CacheDir: testkit.CompileCache(b)})
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
	b.Run("new-dir-each-call", func(b *testing.B) {
		for b.Loop() {
			d, err := os.MkdirTemp(base, "new")
			if err != nil {
				b.Fatal(err)
			}
			out, err := tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: `{"op":"none"}`, Preopens: []sandbox.Preopen{{HostPath: d, GuestPath: d}}})
			if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindTool {
				b.Fatalf("%+v, %v", out, err)
			}
		}
	})
}
