package maiden_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestDefaultIsolationBoundsHostCallArguments is issue 22's finding 13
// through the API an embedder uses without asking for anything: New with
// zero Options (this test binary calls WorkerMain in TestMain). The
// host-call argument bombs, which in process make wasmtime lift gigabytes
// in this process before any maiden code runs (a 0.1.0 list<u8> body: 4.3
// GB; aliased header strings: unbounded by the tool's memory), must end as
// kind memory in a worker, and this process's peak RSS must not grow.
func TestDefaultIsolationBoundsHostCallArguments(t *testing.T) {
	cfg := writeConfig(t, `version = 1
[tools.echo]
path = %q
[tools.bomb]
path = %q
memory_mb = 64
timeout_ms = 120000
[tools.bomb2]
path = %q
memory_mb = 64
timeout_ms = 120000
[tools.alias]
path = %q
memory_mb = 16
timeout_ms = 60000
`, "echo", "bigargs", "bigargs", "aliasargs")
	// The deadlines are not what is tested (the memory limit is): under a
	// full run's load the lifts took more than 20 s (5 s for alias) to
	// reach it, and ended at their deadlines instead.
	h, err := maiden.New(cfg, &maiden.Options{CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	// Compile, describe and warm first, so the peak below is the calls'.
	if _, err := h.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: `{"message":"hi"}`}); err != nil || !res.OK {
		t.Fatalf("echo under the default isolation: %v %+v", err, res.Error)
	}
	for _, tc := range []struct {
		tool, input string
		kinds       []maiden.ErrorKind
	}{
		// 59 MB list<u8>: 4.3 GB lifted in process, and not refused there.
		{"bomb", `{"body":true}`, []maiden.ErrorKind{maiden.KindMemory}},
		// 3.7 M headers: 1.2 GB lifted in process. Under another name:
		// bomb lost its worker just now, so its next call would run at
		// the lowest CPU priority (a tool in trouble), and on a busy
		// machine end at its deadline instead.
		{"bomb2", `{"headers":true}`, []maiden.ErrorKind{maiden.KindMemory}},
		// 4096 aliased 16 KiB strings: 256 MB lifted, then refused; in a
		// worker the lift fits its limit (memory_mb 16 + the allowance is
		// not reached by every run) or stops it.
		{"alias", `{}`, []maiden.ErrorKind{maiden.KindMemory, maiden.KindTrap}},
	} {
		t.Run(tc.tool+tc.input, func(t *testing.T) {
			// Reset VmHWM to the current RSS (Linux's clear_refs 5).
			if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
				t.Skipf("cannot reset VmHWM: %v", err)
			}
			rss0 := testkit.ProcStatus(t, "VmRSS")
			start := time.Now()
			res, err := h.Call(ctx, maiden.Call{Tool: tc.tool, Input: tc.input})
			took := time.Since(start)
			// Signed: the kernel's RSS counters are per-CPU and read
			// approximately, so a high-water mark read after a call that
			// grew nothing can be a few pages below rss0 (an unsigned
			// difference wrapped to 16 EiB and failed the bound): no growth.
			peak := max(0, int64(testkit.ProcStatus(t, "VmHWM"))-int64(rss0))
			t.Logf("%s %s: %+v in %v; this process's peak +%d MiB over %d MiB", tc.tool, tc.input, res.Error, took.Round(time.Millisecond), peak>>20, rss0>>20)
			if err != nil || res.Error == nil || !slices.Contains(tc.kinds, res.Error.Kind) {
				t.Errorf("%v %+v; want kind %v (in a worker: stopped at its memory limit, or refused there)", err, res.Error, tc.kinds)
			}
			// The parent only ever holds frames and the worker's answer.
			if peak > 64<<20 {
				t.Errorf("this process's peak RSS grew by %d MiB; the default isolation must keep the lift out of it (bound 64 MiB)", peak>>20)
			}
		})
	}
}

// envNoWorkerMain makes TestMain skip WorkerMain, for
// TestDefaultIsolationWithoutWorkerMain's child.
const envNoWorkerMain = "MAIDEN_TEST_NO_WORKERMAIN"

// TestDefaultIsolationWithoutWorkerMain: a program that did not call
// WorkerMain cannot serve as a worker, so New with the default isolation and
// no WorkerCommand fails with ErrNoWorkerMain, naming both fixes (and the
// in-process opt-in), instead of re-executing a program that is not a
// worker on the first call. The check runs in this test binary re-executed
// with TestMain skipping WorkerMain, as an embedder's main that forgot it.
func TestDefaultIsolationWithoutWorkerMain(t *testing.T) {
	t.Parallel()
	if os.Getenv(envNoWorkerMain) == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^TestDefaultIsolationWithoutWorkerMain$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envNoWorkerMain+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestDefaultIsolationWithoutWorkerMain")) {
			t.Fatalf("the child without WorkerMain: %v\n%s", err, out)
		}
		return
	}
	cfg := writeConfig(t, "version = 1\n[tools.echo]\npath = %q\n", "echo")
	_, err := maiden.New(cfg, &maiden.Options{CacheDir: "off"})
	if !errors.Is(err, maiden.ErrNoWorkerMain) {
		t.Fatalf("New with the default isolation and no WorkerMain: %v, want ErrNoWorkerMain", err)
	}
	for _, want := range []string{"maiden.WorkerMain()", "Options.WorkerCommand", "maiden.InProcess"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %s", err, want)
		}
	}
	// Either fix (or the explicit opt-in) makes New succeed.
	for name, o := range map[string]maiden.Options{
		"WorkerCommand": {CacheDir: "off", WorkerCommand: []string{"/usr/local/bin/maiden"}},
		"InProcess":     {CacheDir: "off", Isolation: maiden.InProcess},
	} {
		h, err := maiden.New(cfg, &o)
		if err != nil {
			t.Errorf("New with %s: %v", name, err)
			continue
		}
		h.Close(context.Background())
	}
}
