package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRevokedTokenWaitingCallDoesNotRun: a call of token A waits for a
// human's approval over HTTP; the operator revokes token A (the store
// opened a second time, as maiden agents revoke-token does from another
// process); the human then approves. The call must not run: it ends
// denied, naming the revoked token, the counter server the tool fetches
// sees no request, the approval is left unconsumed and the audit trail
// records the refusal. Another token of the same agent is unaffected.
func TestRevokedTokenWaitingCallDoesNotRun(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(filepath.Dir(e.cfg), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := store.TokenID(e.token)

	cs := e.client(legacyProtocol, nil)
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	req := e.pendingOne()
	stillWaiting(t, ch, 200*time.Millisecond)
	if err := st.RevokeToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.decide(req.ID, true, "looks fine")
	o := recv(t, ch, 20*time.Second)
	if o.err != nil {
		t.Fatalf("the waiting call of a revoked token: %v", o.err)
	}
	if !o.res.IsError || o.res.Meta[MetaErrorKind] != "denied" || !strings.Contains(text(o.res), "token revoked") || !strings.Contains(text(o.res), id) {
		t.Fatalf("the waiting call of a revoked token, approved after the revocation: %q (isError %v, _meta %v); want denied naming the revoked token %s",
			text(o.res), o.res.IsError, o.res.Meta, id)
	}
	// The call has ended: a fetch of the tool's would have reached the
	// counter before its result did.
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("the tool ran %d times for a revoked token", n)
	}
	if s := e.state(req.ID); s != "approved" {
		t.Errorf("the approval is %s after a call that did not run, want approved (unconsumed)", s)
	}
	if !refusedInTrail(t, e.host, "fetcher", "token revoked") {
		t.Errorf("no call-refused record naming the revoked token in the audit trail")
	}
	// The revoked token's next request is refused at the door, as before.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err == nil {
		t.Error("a revoked token's session still takes calls")
	}
	// A valid token of the same agent waits, is approved and runs.
	tokB, _, err := st.MintToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.httpClientEra(e.srv.URL, bearer(tokB), legacyProtocol, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ch = callAsync(ctx, b, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("b")})
	var reqB maiden.ApprovalRequest
	waitFor(t, 30*time.Second, func() bool {
		list, err := e.host.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			if r.ID != req.ID {
				reqB = r
				return true
			}
		}
		return false
	})
	e.decide(reqB.ID, true, "")
	recv(t, ch, 20*time.Second).ok(t, "200 hit 1")
}

// TestRevokedTokenWaitEndsUnanswered: a call of token A waits for a
// human's approval over HTTP; the operator revokes token A from another
// process (a second store over the same file, as maiden agents
// revoke-token) and nobody answers. The call stops waiting at the next
// poll of the store (the default ApprovalPoll, 250 ms; the wait is a
// minute) and its client is told it was denied, naming the revoked token;
// the tool never runs, the request stays pending for the human, and the
// audit trail records the refusal.
func TestRevokedTokenWaitEndsUnanswered(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(filepath.Dir(e.cfg), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := store.TokenID(e.token)

	cs := e.client(legacyProtocol, nil)
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	req := e.pendingOne()
	if err := st.RevokeToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	o := recv(t, ch, 20*time.Second)
	if o.err != nil {
		t.Fatalf("the waiting call of a revoked token: %v", o.err)
	}
	if !o.res.IsError || o.res.Meta[MetaErrorKind] != "denied" || !strings.Contains(text(o.res), "token revoked") || !strings.Contains(text(o.res), id) {
		t.Fatalf("the waiting call of a revoked token, nobody having answered: %q (isError %v, _meta %v); want denied naming the revoked token %s",
			text(o.res), o.res.IsError, o.res.Meta, id)
	}
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("the tool ran %d times for a revoked token", n)
	}
	if s := e.state(req.ID); s != "pending" {
		t.Errorf("the approval request is %s after its caller stopped waiting, want pending (for the human)", s)
	}
	if !refusedInTrail(t, e.host, "fetcher", "token revoked") {
		t.Errorf("no call-refused record naming the revoked token in the audit trail")
	}
}

