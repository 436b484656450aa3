package maiden_test

import (
	"context"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
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
timeout_ms = 20000
`, "echo", "bigargs")
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
