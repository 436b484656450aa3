package toolbuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/wasmsnap"
)

func TestGoflagsTags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		goflags string
		want    []string
	}{
		{"", nil},
		{"-mod=mod", nil},
		{"-tags=maiden_tool_0_1", []string{"maiden_tool_0_1"}},
		{"-mod=mod --tags=a,b -trimpath -tags=b,c", []string{"a", "b", "c"}},
	} {
		if got := goflagsTags(tt.goflags); !cmp.Equal(got, tt.want) {
			t.Errorf("goflagsTags(%q) = %q, want %q", tt.goflags, got, tt.want)
		}
	}
}

func TestFrozenReads(t *testing.T) {
	t.Parallel()
	if msg := frozenReads(wasmsnap.Counts{WallClock: runtimeWallClockReads, Random: runtimeRandomReads}); msg != "" {
		t.Errorf("the runtime's own reads are reported: %s", msg)
	}
	msg := frozenReads(wasmsnap.Counts{WallClock: runtimeWallClockReads + 2, Random: runtimeRandomReads + 1, GoRand: runtimeGoRandReads + 3})
	for _, want := range []string{"wall clock 2 time(s)", "randomness 1 time(s)", "drew 3 random number(s) from math/rand", "sync.Once"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}

// echoCore builds examples/echo for a snapshot (the runtime overlay and the
// SDK's restore export) and returns the core module.
var echoCore = sync.OnceValues(func() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gobin, err := findExecutable("", "go", ErrNoGo)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "echo"))
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "maiden-preinit-test-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	extra, err := preinitBuildArgs(ctx, gobin, dir, work, nil)
	if err != nil {
		return nil, err
	}
	core := filepath.Join(work, "core.wasm")
	if out, err := goBuild(ctx, gobin, dir, core, extra); err != nil {
		return nil, fmt.Errorf("go build: %v: %s", err, out)
	}
	return os.ReadFile(core)
})

// TestSnapshotCounts checks the baseline the frozen-read check relies on:
// Go's runtime start-up (with the SDK, as in every tool) reads randomness
// runtimeRandomReads times and the wall clock runtimeWallClockReads times.
func TestSnapshotCounts(t *testing.T) {
	t.Parallel()
	tc := toolchain(t)
	core, err := echoCore()
	if err != nil {
		t.Fatal(err)
	}
	_, probe, err := wasmsnap.Instrument(core)
	if err != nil {
		t.Fatal(err)
	}
	if probe.Imports < 2 {
		t.Fatalf("instrumented %d WASI imports, want clock_time_get and random_get at least", probe.Imports)
	}
	snap, err := tc.snapshotGo(ctxFor(t), core, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// snapshotGo instruments the same way: the counters are where probe says.
	counts, err := probe.Counts(snap)
	if err != nil {
		t.Fatal(err)
	}
	if want := (wasmsnap.Counts{WallClock: runtimeWallClockReads, Random: runtimeRandomReads, GoRand: runtimeGoRandReads}); counts != want {
		t.Errorf("Go's start-up made %+v WASI reads, the check assumes %+v", counts, want)
	}
	// Merging the data segments leaves the memory the module starts with
	// as it was.
	merged, err := wasmsnap.Coalesce(snap, dataGap)
	if err != nil {
		t.Fatal(err)
	}
	before, err := wasmsnap.Image(snap)
	if err != nil {
		t.Fatal(err)
	}
	after, err := wasmsnap.Image(merged)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("Coalesce changed the snapshot's initial memory (%d bytes before, %d after)", len(before), len(after))
	}
	st, _ := wasmsnap.Stats(merged)
	if st.Segments > 100 {
		t.Errorf("%d data segments after merging, want at most 100", st.Segments)
	}
	t.Logf("%d bytes of initial memory image; %d segments, %d bytes after merging", len(before), st.Segments, st.Bytes)
	exports, err := wasmsnap.Exports(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(exports, "_initialize") || slices.Contains(exports, "maiden_restore") {
		t.Errorf("snapshot exports %q: want _initialize (the restore function) and no maiden_restore", exports)
	}
}

// BenchmarkGoPreinit runs examples/echo, one fresh instance per call, built
// each way pre-initialisation can go: "plain" is the module as go build
// made it (what every Go tool was before), "snapshot" is wizer's output as
// it is, "gapN" merges data segments at most N bytes apart. Compare the rows
// of one run:
//
//	go test -run '^$' -bench GoPreinit -benchtime 2s ./internal/toolbuild
func BenchmarkGoPreinit(b *testing.B) {
	tc := toolchain(b)
	core, err := echoCore()
	if err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	snap, err := tc.snapshotGo(ctxFor(b), core, work)
	if err != nil {
		b.Fatal(err)
	}
	plain, err := wasmsnap.RemoveExport(core, "maiden_restore")
	if err != nil {
		b.Fatal(err)
	}
	variants := []struct {
		name string
		core []byte
	}{{"plain", plain}, {"snapshot", snap}}
	for _, gap := range []int{0, 256, 4096, 65536} {
		c, err := wasmsnap.Coalesce(snap, gap)
		if err != nil {
			b.Fatal(err)
		}
		variants = append(variants, struct {
			name string
			core []byte
		}{fmt.Sprintf("gap%d", gap), c})
	}
	sb, err := sandbox.New(&sandbox.Options{CacheDir: "off"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close() })
	for _, v := range variants {
		comp, err := tc.ComponentFromCore(ctxFor(b), v.core, true)
		if err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(work, v.name+".wasm")
		if err := os.WriteFile(path, comp, 0o644); err != nil {
			b.Fatal(err)
		}
		st, _ := wasmsnap.Stats(v.core)
		call := sandbox.Call{Path: path, Limits: sandbox.Limits{Timeout: 5 * time.Second, Memory: 64 << 20}, Input: `{"message":"hello"}`}
		if out, err := sb.Execute(context.Background(), call); err != nil || out.Failure != nil || out.Output != call.Input {
			b.Fatalf("%s: %v %v %q", v.name, err, out.Failure, out.Output)
		}
		b.Run(v.name, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				out, err := sb.Execute(context.Background(), call)
				durs = append(durs, time.Since(start))
				if err != nil || out.Failure != nil {
					b.Fatalf("%v %v", err, out.Failure)
				}
			}
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(st.Segments), "segments")
			b.ReportMetric(float64(st.Bytes)/(1<<20), "data-MiB")
		})
	}
}

