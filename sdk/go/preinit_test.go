//go:build !wasip1

package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

// These tests check what pre-initialisation (maiden build runs a Go tool's
// init once, under wizer, and ships the snapshot) must not change: each
// call gets fresh random seeds and a working clock, timers and collector,
// and a tool that reads the clock or randomness while it initialises is
// not snapshotted behind its author's back. They build real tools from
// testdata and run them in the real sandbox.

// buildWithLog builds testdata/NAME into a fresh file with the given
// MAIDEN_GO_PREINIT setting and returns the path, the build's progress
// text and its error.
func buildWithLog(t *testing.T, name, setting string) (string, string, error) {
	t.Helper()
	t.Setenv(toolbuild.PreinitEnv, setting)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress strings.Builder
	tc, err := toolbuild.EnsureToolchain(ctx, &toolbuild.Options{Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	p, err := toolbuild.DetectProject(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), name+".wasm")
	err = tc.Build(ctx, p, out)
	t.Logf("build of %s (%s=%q):\n%s", name, toolbuild.PreinitEnv, setting, progress.String())
	return out, progress.String(), err
}

func callJSON(t *testing.T, sb *sandbox.Sandbox, path, input string, v any) {
	t.Helper()
	out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Limits: limits, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	if out.Failure != nil {
		t.Fatalf("%s: %v; logs %v", input, out.Failure, out.Logs)
	}
	if err := json.Unmarshal([]byte(out.Output), v); err != nil {
		t.Fatalf("%s: output %q: %v", input, out.Output, err)
	}
}

func TestPreinitSnapshotTool(t *testing.T) {
	path, progress, err := buildWithLog(t, "snaptool", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress, "pre-initialised") || strings.Contains(progress, "warning") {
		t.Fatalf("snaptool was not pre-initialised cleanly; build said:\n%s", progress)
	}
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("fresh seeds per call", func(t *testing.T) {
		type random struct {
			MathRand     int64  `json:"math_rand"`
			MathRandV2   uint64 `json:"math_rand_v2"`
			Crypto       string `json:"crypto"`
			MapOrder     []int  `json:"map_order"`
			InitMapOrder []int  `json:"init_map_order"`
		}
		const calls = 6
		var rs []random
		for range calls {
			var r random
			callJSON(t, sb, path, `{"op":"random"}`, &r)
			rs = append(rs, r)
		}
		distinct := func(what string, key func(random) string) {
			seen := map[string]bool{}
			for _, r := range rs {
				seen[key(r)] = true
			}
			// Every value is 64 bits or more of fresh randomness except the
			// map orders (a random start among 64 keys): those must differ
			// at least once in six calls.
			min := calls
			if strings.Contains(what, "map") {
				min = 2
			}
			if len(seen) < min {
				t.Errorf("%s: %d distinct values in %d calls, want at least %d: %v", what, len(seen), calls, min, rs)
			}
		}
		distinct("math/rand", func(r random) string { return fmt.Sprint(r.MathRand) })
		distinct("math/rand/v2", func(r random) string { return fmt.Sprint(r.MathRandV2) })
		distinct("crypto/rand", func(r random) string { return r.Crypto })
		distinct("map iteration order", func(r random) string { return fmt.Sprint(r.MapOrder) })
		distinct("map iteration order of a map filled in init", func(r random) string { return fmt.Sprint(r.InitMapOrder) })
	})

	t.Run("clock and timers", func(t *testing.T) {
		type clock struct {
			UnixNano  int64 `json:"unix_nano"`
			SleptNS   int64 `json:"slept_ns"`
			TimerNS   int64 `json:"timer_ns"`
			TickerNS  int64 `json:"ticker_ns"`
			Monotonic bool  `json:"monotonic"`
			Ordered   bool  `json:"ordered"`
		}
		const sleep = 30 * time.Millisecond
		for i := range 2 {
			before := time.Now()
			var c clock
			callJSON(t, sb, path, fmt.Sprintf(`{"op":"clock","sleep_ms":%d}`, sleep.Milliseconds()), &c)
			wall := time.Since(before)
			now := time.Unix(0, c.UnixNano)
			if now.Before(before.Add(-time.Second)) || now.After(time.Now().Add(time.Second)) {
				t.Errorf("call %d: time.Now in the tool is %v, the host's was %v", i, now, before)
			}
			if !c.Monotonic || !c.Ordered {
				t.Errorf("call %d: monotonic reading %v, readings in order %v", i, c.Monotonic, c.Ordered)
			}
			// Each wait took at least what was asked, and the three waits
			// fit in the call's own wall time.
			for name, got := range map[string]int64{"time.Sleep": c.SleptNS, "time.After": c.TimerNS, "3 ticks of a ticker": c.TickerNS} {
				if time.Duration(got) < sleep-time.Millisecond || time.Duration(got) > wall {
					t.Errorf("call %d: %s(%v) measured %v inside the tool; the whole call took %v", i, name, sleep, time.Duration(got), wall)
				}
			}
			if wall < 3*sleep {
				t.Errorf("call %d: three waits of %v returned after %v", i, sleep, wall)
			}
		}
	})

	t.Run("collector", func(t *testing.T) {
		// 256 MiB of garbage in a 64 MiB memory limit: only a working
		// collector gets through.
		var g struct {
			Collections uint32 `json:"collections"`
		}
		callJSON(t, sb, path, `{"op":"gc","alloc_mb":256}`, &g)
		if g.Collections == 0 {
			t.Errorf("no collection while allocating 256 MiB")
		}
	})

	t.Run("memory ceiling", func(t *testing.T) {
		// The snapshot's memory is charged to the call like any other: a
		// tool that keeps 128 MiB under a 32 MiB ceiling ends as kind memory.
		out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Input: `{"op":"hold","alloc_mb":128}`,
			Limits: sandbox.Limits{Timeout: 10 * time.Second, Memory: 32 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Failure == nil || out.Failure.Kind != sandbox.KindMemory {
			t.Fatalf("outcome %+v, want a failure of kind memory", out.Failure)
		}
		if out.MemoryPeak == 0 || out.MemoryPeak > 32<<20 {
			t.Errorf("memory peak %d, want between 1 and 32 MiB", out.MemoryPeak)
		}
	})
}

// TestPreinitRefusesFrozenInitReads builds tools that read the clock or
// randomness while they initialise (crypto/rand and the wall clock are WASI
// calls; math/rand and math/rand/v2 draw from the runtime's generator). By default the build says why it does
// not pre-initialise them and builds an ordinary module, whose every call
// runs init afresh; with MAIDEN_GO_PREINIT=require the build fails.
func TestPreinitRefusesFrozenInitReads(t *testing.T) {
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		require    bool // also check MAIDEN_GO_PREINIT=require
	}{
		{"initclock", "read the wall clock", true},
		{"initrand", "read randomness", false},
		{"initmathrand", "drew 1 random number(s) from math/rand", false},
		{"initrandv2", "drew 1 random number(s) from math/rand", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, progress, err := buildWithLog(t, tc.name, "")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(progress, "warning: not pre-initialising") || !strings.Contains(progress, tc.want) {
				t.Errorf("the build did not warn that it %s; it said:\n%s", tc.want, progress)
			}
			if strings.Contains(progress, "pre-initialised (") {
				t.Errorf("the build pre-initialised a tool that reads the clock or randomness at init:\n%s", progress)
			}
			// Not frozen: each instance initialises anew.
			var outs []string
			for range 2 {
				out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Limits: limits, Input: "{}"})
				if err != nil || out.Failure != nil {
					t.Fatalf("call: %v %v", err, out.Failure)
				}
				outs = append(outs, out.Output)
				time.Sleep(2 * time.Millisecond)
			}
			if outs[0] == outs[1] {
				t.Errorf("two calls returned the same init-time value %q", outs[0])
			}

			if !tc.require {
				return
			}
			_, progress, err = buildWithLog(t, tc.name, "require")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "require") {
				t.Errorf("with %s=require: err %v, want a build error that says it %s; progress:\n%s", toolbuild.PreinitEnv, err, tc.want, progress)
			}
		})
	}
}

