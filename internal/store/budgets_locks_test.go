package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
)

// TestBudgetChainsAcrossInstances: siblings derived from one card spend
// its budget together, from three instances at once, and never past it,
// now that a check and its spend hold the locks of the chain's cards
// instead of the store's one write lock: 60 payments of 400 bytes (10
// through each of six siblings) on a parent's bytes_out=4000 are 10 paid
// and 50 refused naming the parent with nothing left, while calls on both chains reserve and
// settle wall time beside them (every kind of budget write at once, none
// waiting for another forever). The parent's spend is what was paid and
// settled, exactly.
func TestBudgetChainsAcrossInstances(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBudgetChainsAcrossInstances)
}

func testBudgetChainsAcrossInstances(t *testing.T, be backend) {
	ctx := context.Background()
	target := be.target(t)
	ins := []*DB{open(t, target, nil), open(t, target, nil), open(t, target, nil)}
	for _, a := range []string{"a", "b"} {
		if err := ins[0].EnsureAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	parent, err := ins[0].Grant(ctx, "a", budgeted(t, "bytes_out=4000,wall_ms=100000", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	var kids [6]cards.Card
	for i := range kids {
		if kids[i], err = ins[0].Derive(ctx, Operator(), parent.ID, "b", budgeted(t, "calls=1000", "tool:invoke echo --...")); err != nil {
			t.Fatal(err)
		}
	}
	// One reservation per sibling, made first, that the payments go on.
	var sps [len(kids)]BudgetSpend
	for i, k := range kids {
		if sps[i], err = ins[0].ReserveBudget(ctx, k.ID, 1, 10); err != nil {
			t.Fatal(err)
		}
	}
	var paid, refused, settled atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 60 {
		s, sp, kid := ins[i%3], sps[i%len(kids)], kids[(i+1)%len(kids)]
		wg.Go(func() {
			<-start
			err := s.SpendBudgetBytes(ctx, sp, 400)
			var ex *cards.Exhausted
			switch {
			case err == nil:
				paid.Add(1)
			case errors.As(err, &ex) && ex.Card == parent.ID && ex.Key == cards.BudgetBytesOut && ex.Left == 0 && ex.Need == 400:
				refused.Add(1)
			default:
				t.Errorf("pay 400 bytes on %s: %v; want paid, or refused naming card %s with 0 left", sp.Card, err, parent.ID)
			}
		})
		// Beside them, calls on both chains: each reserves 10 ms of wall
		// time and settles it at 4 (6 back), or is refused once the
		// parent's bytes are gone (a card with a budget used up admits no
		// call).
		wg.Go(func() {
			<-start
			call, err := s.ReserveBudget(ctx, kid.ID, 1, 10)
			var ex *cards.Exhausted
			switch {
			case errors.As(err, &ex) && ex.Card == parent.ID && ex.Key == cards.BudgetBytesOut && ex.Left == 0:
				return
			case err != nil:
				t.Errorf("reserve a call on %s: %v", kid.ID, err)
				return
			}
			if err := s.ChargeBudget(ctx, call, 4, 0); err != nil {
				t.Errorf("settle a call on %s: %v", kid.ID, err)
				return
			}
			settled.Add(1)
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	got, err := ins[2].Card(ctx, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if paid.Load() != 10 || refused.Load() != 50 || got.Spent[cards.BudgetBytesOut] != 4000 {
		t.Fatalf("60 payments of 400 bytes through six siblings on a parent's bytes_out=4000: %d paid, %d refused, the parent spent %d; want 10, 50, 4000",
			paid.Load(), refused.Load(), got.Spent[cards.BudgetBytesOut])
	}
	// The first reservations of 10 ms never settled, the calls settled at
	// 4 ms.
	if w, want := got.Spent[cards.BudgetWallMS], int64(len(kids))*10+4*settled.Load(); w != want {
		t.Fatalf("the parent's wall_ms spent: %d; want %d (%d calls settled at 4 ms)", w, want, settled.Load())
	}
	var kidBytes int64
	for _, k := range kids {
		c, err := ins[1].Card(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		kidBytes += c.Spent[cards.BudgetBytesOut]
	}
	if kidBytes != 4000 {
		t.Fatalf("the siblings spent %d bytes together; want the 4000 their parent did", kidBytes)
	}
}

// TestBudgetLockHeldFromReadToCommit: on PostgreSQL a payment on one
// sibling's chain waits, from another instance, while a payment on the
// other sibling's has read what their common parent spent and not yet
// committed, then finds nothing left: the parent's lock is held from the
// read to the commit, whichever child the chain starts from. (The test
// holds the first payment between its read and its spend with a hook and
// waits until the second either returns or is seen waiting for an
// advisory lock in pg_locks; SQLite's one writer is its file's lock.)
func TestBudgetLockHeldFromReadToCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := backend{name: "postgres", pg: true}.target(t)
	a, b := open(t, target, nil), open(t, target, nil)
	for _, ag := range []string{"a", "b"} {
		if err := a.EnsureAgent(ctx, ag); err != nil {
			t.Fatal(err)
		}
	}
	parent, err := a.Grant(ctx, "a", budgeted(t, "bytes_out=400", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	var sps [2]BudgetSpend
	for i := range sps {
		kid, err := a.Derive(ctx, Operator(), parent.ID, "b", budgeted(t, "calls=10", "tool:invoke echo --..."))
		if err != nil {
			t.Fatal(err)
		}
		if sps[i], err = a.ReserveBudget(ctx, kid.ID, 1, 10); err != nil {
			t.Fatal(err)
		}
	}
	read, release := make(chan struct{}), make(chan struct{})
	a.testHookChainRead = func() {
		close(read)
		<-release
	}
	first := make(chan error, 1)
	go func() { first <- a.SpendBudgetBytes(ctx, sps[0], 400) }()
	select {
	case <-read:
	case err := <-first:
		t.Fatalf("the first payment returned (%v) before it read the chain", err)
	}
	second := make(chan error, 1)
	go func() { second <- b.SpendBudgetBytes(ctx, sps[1], 400) }()
	// Either the second payment returns (the defect: it read the parent's
	// spend while the first held it) or it is seen waiting for a lock.
	var early error
	deadline := time.Now().Add(time.Minute)
	for waited := false; !waited; {
		select {
		case early = <-second:
			close(release)
			<-first
			t.Fatalf("a payment on the other sibling returned %v while the first had read the parent's spend and not committed; want it to wait for the parent's lock", early)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the second payment neither returned nor waited for a lock in a minute")
		}
		var n int
		if err := a.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = ?
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, int64(uint32(pgLockBudgetClass))).Scan(&n); err != nil {
			t.Fatal(err)
		}
		waited = n > 0
		if !waited {
			time.Sleep(5 * time.Millisecond)
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first payment: %v", err)
	}
	err = <-second
	var ex *cards.Exhausted
	if !errors.As(err, &ex) || ex.Card != parent.ID || ex.Key != cards.BudgetBytesOut || ex.Left != 0 || ex.Need != 400 {
		t.Fatalf("the second payment after the first committed: %v; want budget-exhausted naming card %s, 0 left, 400 needed", err, parent.ID)
	}
}
