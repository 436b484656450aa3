package maiden_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestCrashBackOffThroughHost: a tool that loses its worker on every call
// (the host-call argument bomb, in workers) runs CrashLimit times, each
// kind memory; the next call is refused at once as kind unavailable, with a
// message that names the cool-down, before anything is loaded; another
// tool runs meanwhile.
func TestCrashBackOffThroughHost(t *testing.T) {
	cfg := writeConfig(t, `version = 1
[tools.echo]
path = %q
[tools.bomb]
path = %q
memory_mb = 64
timeout_ms = 120000
`, "echo", "bigargs")
	// The back-off, not the priority: on a busy machine a bomb at the
	// lowest priority ends at its deadline, not its memory limit.
	maiden.NormalPriorityInTrouble(t)
	h, err := maiden.New(cfg, &maiden.Options{CacheDir: t.TempDir(), Isolation: maiden.Workers})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	for i := range maiden.CrashLimit {
		res, err := h.Call(ctx, maiden.Call{Tool: "bomb", Input: `{"body":true}`})
		if err != nil || res.Error == nil || res.Error.Kind != maiden.KindMemory {
			t.Fatalf("bomb call %d: %v %+v; want kind memory (the worker killed)", i+1, err, res.Error)
		}
	}
	res, err := h.Call(ctx, maiden.Call{Tool: "bomb", Input: `{"body":true}`})
	if err != nil || res.Error == nil || res.Error.Kind != maiden.KindUnavailable ||
		!strings.Contains(res.Error.Message, "lost its worker process on 3 calls in a row") || !strings.Contains(res.Error.Message, "refused for 10s") {
		t.Fatalf("the call after %d lost workers: %v %+v; want unavailable naming the cool-down", maiden.CrashLimit, err, res.Error)
	}
	if res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: `{"message":"hi"}`}); err != nil || !res.OK {
		t.Fatalf("echo during the bomb's cool-down: %v %+v", err, res.Error)
	}
}

// TestCrashCoolDownEndsWithTheComponent: the cool-down belongs to the
// component that lost its workers. Once the tool's file is replaced (the
// fix rebuilt in place), the next call runs the new component at once
// instead of being refused for the old one's cool-down.
func TestCrashCoolDownEndsWithTheComponent(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "tool.wasm")
	copyFile := func(from string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		tmp := tool + ".new"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tool); err != nil { // as a build writes it
			t.Fatal(err)
		}
	}
	copyFile(testkit.Component(t, "bigargs"))
	path := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("version = 1\n[tools.t]\npath = %q\nmemory_mb = 64\ntimeout_ms = 120000\n", tool)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// The back-off, not the priority: on a busy machine a bomb at the
	// lowest priority ends at its deadline, not its memory limit.
	maiden.NormalPriorityInTrouble(t)
	h, err := maiden.New(cfg, &maiden.Options{CacheDir: t.TempDir(), Isolation: maiden.Workers})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	for range maiden.CrashLimit {
		if res, err := h.Call(ctx, maiden.Call{Tool: "t", Input: `{"body":true}`}); err != nil || res.Error == nil || res.Error.Kind != maiden.KindMemory {
			t.Fatalf("the bomb: %v %+v; want kind memory", err, res.Error)
		}
	}
	if res, err := h.Call(ctx, maiden.Call{Tool: "t", Input: `{"message":"hi"}`}); err != nil || res.Error == nil || res.Error.Kind != maiden.KindUnavailable {
		t.Fatalf("the bomb after %d lost workers: %v %+v; want unavailable", maiden.CrashLimit, err, res.Error)
	}
	copyFile(testkit.Component(t, "echo")) // the fix
	res, err := h.Call(ctx, maiden.Call{Tool: "t", Input: `{"message":"fixed"}`})
	if err != nil || !res.OK || !strings.Contains(res.Output, "fixed") {
		t.Fatalf("the replaced component: %v %+v; want it to run, not inherit the old one's cool-down", err, res.Error)
	}
}
