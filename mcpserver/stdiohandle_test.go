package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioModern serves agent over stdio (maiden serve -agent AGENT) on e's
// host, a second front end over the same state store as the HTTP one, and
// connects a 2026-07-28 client to it.
func stdioModern(t *testing.T, e *agentsEnv, agent string) *mcp.ClientSession {
	t.Helper()
	srv := New(e.host, &Options{Agent: agent})
	if _, err := srv.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.RunStdio(ctx, inR, outW); outW.Close() }()
	t.Cleanup(func() { inW.Close(); cancel(); <-done })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "0"}, nil).Connect(ctx,
		&mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: ModernProtocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestStdioHandleNotAnotherCredentials: over stdio there is no token, and
// a 2026-07-28 request's _meta["maiden/session"] used to be held only to
// the agent and to "no credential", which every token's default session
// (default-AGENT/token:ID, its ID made of a token ID that is no secret) and
// every 2025-11-25 HTTP session is bound to. So a stdio client of the
// agent (a desktop agent, a sub-agent) named another principal's session
// and ran under the boundary a human widened for that token. The stdio
// front end is a credential of its own: such a name gets the answer an
// unknown handle gets, and stdio's own session_open handles still work.
func TestStdioHandleNotAnotherCredentials(t *testing.T) {
	t.Parallel()
	e, dir := aliceNoBoundary(t)
	srv := e.httpServer(HTTPOptions{})
	tokA, idA := e.token("alice")
	ctx := context.Background()
	path := filepath.Join(dir, "f.txt")
	read := func(cs *mcp.ClientSession, session string) *mcp.CallToolResult {
		t.Helper()
		p := &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": path}}
		if session != "" {
			p.Meta = mcp.Meta{MetaSession: session}
		}
		r, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Token A's default session (2026-07-28, naming no handle), widened
	// by a human.
	a, err := e.httpClientModern(srv.URL, bearer(tokA), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if r := read(a, ""); !r.IsError || !strings.Contains(text(r), "sandbox_boundary_required") {
		t.Fatalf("token A before the widening: %s", text(r))
	}
	defaultA := "default-alice/token:" + idA
	widen(t, e, defaultA, dir)
	if r := read(a, ""); r.IsError || !strings.Contains(text(r), "file body") {
		t.Fatalf("token A after the widening: %s", text(r))
	}
	// Token A's 2025-11-25 session, widened too.
	code, sidA := initializeRaw(t, http.DefaultClient, srv.URL, tokA)
	if code != http.StatusOK || sidA == "" {
		t.Fatalf("token A's initialize: %d %q", code, sidA)
	}
	args, _ := json.Marshal(map[string]any{"path": path})
	if code, body := rawLegacy(t, srv.URL, http.MethodPost, tokA, sidA, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_read","arguments":`+string(args)+`}}`); code != http.StatusOK || !strings.Contains(body, "sandbox_boundary_required") {
		t.Fatalf("token A's legacy session before the widening: %d %s", code, body)
	}
	widen(t, e, sidA, dir)

	s := stdioModern(t, e, "alice")
	const madeUp = "ses_00000000000000000000000000000000"
	unknown := read(s, madeUp)
	if !unknown.IsError {
		t.Fatalf("a made-up handle over stdio: %s", text(unknown))
	}
	for _, c := range []struct{ name, handle string }{
		{"token A's default session", defaultA},
		{"token A's 2025-11-25 session", sidA},
	} {
		r := read(s, c.handle)
		got := strings.ReplaceAll(text(r), c.handle, "ID")
		want := strings.ReplaceAll(text(unknown), madeUp, "ID")
		if !r.IsError || got != want || !strings.Contains(got, `no session "ID" of this agent`) {
			t.Errorf("stdio naming %s: answered %q; an unknown handle gets %q", c.name, got, want)
		}
	}
	// Stdio's own handle works, once a human widened it; a token cannot
	// name it.
	own := openSession(t, s)
	widen(t, e, own, dir)
	if r := read(s, own); r.IsError || !strings.Contains(text(r), "file body") {
		t.Errorf("stdio in its own widened session: %s", text(r))
	}
	if r := read(a, own); !r.IsError || !strings.Contains(text(r), "no session") {
		t.Errorf("token A naming stdio's handle: %s", text(r))
	}
	// Stdio naming none runs in a default of its own, not in token A's.
	if r := read(s, ""); !r.IsError || !strings.Contains(text(r), "sandbox_boundary_required") {
		t.Errorf("stdio naming no session: %s", text(r))
	}
}
