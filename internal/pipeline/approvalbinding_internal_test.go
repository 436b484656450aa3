package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// staleRunner is a runner whose tool, once swap is set, is replaced as the
// approved call starts: the version the call opened reports ErrStale (as
// the sandbox does when the file changed and the old code was freed) and
// the next Open returns another component (another digest), whose runs
// are counted.
type staleRunner struct {
	sandbox.Runner
	swap  atomic.Bool
	opens atomic.Int32
	runs  atomic.Int32
}

func (r *staleRunner) Open(ctx context.Context, path string, lim sandbox.Limits) (*sandbox.Tool, error) {
	t, err := r.Runner.Open(ctx, path, lim)
	if err != nil || !r.swap.Load() {
		return t, err
	}
	if r.opens.Add(1) == 1 {
		return sandbox.NewTool(t.LoadInfo, func(context.Context, sandbox.Call) (sandbox.Outcome, error) {
			return sandbox.Outcome{}, sandbox.ErrStale
		}), nil
	}
	info := t.LoadInfo
	info.Digest = strings.Repeat("0", 64) // another component at the same path
	return sandbox.NewTool(info, func(context.Context, sandbox.Call) (sandbox.Outcome, error) {
		r.runs.Add(1)
		return sandbox.Outcome{Output: "the replacement ran"}, nil
	}), nil
}

// TestApprovedCallRefusedWhenTheToolIsReplacedAsItStarts: the approval
// was consumed for one version of the tool; that version turned stale as
// it started, and loadAndValidate's retry opened another component: the
// approval (consumed once, for the old code) does not run the new one.
func TestApprovedCallRefusedWhenTheToolIsReplacedAsItStarts(t *testing.T) {
	dir := t.TempDir()
	body := fmt.Sprintf(`version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
[agents.a]
tools = ["t"]
grants = ["tool:invoke t --..."]
`, testkit.Component(t, "logger"))
	h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	r := &staleRunner{Runner: h.runner}
	h.useRunner(r)
	ctx := context.Background()
	call := Call{Agent: "a", Tool: "t", Input: `{}`, ApprovalWait: -1}
	res, err := h.Call(ctx, call)
	if err != nil || res.Error == nil || res.Error.Kind != KindPending {
		t.Fatalf("first call: %+v %v", res, err)
	}
	id := res.Error.Approval
	if _, err := decideRequest(ctx, h, id, admin.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	r.swap.Store(true)
	res, err = h.Call(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if r.opens.Load() < 2 {
		t.Fatalf("the stale version was not reopened (%d opens): the test did not reach the retry", r.opens.Load())
	}
	if n := r.runs.Load(); n != 0 || res.OK {
		t.Fatalf("the replacement ran %d times on an approval given for the old code: %+v", n, res)
	}
	if res.Error == nil || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, "the tool changed after the call was approved") {
		t.Fatalf("result %+v", res.Error)
	}
}
