package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
)

// inputShapes are the call inputs of BenchmarkInputSize: one long string,
// or many small objects, each about n bytes, both accepted by echo's schema
// (an object with a string "message"; other properties allowed).
func inputShapes(n int) []struct{ name, input string } {
	str := fmt.Sprintf(`{"message":%q}`, strings.Repeat("a", max(1, n-14)))
	const item = `{"id":123,"ok":true,"tag":"abc"}`
	items := max(1, (n-40)/(len(item)+1))
	obj := `{"message":"m","data":[` + strings.TrimSuffix(strings.Repeat(item+",", items), ",") + `]}`
	return []struct{ name, input string }{{"string", str}, {"objects", obj}}
}

var inputSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// BenchmarkInputSize is a whole call of the echo tool through Host.Call at
// input sizes from 1 KiB to 1 MiB, a string or 30,000 small objects, in
// process and in workers; MB/s is the input's size over the call's time.
// BenchmarkInputStages splits the in-process time among the stages the
// input goes through. Run:
//
//	go test -run '^$' -bench 'Input(Size|Stages)' -count 3 ./internal/pipeline
func BenchmarkInputSize(b *testing.B) {
	for _, iso := range []struct {
		name      string
		isolation api.Isolation
	}{{"process", api.InProcess}, {"workers", api.Workers}} {
		b.Run(iso.name, func(b *testing.B) {
			dir := b.TempDir()
			src := fmt.Sprintf("version = 1\nmax_input_bytes = %d\n[tools.echo]\npath = %q\n", 4<<20, testkit.Component(b, "echo"))
			h, _ := testHost(b, dir, src, &Options{CacheDir: testkit.CompileCache(b), Isolation: iso.isolation})
			defer h.Close(context.Background())
			for _, size := range inputSizes {
				for _, shape := range inputShapes(size.n) {
					b.Run(size.name+"/"+shape.name, func(b *testing.B) {
						c := Call{Tool: "echo", Input: shape.input}
						b.SetBytes(int64(len(shape.input)))
						defer reportCPU(b, len(shape.input))()
						for b.Loop() {
							res, err := h.Call(context.Background(), c)
							if err != nil || !res.OK {
								b.Fatalf("%v %+v", err, res.Error)
							}
						}
					})
				}
			}
		})
	}
}

// BenchmarkInputStages is where a call's time goes, stage by stage, for
// the inputs of BenchmarkInputSize: scanning it (input.check, once per
// call), the schema check on the scan (what a call without a declared
// agent, secrets or middleware does: check), decoding it (parse: done
// only when a stage needs the value) and the check on the decoded value
// (validate), against echo's schema, and the run alone (the input into the
// component and the output back, through internal/sandbox with no
// pipeline around it). What BenchmarkInputSize/process takes beyond their
// sum is the rest of the pipeline and the garbage collector. docs/input-speed.md
// holds a breakdown. Run:
//
//	go test -run '^$' -bench 'InputStages' -count 5 ./internal/pipeline
func BenchmarkInputStages(b *testing.B) {
	schema := compileSchema(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)
	sb, err := sandbox.New(&sandbox.Options{CacheDir: testkit.CompileCache(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	lim := sandbox.Limits{Timeout: time.Minute, Memory: 256 << 20}
	tool, err := sb.Open(context.Background(), testkit.Component(b, "echo"), lim)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range inputSizes {
		for _, shape := range inputShapes(size.n) {
			b.Run("parse/"+size.name+"/"+shape.name, func(b *testing.B) {
				b.SetBytes(int64(len(shape.input)))
				defer reportCPU(b, len(shape.input))()
				for b.Loop() {
					if _, err := parseInput(shape.input); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("scan/"+size.name+"/"+shape.name, func(b *testing.B) {
				b.SetBytes(int64(len(shape.input)))
				defer reportCPU(b, len(shape.input))()
				for b.Loop() {
					inv := invocation{call: Call{Input: shape.input}}
					if err := inv.scanInput(); err != nil {
						b.Fatal(err)
					}
				}
			})
			inv := invocation{call: Call{Input: shape.input}}
			if err := inv.scanInput(); err != nil {
				b.Fatal(err)
			}
			b.Run("check/"+size.name+"/"+shape.name, func(b *testing.B) {
				b.SetBytes(int64(len(shape.input)))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // as a call's
				defer cancel()
				defer reportCPU(b, len(shape.input))()
				for b.Loop() {
					inv := inv
					if err := inv.validateInput(ctx, schema, 0); err != nil || inv.decoded {
						b.Fatal(err, inv.decoded)
					}
				}
			})
			v, err := parseInput(shape.input)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("validate/"+size.name+"/"+shape.name, func(b *testing.B) {
				b.SetBytes(int64(len(shape.input)))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // as a call's
				defer cancel()
				defer reportCPU(b, len(shape.input))()
				for b.Loop() {
					if err := schema.validateWithin(ctx, 0, v); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("run/"+size.name+"/"+shape.name, func(b *testing.B) {
				b.SetBytes(int64(len(shape.input)))
				defer reportCPU(b, len(shape.input))()
				for b.Loop() {
					out, err := tool.Execute(context.Background(), sandbox.Call{Limits: lim, Input: shape.input})
					if err != nil || out.Failure != nil || len(out.Output) != len(shape.input) {
						b.Fatalf("%v %+v", err, out.Failure)
					}
				}
			})
		}
	}
}

// reportCPU reports the process's CPU time (user and system, every thread:
// the garbage collector's and the kernel's page faults included) per
// operation as cpu-ns/op, and the input's size over it as cpu-MB/s. On a
// machine shared with other work the wall time (ns/op, MB/s) includes
// waiting for a core; the CPU time does not. Call it after SetBytes, and
// the function it returns when the loop is done; n is the input's size.
func reportCPU(b *testing.B, n int) func() {
	start := cpuclock.Now()
	return func() {
		if b.N == 0 {
			return
		}
		per := float64(cpuclock.Now()-start) / float64(b.N)
		b.ReportMetric(per, "cpu-ns/op")
		if per > 0 {
			b.ReportMetric(float64(n)/per*1e3, "cpu-MB/s")
		}
	}
}
