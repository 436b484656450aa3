package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// Two of pass 21's open plants (docs/security-tests.md, "Twenty-first
// pass"), killed without a PostgreSQL server: the change feed's own
// reasoning, driven directly.

// TestTrustedEpochRecheckedAfterTheLoad: the epoch is trusted only under
// a lease that still held after it was loaded. A reader descheduled
// between its first look at the lease and the load, for longer than the
// lease's rest, would otherwise return an epoch from after a writer's
// barrier gave up on this instance (the lease lapsed), one that may not
// have moved for the writer's change: a stale wallet trusted.
func TestTrustedEpochRecheckedAfterTheLoad(t *testing.T) {
	t.Parallel()
	f := &changeFeed{start: time.Now()}
	f.up.Store(true)
	f.trusted.Store(int64(time.Hour))
	f.epoch.Store(7)
	if e, ok := f.cardsEpoch(); !ok || e != 7|1<<62 {
		t.Fatalf("under a lease an hour long: %d, %v; want %d, trusted", e, ok, int64(7|1<<62))
	}
	f.epochLoading = func() { f.trusted.Store(0) } // the lease lapses while the reader is descheduled
	if e, ok := f.cardsEpoch(); ok {
		t.Fatalf("an epoch loaded after the lease lapsed: %d, trusted; want it untrusted (the caller then reads the generation)", e)
	}
	if e, ok := f.sessionsEpoch(); ok {
		t.Fatalf("a sessions epoch loaded after the lease lapsed: %d, trusted; want it untrusted", e)
	}
}

// TestBarrierWaitsWhenItCannotListTheFeeds: a writer whose listing of the
// other instances' feeds fails (its connection broke after its commit)
// cannot know who must acknowledge its change, so its barrier waits out
// the whole bound (feedBarrier), by which every lease that could trust an
// epoch from before the change has run out; it must not return at once as
// if no instance were listening.
func TestBarrierWaitsWhenItCannotListTheFeeds(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "closed.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close() // every query now fails: "sql: database is closed"
	f := &changeFeed{}
	start := time.Now()
	f.barrier(context.Background(), db, 1)
	if took, n := time.Since(start), f.waitedOut.Load(); took < feedBarrier || n != 1 {
		t.Fatalf("a barrier that could not list the feeds returned after %v (%d waited out); want it to wait out the bound, %v, counted once", took.Round(time.Millisecond), n, feedBarrier)
	}
}
