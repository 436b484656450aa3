package session

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/store"
)

// openCounter is a store that counts the sessions read from it
// (OpenSession: what a call does when its session is not in the gate's
// cache).
type openCounter struct {
	*store.DB
	opens atomic.Int64
}

func (o *openCounter) OpenSession(ctx context.Context, id, agent string, initial boundary.Boundary) (store.Session, bool, error) {
	o.opens.Add(1)
	return o.DB.OpenSession(ctx, id, agent, initial)
}

// TestSessionCacheKeptAcrossOtherWrites: a call reads its session from
// the store once and keeps it while no session changes, whatever else is
// written (a rate-limit take, an audit batch, a session's last use,
// another session opened: each moves SQLite's change counter, the store's
// Generation); a change to the session (a reset narrowing its boundary)
// is read by the next call.
func TestSessionCacheKeptAcrossOtherWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	_, st := newGate(t)
	oc := &openCounter{DB: st}
	g := &Gate{State: func(context.Context, *config.Config) (store.Store, error) { return oc, nil }, ErrState: errTestState}
	fetcher := config.Tool{Name: "fetcher", HTTPAllow: []string{"api.example.com"}}
	call := func() {
		t.Helper()
		c := &Call{Cfg: cfg, Agent: "b", ID: "s", Tool: &fetcher}
		if _, terr, err := g.Hold(ctx, c); terr != nil || err != nil {
			t.Fatalf("a network tool in b's session (network on): refusal %+v, err %v", terr, err)
		}
	}
	// The first call opens the session (its creation moves no
	// generation: no one can have kept a session that did not exist); the
	// second finds it kept.
	call()
	call()
	if n := oc.opens.Load(); n != 1 {
		t.Fatalf("the first two calls read their session %d times; want 1", n)
	}
	rate := store.Rate{Capacity: 100, Refill: 1, Interval: time.Second}
	for i := range 5 {
		g0, err := st.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Take(ctx, store.BucketKey{Agent: "b", Tool: "fetcher", Rule: "r"}, rate, 1, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := st.Journal().Append(store.AuditRecord{At: time.Now(), Kind: "test", Actor: "test", Agent: "b", Tool: "fetcher", Body: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)}); err != nil {
			t.Fatal(err)
		}
		if err := st.Journal().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.TouchSession(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.OpenSession(ctx, "other"+string(rune('0'+i)), "b", Initial(cfg, "b")); err != nil {
			t.Fatal(err)
		}
		if g1, err := st.Generation(ctx); err != nil || g1 == g0 {
			t.Fatalf("the writes did not move the store's Generation (%d, %v): the test shows nothing", g1, err)
		}
		call()
	}
	if n := oc.opens.Load(); n != 1 {
		t.Fatalf("after rate-limit takes, audit batches, another session's opening and the session's use, calls read their session %d times in all; want it kept (1)", n)
	}
	// The operator narrows the session: network off. The next call reads
	// it again and is refused.
	if _, err := st.ResetSession(ctx, "s", boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted}, "cli:root"); err != nil {
		t.Fatal(err)
	}
	c := &Call{Cfg: cfg, Agent: "b", ID: "s", Tool: &fetcher}
	if _, terr, err := g.Hold(ctx, c); err != nil || structuredReason(terr) != boundary.ReasonBoundaryRequired {
		t.Fatalf("a network tool after the session's reset to network off: refusal %+v, err %v; want sandbox_boundary_required", terr, err)
	}
	if n := oc.opens.Load(); n != 2 {
		t.Fatalf("the call after the reset read its session %d times in all; want 2", n)
	}
}
