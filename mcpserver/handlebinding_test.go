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

// TestModernHandleBoundToToken: a 2026-07-28 session handle is bound to
// the token that opened it (ARCHITECTURE, "two protocol eras"), not only
// to its agent. An agent given two tokens (one handed to a less trusted
// sub-agent) cannot use, with the second, a handle the first opened, and
// so inherit a boundary widened for the first's session: the answer is
// the one an unknown handle gets (no oracle). Each token's own handle
// works for it.
func TestModernHandleBoundToToken(t *testing.T) {
	t.Parallel()
	e, dir := aliceReadsADir(t, "")
	srv := e.httpServer(HTTPOptions{})
	tokA, _ := e.token("alice")
	tokB, _ := e.token("alice")
	ctx := context.Background()
	read := func(cs *mcp.ClientSession, session string) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": filepath.Join(dir, "f.txt")},
			Meta: mcp.Meta{MetaSession: session}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, err := e.httpClientModern(srv.URL, bearer(tokA), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := e.httpClientModern(srv.URL, bearer(tokB), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	handleA, handleB := openSession(t, a), openSession(t, b)
	if r := read(a, handleA); r.IsError || !strings.Contains(text(r), "file body") {
		t.Fatalf("token A in its own session: %s", text(r))
	}
	if r := read(b, handleB); r.IsError || !strings.Contains(text(r), "file body") {
		t.Fatalf("token B in its own session: %s", text(r))
	}
	const madeUp = "ses_00000000000000000000000000000000"
	unknown := read(b, madeUp)
	for _, c := range []struct {
		name   string
		cs     *mcp.ClientSession
		handle string
	}{{"token B naming A's handle", b, handleA}, {"token A naming B's handle", a, handleB}} {
		r := read(c.cs, c.handle)
		if !r.IsError {
			t.Errorf("%s: accepted: %s", c.name, text(r))
			continue
		}
		// The same words as for a handle that never existed, the ID aside.
		got := strings.ReplaceAll(text(r), c.handle, "ID")
		want := strings.ReplaceAll(text(unknown), madeUp, "ID")
		if got != want || !strings.Contains(got, `no session "ID" of this agent`) {
			t.Errorf("%s: answered %q; an unknown handle gets %q", c.name, got, want)
		}
	}
}

// TestMixedEraRequestRefused: the era of an HTTP request is decided once,
// from its headers: a request that carries a 2025-11-25 session's
// Mcp-Session-Id and names the sessionless protocol is refused (400, with
// what to drop), rather than leaving that session's boundary for the
// agent's default session. The session itself still works.
func TestMixedEraRequestRefused(t *testing.T) {
	t.Parallel()
	e, dir := aliceReadsADir(t, "")
	srv := e.httpServer(HTTPOptions{})
	tok, _ := e.token("alice")
	status, sid := initializeRaw(t, http.DefaultClient, srv.URL, tok)
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", status, sid)
	}
	args, _ := json.Marshal(map[string]any{"path": filepath.Join(dir, "f.txt")})
	post := func(header map[string]string, meta string) (int, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_read","arguments":` + string(args) + meta + `}}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	modernMeta := `,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + ModernProtocol + `","io.modelcontextprotocol/clientInfo":{"name":"mixed","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	for _, c := range []struct {
		name   string
		header map[string]string
		meta   string
	}{
		{"modern header and _meta", map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": ModernProtocol, "Mcp-Method": "tools/call", "Mcp-Name": "fs_read"}, modernMeta},
		{"modern _meta, no version header", map[string]string{"Mcp-Session-Id": sid}, modernMeta},
	} {
		code, body := post(c.header, c.meta)
		if code != http.StatusBadRequest || !strings.Contains(body, "Mcp-Session-Id") || !strings.Contains(body, "one protocol era") {
			t.Errorf("%s: %d %s", c.name, code, body)
		}
	}
	// The legacy session, asked in its own era, still answers.
	code, body := post(map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": legacyProtocol}, "")
	if code != http.StatusOK || !strings.Contains(body, "file body") {
		t.Errorf("the legacy session in its own era: %d %s", code, body)
	}
}
