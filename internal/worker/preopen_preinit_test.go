package worker

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/sandbox/preopentest"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestPreopensPreinitialisedInWorker runs the preopened-directory suite
// through worker processes with a Go tool maiden build pre-initialised
// (go/fsprobesnap): a worker kept for the same directories serves the next
// call with a fresh instance, which lists them again.
func TestPreopensPreinitialisedInWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 2, CacheDir: testkit.CompileCache(t)})
	preopentest.RunPreinitialised(t, func(ctx context.Context, tool string, dirs []sandbox.Preopen, input string) (sandbox.Outcome, error) {
		tl, err := p.Open(ctx, tool, preopentest.Limits)
		if err != nil {
			t.Fatalf("open %s: %v", tool, err)
		}
		return tl.Execute(ctx, sandbox.Call{Limits: preopentest.Limits, Input: input, Preopens: dirs})
	})
}
