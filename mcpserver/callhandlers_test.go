package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallHandlers: a session's DELETE cancels that session's handlers
// only; Drain sees the watches of the handlers that have one, and waits
// until every handler returned, or says how many still run when its
// context ends.
func TestCallHandlers(t *testing.T) {
	t.Parallel()
	var hs callHandlers
	cancelled := map[string]int{}
	add := func(session, name string) (*callHandler, func()) {
		return hs.add(session, func() { cancelled[name]++ })
	}
	a1, removeA1 := add("A", "a1")
	_, removeA2 := add("A", "a2")
	b1, removeB1 := add("B", "b1")
	_, removeS := add("", "stdio")
	if n := hs.cancelSession("A"); n != 2 || cancelled["a1"] != 1 || cancelled["a2"] != 1 || cancelled["b1"] != 0 || cancelled["stdio"] != 0 {
		t.Fatalf("cancelSession(A) = %d, cancelled %v; want a1 and a2 only", n, cancelled)
	}
	if n := hs.cancelSession(""); n != 0 || cancelled["stdio"] != 0 {
		t.Errorf("the empty session cancelled %d handlers", n)
	}
	w := &approvalWatch{}
	hs.setWatch(b1, w)
	if ws := hs.watches(); len(ws) != 1 || ws[0] != w {
		t.Errorf("watches = %v, want b1's", ws)
	}
	_ = a1
	removeA1()
	removeA2()
	if n := hs.cancelSession("A"); n != 0 {
		t.Errorf("a removed session still has %d handlers", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if n := hs.waitIdle(ctx); n != 2 {
		t.Errorf("waitIdle with two handlers running = %d, want 2 when ctx ends", n)
	}
	done := make(chan int)
	go func() { done <- hs.waitIdle(context.Background()) }()
	removeB1()
	removeS()
	if n := <-done; n != 0 {
		t.Errorf("waitIdle = %d after every handler returned", n)
	}
}

// TestDrainAnswersWaitingCallsPending: Drain ends a call's wait for a human
// with the pending result (its request ID, the request left for an
// operator) while the client's connection and context stay as they are, and
// returns 0 once no call is in flight. (cmd/maiden's
// TestServeStopAnswersWaitingCallsPending stops the whole server, whose
// ending contexts answer the call too: it stayed green with Drain's watches
// gone.)
func TestDrainAnswersWaitingCallsPending(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	var prog progressLog
	cs := e.client(legacyProtocol, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler})
	p := &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")}
	p.SetProgressToken("drain")
	ch := callAsync(context.Background(), cs, p)
	// The event waited for: the call told its client it waits (its watch
	// began), so Drain finds it waiting rather than about to.
	waitFor(t, 30*time.Second, func() bool { _, m := prog.find(waitingRE); return m != nil })
	req := e.pendingOne()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n := e.server.Drain(ctx); n != 0 {
		t.Fatalf("Drain left %d calls in flight", n)
	}
	o := recv(t, ch, 10*time.Second)
	if o.err != nil {
		t.Fatalf("the waiting call: %v", o.err)
	}
	checkPending(t, o.res, req.ID, "")
	if !strings.Contains(text(o.res), "the server is stopping") {
		t.Errorf("the pending text does not say the server is stopping: %q", text(o.res))
	}
	if s := e.state(req.ID); s != "pending" {
		t.Errorf("after Drain the request is %s, want pending for an operator", s)
	}
}
