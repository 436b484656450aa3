package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestStaleRetryChargesOnce: the version a call opened turns stale as it starts (sandbox.ErrStale, as when the
// tool's file is replaced and the old code freed, or a worker's compiled code is lost) and loadAndValidate opens it
// again and runs the rest of the pipeline a second time. The agent made one call: it takes one rate-limit token,
// one quota unit and one budget charge, however many times it is retried inside. Before the fix the budget stage
// reserved again on the retry: a card with calls=2 was spent by one call, and the next was budget-exhausted.
func TestStaleRetryChargesOnce(t *testing.T) {
	path := testkit.Component(t, "logger")
	for _, tc := range []struct {
		name, extra, grant, refusal string
	}{
		{"budget", "", `{ grant = "tool:invoke t --...", budget = "calls=2" }`, "budget-exhausted: card "},
		{"ratelimit", "[[middleware]]\nuse = \"ratelimit\"\nlimit = 2\nper = \"1h\"\n", `"tool:invoke t --..."`, "rate limit: at most 2 calls of t per 1h0m0s"},
		{"quota", "[[middleware]]\nuse = \"quota\"\nlimit = 2\nwindow = \"1h\"\n", `"tool:invoke t --..."`, "quota exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			body := fmt.Sprintf("version = 1\n[tools.t]\npath = %q\n%s[agents.a]\ntools = [\"t\"]\ngrants = [%s]\n", path, tc.extra, tc.grant)
			h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
			defer h.Close(context.Background())
			r := &staleRunner{Runner: h.runner}
			r.swap.Store(true)
			h.useRunner(r)
			ctx := context.Background()
			call := Call{Agent: "a", Tool: "t", Input: `{}`}
			res, err := h.Call(ctx, call)
			if err != nil {
				t.Fatal(err)
			}
			if r.opens.Load() < 2 || r.runs.Load() != 1 {
				t.Fatalf("the stale version was not reopened and run once (%d opens, %d runs): the test did not reach the retry", r.opens.Load(), r.runs.Load())
			}
			if !res.OK {
				t.Fatalf("the retried call: %+v %+v", res, res.Error)
			}
			// The second call is the agent's second: within the limit of 2.
			r.swap.Store(false)
			if res, err = h.Call(ctx, call); err != nil || !res.OK {
				t.Fatalf("the second call, within a limit of 2, was refused (the retry was charged twice): %+v %+v %v", res, res.Error, err)
			}
			// The third is over it, refused by the limit under test.
			res, err = h.Call(ctx, call)
			if err != nil || res.OK || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, tc.refusal) {
				t.Fatalf("the third call: %+v %+v %v, want denied with %q", res, res.Error, err, tc.refusal)
			}
		})
	}
}
