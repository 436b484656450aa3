package store

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// The twenty-first mutation pass (docs/security-tests.md, "Twenty-first
// pass"; docs/mutation/postgres-feed.tsv): what postgres.go's change feed
// promises across instances that no earlier test looked at.

// rawEpochs is f's two epochs as they are, trusted or not (a test of what
// moves them must not mistake a lapsed lease, the safe fallback, for a
// move).
func rawEpochs(f *changeFeed) (int64, int64) { return f.epoch.Load(), f.sepoch.Load() }

// waitSyncs waits until f has read the counter n more times.
func waitSyncs(t *testing.T, f *changeFeed, n int64) {
	t.Helper()
	want := f.syncs.Load() + n
	deadline := time.Now().Add(30 * time.Second)
	for f.syncs.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the change feed did not read the counter %d more times within 30 s", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitNotes waits until f has received n more change notifications than
// before.
func waitNotes(t *testing.T, f *changeFeed, before, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.notes.Load() < before+n {
		if time.Now().After(deadline) {
			t.Fatalf("the change feed received %d of %d notifications within 30 s", f.notes.Load()-before, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestPostgresAuditChainWithCardWriters: the audit trail has one order
// across instances whoever appends to it: a write of cards appends its
// record inside its own transaction (under pgWriteLockSQL), the audit
// trail's own appends under pgAuditLockSQL, and both must hold the one
// advisory write lock. (Writers of the counter also wait for one another
// on the counters row, which hid the advisory lock's absence from every
// test of two such writers.) Kills: the advisory lock dropped from
// pgWriteLockSQL, or its CTE l no longer read by the UPDATE (postgres.go
// :60-61).
func TestPostgresAuditChainWithCardWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := openOpts(t, dbURL, &Options{JournalDir: t.TempDir()})
	b := openOpts(t, dbURL, &Options{JournalDir: t.TempDir()})
	mustAgents(t, a, "x")
	n0, _, err := a.VerifyAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const per = 40
	var wg sync.WaitGroup
	wg.Go(func() {
		for range per {
			if _, err := a.Grant(ctx, "x", spec(t, "tool:invoke t")); err != nil {
				t.Errorf("a grant beside audit appends: %v", err)
				return
			}
		}
	})
	wg.Go(func() {
		for k := range per {
			if _, err := b.AppendAudit(ctx, journalRec("direct", k)); err != nil {
				t.Errorf("an audit append beside grants: %v", err)
				return
			}
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	n, _, err := b.VerifyAudit(ctx)
	if err != nil || n != n0+2*per {
		t.Fatalf("after %d grants on A and %d audit appends on B at once: VerifyAudit = %d records, %v; want %d, a whole chain", per, per, n, err, n0+2*per)
	}
}

// TestPostgresFeedEpochTagged: what CardsGeneration and SessionsGeneration
// return from a trusted feed is tagged (bit 62), so that it never equals
// a value of the counter, which they return once the feed is no longer
// trusted: a wallet kept on epoch 12 must not be taken as current when
// the counter happens to read 12 after the lease lapsed. Kills: the tag
// dropped in trustedEpoch (postgres.go:804).
func TestPostgresFeedEpochTagged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	b := open(t, dbURL, nil)
	waitTrusted(t, b)
	for name, read := range map[string]func(context.Context) (int64, error){"CardsGeneration": b.CardsGeneration, "SessionsGeneration": b.SessionsGeneration} {
		e, err := read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e>>62 != 1 {
			t.Fatalf("%s from the trusted feed = %d, untagged: it can equal a value of the counter (%s)", name, e, "bit 62 unset")
		}
	}
}

// TestPostgresCounterReadMovesEpochs: a change the feed learns of only by
// its counter read (its notification lost or still on the way: here the
// counter is advanced with no notification at all) moves both epochs, so
// that what the instance keeps is read again. Kills: sync's moveEpochs
// dropped (postgres.go:895).
func TestPostgresCounterReadMovesEpochs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	b := open(t, dbURL, nil)
	waitTrusted(t, b)
	f := b.pg.feed
	waitSyncs(t, f, 2)
	e0, s0 := rawEpochs(f)
	pgtest.Exec(t, dbURL, `UPDATE counters SET value = value + 1 WHERE name = 'generation'`)
	waitSyncs(t, f, 2)
	if e, s := rawEpochs(f); e == e0 || s == s0 {
		t.Fatalf("a change found by the feed's counter read (no notification) left the epochs cards %d -> %d, sessions %d -> %d; want both moved", e0, e, s0, s)
	}
	if _, err := b.CardsGeneration(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresQuietWritesMoveNoEpoch: a counter read that finds nothing
// new moves nothing, before any notification came as after; and writes
// of other kinds (two approvals, a new session) notify the other
// instances and advance the counter, but move neither of their epochs,
// not through the notification and not through the next counter reads,
// which find the counter where the notifications left it. (The kinds
// tests keep the counter reads out of their minute, so only this one sees
// them.) Kills: lastGen not updated by a counter read (postgres.go:896) or
// by a notification (:948).
func TestPostgresQuietWritesMoveNoEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	if _, _, err := a.OpenSession(ctx, "s", "x", workBoundary()); err != nil {
		t.Fatal(err)
	}
	// B opens after A's writes: its feed has seen no notification, only
	// its counter reads.
	b := open(t, dbURL, nil)
	waitTrusted(t, b)
	f := b.pg.feed
	waitSyncs(t, f, 1)
	e0, s0 := rawEpochs(f)
	waitSyncs(t, f, 2)
	if e, s := rawEpochs(f); e != e0 || s != s0 {
		t.Fatalf("with nothing written, B's counter reads moved its epochs cards %d -> %d, sessions %d -> %d; want both unchanged", e0, e, s0, s)
	}
	notes := f.notes.Load()
	if _, err := a.CreateApproval(ctx, Approval{Agent: "x", Tool: "t", Digest: "d", Middleware: "m", Expires: time.Now().Add(time.Hour)}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateApproval(ctx, Approval{Agent: "x", Tool: "t", Digest: "e", Middleware: "m", Expires: time.Now().Add(time.Hour)}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.OpenSession(ctx, "s2", "x", workBoundary()); err != nil {
		t.Fatal(err)
	}
	waitNotes(t, f, notes, 3)
	waitSyncs(t, f, 3)
	if e, s := rawEpochs(f); e != e0 || s != s0 {
		t.Fatalf("two approvals and a new session on A, then B's counter reads: B's epochs cards %d -> %d, sessions %d -> %d; want both unchanged (every call would read again)", e0, e, s0, s)
	}
}

// TestPostgresMalformedNotificationMovesEpochs: a notification on the
// change channel whose payload the feed cannot read (not KIND:VALUE), or
// of a kind it does not know (a newer maiden's on the same database), is
// taken as a change of any kind: both epochs move. Kills: the !ok case's
// moveEpochs dropped (postgres.go:935); an unknown kind moving nothing
// (the code before this pass's review).
func TestPostgresMalformedNotificationMovesEpochs(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	b := open(t, dbURL, nil)
	waitTrusted(t, b)
	f := b.pg.feed
	e0, s0 := rawEpochs(f)
	notes := f.notes.Load()
	pgtest.Exec(t, dbURL, `SELECT pg_notify('`+pgChannel+`', 'cards-without-a-value')`)
	waitNotes(t, f, notes, 1)
	if e, s := rawEpochs(f); e == e0 || s == s0 {
		t.Fatalf("a notification the feed could not read left the epochs cards %d -> %d, sessions %d -> %d; want both moved", e0, e, s0, s)
	}
	// A kind this version does not know (a newer maiden's, writing the
	// same database) may have changed anything it keeps.
	e0, s0 = rawEpochs(f)
	pgtest.Exec(t, dbURL, `SELECT pg_notify('`+pgChannel+`', 'grants-v2:7')`)
	waitNotes(t, f, notes, 2)
	if e, s := rawEpochs(f); e == e0 || s == s0 {
		t.Fatalf("a notification of a kind the feed does not know left the epochs cards %d -> %d, sessions %d -> %d; want both moved", e0, e, s0, s)
	}
}

// feedBackends is how many change feeds the server lists on dbURL's
// database.
func feedBackends(t *testing.T, dbURL string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(pgtest.Exec(t, dbURL, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = '`+pgFeedApp+`'`)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPostgresCardsWriteDoesNotWaitOutTheBound: while every feed listens
// and acknowledges, a write of cards returns on their acknowledgements,
// not at feedBarrier or after waiting out a lease (every revocation,
// grant and token would otherwise take 2.5 s); an instance that closed
// leaves no lease for a writer to wait out; and an instance's first write
// right after its Open waits for none. Each is observed as the writer's
// feed's count of barriers ended without every acknowledgement
// (waitedOut), not timed. Kills: the ack channel not listened to, an ack
// naming another PID or one generation short, an ack recorded only if
// lower, ackCh not closed, barrier's min dropped (postgres.go:865, 870,
// 953, 956, 1015), the lease row not deleted when the feed stops (:844),
// Open not waiting for its feed (:195).
func TestPostgresCardsWriteDoesNotWaitOutTheBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	waitTrusted(t, a)
	b, err := Open(ctx, dbURL, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			b.Close()
		}
	})
	// B's first write, right after its Open returned: its own feed,
	// through which A's acknowledgement comes, already listens.
	start := time.Now()
	if _, err := b.Grant(ctx, "x", spec(t, "tool:invoke t")); err != nil {
		t.Fatal(err)
	}
	if n := b.pg.feed.waitedOut.Load(); n != 0 {
		t.Fatalf("B's first grant right after its Open waited out the bound (%d barriers without every acknowledgement, %v)", n, time.Since(start))
	}
	waitTrusted(t, b)
	for i := range 5 {
		start := time.Now()
		if _, err := a.Grant(ctx, "x", spec(t, "tool:invoke t")); err != nil {
			t.Fatal(err)
		}
		if n := a.pg.feed.waitedOut.Load(); n != 0 {
			t.Fatalf("grant %d of 5 with both feeds listening ended without every acknowledgement (%d such barriers, %v): the acknowledgements were not taken in", i+1, n, time.Since(start))
		}
	}
	b.Close()
	closed = true
	deadline := time.Now().Add(10 * time.Second)
	for feedBackends(t, dbURL) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("B's feed's backend did not end within 10 s of its Close")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start = time.Now()
	if _, err := a.Grant(ctx, "x", spec(t, "tool:invoke t")); err != nil {
		t.Fatal(err)
	}
	if n := a.pg.feed.waitedOut.Load(); n != 0 {
		t.Fatalf("the first grant after B closed waited out a lease (%d barriers without every acknowledgement, %v): a closed instance's lease was waited out", n, time.Since(start))
	}
}

// TestPostgresWriteWhileFeedFrozen: an instance cut off from the database
// whose feed's backend the server still lists (a partition the server has
// not noticed) acknowledges nothing; a revocation, or a session's end, on
// another instance must then wait until that feed's lease has run out and
// no longer (it returns within the bound), so that when it returns the
// cut-off instance no longer answers CardsGeneration or
// SessionsGeneration from what it keeps. Kills: barrier's deadline not
// ending the wait, a shorter deadline, the feeds not listed, an ack of
// the previous generation taken, a return with acknowledgements missing
// (postgres.go:988, 991, 1021, 1027, 1037), a lease of 2*feedLease (:901),
// writeTx's barrier waiting for generation 0 or skipped for kindSessions
// (sqlite.go:694-695).
func TestPostgresWriteWhileFeedFrozen(t *testing.T) {
	t.Parallel()
	for _, what := range []string{"revocation", "session end"} {
		t.Run(strings.ReplaceAll(what, " ", "-"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbURL := pgtest.URL(t)
			a := open(t, dbURL, nil)
			p := newPartition(t)
			b := open(t, p.url(t, dbURL), nil)
			t.Cleanup(p.close) // before b's Close
			mustAgents(t, a, "x")
			c, err := a.Grant(ctx, "x", spec(t, "tool:invoke t"))
			if err != nil {
				t.Fatal(err)
			}
			read, write := b.CardsGeneration, func() error { _, err := a.Revoke(ctx, Operator(), c.ID); return err }
			if what == "session end" {
				if _, _, err := a.OpenSession(ctx, "s", "x", workBoundary()); err != nil {
					t.Fatal(err)
				}
				read, write = b.SessionsGeneration, func() error { return a.EndSession(ctx, "s") }
			}
			waitTrusted(t, a)
			waitTrusted(t, b)
			waitRenewed(t, b) // what A wrote is taken in by now
			g0, err := read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p.freeze()
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- write() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(4 * feedBarrier):
				t.Fatalf("the %s on A had not returned %v after it began: it waits for a cut-off feed beyond its lease", what, 4*feedBarrier)
			}
			took := time.Since(start)
			rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			g, err := read(rctx)
			t.Logf("the %s took %v; then B (cut off) answers %d (was %d), %v", what, took, g, g0, err)
			if err == nil && g == g0 {
				t.Fatalf("right after the %s on A returned (after %v), B, cut off but still listed, answers %d from what it keeps: its lease outlived the writer's wait", what, took, g)
			}
		})
	}
}

// TestPostgresSweepKeepsAVanishedFeedsLease: a feed that connects sweeps
// the lease rows of feeds long gone (a minute past their end), never the
// row of a feed that vanished from pg_stat_activity moments ago and whose
// instance, cut off, still trusts its epoch: a writer after the sweep
// still waits that lease out. Kills: the sweep's "- 60000" made
// "+ 60000" (postgres.go:878).
func TestPostgresSweepKeepsAVanishedFeedsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	p := newPartition(t)
	b := open(t, p.url(t, dbURL), nil)
	t.Cleanup(p.close)
	mustAgents(t, a, "x")
	c, err := a.Grant(ctx, "x", spec(t, "tool:invoke t"))
	if err != nil {
		t.Fatal(err)
	}
	waitTrusted(t, a)
	waitTrusted(t, b)
	gB, err := b.CardsGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitRenewed(t, b)
	p.freeze()
	p.endFeeds(t, dbURL)
	// A third feed connects now (another instance starting): its sweep
	// runs before it first listens.
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	third := newChangeFeed(cfg, nil)
	defer third.close()
	select {
	case <-third.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("a third feed did not listen within 10 s")
	}
	f := b.pg.feed
	if time.Since(f.start) >= time.Duration(f.trusted.Load()) {
		t.Skip("B's lease ran out before the revocation: the test proves nothing on this machine")
	}
	if _, err := a.Revoke(ctx, Operator(), c.ID); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if g, err := b.CardsGeneration(rctx); err == nil && g == gB {
		t.Fatalf("after a third feed connected and A revoked, B (cut off, its feed ended by the server) still answers CardsGeneration %d from its lease: its lease row was swept", g)
	}
}

// TestPostgresQuietFeedStaysTrusted: a listening feed renews its lease
// before it runs out, so while nothing changes an instance never falls
// back to reading the counter (every call's wallet and token would read
// it in the gaps). Read without pause for 2.5 leases. Kills: the renewal
// every feedLease rather than feedSync (postgres.go:664, 888), a renewal's
// timeout taken for an error (:923).
func TestPostgresQuietFeedStaysTrusted(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	b := open(t, dbURL, nil)
	waitTrusted(t, b)
	f := b.pg.feed
	lapses, reads := 0, 0
	for end := time.Now().Add(feedLease * 5 / 2); time.Now().Before(end); reads++ {
		if _, ok := f.cardsEpoch(); !ok {
			lapses++
		}
	}
	if lapses > 0 {
		t.Fatalf("a quiet, listening feed was not trusted at %d of %d reads over %v: its lease lapsed before it was renewed", lapses, reads, feedLease*5/2)
	}
}

// TestPostgresWriteLockWaitBounded: a writer waits for the write lock
// another holds (another instance stuck in a transaction) at most
// Options.BusyTimeout, whatever its kind, and then fails saying the store
// is locked (SQLSTATE 55P03), rather than hanging its call. Kills: the
// lock_timeout of pgWriteLockSQL set to 0 (postgres.go:60-63), 55P03 not
// recognised in lockError (:111).
func TestPostgresWriteLockWaitBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := openOpts(t, dbURL, &Options{BusyTimeout: 200 * time.Millisecond, JournalDir: t.TempDir()})
	mustAgents(t, a, "x")
	holdLock(t, dbURL, `SELECT pg_advisory_xact_lock($1)`, pgLockWrite)
	writes := map[string]func(context.Context) error{
		"a grant (cards)": func(ctx context.Context) error {
			_, err := a.Grant(ctx, "x", spec(t, "tool:invoke t"))
			return err
		},
		"an approval (other)": func(ctx context.Context) error {
			_, err := a.CreateApproval(ctx, Approval{Agent: "x", Tool: "t", Digest: "d", Middleware: "m", Expires: time.Now().Add(time.Hour)}, 0)
			return err
		},
		"an audit append (audit)": func(ctx context.Context) error {
			_, err := a.AppendAudit(ctx, journalRec("locked", 0))
			return err
		},
	}
	for what, write := range writes {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		err := write(wctx)
		cancel()
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "the store is locked") || took > 5*time.Second {
			t.Fatalf("%s while another holds the write lock: %v after %v; want \"the store is locked\" after about the 200ms busy timeout", what, err, took)
		}
	}
}

// TestRebindParameterNotADollarTag: a $ followed by a digit is a
// parameter, never the opening of a $tag$ string, even where identifier
// characters and a $ follow it; what comes after is still SQL, whose '?'
// is rebound; and a doubled quote continues an E-string, whose
// backslashes still escape after it. Kills: dollarTag's digit check moved
// by one (postgres.go:568), a doubled quote taken for the end
// (endQuoted, :529).
func TestRebindParameterNotADollarTag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"SELECT $1a$, ?":   "SELECT $1a$, $1",
		"SELECT $12x$ + ?": "SELECT $12x$ + $1",
		// A doubled quote inside an E-string continues it: a
		// backslash after it still escapes.
		`SELECT E'a''\' ?', ?`: `SELECT E'a''\' ?', $1`,
	} {
		if got := rebind(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPostgresBudgetLockWaitBounded: a call whose card's budget lock
// another holds (a call on another instance stuck in its transaction)
// waits at most Options.BusyTimeout and fails naming the budget lock,
// not as an unexplained lock timeout. Kills: 55P03 not recognised in
// lockBudgets (budgets.go:143).
func TestPostgresBudgetLockWaitBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := openOpts(t, dbURL, &Options{BusyTimeout: 200 * time.Millisecond, JournalDir: t.TempDir()})
	mustAgents(t, a, "x")
	c, err := a.Grant(ctx, "x", budgeted(t, "wall_ms=100000", "tool:invoke t"))
	if err != nil {
		t.Fatal(err)
	}
	holdLock(t, dbURL, `SELECT pg_advisory_xact_lock($1, $2)`, pgLockBudgetClass, budgetLockKey(c.ID))
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = a.ReserveBudget(rctx, c.ID, 1, 10)
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "another call on these cards held it for more than") || took > 5*time.Second {
		t.Fatalf("a reservation while another holds the card's budget lock: %v after %v; want the budget lock named as held past the 200ms busy timeout", err, took)
	}
}

// TestPostgresLateAckEndsTheWait: an acknowledgement that comes after the
// writer's barrier first looked (B holds its back 300 ms) wakes the
// barrier, which returns on it, not at its deadline. Kills the open plant
// of pass 21: ackCh not closed on an acknowledgement (the barrier then
// waited out the bound whenever an acknowledgement came late; every test
// where they came early stayed green).
func TestPostgresLateAckEndsTheWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	waitTrusted(t, a)
	waitTrusted(t, b)
	b.pg.feed.ackDelay.Store(int64(300 * time.Millisecond))
	before := a.pg.feed.waitedOut.Load()
	start := time.Now()
	if _, err := a.Grant(ctx, "x", spec(t, "tool:invoke t")); err != nil {
		t.Fatal(err)
	}
	if n := a.pg.feed.waitedOut.Load() - before; n != 0 {
		t.Fatalf("a grant whose other instance acknowledged late ended without every acknowledgement (%d barriers, %v): the late acknowledgement did not wake it", n, time.Since(start))
	}
}

// holdLock takes an advisory lock (lockSQL and its arguments) in a
// transaction of a connection of its own, as another instance stuck in
// its transaction would hold it, until the test ends.
func holdLock(t *testing.T, dbURL, lockSQL string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, lockSQL, args...); err != nil {
		t.Fatal(err)
	}
}
