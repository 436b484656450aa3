package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
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

// TestRevocationFollowsTheCardsGeneration: the watch asks about the
// tokens in flight when the store's cards generation moves, not only every
// 4 × the approval poll: with that period at two minutes, a revocation
// still ends its token's running call (loop.wat, a 10 s deadline) denied,
// naming the token, long before the period or the deadline. A change that
// leaves the token live (another token minted, which moves the generation)
// ends nothing.
func TestRevocationFollowsTheCardsGeneration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.loop]
path = %q
timeout_ms = 10000
[agents.a]
tools = ["loop"]
grants = ["tool:invoke loop --..."]
`, testkit.Component(t, "loop")),
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: 30 * time.Second})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, info, err := st.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.Call(ctx, Call{Agent: "a", Tool: "loop", Input: "{}", Credential: TokenCredential(tok)})
		done <- outcome{res, err}
	}()
	for h.revocationWatched() < 1 || h.Active() < 1 {
		select {
		case o := <-done:
			t.Fatalf("the call ended before the revocation: %+v %v", o.res.Error, o.err)
		case <-time.After(time.Millisecond):
		}
	}
	if _, _, err := st.MintToken(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		t.Fatalf("the call ended when another token was minted: %+v %v", o.res.Error, o.err)
	case <-time.After(4 * revocationQuick):
	}
	revokedAt := time.Now()
	if err := st.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	o := <-done
	want := "token revoked: the agent token this call was made with (ID " + info.ID + ") was revoked while the tool ran"
	if o.err != nil || o.res.OK || o.res.Error == nil || o.res.Error.Kind != KindDenied || !strings.Contains(o.res.Error.Message, want) {
		t.Fatalf("the running call of a revoked token, the watch's period two minutes: %+v %v, %v after the revocation; want denied at the cards generation's move: %s", o.res.Error, o.err, time.Since(revokedAt), want)
	}
}

// TestRevokedTokenWithholdsHeldLogs: a revoked token's running call that a
// middleware component watches (its log lines held for the component,
// a591ba2) ends denied with none of the tool's lines: not in the result,
// and not given to the caller's OnLog after the chain. The tool (go/leaky)
// logs a line and then waits on a probe that answers only once the caller
// saw a line, which a held line never is.
func TestRevokedTokenWithholdsHeldLogs(t *testing.T) {
	t.Parallel()
	fetched := make(chan struct{}, 1)
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched <- struct{}{}
		<-r.Context().Done()
	}), "probe.example")
	u, _ := url.Parse(srv.URL)
	const body = `version = 1
[tools.leaky]
path = %q
timeout_ms = 60000
http_allow = ["probe.example"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]
[middleware.dlp]
path = %q
[[middleware]]
use = "dlp"
[agents.a]
tools = ["leaky"]
grants = ["tool:invoke leaky --...", "network:connect *"]
`
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(body, testkit.Component(t, "go/leaky"), u.Port(), ca, testkit.Middleware(t, "dlp")),
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: 10 * time.Millisecond, Resolver: testkit.Loopback("probe.example")})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, info, err := st.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var live []string
	done := make(chan Result, 1)
	go func() {
		res, err := h.Call(ctx, Call{Agent: "a", Tool: "leaky", Credential: TokenCredential(tok),
			Input: `{"log":["internal-XYZ"],"probe":"https://probe.example:` + u.Port() + `/","output":"x"}`,
			OnLog: func(e LogEntry) { mu.Lock(); live = append(live, e.Message); mu.Unlock() }})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case <-fetched: // the line is logged, and the tool waits
	case res := <-done:
		t.Fatalf("the call ended before the tool fetched the probe: %+v", res.Error)
	}
	if err := st.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	var res Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call of a revoked token still ran 30 s after the revocation")
	}
	mu.Lock()
	defer mu.Unlock()
	if res.OK || res.Error == nil || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, "token revoked") || len(res.Logs) != 0 || len(live) != 0 {
		t.Fatalf("the revoked call: %+v, logs %+v, OnLog saw %q; want denied naming the token and no line anywhere", res.Error, res.Logs, live)
	}
}
