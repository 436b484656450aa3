package toolbuild

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkBuildWAT builds testdata/tools/echo.wat into a component as
// maiden build does (one node driver process a build) and reports, besides
// ns/op, the CPU the build's child processes took (child-cpu-ms/op: user
// and system time from getrusage(RUSAGE_CHILDREN), which counts a child
// once it has been waited for): the node driver's work, which a wall time
// on a loaded two-CPU machine hides. Compare commits by building this test
// binary at each and running them in alternating rounds:
//
//	go test -c -o /tmp/X-toolbuild.test ./internal/toolbuild
//	(cd internal/toolbuild && /tmp/X-toolbuild.test -test.run '^$' -test.bench '^BenchmarkBuildWAT$' -test.benchtime 20x)
func BenchmarkBuildWAT(b *testing.B) {
	tc := toolchain(b)
	wat, err := os.ReadFile(filepath.Join(toolsDir(b), "echo.wat"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := ctxFor(b)
	before := childCPU(b)
	for b.Loop() {
		if _, err := tc.ComponentFromWAT(ctx, wat); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(childCPU(b)-before)/1e6/float64(b.N), "child-cpu-ms/op")
}

// BenchmarkBuildJS builds testdata/tools/js/echo.js through
// ComponentFromJS (componentize-js: the splicer, wizer, the component) and
// reports child-cpu-ms/op like BenchmarkBuildWAT, with the driver's
// collector on its main thread as maiden runs it (single-threaded-gc) and
// with V8's default (concurrent-gc), the baseline of the same run:
//
//	go test -c -o /tmp/X-toolbuild.test ./internal/toolbuild
//	(cd internal/toolbuild && /tmp/X-toolbuild.test -test.run '^$' -test.bench '^BenchmarkBuildJS$' -test.benchtime 3x -test.count 3)
func BenchmarkBuildJS(b *testing.B) {
	tc := toolchain(b)
	js, err := os.ReadFile(filepath.Join(toolsDir(b), "js", "echo.js"))
	if err != nil {
		b.Fatal(err)
	}
	for _, gc := range []struct {
		name       string
		concurrent bool
	}{{"single-threaded-gc", false}, {"concurrent-gc", true}} {
		b.Run(gc.name, func(b *testing.B) {
			tc := *tc
			tc.concurrentGC = gc.concurrent
			ctx := ctxFor(b)
			before := childCPU(b)
			for b.Loop() {
				if _, err := tc.ComponentFromJS(ctx, js); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(childCPU(b)-before)/1e6/float64(b.N), "child-cpu-ms/op")
		})
	}
}

// BenchmarkBuildGo builds examples/echo as maiden build does (go build to
// WASI, pre-initialised, wrapped into a component by the node driver) and
// reports child-cpu-ms/op like BenchmarkBuildWAT: go build's own processes
// (the go command, and the compiler and linker for what Go's build cache
// does not hold: after the first build, only the link) and the driver's.
//
//	go test -c -o /tmp/X-toolbuild.test ./internal/toolbuild
//	(cd internal/toolbuild && /tmp/X-toolbuild.test -test.run '^$' -test.bench '^BenchmarkBuildGo$' -test.benchtime 5x)
func BenchmarkBuildGo(b *testing.B) {
	tc := toolchain(b)
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "echo"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := DetectProject(dir)
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "echo.wasm")
	ctx := ctxFor(b)
	before := childCPU(b)
	for b.Loop() {
		if err := tc.Build(ctx, p, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(childCPU(b)-before)/1e6/float64(b.N), "child-cpu-ms/op")
}

// childCPU is the user and system CPU time, in nanoseconds, of this
// process's children that have ended and been waited for.
func childCPU(b *testing.B) int64 {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
