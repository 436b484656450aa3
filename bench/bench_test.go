package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/wit"
)

// Every call variant runs the same tool on the same input under the same
// limits (agent.toml's defaults).
const input = `{"message":"hello"}`

var limits = sandbox.Limits{Timeout: 5 * time.Second, Memory: 64 << 20}

// tools are the echo tools: a tiny hand-written WAT component, and the same
// tool in JS (componentize-js: a JS engine that initialises its heap in every
// fresh instance).
var tools = []struct{ name, fixture string }{
	{"wat", "echo"},
	{"js", "js/echo"},
	{"go", "go/echo"},
}

// variant is one way of making a call. setup runs outside the timed region,
// once per goroutine, and returns what that goroutine does per operation.
type variant struct {
	name  string
	setup func(b *testing.B, tool string) (op func() error, done func())
}

var callVariants = []variant{
	// The full path a user takes: Host.Call with a config (policy lookup,
	// input validation, compile-cache lookup, log capture, classification).
	{"maiden", func(b *testing.B, tool string) (func() error, func()) {
		h := host(b, tool, maiden.InProcess)
		ctx := context.Background()
		return func() error {
			res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: input})
			if err != nil {
				return err
			}
			return checkOutput(res.OK, res.Output, res.Error, input)
		}, nil
	}},
	// The same, with guest code in supervised worker processes (the
	// default of maiden serve, call and check): the price of the second
	// wall is the IPC round trip and the parent's supervision.
	{"maiden-workers", func(b *testing.B, tool string) (func() error, func()) {
		h := host(b, tool, maiden.Workers)
		ctx := context.Background()
		return func() error {
			res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: input})
			if err != nil {
				return err
			}
			return checkOutput(res.OK, res.Output, res.Error, input)
		}, nil
	}},
	// sandbox.Execute: maiden without the root package. maiden.Options has
	// no way to pick the engine configuration, so the pooling comparison is
	// made here, at the sandbox level, for both allocators.
	{"sandbox", sandboxVariant(false)},
	{"sandbox-pooling", sandboxVariant(true)},
	// The same store + instantiate + call through internal/wasmtime alone:
	// no policy, no cache lookup, no log capture, no context plumbing.
	{"cgo-direct", directVariant(false)},
	{"cgo-direct-pooling", directVariant(true)},
	// Reference, not a fresh instance: one instance per goroutine, called
	// again and again. The gap to cgo-direct is the price of isolation.
	{"cgo-warm", func(b *testing.B, tool string) (func() error, func()) {
		d := direct(b, tool, false)
		st, err := wasmtime.NewStore(d.engine, &wasmtime.StoreOptions{MemoryLimit: limits.Memory})
		if err != nil {
			b.Fatal(err)
		}
		inst, err := d.linker.Instantiate(st, d.comp)
		if err != nil {
			b.Fatal(err)
		}
		f, err := inst.Func("execute")
		if err != nil {
			b.Fatal(err)
		}
		return func() error {
			v, err := f.Call(wasmtime.String(input))
			if err != nil {
				return err
			}
			return checkVal(v)
		}, st.Close
	}},
}

// BenchmarkCall measures one call of the echo tool, a fresh instance per
// call (except cgo-warm), from 1 and 2 goroutines.
func BenchmarkCall(b *testing.B) {
	for _, tl := range tools {
		b.Run(tl.name, func(b *testing.B) {
			for _, v := range ordered(callVariants) {
				b.Run(v.name, func(b *testing.B) {
					for _, g := range ordered([]int{1, 2}) {
						b.Run(fmt.Sprintf("g%d", g), func(b *testing.B) {
							measure(b, g, func() (func() error, func()) { return v.setup(b, tl.fixture) })
						})
					}
				})
			}
		})
	}
}

// BenchmarkLoad measures sandbox.Load in a fresh sandbox: a cold compile
// (empty cache dir: compile, serialize, write) against a load from the disk
// cache (read, hash, deserialize). Both include the contract check and the
// describe and schema calls Load makes. wasmtime-ns is the part spent in
// wasmtime's compile or deserialize alone.
func BenchmarkLoad(b *testing.B) {
	for _, tl := range tools {
		b.Run(tl.name, func(b *testing.B) {
			for _, mode := range ordered([]string{"compile", "disk-cache"}) {
				b.Run(mode, func(b *testing.B) {
					path := testkit.Component(b, tl.fixture)
					cached := mode == "disk-cache"
					if cached {
						primeDiskCache(b, path)
					}
					benchLoad(b, path, cached)
				})
			}
		})
	}
}

