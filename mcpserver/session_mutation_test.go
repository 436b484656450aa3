package mcpserver

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Who a call's session belongs to, the session bound and the static
// token, written when planted bugs in them left the package's own suite
// green (docs/security-tests.md, "Fourth pass: the inbox and mcpserver's
// authentication"), like front_mutation_test.go's.

// stdioClient serves agent over stdio on e's host (maiden serve -agent
// AGENT, another process over the same state store) and connects a client
// of protocol version to it; it returns the server too.
func stdioClient(t *testing.T, e *agentsEnv, agent, version string) (*Server, *mcp.ClientSession) {
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
		&mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return srv, cs
}

// TestStdioSessionIsTheProcess: a stdio client of the 2025-11-25 era runs
// its calls in a maiden session of its own process (Server.stdioSession),
// as an HTTP client runs them in its Mcp-Session-Id: a boundary a human
// widened for one stdio process's session is not another's, though both
// serve the same agent over the same store (not a default session the
// agent's stdio clients share, which outlives every process).
func TestStdioSessionIsTheProcess(t *testing.T) {
	t.Parallel()
	e, dir := aliceNoBoundary(t)
	ctx := context.Background()
	read := func(cs *mcp.ClientSession) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": filepath.Join(dir, "f.txt")}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, csA := stdioClient(t, e, "alice", legacyProtocol)
	_, csB := stdioClient(t, e, "alice", legacyProtocol)
	if r := read(csA); !r.IsError || !strings.Contains(text(r), "sandbox_boundary_required") {
		t.Fatalf("stdio client A before any widening: %s", text(r))
	}
	if info, err := e.host.Session(ctx, a.stdioSession); err != nil || info.Agent != "alice" {
		t.Fatalf("stdio client A's call did not run in its process's session %s: %+v %v", a.stdioSession, info, err)
	}
	widen(t, e, a.stdioSession, dir)
	if r := read(csA); r.IsError || !strings.Contains(text(r), "file body") {
		t.Errorf("stdio client A in its widened session: %s", text(r))
	}
	if r := read(csB); !r.IsError || !strings.Contains(text(r), "sandbox_boundary_required") {
		t.Errorf("stdio client B (another process of the same agent) after A's session was widened: isError %v %s, want sandbox_boundary_required", r.IsError, text(r))
	}
}

// TestStdioHandleNotAnotherAgents: the stdio front ends of two agents over
// one store are both the stdio credential; a session_open handle of one
// agent's stdio client named by the other's gets exactly the answer a
// handle that never existed gets (no oracle that it is a live session of
// another agent), as over HTTP.
func TestStdioHandleNotAnotherAgents(t *testing.T) {
	t.Parallel()
	e, dir := aliceReadsADir(t, `
[agents.bob]
tools = ["fs_read", "session_open"]
grants = ["tool:invoke fs_read --...", "tool:invoke session_open --...", "fs:read /**"]
`)
	ctx := context.Background()
	alice := stdioModern(t, e, "alice")
	bob := stdioModern(t, e, "bob")
	read := func(cs *mcp.ClientSession, handle string) string {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": filepath.Join(dir, "f.txt")},
			Meta: mcp.Meta{MetaSession: handle}})
		if err != nil {
			t.Fatal(err)
		}
		if !r.IsError {
			return "served: " + text(r)
		}
		return strings.ReplaceAll(text(r), handle, "ID")
	}
	own := openSession(t, alice)
	if got := read(alice, own); !strings.Contains(got, "file body") {
		t.Fatalf("alice in her own handle: %s", got)
	}
	unknown := read(bob, "ses_00000000000000000000000000000000")
	if got := read(bob, own); got != unknown || !strings.Contains(got, `no session "ID" of this agent`) {
		t.Errorf("bob's stdio client naming alice's stdio handle: %q; a handle that never existed gets %q", got, unknown)
	}
}

// TestLegacySessionEndsWithItsMCPSession: when a 2025-11-25 session ends
// (the client's DELETE), the maiden session of the same ID is ended too:
// its boundary stops applying and its secret material is dropped.
func TestLegacySessionEndsWithItsMCPSession(t *testing.T) {
	t.Parallel()
	e, dir := aliceReadsADir(t, "")
	srv := e.httpServer(HTTPOptions{})
	tok, _ := e.token("alice")
	ctx := context.Background()
	cs, err := e.httpClient(srv.URL, bearer(tok))
	if err != nil {
		t.Fatal(err)
	}
	sid := cs.ID()
	if r := call(t, cs, "fs_read", map[string]any{"path": filepath.Join(dir, "f.txt")}); r.IsError {
		t.Fatalf("a call in the session: %s", text(r))
	}
	if info, err := e.host.Session(ctx, sid); err != nil || !info.Ended.IsZero() {
		t.Fatalf("the maiden session of a live MCP session: %+v %v", info, err)
	}
	cs.Close() // DELETE
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.host.Session(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Ended.IsZero() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the maiden session %s was not ended within 20s of its MCP session's DELETE", sid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInitializesInFlightCountAgainstTheBound: an agent's places under
// MaxSessionsPerAgent are its open sessions and its initializes not yet
// answered, so a burst of initializes sent at once cannot open more
// sessions than the bound: with a bound of two, two in flight hold both
// places, a third is refused, another agent is not, and a place comes
// back when one of them ends.
func TestInitializesInFlightCountAgainstTheBound(t *testing.T) {
	t.Parallel()
	s := New(nil, nil)
	r1, ok1 := s.reserveSession("alice", 2)
	r2, ok2 := s.reserveSession("alice", 2)
	if !ok1 || !ok2 {
		t.Fatalf("two initializes of a bound of two: %v %v", ok1, ok2)
	}
	if r, ok := s.reserveSession("alice", 2); ok {
		r()
		t.Fatal("a third initialize while two are in flight, bound 2, was let through")
	}
	if r, ok := s.reserveSession("bob", 2); !ok {
		t.Fatal("bob refused while alice's initializes are in flight")
	} else {
		r()
	}
	r1()
	r3, ok := s.reserveSession("alice", 2)
	if !ok {
		t.Fatal("alice refused after one of her initializes ended")
	}
	r3()
	r2()
}

// TestStaticTokenComparedWhole: the static token (-auth-token-env) is
// compared whole, at /mcp and /metrics: a guess whose SHA-256 digest
// begins as the token's does is refused.
func TestStaticTokenComparedWhole(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	want := sha256.Sum256([]byte(token))
	var guess string
	for i := 0; guess == ""; i++ {
		g := fmt.Sprint("guess-", i)
		if d := sha256.Sum256([]byte(g)); d[0] == want[0] && d[1] == want[1] {
			guess = g
		}
	}
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	var scrapes atomic.Int64
	srv := e.httpServer(HTTPOptions{AuthToken: token, Metrics: countingMetrics(&scrapes)})
	if code, sid := initializeRaw(t, http.DefaultClient, srv.URL, guess); code != http.StatusForbidden {
		t.Errorf("initialize with %q, whose digest begins as the token's: %d (session %q), want 403", guess, code, sid)
	}
	if code, body := send(t, http.MethodGet, srv.URL+MetricsPath, "Authorization: Bearer "+guess); code != http.StatusForbidden {
		t.Errorf("/metrics with %q, whose digest begins as the token's: %d %q, want 403", guess, code, body)
	}
	if code, _ := initializeRaw(t, http.DefaultClient, srv.URL, token); code != http.StatusOK {
		t.Errorf("initialize with the token: %d, want 200", code)
	}
}
