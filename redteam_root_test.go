package maiden_test

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BUG 9: a worker program that cannot start is reported as the tool being
// invalid (a Result of kind invalid), not as a call that could not be made.
func TestRedTeamBugMissingWorkerIsInvalidTool(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "version = 1\n[tools.echo]\npath = %q\n", "echo")
	h, err := maiden.New(cfg, &maiden.Options{CacheDir: testkit.CompileCache(t), Isolation: maiden.Workers,
		WorkerCommand: []string{"/nonexistent/maiden"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: `{"message":"x"}`})
	t.Logf("res=%+v err=%v", res.Error, err)
	if err == nil && res.Error != nil && res.Error.Kind == maiden.KindInvalid {
		t.Error("an operator's missing worker binary is blamed on the tool (kind invalid)")
	}
}
