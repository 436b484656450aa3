package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestRevokedTokenStopsRunningCall: a call made with an agent token whose
// tool is running (testdata/tools/loop.wat spins until its deadline, a
// minute here) is stopped when the token is revoked: it ends denied,
// naming the token, within the watch's period (40 ms: 4 × the approval
// poll of 10 ms), long before its deadline, and no output reaches the
// caller. Another token's call of the same agent, running beside it, is
// not stopped by the revocation (it runs to its deadline, cut short here
// by the test); nor is a call with no token (an embedder's).
func TestRevokedTokenStopsRunningCall(t *testing.T) {
	t.Parallel()
	// Three names for the loop: the first calls of a tool no call has
	// proven yet run one at a time (admission's share, backoff.go).
	const body = `version = 1
[tools.loop1]
path = %[1]q
timeout_ms = 60000
[tools.loop2]
path = %[1]q
timeout_ms = 60000
[tools.loop3]
path = %[1]q
timeout_ms = 60000
[agents.a]
tools = ["loop1", "loop2", "loop3"]
grants = ["tool:invoke loop1 --...", "tool:invoke loop2 --...", "tool:invoke loop3 --..."]
`
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(body, testkit.Component(t, "loop")),
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: 10 * time.Millisecond})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	revoked, info, err := st.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := st.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res Result
		err error
	}
	start := func(ctx context.Context, tool, credential string) chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			res, err := h.Call(ctx, Call{Agent: "a", Tool: tool, Input: "{}", Credential: credential})
			ch <- outcome{res, err}
		}()
		return ch
	}
	othersCtx, stopOthers := context.WithCancel(ctx)
	defer stopOthers()
	victim := start(ctx, "loop1", TokenCredential(revoked))
	other := start(othersCtx, "loop2", TokenCredential(kept))
	embedder := start(othersCtx, "loop3", "")
	// Revoke once all three are running (their admission records written).
	for h.revocationWatched() < 2 || h.Active() < 3 {
		select {
		case o := <-victim:
			t.Fatalf("the call ended before the revocation: %+v %v", o.res.Error, o.err)
		case <-time.After(time.Millisecond):
		}
	}
	revokedAt := time.Now()
	if err := st.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	var o outcome
	select {
	case o = <-victim:
	case <-time.After(30 * time.Second):
		t.Fatal("the call of a revoked token still ran 30 s after the revocation (watch period 40 ms, deadline 60 s)")
	}
	want := "token revoked: the agent token this call was made with (ID " + info.ID + ") was revoked while the tool ran"
	if o.err != nil || o.res.OK || o.res.Output != "" || o.res.Error == nil || o.res.Error.Kind != KindDenied || !strings.Contains(o.res.Error.Message, want) {
		t.Fatalf("the running call of a revoked token: %+v %v, after %v; want denied: %s", o.res.Error, o.err, time.Since(revokedAt), want)
	}
	select {
	case o := <-other:
		t.Fatalf("another token's call ended with the revocation: %+v %v", o.res.Error, o.err)
	case o := <-embedder:
		t.Fatalf("a call with no token ended with the revocation: %+v %v", o.res.Error, o.err)
	case <-time.After(200 * time.Millisecond): // five periods of the watch
	}
	stopOthers()
	<-other
	<-embedder
}