// TestPreinitStrippedBuild: with -ldflags=-s Go's linker drops the name
// section that math/rand's draws are found by, so a draw at init could not
// be seen: such a build is not snapshotted, with a warning saying why, and
// each call initialises anew.
func TestPreinitStrippedBuild(t *testing.T) {
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFLAGS", strings.TrimSpace(os.Getenv("GOFLAGS")+" -ldflags=-s"))
	path, progress, err := buildWithLog(t, "initmathrand", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress, "warning: not pre-initialising") || !strings.Contains(progress, "no name section") {
		t.Errorf("a stripped build did not say it cannot count math/rand draws; it said:\n%s", progress)
	}
	var outs []string
	for range 2 {
		out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Limits: limits, Input: "{}"})
		if err != nil || out.Failure != nil {
			t.Fatalf("call: %v %v", err, out.Failure)
		}
		outs = append(outs, out.Output)
	}
	if outs[0] == outs[1] {
		t.Errorf("two calls returned the same init-time value %q", outs[0])
	}
}

// TestPreinitOff builds with MAIDEN_GO_PREINIT=off: an ordinary module
// that still works.
func TestPreinitOff(t *testing.T) {
	path, progress, err := buildWithLog(t, "snaptool", "off")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(progress, "pre-initialised") {
		t.Errorf("%s=off still pre-initialised:\n%s", toolbuild.PreinitEnv, progress)
	}
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Crypto string `json:"crypto"`
	}
	callJSON(t, sb, path, `{"op":"random"}`, &r)
	if len(r.Crypto) != 32 {
		t.Errorf("crypto/rand gave %q", r.Crypto)
	}
}

// TestPreinitInitCallsHost: a tool that calls the host (here maiden.Log)
// while it initialises cannot be snapshotted, because the host is not there
// at build time. The build says so and falls back to an ordinary module,
// whose every call logs from init as before.
func TestPreinitInitCallsHost(t *testing.T) {
	path, progress, err := buildWithLog(t, "initlog", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress, "warning: not pre-initialising") || !strings.Contains(progress, "snapshot run of the tool's init failed") ||
		!strings.Contains(progress, "'maiden:tool/host@0.2.0' 'log' (in ") || !strings.Contains(progress, "main.init") {
		t.Errorf("the build did not say why it could not take a snapshot:\n%s", progress)
	}
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Limits: limits, Input: "{}"})
		if err != nil || out.Failure != nil {
			t.Fatalf("call: %v %v", err, out.Failure)
		}
		if len(out.Logs) != 1 || out.Logs[0].Message != "initialising" {
			t.Errorf("logs %+v, want the init's line", out.Logs)
		}
	}
}
