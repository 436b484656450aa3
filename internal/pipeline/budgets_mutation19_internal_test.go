package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// lateRunner opens tools whose run ends well only after its context is
// done: a result that came in after the budget's deadline.
type lateRunner struct{ sandbox.Runner }

func (r lateRunner) Open(ctx context.Context, path string, lim sandbox.Limits) (*sandbox.Tool, error) {
	t, err := r.Runner.Open(ctx, path, lim)
	if err != nil {
		return t, err
	}
	return sandbox.NewTool(t.LoadInfo, func(ctx context.Context, _ sandbox.Call) (sandbox.Outcome, error) {
		<-ctx.Done()
		return sandbox.Outcome{Output: `"finished"`}, nil
	}), nil
}

// TestBudgetDeadlineKeepsAResultThatCameIn guards the budget stage's
// reading of its deadline: a call is turned into a deadline failure naming
// the budget only when it failed; one whose run ended well (here, just as
// its reservation ran out) keeps its result.
func TestBudgetDeadlineKeepsAResultThatCameIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := fmt.Sprintf("version = 1\n[tools.t]\npath = %q\n[agents.a]\ntools = [\"t\"]\ngrants = [{ grant = \"tool:invoke t --...\", budget = \"wall_ms=200\" }]\n", testkit.Component(t, "logger"))
	h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	h.useRunner(lateRunner{Runner: h.runner})
	res, err := h.Call(context.Background(), Call{Agent: "a", Tool: "t", Input: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Error != nil || res.Output != `"finished"` {
		t.Fatalf("a call whose run ended well as its 200 ms reservation ran out: %+v %+v; want its result kept", res, res.Error)
	}
}