// BenchmarkCPULoop runs cpuloop.wat (10^8 multiply-adds) through
// sandbox.Execute with maiden's engine configuration and with epoch
// interruption switched off: the interruption tax on guest code.
func BenchmarkCPULoop(b *testing.B) {
	const want = "9932821227141829761"
	configs := []struct {
		name string
		cfg  *wasmtime.Config
	}{
		{"epoch", nil},
		{"no-epoch", &wasmtime.Config{NoEpochInterruption: true}},
	}
	for _, c := range ordered(configs) {
		b.Run(c.name, func(b *testing.B) {
			sb := shared(b, "cpuloop/"+c.name, func() (*sandbox.Sandbox, func()) {
				sb := newSandbox(b, c.cfg)
				return sb, func() { sb.Close() }
			})
			path := testkit.Component(b, "cpuloop")
			lim := sandbox.Limits{Timeout: time.Minute, Memory: limits.Memory}
			measure(b, 1, func() (func() error, func()) {
				return func() error {
					out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Limits: lim, Input: "{}"})
					if err != nil {
						return err
					}
					return checkOutcome(out, want)
				}, nil
			})
		})
	}
}

// measure runs b.N operations over g goroutines, each with its own op from
// setup, and reports the per-operation latency p50 and p99 and the
// throughput (operations per second of wall time).
func measure(b *testing.B, g int, setup func() (op func() error, done func())) {
	ops := make([]func() error, g)
	for i := range ops {
		op, done := setup()
		if done != nil {
			defer done()
		}
		ops[i] = op
	}
	durs := make([][]time.Duration, g)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	procs := sampleProcs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuclock.Now()
	for i := range g {
		wg.Go(func() {
			d := make([]time.Duration, 0, b.N/g+1)
			for next.Add(1) <= int64(b.N) && failed.Load() == nil {
				t0 := time.Now()
				if err := ops[i](); err != nil {
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
	cpu = cpuclock.Now() - cpu
	b.StopTimer()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	reportProcs(b, procs, len(slices.Concat(durs...)))
	report(b, slices.Concat(durs...), wall)
	if n := len(slices.Concat(durs...)); n > 0 && cpu > 0 {
		// The process's CPU per operation (its threads and the Go
		// runtime's, GC included): unlike ns/op, not inflated by other
		// processes' turns on shared cores.
		b.ReportMetric(float64(cpu)/float64(n), "cpu-ns/op")
	}
}

func report(b *testing.B, d []time.Duration, wall time.Duration) {
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

func benchLoad(b *testing.B, path string, cached bool) {
	ctx := context.Background()
	var durs, engine []time.Duration
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := cacheDir(b)
		if !cached {
			var err error
			if dir, err = os.MkdirTemp(workDir(b), "cold-"); err != nil {
				b.Fatal(err)
			}
		}
		sb, err := sandbox.New(&sandbox.Options{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		info, err := sb.Load(ctx, path, limits)
		d := time.Since(t0)
		b.StopTimer()
		sb.Close()
		if !cached {
			os.RemoveAll(dir)
		}
		if err != nil {
			b.Fatal(err)
		}
		if info.Cached != cached {
			b.Fatalf("LoadInfo.Cached = %t, want %t", info.Cached, cached)
		}
		durs, engine = append(durs, d), append(engine, info.Compile)
		total += d
		b.StartTimer()
	}
	b.StopTimer()
	report(b, durs, total)
	slices.Sort(engine)
	b.ReportMetric(float64(percentile(engine, 50)), "wasmtime-ns")
}

// primeDiskCache makes sure the shared cache dir holds path compiled for
// maiden's default engine.
func primeDiskCache(b *testing.B, path string) {
	sb, err := sandbox.New(&sandbox.Options{CacheDir: cacheDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.Load(context.Background(), path, limits); err != nil {
		b.Fatal(err)
	}
}

// ---- fixtures shared across benchmark invocations ----
//
// go test calls a benchmark function several times while it finds b.N, and
// a JS component takes seconds to compile, so hosts, sandboxes and compiled
// components live for the whole process and are closed by TestMain.

var (
	fixMu    sync.Mutex
	fixtures = map[string]any{}
	closers  []func()

	workMu sync.Mutex
	work   string
)

func TestMain(m *testing.M) {
	// This binary is also the worker process of the maiden-workers rows.
	maiden.WorkerMain()
	code := m.Run()
	for _, c := range slices.Backward(closers) {
		c()
	}
	if work != "" {
		os.RemoveAll(work)
	}
	os.Exit(code)
}

// shared returns the fixture under key, creating it on first use.
func shared[T any](b *testing.B, key string, create func() (T, func())) T {
	b.Helper()
	fixMu.Lock()
	defer fixMu.Unlock()
	if v, ok := fixtures[key]; ok {
		return v.(T)
	}
	v, closeFn := create()
	fixtures[key] = v
	if closeFn != nil {
		closers = append(closers, closeFn)
	}
	return v
}

// workDir is this process's scratch directory, removed by TestMain.
func workDir(b *testing.B) string {
	workMu.Lock()
	defer workMu.Unlock()
	if work == "" {
		d, err := os.MkdirTemp("", "maiden-bench-")
		if err != nil {
			b.Fatal(err)
		}
		work = d
	}
	return work
}

// cacheDir is the compiled-component cache the fixtures share.
// $MAIDEN_BENCH_CACHE keeps it across processes (bench/run sets it, so each
// round does not compile the JS tool again); otherwise it is per process.
func cacheDir(b *testing.B) string {
	if d := os.Getenv("MAIDEN_BENCH_CACHE"); d != "" {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
		return d
	}
	return filepath.Join(workDir(b), "cache")
}

// ordered returns s, reversed when $MAIDEN_BENCH_REVERSE=1: bench/run
// alternates the order between rounds so that drift during a round does not
// always favour the same variant.
func ordered[T any](s []T) []T {
	if os.Getenv("MAIDEN_BENCH_REVERSE") == "1" {
		s = slices.Clone(s)
		slices.Reverse(s)
	}
	return s
}

func newSandbox(b *testing.B, cfg *wasmtime.Config) *sandbox.Sandbox {
	sb, err := sandbox.New(&sandbox.Options{CacheDir: cacheDir(b), Engine: cfg})
	if err != nil {
		b.Fatal(err)
	}
	return sb
}

// host is a maiden.Host whose agent.toml defines the tool as "echo" with
// the default limits written out.
func host(b *testing.B, fixture string, iso maiden.Isolation) *maiden.Host {
	path := testkit.Component(b, fixture)
	dir := workDir(b)
	cache := cacheDir(b)
	return shared(b, fmt.Sprintf("host/%s/%d", fixture, iso), func() (*maiden.Host, func()) {
		toml := fmt.Sprintf("version = 1\n\n[tools.echo]\npath = %q\ntimeout_ms = %d\nmemory_mb = %d\n",
			path, limits.Timeout.Milliseconds(), limits.Memory>>20)
		cfg, err := config.Parse(filepath.Join(dir, "agent.toml"), []byte(toml), dir)
		if err != nil {
			b.Fatal(err)
		}
		h, err := maiden.New(cfg, &maiden.Options{CacheDir: cache, Isolation: iso})
		if err != nil {
			b.Fatal(err)
		}
		// The first call loads the component; keep that out of the samples.
		res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: input})
		if err == nil {
			err = checkOutput(res.OK, res.Output, res.Error, input)
		}
		if err != nil {
			b.Fatal(err)
		}
		return h, func() { h.Close(context.Background()) }
	})
}

func sandboxVariant(pooling bool) func(*testing.B, string) (func() error, func()) {
	return func(b *testing.B, fixture string) (func() error, func()) {
		path := testkit.Component(b, fixture)
		sb := shared(b, fmt.Sprintf("sandbox/pooling=%t", pooling), func() (*sandbox.Sandbox, func()) {
			sb := newSandbox(b, &wasmtime.Config{Pooling: pooling})
			return sb, func() { sb.Close() }
		})
		call := sandbox.Call{Path: path, Limits: limits, Input: input}
		op := func() error {
			out, err := sb.Execute(context.Background(), call)
			if err != nil {
				return err
			}
			return checkOutcome(out, input)
		}
		// Load outside the samples (a no-op after the first time).
		if err := op(); err != nil {
			b.Fatal(err)
		}
		return op, nil
	}
}

// directTool is a component compiled for a bare engine and a linker with
// the same imports maiden provides (WASI and the host interface, whose
// functions here do nothing).
type directTool struct {
	engine *wasmtime.Engine
	linker *wasmtime.Linker
	comp   *wasmtime.Component
}

func direct(b *testing.B, fixture string, pooling bool) *directTool {
	path := testkit.Component(b, fixture)
	cache := cacheDir(b)
	return shared(b, fmt.Sprintf("direct/%s/pooling=%t", fixture, pooling), func() (*directTool, func()) {
		e, err := wasmtime.NewEngine(&wasmtime.Config{Pooling: pooling})
		if err != nil {
			b.Fatal(err)
		}
		l, err := wasmtime.NewLinker(e)
		if err == nil {
			err = l.AddWASIP2()
		}
		if err == nil {
			err = l.DefineInstance(wit.HostInterface, map[string]wasmtime.HostFunc{
				"log": func(*wasmtime.Caller, []wasmtime.Val) ([]wasmtime.Val, error) { return nil, nil },
				"http-fetch": func(*wasmtime.Caller, []wasmtime.Val) ([]wasmtime.Val, error) {
					msg := wasmtime.String("no network")
					e := wasmtime.Variant("denied", &msg)
					return []wasmtime.Val{wasmtime.Err(&e)}, nil
				},
			})
		}
		if err != nil {
			b.Fatal(err)
		}
		comp := compileCached(b, e, path, cache)
		return &directTool{engine: e, linker: l, comp: comp}, func() {
			comp.Close()
			l.Close()
			e.Close()
		}
	})
}

// compileCached compiles path for e, or deserializes it from dir (its own
// file names, independent of the sandbox's cache).
func compileCached(b *testing.B, e *wasmtime.Engine, path, dir string) *wasmtime.Component {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.Sum256(append(data, e.Fingerprint()...))
	file := filepath.Join(dir, "direct-"+hex.EncodeToString(h[:12])+".cwasm")
	if c, err := e.DeserializeComponentFile(file); err == nil {
		return c
	}
	c, err := e.NewComponent(data)
	if err != nil {
		b.Fatal(err)
	}
	if ser, err := c.Serialize(); err == nil {
		tmp := fmt.Sprintf("%s.tmp-%d", file, os.Getpid())
		if os.WriteFile(tmp, ser, 0o600) == nil {
			os.Rename(tmp, file)
		}
	}
	return c
}

func directVariant(pooling bool) func(*testing.B, string) (func() error, func()) {
	return func(b *testing.B, fixture string) (func() error, func()) {
		d := direct(b, fixture, pooling)
		return func() error {
			st, err := wasmtime.NewStore(d.engine, &wasmtime.StoreOptions{
				MemoryLimit: limits.Memory,
				Deadline:    time.Now().Add(limits.Timeout),
			})
			if err != nil {
				return err
			}
			defer st.Close()
			inst, err := d.linker.Instantiate(st, d.comp)
			if err != nil {
				return err
			}
			f, err := inst.Func("execute")
			if err != nil {
				return err
			}
			v, err := f.Call(wasmtime.String(input))
			if err != nil {
				return err
			}
			return checkVal(v)
		}, nil
	}
}

func checkOutput(ok bool, output string, toolErr error, want string) error {
	if !ok {
		return fmt.Errorf("call failed: %v", toolErr)
	}
	if output != want {
		return fmt.Errorf("output %q, want %q", trim(output), trim(want))
	}
	return nil
}

func checkOutcome(out sandbox.Outcome, want string) error {
	if out.Failure != nil {
		return checkOutput(false, "", out.Failure, want)
	}
	return checkOutput(true, out.Output, nil, want)
}

func checkVal(v wasmtime.Val) error {
	if v.Kind != wasmtime.KindResult || v.Payload == nil || v.Payload.Kind != wasmtime.KindString {
		return fmt.Errorf("execute returned a %s, want result<string, string>", v.Kind)
	}
	if !v.OK {
		return errors.New("execute returned err: " + v.Payload.Str)
	}
	return checkOutput(true, v.Payload.Str, nil, input)
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// BenchmarkWASISleepDeadline measures how far past its deadline a call
// ends when the tool sleeps in WASI (where epochs never fire), in worker
// isolation: the parent kills the worker at deadline + grace. Each
// operation is one call with timeout_ms = 50 of a Go tool sleeping 10 s;
// overrun-p50-ns and overrun-p99-ns are the time past the 50 ms. The
// issue's promise is p99 within 20 ms over 200 calls:
//
//	go test ./bench -run '^$' -bench WASISleepDeadline -benchtime 200x
func BenchmarkWASISleepDeadline(b *testing.B) {
	path := testkit.Component(b, "go/sleeper")
	dir := b.TempDir()
	toml := fmt.Sprintf("version = 1\n\n[tools.sleeper]\npath = %q\ntimeout_ms = 50\n", path)
	cfg, err := config.Parse(filepath.Join(dir, "agent.toml"), []byte(toml), dir)
	if err != nil {
		b.Fatal(err)
	}
	// The default pool (4 workers per CPU, as maiden serve): a killed
	// worker is replaced, and warmed, while the others serve.
	h, err := maiden.New(cfg, &maiden.Options{CacheDir: cacheDir(b), Isolation: maiden.Workers})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	if _, err := h.Tools(ctx); err != nil {
		b.Fatal(err)
	}
	// Steady state: the first calls start the pool's workers and hand each
	// the tool's compiled code, which a later replacement gets in advance.
	for range 16 {
		if _, err := h.Call(ctx, maiden.Call{Tool: "sleeper", Input: `{"ms":10000}`}); err != nil {
			b.Fatal(err)
		}
	}
	over := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := h.Call(ctx, maiden.Call{Tool: "sleeper", Input: `{"ms":10000}`})
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.OK || res.Error.Kind != maiden.KindDeadline {
			b.Fatalf("result %+v, want a deadline", res)
		}
		over = append(over, took-50*time.Millisecond)
	}
	b.StopTimer()
	slices.Sort(over)
	b.ReportMetric(float64(percentile(over, 50)), "overrun-p50-ns")
	b.ReportMetric(float64(percentile(over, 99)), "overrun-p99-ns")
}
