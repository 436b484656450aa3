package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// Three of pass 21's open plants (docs/security-tests.md, "Twenty-first
// pass"): the change feed's own reasoning, driven directly (the first two
// without a PostgreSQL server).

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

// TestFeedLeaseRunsFromBeforeTheRead: the change feed's lease runs from
// before its counter read, not from its answer: a writer's barrier counts
// its bound from its own commit, which may fall while the read is on its
// way, so a lease counted from the answer would outlast what the barrier
// waited for by as long as the read took (pass 21's open plant: the lease
// counted from after the read). Here each read takes 300 ms longer (a
// test hook, called after the lease's start is taken); the lease stored
// after it must end a lease's length after the read began, not later.
func TestFeedLeaseRunsFromBeforeTheRead(t *testing.T) {
	t.Parallel()
	s := open(t, backend{name: "postgres", pg: true}.target(t), nil)
	f := s.pg.feed
	type look struct{ began, prev time.Duration }
	looks := make(chan look, 1)
	hook := func() {
		select {
		case looks <- look{time.Since(f.start), time.Duration(f.trusted.Load())}:
		default:
		}
		time.Sleep(300 * time.Millisecond)
	}
	f.syncReading.Store(&hook)
	defer f.syncReading.Store(nil)
	var l look
	select {
	case l = <-looks:
	case <-time.After(30 * time.Second):
		t.Fatal("the change feed did not read its counter within 30 s")
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Duration(f.trusted.Load()) == l.prev {
		if time.Now().After(deadline) {
			t.Fatal("the change feed did not renew its lease within 30 s of a counter read")
		}
		time.Sleep(5 * time.Millisecond)
	}
	lease := time.Duration(f.trusted.Load()) - feedLease - time.Duration(f.leaseExtra.Load())
	if lease > l.began {
		t.Fatalf("the lease renewed by a counter read that began at %v (since the feed's start) runs from %v, %v later: counted from the read's answer, not from before it",
			l.began.Round(time.Millisecond), lease.Round(time.Millisecond), (lease - l.began).Round(time.Millisecond))
	}
}
