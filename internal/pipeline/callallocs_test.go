package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// maxTinyCallAllocs bounds the allocations of the tiniest in-process call
// (the echo tool, JSON input, no secret, no http-fetch, no reveal, the
// implicit agent): 37 before issue 23 trimmed the call path, 27 after, of
// which the sandbox's own store, instance and call are about 20
// (BenchmarkCall/wat/sandbox, -benchmem). The margin of 2 is for the race
// detector and the Go version, not for new per-call work: a call that
// builds a closure, a context or a redactor per stage shows here first.
const maxTinyCallAllocs = 29

// TestTinyCallAllocations guards the call path's own per-call cost
// (issue 23: the in-process tiny call within 1.3x the sandbox-level
// call). What a call builds only when it is used (the http-fetch chain,
// the revealer, the redactor, a release closure per admission turn) must
// stay unbuilt for a call that uses none of it.
func TestTinyCallAllocations(t *testing.T) {
	dir := t.TempDir()
	src := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n", testkit.Component(t, "echo"))
	h, _ := testHost(t, dir, src, &Options{CacheDir: testkit.CompileCache(t), Isolation: api.InProcess})
	defer h.Close(context.Background())
	call := func() {
		res, err := h.Call(context.Background(), Call{Tool: "echo", Input: `{"message":"hello"}`})
		if err != nil || !res.OK || res.Output != `{"message":"hello"}` {
			t.Fatalf("echo: %+v, %v", res, err)
		}
	}
	call() // compile, describe and cache outside the count
	// The race detector's sync.Pool drops items at random: the least of
	// three measurements is the stable one.
	n := testing.AllocsPerRun(100, call)
	for range 2 {
		n = min(n, testing.AllocsPerRun(100, call))
	}
	t.Logf("a tiny in-process call allocates %.0f times (bound %d)", n, maxTinyCallAllocs)
	if n > maxTinyCallAllocs {
		t.Errorf("a tiny in-process call allocates %.0f times, over the bound of %d (maxTinyCallAllocs): something on the call path now builds per call what it could build lazily or once per configuration", n, maxTinyCallAllocs)
	}
}
