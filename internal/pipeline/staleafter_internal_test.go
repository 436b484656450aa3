package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// staleOnceRunner is a runner whose tool at path reports ErrStale on its
// first run (as the sandbox does when the file changed and the old code
// was freed, or a worker's compiled code was lost) and runs for real from
// the next Open on. The middleware components keep the Host's own runner.
type staleOnceRunner struct {
	sandbox.Runner
	path  string
	stale atomic.Bool // set once the stale run happened
	runs  atomic.Int32
}

func (r *staleOnceRunner) Open(ctx context.Context, path string, lim sandbox.Limits) (*sandbox.Tool, error) {
	t, err := r.Runner.Open(ctx, path, lim)
	if err != nil || path != r.path {
		return t, err
	}
	if r.stale.CompareAndSwap(false, true) {
		return sandbox.NewTool(t.LoadInfo, func(context.Context, sandbox.Call) (sandbox.Outcome, error) {
			return sandbox.Outcome{}, sandbox.ErrStale
		}), nil
	}
	return sandbox.NewTool(t.LoadInfo, func(ctx context.Context, c sandbox.Call) (sandbox.Outcome, error) {
		r.runs.Add(1)
		return t.Execute(ctx, c)
	}), nil
}

// TestStaleRetryRunsAfterLayers (security review of the middleware chain):
// the version a call opened turns stale as it starts and loadAndValidate
// runs the rest of the pipeline again. The chain's layers decided before
// the first attempt, and the retry skipped the whole chain, its after
// phase too: the tool's output reached the agent past the redact layers
// and the components that check outputs, whatever they would have said.
// A retried call's output passes the after phase exactly once, as any
// call's does: here the redact layer's pattern is redacted, and a
// component that withholds every output withholds it.
func TestStaleRetryRunsAfterLayers(t *testing.T) {
	echo := testkit.Component(t, "echo")
	for _, tc := range []struct{ name, layers, want string }{
		{"redact", `[[middleware]]
use = "redact"
patterns = [{ name = "ticket", expr = "TCK-[0-9]+" }]
`, "[REDACTED:ticket]"},
		{"component", fmt.Sprintf(`[middleware.withhold]
path = %q
[[middleware]]
use = "withhold"
`, testkit.Middleware(t, "withhold")), "output withheld by withhold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			body := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n%s", echo, tc.layers)
			h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
			defer h.Close(context.Background())
			r := &staleOnceRunner{Runner: h.runner, path: echo}
			h.useRunner(r)
			res, err := h.Call(context.Background(), Call{Tool: "echo", Input: `{"message":"ticket TCK-1234"}`})
			if err != nil {
				t.Fatal(err)
			}
			if !r.stale.Load() || r.runs.Load() != 1 {
				t.Fatalf("the stale version was not reopened and run once (stale %v, %d runs): the test did not reach the retry", r.stale.Load(), r.runs.Load())
			}
			got := res.Output
			if res.Error != nil {
				got = res.Error.Message
			}
			if strings.Contains(got, "TCK-1234") || !strings.Contains(got, tc.want) {
				t.Fatalf("the retried call's result passed no after layer: %+v (error %+v), want %q and no TCK-1234", res, res.Error, tc.want)
			}
		})
	}
}
