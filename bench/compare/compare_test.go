package compare

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/bench/compare/tools/gotools"
	sdk "github.com/maiden-run/maiden/sdk/go"
)

// limits are maiden's defaults (agent.toml without timeout_ms and
// memory_mb), applied to every engine: 5 s per call, 64 MiB of linear memory.
const (
	defaultTimeout = 5 * time.Second
	memoryLimit    = 64 << 20
	memoryPages    = memoryLimit >> 16 // wasm pages of 64 KiB
)

// workload is one behaviour, implemented once per engine and language.
type workload struct {
	name    string // also the tool's name in agent.toml and over MCP
	input   string
	want    string
	timeout time.Duration
	wat     string // testkit fixture (testdata/tools/NAME.wat); wazero runs its core module
	js      string // testkit fixture, "" if none
	goDir   string // Go tool, relative to the repo root; "" if none
	native  sdk.Tool
	extism  string // export of wasm/extism.wat
	gs      []int  // goroutine counts measured
}

var workloads = []*workload{
	{name: "echo", input: EchoInput, want: EchoInput, timeout: defaultTimeout,
		wat: "echo", js: "js/echo", goDir: "examples/echo", native: gotools.Echo, extism: "echo", gs: []int{1, 2}},
	{name: "json", input: JSONInput(), want: JSONTarget, timeout: defaultTimeout,
		wat: "jsonfield", js: "js/jsonfield", goDir: "bench/compare/tools/jsonfield", native: gotools.JSONField,
		extism: "jsonfield", gs: []int{1, 2}},
	// 10^8 iterations take ~0.15 s compiled without interruption checks
	// but ~4 s under wazero's CloseOnContextDone, so the CPU rows get a
	// 60 s timeout instead of 5 s (the same for every engine).
	{name: "cpu", input: "{}", want: CPUOutput, timeout: time.Minute, wat: "cpuloop", extism: "cpuloop", gs: []int{1}},
}

// row is one way of running a workload. setup runs outside the timed
// region.
type row struct {
	name string
	// lang is the language of the guest code: the ratio column compares
	// the row with maiden-LANG, in-process, on the same workload.
	lang string
	// instance says how much isolation a call gets: "fresh" (a new
	// instance per call: nothing survives it), "reused" (one instance per
	// goroutine, called again and again: memory and globals survive from
	// call to call) or "none" (no sandbox).
	instance string
	// on reports whether the row runs workload w.
	on    func(w *workload) bool
	setup func(tb testing.TB, w *workload, g int) *run
}

// run is a row set up for g goroutines.
type run struct {
	// ops are one operation per goroutine: one call, its output checked.
	// They may share state, such as one MCP session.
	ops []func() error
	// done releases what setup made for this run alone (shared fixtures
	// live until TestMain ends); nil if nothing.
	done func()
	// pid is the process that runs the tool when it is not this one (the
	// MCP server of a stdio row): peak-rss-MiB is then that process's.
	pid int
}

func always(*workload) bool      { return true }
func notCPU(w *workload) bool    { return w.name != "cpu" }
func notEcho(w *workload) bool   { return w.name != "echo" }
func onlyCPU(w *workload) bool   { return w.name == "cpu" }
func hasJS(w *workload) bool     { return w.js != "" }
func hasGo(w *workload) bool     { return w.goDir != "" }
func hasNative(w *workload) bool { return w.native != nil }
func both(a, b func(*workload) bool) func(*workload) bool {
	return func(w *workload) bool { return a(w) && b(w) }
}

