package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSessionsOverMCP: which maiden session a tools/call runs in, over
// HTTP in both protocol eras (issue 14, K1). A boundary failure comes back
// as structuredContent (code, reason, requiredExpansion). On 2025-11-25
// each MCP session is its own maiden session; on 2026-07-28 a client names
// one from session_open in _meta["maiden/session"], another agent's ID or
// a made-up one is refused, and naming none runs in the agent's default
// session.
func TestSessionsOverMCP(t *testing.T) {
	t.Parallel()
	e, dir := aliceReadsADir(t, `
[agents.bob]
tools = ["fs_read", "session_open"]
grants = ["tool:invoke fs_read --...", "tool:invoke session_open --...", "fs:read /**"]
`)
	srv := e.httpServer(HTTPOptions{})
	aliceTok, _ := e.token("alice")
	bobTok, _ := e.token("bob")
	ctx := context.Background()
	read := func(cs *mcp.ClientSession, meta mcp.Meta) *mcp.CallToolResult {
		t.Helper()
		p := &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": filepath.Join(dir, "f.txt")}}
		if meta != nil {
			p.Meta = meta
		}
		r, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// 2025-11-25: the Mcp-Session-Id is the session.
	legacy, err := e.httpClient(srv.URL, bearer(aliceTok))
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	if r := read(legacy, nil); r.IsError || !strings.Contains(text(r), "file body") {
		t.Fatalf("alice reads inside her boundary: %s", text(r))
	}
	if _, err := e.host.Session(ctx, legacy.ID()); err != nil {
		t.Errorf("the MCP session %s is not a maiden session: %v", legacy.ID(), err)
	}
	bobLegacy, err := e.httpClient(srv.URL, bearer(bobTok))
	if err != nil {
		t.Fatal(err)
	}
	defer bobLegacy.Close()
	r := read(bobLegacy, nil)
	sc, _ := json.Marshal(r.StructuredContent)
	if !r.IsError || !strings.Contains(string(sc), `"code":"SANDBOX_COMMAND_EXECUTION_FAILED"`) || !strings.Contains(string(sc), `"requiredExpansion"`) {
		t.Errorf("bob outside his (empty) boundary: isError %v, structuredContent %s, text %s", r.IsError, sc, text(r))
	}

	// 2026-07-28: session_open, then _meta.
	modern, err := e.httpClientModern(srv.URL, bearer(aliceTok), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer modern.Close()
	session := openSession(t, modern)
	if r := read(modern, mcp.Meta{MetaSession: session}); r.IsError || !strings.Contains(text(r), "file body") {
		t.Errorf("alice in her opened session: %s", text(r))
	}
	info, err := e.host.Session(ctx, session)
	if err != nil || info.Agent != "alice" {
		t.Errorf("the opened session: %+v %v", info, err)
	}
	if r := read(modern, nil); r.IsError {
		t.Errorf("alice in her default session: %s", text(r))
	}
	bobModern, err := e.httpClientModern(srv.URL, bearer(bobTok), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bobModern.Close()
	for _, id := range []string{session, "ses_madeup"} {
		if r := read(bobModern, mcp.Meta{MetaSession: id}); !r.IsError || !strings.Contains(text(r), "no session") {
			t.Errorf("bob naming session %s: %s", id, text(r))
		}
	}
}

// aliceReadsADir is an agents environment where alice's boundary lets her
// read one directory, holding f.txt ("file body"), with fs_read and
// session_open bound, and more agents as declared; and the directory.
func aliceReadsADir(t *testing.T, more string) (*agentsEnv, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("file body"), 0o644); err != nil {
		t.Fatal(err)
	}
	return newAgentsEnv(t, `
[agents.alice]
tools = ["fs_read", "session_open"]
grants = ["tool:invoke fs_read --...", "tool:invoke session_open --...", "fs:read /**"]
[agents.alice.boundary]
fs = [{ path = "`+dir+`", access = "read", match = "subtree" }]
`+more), dir
}

// openSession calls session_open over a 2026-07-28 client and returns the
// session's ID (a handle for _meta["maiden/session"]).
func openSession(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	opened, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "session_open", Arguments: map[string]any{}})
	if err != nil || opened.IsError {
		t.Fatalf("session_open: %v %s", err, text(opened))
	}
	var o struct{ Session string }
	if err := json.Unmarshal([]byte(text(opened)), &o); err != nil || !strings.HasPrefix(o.Session, "ses_") {
		t.Fatalf("session_open answered %s", text(opened))
	}
	return o.Session
}
