package maiden_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
)

// TestBoundaryNewlyAgainstTheRevisionItRanUnder: a real Host's refused
// fs_write calls record the revision of the boundary they were decided
// under, and what approving a widening would newly allow replays each
// against that revision: two writes refused under revisions 0 and 1 (the
// boundary was widened for a read in between) are both shown, nothing is
// counted as not replayable, and a write the widening would still refuse
// is not shown.
func TestBoundaryNewlyAgainstTheRevisionItRanUnder(t *testing.T) {
	t.Parallel()
	h, dir := sessionHost(t, "")
	other := filepath.Join(dir, "other")
	write := func(name string) {
		t.Helper()
		if res := sessCall(t, h, "s1", "fs_write", map[string]any{"path": filepath.Join(other, name), "content": "x"}); res.OK {
			t.Fatalf("fs_write %s outside the boundary succeeded", name)
		}
	}
	write("x.txt") // revision 0
	readB := map[string]any{"filesystem": map[string]any{"entries": []any{map[string]any{"path": filepath.Join(other, "b.txt"), "access": "read", "scope": "exact"}}}}
	if out := requestAndDecide(t, h, "s1", map[string]any{"id": "r1", "expansion": readB, "justification": "read b"}, maiden.Answer{Approve: true, By: "test"}); !out.OK {
		t.Fatalf("widening for a read: %+v", out)
	}
	write("y.txt") // revision 1
	if res := sessCall(t, h, "s1", "fs_write", map[string]any{"path": filepath.Join(dir, "elsewhere.txt"), "content": "x"}); res.OK {
		t.Fatal("fs_write outside everything succeeded")
	}

	// The widening to write under other/: asked, and looked at while it
	// waits, then denied.
	id, done := askToWrite(t, h, "r2", other)
	np, err := h.ApprovalNewlyPossible(context.Background(), id, "", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ex := range np.Examples {
		got = append(got, ex.Target)
	}
	want := []string{"fs_write: write " + filepath.Join(other, "x.txt"), "fs_write: write " + filepath.Join(other, "y.txt")}
	if np.Calls != 2 || !slices.Equal(got, want) || np.NotReplayable != 0 {
		t.Errorf("newly possible: %d calls %q, %d not replayable (%s); want 2 calls %q, 0 not replayable", np.Calls, got, np.NotReplayable, np.NotReplayableWhy, want)
	}
	if _, err := h.Decide(context.Background(), id, maiden.Answer{Approve: false, By: "test", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	<-done
}

// TestBoundaryNewlyNotAShadowedBuiltin: a [tools] entry named like a file
// built-in (a WebAssembly tool called fs_write, which agent.toml allows:
// it shadows the built-in) is not the built-in to what approving a
// widening would newly allow: its call that failed in the session (the
// tool's own error, with a path argument outside the boundary) is not
// shown as a write the boundary refused and the widening would let run,
// nor its call the cards refused counted as one that cannot be replayed.
// Before the fix the replay went by the tool's name alone and showed it.
func TestBoundaryNewlyNotAShadowedBuiltin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work, other := filepath.Join(dir, "work"), filepath.Join(dir, "other")
	for _, d := range []string{work, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := newHostWith(t, `version = 1
[tools.fs_write]
path = %q
fs = "read"
[agents.coder]
tools = ["fs_write", "request_sandbox_boundary"]
grants = ["tool:invoke fs_write --content=x --...", "tool:invoke request_sandbox_boundary --...", "fs:read /**", "fs:write /**"]
[agents.coder.boundary]
fs = [{ path = "`+work+`", access = "read", match = "subtree" }]
`, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond}, "toolerr")
	// Refused by the cards (content=y): its record is the WebAssembly
	// tool's too, not a built-in's call to replay (nor one it cannot).
	if res := sessCall(t, h, "s1", "fs_write", map[string]any{"path": filepath.Join(other, "y.txt"), "content": "y"}); res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("the WebAssembly fs_write with content=y: %+v, want denied by the cards", res)
	}
	res := sessCall(t, h, "s1", "fs_write", map[string]any{"path": filepath.Join(other, "x.txt"), "content": "x"})
	if res.OK || res.Error == nil || res.Error.Message != "the tool refused: bad input" {
		t.Fatalf("the WebAssembly fs_write: %+v, want its own tool error", res)
	}
	id, done := askToWrite(t, h, "r1", other)
	np, err := h.ApprovalNewlyPossible(context.Background(), id, "", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if np.Calls != 0 || len(np.Examples) != 0 || np.NotReplayable != 0 {
		t.Errorf("newly possible: %d calls %+v, %d not replayable; want none: the WebAssembly fs_write's failure was its own, not the boundary's", np.Calls, np.Examples, np.NotReplayable)
	}
	if _, err := h.Decide(context.Background(), id, maiden.Answer{Approve: false, By: "test", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	<-done
}

// askToWrite has session s1 of agent coder ask (request ID id) to widen
// its boundary to write under dir, and returns the approval's ID once the
// request waits for it, and where its result comes when it is answered.
func askToWrite(t *testing.T, h *maiden.Host, id, dir string) (string, <-chan maiden.Result) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"id": id, "justification": "write there",
		"expansion": map[string]any{"filesystem": map[string]any{"entries": []any{map[string]any{"path": dir, "access": "write", "scope": "subtree"}}}}})
	asked := make(chan string, 1)
	done := make(chan maiden.Result, 1)
	go func() {
		res, _ := h.Call(context.Background(), maiden.Call{Agent: "coder", Tool: "request_sandbox_boundary", Input: string(raw), Session: "s1",
			ApprovalWait: 20 * time.Second, OnApproval: func(r maiden.ApprovalRequest) { asked <- r.ID }})
		done <- res
	}()
	select {
	case approval := <-asked:
		return approval, done
	case res := <-done:
		t.Fatalf("the request ended without waiting: %+v", res)
	}
	return "", nil
}
