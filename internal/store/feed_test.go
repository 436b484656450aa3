package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// waitTrusted waits until s's change feed trusts what it keeps (it has
// connected and read the counter): an observable state, polled.
func waitTrusted(t *testing.T, s *DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := s.pg.feed.cardsEpoch(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the change feed did not connect within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdTrust lengthens s's feed's lease by a minute and waits until the
// feed has renewed it so (its next counter read, within feedSync): a test
// of what moves the cards epoch then cannot mistake the lease lapsing on
// a loaded machine (B reading the counter, the safe fallback) for the
// epoch moving. Only the reader's lease grows; writers' barriers keep
// feedBarrier, so a test using it must not rely on a missing
// acknowledgement.
func holdTrust(t *testing.T, s *DB) {
	t.Helper()
	f := s.pg.feed
	f.leaseExtra.Store(int64(time.Minute))
	deadline := time.Now().Add(30 * time.Second)
	for time.Duration(f.trusted.Load())-time.Since(f.start) < 30*time.Second {
		if time.Now().After(deadline) {
			t.Fatal("the change feed did not renew its lease within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPostgresRevokeThenCallElsewhere: the wallet and the token an
// instance keeps are never stale once a revocation on another instance
// has returned. B pins agent x's wallet and token as the call path does
// (keyed on CardsGeneration, which B reads with no round trip); A revokes
// the card, then the token; right after each returns, B's next
// CardsGeneration has moved (so its next call re-reads the wallet and
// refuses the card) and B's Authenticate refuses the token. Many rounds,
// so that a notification that merely tends to arrive first would lose
// some.
func TestPostgresRevokeThenCallElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	waitTrusted(t, a)
	waitTrusted(t, b)
	for round := range 20 {
		c, err := a.Grant(ctx, "x", spec(t, "tool:invoke t"))
		if err != nil {
			t.Fatal(err)
		}
		tok, _, err := a.MintToken(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		gB, err := b.CardsGeneration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if w, err := b.Wallet(ctx, "x", time.Now()); err != nil || len(w.Cards()) != 1 {
			t.Fatalf("round %d: B's wallet before the revocation: %v, %v", round, w, err)
		}
		if agent, err := b.Authenticate(ctx, tok); err != nil || agent != "x" {
			t.Fatalf("round %d: B's Authenticate before the revocation: %q, %v", round, agent, err)
		}
		if _, err := a.Revoke(ctx, Operator(), c.ID); err != nil {
			t.Fatal(err)
		}
		if g, err := b.CardsGeneration(ctx); err != nil || g == gB {
			t.Fatalf("round %d: right after A's revocation returned, B's CardsGeneration is still %d (%v): B would call with the revoked card", round, g, err)
		}
		if w, err := b.Wallet(ctx, "x", time.Now()); err != nil || len(w.Cards()) != 0 {
			t.Fatalf("round %d: B's wallet after the revocation: %v, %v", round, w.Cards(), err)
		}
		id := tok[len(tokenPrefix) : len(tokenPrefix)+16]
		if err := a.RevokeToken(ctx, id); err != nil {
			t.Fatal(err)
		}
		if agent, err := b.Authenticate(ctx, tok); !errors.Is(err, ErrBadToken) {
			t.Fatalf("round %d: right after A revoked the token, B's Authenticate = %q, %v; want ErrBadToken", round, agent, err)
		}
	}
}

// TestPostgresCardsGenerationKinds: while nothing about cards or tokens
// changes, CardsGeneration stays put and reads nothing from the database,
// whatever else other instances write (a rate-limit take, a quota, audit
// records ingested, a session); a grant moves it.
func TestPostgresCardsGenerationKinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	waitTrusted(t, b)
	tok, _, err := a.MintToken(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	holdTrust(t, b)
	g0, err := b.CardsGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	reads := b.pg.genReads.Load()
	rate := Rate{Capacity: 100, Refill: 1, Interval: time.Second}
	for i := range 20 {
		if _, _, err := a.Take(ctx, BucketKey{"x", "t", "r"}, rate, 1, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := a.Journal().Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
		if err := a.Journal().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if g, err := b.CardsGeneration(ctx); err != nil || g != g0 {
			t.Fatalf("after a rate-limit take and an audit batch, B's CardsGeneration %d -> %d (%v): B's wallets were invalidated", g0, g, err)
		}
		if _, err := b.Authenticate(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.pg.genReads.Load() - reads; n != 0 {
		t.Fatalf("B read the generation from the database %d times while nothing it depends on changed", n)
	}
	if _, err := a.Grant(ctx, "x", spec(t, "tool:invoke t")); err != nil {
		t.Fatal(err)
	}
	if g, err := b.CardsGeneration(ctx); err != nil || g == g0 {
		t.Fatalf("a grant did not move B's CardsGeneration (%d, %v)", g, err)
	}
}

// TestFeedsVisibleToAnotherRole: a cards writer waits for the feeds it
// finds in pg_stat_activity (barrier). A writer logged in as an
// unprivileged role other than the feed's must still find it: if it did
// not, it would return at once and the other instance could honour a
// revoked card until its lease ran out.
func TestFeedsVisibleToAnotherRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil) // its feed logs in as the superuser
	waitTrusted(t, a)
	role := fmt.Sprintf("feedwatch_%d", os.Getpid())
	pgtest.Exec(t, dbURL, "CREATE ROLE "+role+" LOGIN NOSUPERUSER")
	t.Cleanup(func() { pgtest.Exec(t, dbURL, "DROP ROLE "+role) })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil || super {
		t.Fatalf("the watching role is a superuser (%v, %v): the test would prove nothing", super, err)
	}
	rows, err := conn.Query(ctx, strings.Replace(pgFeedsSQL, "?", "$1", 1), pgFeedApp)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 {
		t.Fatalf("an unprivileged role sees %d feeds (%v), want A's one", len(pids), pids)
	}
}

// TestPostgresFeedRenewsUnderNotifications: a feed renews its lease every
// feedSync however many notifications come meanwhile. Under load other
// instances' writes notify many times a second; a feed that renewed only
// after feedSync without one let its lease lapse for as long as the load
// lasted, and every call then read the counter from the database (twice:
// the wallet's and the token's). Here other-kind notifications come every
// 20 ms for twice the lease; the feed must have read the counter several
// times meanwhile. Not parallel: a pause of the notifier as long as
// feedSync makes it skip, and one full run with it parallel did.
func TestPostgresFeedRenewsUnderNotifications(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	b := open(t, dbURL, nil)
	waitTrusted(t, b)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	f := b.pg.feed
	syncs := f.syncs.Load()
	var gap time.Duration // the longest pause between two notifications
	last := time.Now()
	for end := last.Add(2 * feedLease); time.Now().Before(end); {
		if _, err := conn.Exec(ctx, `SELECT pg_notify($1, $2 || ':' || value) FROM counters WHERE name = 'generation'`, pgChannel, kindOther); err != nil {
			t.Fatal(err)
		}
		gap = max(gap, time.Since(last))
		last = time.Now()
		time.Sleep(20 * time.Millisecond)
	}
	n := f.syncs.Load() - syncs
	t.Logf("%d counter reads in %v of notifications (longest pause between two: %v)", n, 2*feedLease, gap)
	if gap >= feedSync {
		t.Skipf("this machine paused the notifications for %v (>= feedSync): the test proves nothing", gap)
	}
	if n < 2 {
		t.Fatalf("the feed read the counter %d times in %v of notifications every 20 ms: its lease lapsed under them", n, 2*feedLease)
	}
	if _, ok := f.cardsEpoch(); !ok && f.up.Load() {
		t.Logf("the feed does not trust its epoch at the end (a loaded machine may delay a renewal)")
	}
}

// TestPostgresAuditWakesNoOne: the audit trail's own appends (the
// journal's batches, AppendAudit, AppendAuditGroup) take the write lock
// but neither move the generation nor notify: another instance's feed
// receives nothing and its Generation (the session cache's key) stays
// put, while a write of another kind (an approval) still does both. The
// chain's one order under the lock is TestPostgresAuditTwoInstances's.
func TestPostgresAuditWakesNoOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := openOpts(t, dbURL, &Options{JournalDir: t.TempDir()})
	b := open(t, dbURL, nil)
	waitTrusted(t, b)
	f := b.pg.feed
	// A's own start-up writes (its sweep) are done once A's next write's
	// notification has reached B: an approval, whose arrival is awaited.
	notify := func() {
		t.Helper()
		before := f.notes.Load()
		if _, err := a.CreateApproval(ctx, Approval{Agent: "x", Tool: "t", Digest: "d", Middleware: "m", Expires: time.Now().Add(time.Hour)}, 0); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for f.notes.Load() == before {
			if time.Now().After(deadline) {
				t.Fatal("an approval's notification did not reach the other instance within 30 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	notify()
	g0, err := b.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	notes := f.notes.Load()
	for i := range 20 {
		if err := a.Journal().Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
		if err := a.Journal().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.AppendAudit(ctx, journalRec("direct", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.AppendAuditGroup(ctx, journalRec("group", i)); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := b.Generation(ctx); err != nil || g != g0 {
		t.Fatalf("60 audit appends moved B's Generation %d -> %d (%v)", g0, g, err)
	}
	// The approval's notification comes after anything the appends sent
	// (one connection's notifications arrive in commit order).
	notify()
	if n := f.notes.Load() - notes; n != 1 {
		t.Fatalf("B's feed received %d notifications across 60 audit appends and one approval, want the approval's only", n)
	}
	if g, err := b.Generation(ctx); err != nil || g == g0 {
		t.Fatalf("an approval did not move B's Generation (%d, %v)", g, err)
	}
}
