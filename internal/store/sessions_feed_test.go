package store

import (
	"context"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/pgtest"
)

// TestPostgresSessionsGenerationKinds: while no session changes,
// SessionsGeneration stays put and reads nothing from the database,
// whatever else other instances write (a grant, a token, a rate-limit
// take, audit records ingested, a session's last use, a new session,
// bound to a credential (session_open's) or not: no instance can keep a
// session that did not exist), so a call in a session makes no round trip
// for it; a session's reset, a boundary
// request and its settlement, and its end each move it. (What moves it
// here is the notifications' kinds; the feed's counter read every
// feedSync, when it finds a change whose notification has not come yet,
// moves both epochs, which the test keeps out of its minute.)
func TestPostgresSessionsGenerationKinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	waitTrusted(t, b)
	if _, _, err := a.OpenSession(ctx, "s1", "x", workBoundary()); err != nil {
		t.Fatal(err)
	}
	// B's feed reads the counter next in a minute: a read that found a
	// grant committed and its notification still on the way would move
	// both epochs (the safe fallback), which this test is not about.
	b.pg.feed.syncExtra.Store(int64(time.Minute))
	holdTrust(t, b)
	g0, err := b.SessionsGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reads := b.pg.genReads.Load()
	rate := Rate{Capacity: 100, Refill: 1, Interval: time.Second}
	for i := range 10 {
		if _, err := a.Grant(ctx, "x", spec(t, "tool:invoke t")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.MintToken(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.Take(ctx, BucketKey{"x", "t", "r"}, rate, 1, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := a.Journal().Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
		if err := a.Journal().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.TouchSession(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.OpenSession(ctx, "new"+string(rune('a'+i)), "x", workBoundary()); err != nil {
			t.Fatal(err)
		}
		if ss, _, err := a.OpenSessionWithin(ctx, "", "x", "token:0123456789abcdef", workBoundary(), 100); err != nil || ss.Credential == "" {
			t.Fatalf("a new bound session: %+v %v", ss, err)
		}
		if g, err := b.SessionsGeneration(ctx); err != nil || g != g0 {
			t.Fatalf("after a grant, a token, a rate-limit take, an audit batch, a session's use and a new session (bound or not), B's SessionsGeneration %d -> %d (%v): B's sessions were invalidated", g0, g, err)
		}
	}
	if n := b.pg.genReads.Load() - reads; n != 0 {
		t.Fatalf("B read the generation from the database %d times while no session changed", n)
	}
	moves := []struct {
		what string
		do   func() error
	}{
		{"a reset", func() error { _, err := a.ResetSession(ctx, "s1", workBoundary(), "cli:root"); return err }},
		{"a boundary request", func() error {
			_, _, err := a.RequestBoundary(ctx, "s1", "c1", expansion("/srv/other", "read", "exact"), "needs it", time.Now().Add(time.Hour), 10)
			return err
		}},
		{"its settlement", func() error {
			rs, err := a.BoundaryRequestsOf(ctx, "s1")
			if err != nil || len(rs) != 1 {
				t.Fatalf("the boundary request: %v, %v", rs, err)
			}
			_, _, err = a.SettleBoundaryRequest(ctx, rs[0].Handle, boundary.Allow(), "operator:ann")
			return err
		}},
		{"the session's end", func() error { return a.EndSession(ctx, "s1") }},
	}
	for _, m := range moves {
		before, err := b.SessionsGeneration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.do(); err != nil {
			t.Fatalf("%s: %v", m.what, err)
		}
		if g, err := b.SessionsGeneration(ctx); err != nil || g == before {
			t.Fatalf("%s by A did not move B's SessionsGeneration (%d, %v) by the time it returned", m.what, g, err)
		}
	}
}

// TestPostgresSessionEndThenCallElsewhere: a session an instance keeps
// is never stale once another instance's change to it has returned. B
// reads session s as the call path does (keyed on SessionsGeneration,
// read with no round trip); A ends it; right after A returns, B's
// SessionsGeneration has moved, so B's next call reads the session again
// and finds it ended. Many rounds, so that a notification that merely
// tends to arrive first would lose some.
func TestPostgresSessionEndThenCallElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	waitTrusted(t, a)
	waitTrusted(t, b)
	for round := range 20 {
		id := "s" + string(rune('a'+round))
		if _, _, err := b.OpenSession(ctx, id, "x", workBoundary()); err != nil {
			t.Fatal(err)
		}
		gB, err := b.SessionsGeneration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.EndSession(ctx, id); err != nil {
			t.Fatal(err)
		}
		if g, err := b.SessionsGeneration(ctx); err != nil || g == gB {
			t.Fatalf("round %d: right after A ended session %s, B's SessionsGeneration is still %d (%v): B would run a call in the ended session", round, id, g, err)
		}
		if s, err := b.Session(ctx, id); err != nil || s.Live() {
			t.Fatalf("round %d: B's session after A ended it: %+v, %v", round, s, err)
		}
	}
}
