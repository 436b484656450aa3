package mcpserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPClientCancelStopsTool: the Go SDK's client, when the caller's
// context ends, first closes the request's POST and only then sends
// notifications/cancelled. The cancellation must still reach the running
// tool (it was dropped as a cancellation of a request no longer in flight,
// and the tool ran on to its deadline).
func TestHTTPClientCancelStopsTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 60000"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 2})
	srv := e.httpServer(HTTPOptions{})
	cs, err := e.httpClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{}})
		done <- err
	}()
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call returned %v", err)
	}
	start := time.Now()
	waitFor(t, 10*time.Second, func() bool { return e.host.Active() == 0 })
	t.Logf("the tool stopped %v after the client cancelled", time.Since(start).Round(time.Millisecond))
	if n := e.server.httpCalls.len(); n != 0 {
		t.Errorf("%d requests still tracked", n)
	}
}

// TestOrphans: an orphan is kept for its ttl only, taken once, and their
// number is bounded.
func TestOrphans(t *testing.T) {
	t.Parallel()
	var f inflight
	now := time.Now()
	k := func(i int) callKey { return callKey{session: "s", id: mustID(t, int64(i))} }
	f.begin(k(1))
	f.end(k(1), now, time.Minute)
	if f.len() != 0 || !f.takeOrphan(k(1), now.Add(time.Second), time.Minute) || f.takeOrphan(k(1), now, time.Minute) {
		t.Fatal("an orphan is taken once")
	}
	f.begin(k(2))
	f.end(k(2), now, time.Minute)
	if f.takeOrphan(k(2), now.Add(2*time.Minute), time.Minute) {
		t.Error("an orphan past its ttl was taken")
	}
	// Answered requests do not become orphans.
	f.begin(k(3))
	f.finish(k(3))
	f.end(k(3), now, time.Minute)
	if f.takeOrphan(k(3), now, time.Minute) {
		t.Error("an answered request became an orphan")
	}
	for i := range maxOrphans + 10 {
		f.begin(k(100 + i))
		f.end(k(100+i), now.Add(time.Duration(i)*time.Millisecond), time.Hour)
	}
	if n := len(f.orphans); n > maxOrphans {
		t.Errorf("%d orphans kept, at most %d", n, maxOrphans)
	}
	if f.takeOrphan(k(100), now, time.Hour) || !f.takeOrphan(k(100+maxOrphans+9), now, time.Hour) {
		t.Error("the oldest orphans go first")
	}
}

func mustID(t *testing.T, n int64) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(float64(n))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestOrphansCostNoScan: making an orphan costs the same whether none or
// maxOrphans are held. Each made one scanned every orphan held, so one
// POST of a 1 MiB batch (24,000 requests, orphans all when the SDK refuses
// the batch or the client closes the POST) cost 3.3 s of CPU, partly
// under the lock every HTTP request takes. Measured in the process's CPU
// time, as a ratio, so a loaded machine slows both sides alike; the full
// side stops once it has cost the bound, so the test ends either way.
func TestOrphansCostNoScan(t *testing.T) {
	const n = 50000
	k := func(i int) callKey { return callKey{session: "s", id: mustID(t, int64(i))} }
	now := time.Now()
	// Few held: each orphan is taken as soon as it is made.
	var few inflight
	start := cpuclock.Now()
	for i := range n {
		few.begin(k(i))
		few.end(k(i), now, time.Hour)
		few.takeOrphan(k(i), now, time.Hour)
	}
	base := cpuclock.Now() - start
	if base == 0 {
		t.Skip("no CPU clock here")
	}
	// maxOrphans held: each one made drops the oldest.
	var full inflight
	for i := range maxOrphans {
		full.begin(k(i))
		full.end(k(i), now, time.Hour)
	}
	const bound = 20
	start = cpuclock.Now()
	for i := range n {
		full.begin(k(maxOrphans + i))
		full.end(k(maxOrphans+i), now, time.Hour)
		full.takeOrphan(k(1<<40+i), now, time.Hour) // as above: a lookup that finds nothing
		if i%1000 == 999 {
			if spent := cpuclock.Now() - start; spent > bound*base {
				t.Fatalf("making %d orphans with %d held cost %v of CPU, more than %dx the %v of %d with none held: each one made looks at the orphans held", i+1, maxOrphans, spent, bound, base, n)
			}
		}
	}
	if len(full.orphans) != maxOrphans || len(full.order) > 2*maxOrphans {
		t.Errorf("%d orphans and %d entries in their order held, want %d and at most %d", len(full.orphans), len(full.order), maxOrphans, 2*maxOrphans)
	}
	t.Logf("CPU: %v with none held, %v with %d held", base, cpuclock.Now()-start, maxOrphans)
}
