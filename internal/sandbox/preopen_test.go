package sandbox_test

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/sandbox/preopentest"
	"github.com/maiden-run/maiden/internal/testkit"
)

func TestPreopens(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.New(&sandbox.Options{CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	preopentest.Run(t, func(ctx context.Context, tool string, dirs []sandbox.Preopen, input string) (sandbox.Outcome, error) {
		return sb.Execute(ctx, sandbox.Call{Path: tool, Limits: preopentest.Limits, Input: input, Preopens: dirs})
	})
}