func TestWizerMessage(t *testing.T) {
	t.Parallel()
	out := `panic: boom

goroutine 1 [running]:
Error: calling the Reactor initialization function

Caused by:
    0: error while executing at wasm backtrace:
           0: 0x163e61 - <unknown>!github.com_maiden_run_maiden_sdk_go.logImport
           1: 0x1639f0 - <unknown>!github.com_maiden_run_maiden_sdk_go.Log
           2: 0x164ad6 - <unknown>!main.init.0
           3:  0xd516a - <unknown>!runtime.doInit1
           4: 0x131290 - <unknown>!wasm_pc_f_loop
    1: Error: attempted to call an unknown imported function: 'maiden:tool/host@0.2.0' 'log'
       
       You cannot call arbitrary imported functions during Wizer initialization.
`
	got := wizerMessage(out)
	want := "panic: boom\ngoroutine 1 [running]:\nattempted to call an unknown imported function: 'maiden:tool/host@0.2.0' 'log' " +
		"(in github.com_maiden_run_maiden_sdk_go.logImport <- github.com_maiden_run_maiden_sdk_go.Log <- main.init.0); " +
		"the host is not there at build time: call maiden.Log, maiden.Fetch and other host functions from Execute, not while initialising"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := wizerMessage("killed\n"); got != "killed" {
		t.Errorf("output without wizer's error: %q", got)
	}
}

// TestSnapshotRunTimesOut: a tool whose init never returns does not hang
// maiden build; it is built the ordinary way, with a warning.
func TestSnapshotRunTimesOut(t *testing.T) {
	tc := toolchain(t)
	prev := snapshotTimeout
	snapshotTimeout = 3 * time.Second
	t.Cleanup(func() { snapshotTimeout = prev })
	var progress strings.Builder
	tc2 := *tc
	tc2.progress = &progress
	p, err := DetectProject(filepath.Join("testdata", "initspin"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := tc2.Build(ctxFor(t), p, filepath.Join(t.TempDir(), "initspin.wasm")); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Logf("built in %v:\n%s", time.Since(start).Round(time.Millisecond), progress.String())
	if !strings.Contains(progress.String(), "warning: not pre-initialising") || !strings.Contains(progress.String(), "did not finish within 3s") {
		t.Errorf("no warning about the snapshot run's time limit:\n%s", progress.String())
	}
}
