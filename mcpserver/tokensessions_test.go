package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// aliceNoBoundary is an agents environment where alice may read anything
// her session's boundary allows (fs:read /**) and asks for more with
// request_sandbox_boundary, yet starts with no filesystem at all: what she
// reads is what a human widened her session's boundary to. dir holds f.txt
// ("file body").
func aliceNoBoundary(t *testing.T) (*agentsEnv, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("file body"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newAgentsEnv(t, `
[agents.alice]
tools = ["fs_read", "session_open", "request_sandbox_boundary"]
grants = ["tool:invoke fs_read --...", "tool:invoke session_open --...", "tool:invoke request_sandbox_boundary --...", "fs:read /**"]
`)
	return e, dir
}

// widen is a human widening session id's boundary to read dir (a boundary
// request, approved: what request_sandbox_boundary and the inbox do).
func widen(t *testing.T, e *agentsEnv, id, dir string) {
	t.Helper()
	x := fmt.Appendf(nil, `{"filesystem":{"entries":[{"path":%q,"access":"read","scope":"subtree"}]}}`, dir)
	r, _, err := e.st.RequestBoundary(context.Background(), id, "widen-1", x, "token A's work reads there", time.Time{}, 0)
	if err != nil {
		t.Fatalf("request on %s: %v", id, err)
	}
	if _, _, err := e.st.SettleBoundaryRequest(context.Background(), r.Handle, boundary.Allow(), "operator:test"); err != nil {
		t.Fatalf("settling %s: %v", r.Handle, err)
	}
}

// rawLegacy sends one request of a 2025-11-25 session (sid, "" for none)
// with token tok and returns the status and body.
func rawLegacy(t *testing.T, base, method, tok, sid, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, base+Path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", legacyProtocol)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if method == http.MethodGet && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "" // the session's open stream: its being served is the answer
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLegacySessionBoundToToken: a 2025-11-25 session (Mcp-Session-Id) is
// bound to the token whose initialize opened it, not only to its agent.
// A second token of the same agent (one handed to a less trusted
// sub-agent) that learns the session's ID cannot post in it, open its
// stream or end it, and so cannot act under the boundary a human widened
// for that session: every method gets the very answer a session ID that
// never existed gets (404, the same body: no oracle). The first token
// goes on in its session; the second's own session has only the agent's
// initial boundary.
func TestLegacySessionBoundToToken(t *testing.T) {
	t.Parallel()
	e, dir := aliceNoBoundary(t)
	srv := e.httpServer(HTTPOptions{})
	tokA, _ := e.token("alice")
	tokB, _ := e.token("alice")
	args, _ := json.Marshal(map[string]any{"path": filepath.Join(dir, "f.txt")})
	readCall := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_read","arguments":` + string(args) + `}}`

	code, sidA := initializeRaw(t, http.DefaultClient, srv.URL, tokA)
	if code != http.StatusOK || sidA == "" {
		t.Fatalf("token A's initialize: %d %q", code, sidA)
	}
	if code, body := rawLegacy(t, srv.URL, http.MethodPost, tokA, sidA, readCall); code != http.StatusOK || !strings.Contains(body, "sandbox_boundary_required") {
		t.Fatalf("token A before the widening: %d %s", code, body)
	}
	widen(t, e, sidA, dir)
	if code, body := rawLegacy(t, srv.URL, http.MethodPost, tokA, sidA, readCall); code != http.StatusOK || !strings.Contains(body, "file body") {
		t.Fatalf("token A in its widened session: %d %s", code, body)
	}

	const madeUp = "made-up-session"
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		body := ""
		if m == http.MethodPost {
			body = readCall
		}
		wantCode, want := rawLegacy(t, srv.URL, m, tokB, madeUp, body)
		if wantCode != http.StatusNotFound {
			t.Fatalf("%s on a made-up session: %d %s, want 404", m, wantCode, want)
		}
		code, got := rawLegacy(t, srv.URL, m, tokB, sidA, body)
		if code != wantCode || got != want {
			t.Errorf("token B on token A's session, %s: %d %q; a session that never existed gets %d %q", m, code, got, wantCode, want)
		}
	}
	// Token B's DELETE ended nothing: A's session and its boundary hold.
	if code, body := rawLegacy(t, srv.URL, http.MethodPost, tokA, sidA, readCall); code != http.StatusOK || !strings.Contains(body, "file body") {
		t.Errorf("token A after token B's attempts: %d %s", code, body)
	}
	// Token B's own session starts from the agent's boundary.
	code, sidB := initializeRaw(t, http.DefaultClient, srv.URL, tokB)
	if code != http.StatusOK || sidB == "" {
		t.Fatalf("token B's initialize: %d %q", code, sidB)
	}
	if code, body := rawLegacy(t, srv.URL, http.MethodPost, tokB, sidB, readCall); code != http.StatusOK || !strings.Contains(body, "sandbox_boundary_required") {
		t.Errorf("token B in its own session: %d %s", code, body)
	}
	// And A's token on B's session is refused the same way.
	if code, body := rawLegacy(t, srv.URL, http.MethodPost, tokA, sidB, readCall); code != http.StatusNotFound {
		t.Errorf("token A on token B's session: %d %s, want 404", code, body)
	}
}

// TestDefaultSessionPerToken: a 2026-07-28 call that names no session
// handle runs in the default session of its token, not in one all of the
// agent's tokens share. A boundary a human widened for token A's
// handle-less calls (request_sandbox_boundary, approved) is not inherited
// by token B's handle-less calls, which start from the agent's initial
// boundary and have their own to widen; A keeps its widening.
func TestDefaultSessionPerToken(t *testing.T) {
	t.Parallel()
	e, dir := aliceNoBoundary(t)
	srv := e.httpServer(HTTPOptions{})
	tokA, idA := e.token("alice")
	tokB, idB := e.token("alice")
	ctx := context.Background()
	connect := func(tok string) *mcp.ClientSession {
		t.Helper()
		cs, err := e.httpClientModern(srv.URL, bearer(tok), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	a, b := connect(tokA), connect(tokB)
	read := func(cs *mcp.ClientSession) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": filepath.Join(dir, "f.txt")}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(a); !r.IsError || !strings.Contains(text(r), "sandbox_boundary_required") {
		t.Fatalf("token A before any widening: %s", text(r))
	}
	// Token A asks, in its default session; a human approves.
	x := map[string]any{"filesystem": map[string]any{"entries": []any{map[string]any{"path": dir, "access": "read", "scope": "subtree"}}}}
	r, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "request_sandbox_boundary", Arguments: map[string]any{"id": "read-dir", "expansion": x, "justification": "token A's work reads there"}})
	if err != nil {
		t.Fatal(err)
	}
	handle, _ := r.Meta[MetaApproval].(string)
	if !r.IsError || !strings.HasPrefix(handle, "bnd_") {
		t.Fatalf("request_sandbox_boundary: %s (_meta %v)", text(r), r.Meta)
	}
	if _, err := e.host.Decide(ctx, handle, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatalf("approving %s: %v", handle, err)
	}
	if r := read(a); r.IsError || !strings.Contains(text(r), "file body") {
		t.Fatalf("token A after the widening: %s", text(r))
	}
	if r := read(b); !r.IsError || !strings.Contains(text(r), "sandbox_boundary_required") {
		t.Errorf("token B, naming no session, inherits the boundary a human widened for token A's: %s", text(r))
	}
	if r := read(a); r.IsError || !strings.Contains(text(r), "file body") {
		t.Errorf("token A after token B's call: %s", text(r))
	}
	// What an operator sees: each token's default session, by the token's
	// ID (never its secret), the widening in A's only; the agent's own
	// default (an embedder's calls without a credential) untouched.
	for _, c := range []struct {
		id        string
		revisions int
	}{{"default-alice/token:" + idA, 2}, {"default-alice/token:" + idB, 1}} {
		info, err := e.host.Session(ctx, c.id)
		if err != nil || info.Agent != "alice" || len(info.Revisions) != c.revisions || strings.Contains(c.id, tokA) || strings.Contains(c.id, tokB) {
			t.Errorf("session %s: %d revisions, want %d (%+v, %v)", c.id, len(info.Revisions), c.revisions, info, err)
		}
	}
	if _, err := e.host.Session(ctx, maiden.DefaultSession("alice")); !errors.Is(err, maiden.ErrUnknownSession) {
		t.Errorf("the agent's credential-less default session was used: %v", err)
	}
}