// TestRemovedAgentWaitingCallDoesNotRun: a reload that removes the agent
// from agent.toml while its call waits for a human: approved afterwards,
// the call ends denied naming the removed agent, and the tool never runs.
func TestRemovedAgentWaitingCallDoesNotRun(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	ctx := context.Background()
	cs := e.client(legacyProtocol, nil)
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	req := e.pendingOne()

	b, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.cfg, []byte(strings.Replace(string(b), "[agents.alice]", "[agents.bob]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.host.SetConfig(cfg)
	if _, err := e.server.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.decide(req.ID, true, "")
	// The client may see the denial, or lose its session first: the
	// reload's list_changed ended its GET stream, whose token names an
	// agent no longer declared (TestRevokedTokenStreamEnds). Either way
	// the server's call ends denied, as the audit trail records.
	const why = `agent removed: agent "alice" was removed`
	if o := recv(t, ch, 20*time.Second); o.err == nil && (!o.res.IsError || o.res.Meta[MetaErrorKind] != "denied" || !strings.Contains(text(o.res), why)) {
		t.Fatalf("the waiting call of a removed agent, approved after the reload: %q (isError %v, _meta %v)", text(o.res), o.res.IsError, o.res.Meta)
	}
	waitFor(t, 20*time.Second, func() bool { return e.ended.Load() == 1 })
	// The call has ended: a fetch of the tool's would have reached the
	// counter before then.
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("the tool ran %d times for an agent agent.toml no longer declares", n)
	}
	if !refusedInTrail(t, e.host, "fetcher", "agent removed: agent") {
		t.Errorf("no call-refused record naming the removed agent in the audit trail")
	}
}

// refusedInTrail reports whether the audit trail holds a call-refused
// record of tool whose body contains why, and that no call of tool was
// admitted.
func refusedInTrail(t *testing.T, h *maiden.Host, tool, why string) bool {
	t.Helper()
	recs, err := h.AuditTail(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, r := range recs {
		if r.Kind == "call-admitted" && r.Tool == tool {
			t.Errorf("a call-admitted record for a call that must not run: %s", r.Body)
		}
		if r.Kind == "call-refused" && r.Tool == tool && strings.Contains(string(r.Body), why) {
			refused = true
		}
	}
	return refused
}

// TestRevokedTokenBoundaryRequestRefused: token A's request_sandbox_boundary
// waits for a human; token A is revoked; the human approves. The call ends
// denied naming the revoked token: the revoked client is not told its
// boundary was widened.
func TestRevokedTokenBoundaryRequestRefused(t *testing.T) {
	t.Parallel()
	e, dir := aliceNoBoundary(t)
	srv := e.httpServer(HTTPOptions{})
	tok, id := e.token("alice")
	ctx := context.Background()
	cs, err := e.httpClientEra(srv.URL, bearer(tok), legacyProtocol, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	x := map[string]any{"filesystem": map[string]any{"entries": []any{map[string]any{"path": dir, "access": "read", "scope": "subtree"}}}}
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "request_sandbox_boundary", Arguments: map[string]any{"id": "read-dir", "expansion": x, "justification": "reads there"}})
	var handle string
	waitFor(t, 30*time.Second, func() bool {
		list, err := e.host.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			handle = list[0].ID
		}
		return handle != ""
	})
	if err := e.st.RevokeToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.host.Decide(ctx, handle, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatalf("approving %s: %v", handle, err)
	}
	o := recv(t, ch, 20*time.Second)
	if o.err != nil {
		t.Fatalf("the waiting boundary request of a revoked token: %v", o.err)
	}
	if !o.res.IsError || o.res.Meta[MetaErrorKind] != "denied" || !strings.Contains(text(o.res), "token revoked") {
		out, _ := json.Marshal(o.res.StructuredContent)
		t.Fatalf("the boundary request of a revoked token, approved after the revocation: %q %s (isError %v); want denied naming the revoked token", text(o.res), out, o.res.IsError)
	}
}

// TestRevokedTokenStreamEnds: a 2025-11-25 session's GET stream, open
// while its token is revoked, ends at its next event instead of carrying
// it: the token was checked when the stream opened, and is checked again
// for each event.
func TestRevokedTokenStreamEnds(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, agentsTOML)
	srv := e.httpServer(HTTPOptions{})
	tok, id := e.token("alice")
	ctx := context.Background()
	code, sid := initializeRaw(t, http.DefaultClient, srv.URL, tok)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", code, sid)
	}
	if code, body := rawLegacy(t, srv.URL, http.MethodPost, tok, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", code, body)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+Path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("MCP-Protocol-Version", legacyProtocol)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// alice's tools change: the stream carries list_changed.
	reload := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(e.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.cfg, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(e.cfg)
		if err != nil {
			t.Fatal(err)
		}
		e.host.SetConfig(cfg)
		if _, err := e.server.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reload(`tools = ["echo", "cards_derive"`, `tools = ["echo", "logger", "cards_derive"`)
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended before the token was revoked")
			}
			seen = strings.Contains(l, "notifications/tools/list_changed")
		case <-deadline:
			t.Fatal("no list_changed on the stream of a valid token")
		}
	}
	if err := e.st.RevokeToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	reload(`tools = ["echo", "logger", "cards_derive"`, `tools = ["echo", "cards_derive"`)
	deadline = time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return // ended, carrying nothing more
			}
			if strings.Contains(l, "list_changed") {
				t.Fatalf("the stream of a revoked token carried an event: %s", l)
			}
		case <-deadline:
			t.Fatal("the stream of a revoked token is still open 10 s after its next event")
		}
	}
}