var rows = []row{
	// maiden in-process: Host.Call through an agent.toml, a fresh store and
	// instance per call, maiden's default engine. The ratio baselines.
	{"maiden-wat", "wat", "fresh", always, maidenRow("wat")},
	{"maiden-go", "go", "fresh", hasGo, maidenRow("go")},
	{"maiden-js", "js", "fresh", hasJS, maidenRow("js")},
	// The Go tool built without pre-initialisation (MAIDEN_GO_PREINIT=off):
	// every call runs Go's runtime start-up and the package inits.
	{"maiden-nopreinit-go", "go", "fresh", both(notCPU, hasGo), maidenRow("go-nopreinit")},
	// Reference for the interruption tax: sandbox.Execute on an engine
	// without epoch interruption (not a configuration maiden offers).
	{"maiden-noepoch-wat", "wat", "fresh", onlyCPU, noEpochRow},
	// maiden over MCP: a Go SDK client, tools/call round trips, with the
	// WAT tool (the protocol's cost, nearly alone) and the Go tool (to set
	// against native-mcp-*-go, the same code without a sandbox).
	{"maiden-mcp-stdio-wat", "wat", "fresh", notCPU, maidenStdioRow("wat", "workers")},
	// The same server with tools in process: the difference is the second
	// wall's price over MCP.
	{"maiden-mcp-stdio-inproc-wat", "wat", "fresh", notCPU, maidenStdioRow("wat", "process")},
	{"maiden-mcp-http-wat", "wat", "fresh", notCPU, maidenHTTPRow("wat")},
	{"maiden-mcp-stdio-go", "go", "fresh", both(notCPU, hasGo), maidenStdioRow("go", "workers")},
	{"maiden-mcp-http-go", "go", "fresh", both(notCPU, hasGo), maidenHTTPRow("go")},
	// Extism Go SDK v1.7.1 on wazero v1.12.0, the same guest code against
	// Extism's kernel ABI (wasm/extism.wat).
	{"extism-fresh-wat", "wat", "fresh", always, extismRow(true, false)},
	{"extism-reused-wat", "wat", "reused", notCPU, extismRow(true, true)},
	{"extism-notimeout-wat", "wat", "fresh", onlyCPU, extismRow(false, false)},
	// Bare wazero v1.12.0 running maiden's own core modules (the WAT
	// fixtures without the component wrapper), the canonical ABI by hand.
	{"wazero-fresh-wat", "wat", "fresh", always, wazeroRow(true, false)},
	{"wazero-reused-wat", "wat", "reused", notCPU, wazeroRow(true, true)},
	// Reference for the interruption tax: no deadline can stop the guest.
	{"wazero-noclose-wat", "wat", "fresh", notEcho, wazeroRow(false, false)},
	// No sandbox: the Go tool's own code as a function call, and as an MCP
	// tool served by the official Go SDK.
	{"native-go", "go", "none", hasNative, nativeRow},
	{"native-mcp-stdio-go", "go", "none", hasNative, nativeStdioRow},
	// The floor of a tool in another process over MCP stdio: the native
	// stdio server relaying each call to a child process (nativechild_test.go).
	{"native-mcp-stdio-child-go", "go", "none", hasNative, nativeChildStdioRow},
	{"native-mcp-http-go", "go", "none", hasNative, nativeHTTPRow},
}

// BenchmarkCompare measures every row on every workload it runs, at each
// goroutine count. ./run runs each sub-benchmark in its own process (so
// that peak-rss-MiB is that configuration's own), several rounds.
func BenchmarkCompare(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			for _, r := range rows {
				if !r.on(w) {
					continue
				}
				b.Run(r.name, func(b *testing.B) {
					for _, g := range w.gs {
						b.Run(fmt.Sprintf("g%d", g), func(b *testing.B) {
							rn := r.setup(b, w, g)
							if rn.done != nil {
								defer rn.done()
							}
							cpu0 := serverCPU(rn.pid)
							measure(b, rn.ops)
							reportServerCPU(b, rn.pid, cpu0)
							reportRSS(b, rn.pid)
						})
					}
				})
			}
		})
	}
}

// measure runs b.N operations spread over the goroutines (one per op) and
// reports the per-operation latency p50 and p99 and the throughput
// (operations per second of wall time).
func measure(b *testing.B, ops []func() error) {
	durs := make([][]time.Duration, len(ops))
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, op := range ops {
		wg.Go(func() {
			d := make([]time.Duration, 0, b.N/len(ops)+1)
			for next.Add(1) <= int64(b.N) && failed.Load() == nil {
				t0 := time.Now()
				if err := op(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				d = append(d, time.Since(t0))
			}
			durs[i] = d
		})
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	d := slices.Concat(durs...)
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(percentile(d, 50)), "p50-ns")
	b.ReportMetric(float64(percentile(d, 99)), "p99-ns")
	b.ReportMetric(float64(len(d))/wall.Seconds(), "calls/s")
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

// TestMain doubles as the native MCP servers of the native-mcp-stdio rows
// and as the relaying server's child (the benchmark starts this same binary
// with $COMPARE_SERVE set), lists the configurations for ./run
// ($COMPARE_LIST), and closes shared fixtures after the tests.
func TestMain(m *testing.M) {
	switch {
	case os.Getenv("COMPARE_SERVE") == "native-mcp":
		os.Exit(serveNativeStdio())
	case os.Getenv("COMPARE_SERVE") == "native-mcp-child":
		os.Exit(serveNativeChildStdio())
	case os.Getenv("COMPARE_SERVE") == "native-child":
		os.Exit(serveNativeChild())
	case os.Getenv("COMPARE_LIST") != "":
		for _, w := range workloads {
			for _, r := range rows {
				if r.on(w) {
					for _, g := range w.gs {
						fmt.Printf("%s/%s/g%d\n", w.name, r.name, g)
					}
				}
			}
		}
		os.Exit(0)
	}
	code := m.Run()
	closeFixtures()
	os.Exit(code)
}

// ctxBG is the context of every call: each engine applies the workload's
// timeout itself, as maiden does from agent.toml.
var ctxBG = context.Background()

func check(got, want string) error {
	if got != want {
		return fmt.Errorf("output %q, want %q", trim(got), trim(want))
	}
	return nil
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
