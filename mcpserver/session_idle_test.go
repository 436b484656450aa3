package mcpserver

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	maiden "github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestModernSessionHandleExpires: a 2026-07-28 client's
// _meta["maiden/session"] handle expires after -session-idle without a
// request naming it, as a legacy Mcp-Session-Id session does
// (ARCHITECTURE, "two protocol eras"): a handle idle past it is refused and
// its session ended, so a boundary an operator widened "for this session
// only" does not outlive the idle time the operator configured. A handle
// in use keeps its session.
func TestModernSessionHandleExpires(t *testing.T) {
	t.Parallel()
	e, dir := aliceReadsADir(t, "")
	idle := testkit.Slack(t, time.Second)
	srv := e.httpServer(HTTPOptions{SessionIdle: idle})
	tok, _ := e.token("alice")
	ctx := context.Background()
	modern, err := e.httpClientModern(srv.URL, bearer(tok), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer modern.Close()
	session := openSession(t, modern)
	read := func() *mcp.CallToolResult {
		t.Helper()
		r, err := modern.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": filepath.Join(dir, "f.txt")},
			Meta: mcp.Meta{MetaSession: session}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// In use: every request within the idle time keeps it.
	for range 3 {
		if r := read(); r.IsError {
			t.Fatalf("a handle in use was refused: %s", text(r))
		}
		time.Sleep(idle / 4) // a client's pause between requests
	}
	time.Sleep(idle + idle/2) // idle past the idle time
	if r := read(); !r.IsError || !strings.Contains(text(r), session) {
		t.Errorf("a handle idle past -session-idle (%v) was accepted: isError %v, %s", idle, r.IsError, text(r))
	}
	if info, err := e.host.Session(ctx, session); err != nil || info.Ended.IsZero() {
		t.Errorf("the idle session was not ended: %+v %v", info, err)
	}
}

// TestHandleIdleCountsUsesRecordedElsewhere: a handle's last use is the
// latest of its creation, its use in this process and the use the store
// holds (another instance sharing the store records its uses there,
// Host.TouchSession), so an instance that has not seen a handle (or has
// not seen it lately) does not end a session in use elsewhere; with no
// recent use anywhere, it is expired.
func TestHandleIdleCountsUsesRecordedElsewhere(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, "")
	s := e.server
	const idle = time.Hour
	s.handleIdle.Store(int64(idle))
	now := time.Now()
	old := now.Add(-3 * idle)
	ctx := context.Background()
	if s.handleExpired(ctx, "used-elsewhere", maiden.SessionInfo{Created: old, LastUsed: now.Add(-idle / 2)}) {
		t.Error("a handle the store says was used half an idle time ago expired")
	}
	if !s.handleExpired(ctx, "idle-everywhere", maiden.SessionInfo{Created: old, LastUsed: now.Add(-2 * idle)}) {
		t.Error("a handle unused anywhere for twice the idle time did not expire")
	}
	// Used here lately, though the store's record is old (it is written
	// at most once a minute): not expired.
	s.touchHandle(ctx, "used-here")
	if s.handleExpired(ctx, "used-here", maiden.SessionInfo{Created: old, LastUsed: old}) {
		t.Error("a handle used in this process just now expired")
	}
}

// TestHandleUsesBounded: an agent can open as many session handles as it
// likes and name each within the idle time; the uses this process keeps
// stay bounded (they were kept whole, and each touch past the bound then
// scanned them all under the lock every modern call takes), and a
// handle just named is still known as used.
func TestHandleUsesBounded(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, "")
	s := e.server
	s.handleIdle.Store(int64(time.Hour))
	ctx := context.Background()
	for i := range 3 * maxHandleUses {
		s.touchHandle(ctx, fmt.Sprintf("ses_%d", i))
	}
	s.handleMu.Lock()
	n := len(s.handleUsed)
	s.handleMu.Unlock()
	if n > maxHandleUses {
		t.Fatalf("%d handle uses kept after %d handles in use were named, want at most %d", n, 3*maxHandleUses, maxHandleUses)
	}
	last := fmt.Sprintf("ses_%d", 3*maxHandleUses-1)
	old := time.Now().Add(-3 * time.Hour)
	if s.handleExpired(ctx, last, maiden.SessionInfo{Created: old, LastUsed: old}) {
		t.Error("the handle named last expired")
	}
}
