package bench

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkCallInterleaved measures issue 23's in-process ratio (the tiny
// WAT call through Host.Call against sandbox.Execute, at most 1.3x) with
// the two calls interleaved in one goroutine: each operation makes one
// call of each, the order swapped every operation, so that the
// neighbours' use of the machine lands on both rows alike instead of on
// whichever ran when they were busy (BenchmarkCall runs the rows one after
// the other, and on a shared machine a row's p50 moves by several µs
// between runs). It reports each one's p50 and their ratio, and the same
// for the means; ns/op is the pair's.
func BenchmarkCallInterleaved(b *testing.B) {
	variant := func(name string) func(*testing.B, string) (func() error, func()) {
		for _, v := range callVariants {
			if v.name == name {
				return v.setup
			}
		}
		b.Fatalf("no call variant %q", name)
		return nil
	}
	maidenOp, done := variant("maiden")(b, "echo")
	if done != nil {
		defer done()
	}
	sandboxOp, done := variant("sandbox")(b, "echo")
	if done != nil {
		defer done()
	}
	ops := [2]func() error{maidenOp, sandboxOp}
	durs := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
	b.ResetTimer()
	for i := range b.N {
		for k := range 2 {
			j := (i + k) % 2 // maiden first in even operations, sandbox in odd
			t0 := time.Now()
			if err := ops[j](); err != nil {
				b.Fatal(err)
			}
			durs[j] = append(durs[j], time.Since(t0))
		}
	}
	b.StopTimer()
	p50, mean := p50AndMean(durs)
	b.ReportMetric(p50[0], "maiden-p50-ns")
	b.ReportMetric(p50[1], "sandbox-p50-ns")
	b.ReportMetric(p50[0]/p50[1], "p50-ratio")
	b.ReportMetric(mean[0]/mean[1], "mean-ratio")
}

// p50AndMean returns each row's median and mean call time in ns (it
// sorts the rows in place).
func p50AndMean(durs [2][]time.Duration) (p50, mean [2]float64) {
	for j, d := range durs {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		mean[j] = float64(sum) / float64(len(d))
		slices.Sort(d)
		p50[j] = float64(percentile(d, 50))
	}
	return p50, mean
}

// workerBlock is how many calls BenchmarkCallWorkerBlocks makes in a row on
// one side before switching to the other.
const workerBlock = 32

// BenchmarkCallWorkerBlocks measures issue 23's worker ratio (a JS or Go
// call in a worker at most 1.05x the same call in process) with the two
// rows made in one goroutine, alternating in blocks of workerBlock calls
// (the order swapped every block pair), so that the neighbours' use of the
// machine lands on both rows alike: BenchmarkCall runs them one after the
// other, seconds apart, and on a shared machine a row's p50 moves by
// 20-50 % between runs. Blocks rather than single calls keep each side's
// calls back to back, as in BenchmarkCall (a worker that waited a whole
// in-process call between its calls would sleep between them). An
// operation is one call of each; it reports each side's p50 and their
// ratio, and the same for the means.
func BenchmarkCallWorkerBlocks(b *testing.B) {
	setup := func(name, fixture string) func() error {
		for _, v := range callVariants {
			if v.name == name {
				op, done := v.setup(b, fixture)
				if done != nil {
					b.Cleanup(done)
				}
				return op
			}
		}
		b.Fatalf("no call variant %q", name)
		return nil
	}
	for _, tl := range tools {
		b.Run(tl.name, func(b *testing.B) {
			ops := [2]func() error{setup("maiden", tl.fixture), setup("maiden-workers", tl.fixture)}
			durs := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
			b.ResetTimer()
			for i := 0; i < b.N; i += workerBlock {
				n := min(workerBlock, b.N-i)
				for k := range 2 {
					j := (i/workerBlock + k) % 2
					for range n {
						t0 := time.Now()
						if err := ops[j](); err != nil {
							b.Fatal(err)
						}
						durs[j] = append(durs[j], time.Since(t0))
					}
				}
			}
			b.StopTimer()
			p50, mean := p50AndMean(durs)
			b.ReportMetric(p50[0], "inproc-p50-ns")
			b.ReportMetric(p50[1], "worker-p50-ns")
			b.ReportMetric(p50[1]/p50[0], "p50-ratio")
			b.ReportMetric(mean[1]/mean[0], "mean-ratio")
		})
	}
}
