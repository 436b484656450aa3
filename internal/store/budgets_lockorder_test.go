package store

import (
	"context"
	"testing"
	"time"
)

// TestBudgetLocksInAscendingKeyOrder: lockBudgets takes a chain's budget
// locks in ascending key order whatever order the chain was read in, so
// two payments whose chains share two budgeted cards listed in opposite
// orders (cards with the same two parents, walked breadth first) never
// each hold one lock and wait for the other, a deadlock PostgreSQL breaks
// only after deadlock_timeout by failing one (pass 21's open plant: the
// sort dropped). Shown without a race: another connection holds the higher
// key's lock, lockBudgets is given the higher card first, and while it
// waits for that lock it must already hold the lower one.
func TestBudgetLocksInAscendingKeyOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, backend{name: "postgres", pg: true}.target(t), nil)
	hi, lo := "card-order-1", "card-order-2"
	if budgetLockKey(hi) < budgetLockKey(lo) {
		hi, lo = lo, hi
	}
	holder, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var holderPID int64
	if err := holder.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_lock(?, ?)`, pgLockBudgetClass, budgetLockKey(hi)); err != nil {
		t.Fatal(err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	done := make(chan error, 1)
	go func() { done <- s.lockBudgets(ctx, tx, []string{hi, lo}) }()
	// The payment's locks as PostgreSQL lists them (pg_locks shows a
	// two-key advisory lock's keys as oids, unsigned).
	held := func(id string, granted bool) int {
		t.Helper()
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = ? AND classid = ? AND objid = ? AND objsubid = 2 AND pid <> ?
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
			granted, int64(uint32(pgLockBudgetClass)), int64(uint32(budgetLockKey(id))), holderPID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(time.Minute); held(hi, false) == 0; {
		select {
		case err := <-done:
			t.Fatalf("lockBudgets returned (%v) while another connection held the lock of card %s", err, hi)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("lockBudgets was not seen waiting for the held lock in a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := held(lo, true); n != 1 {
		t.Errorf("waiting for the lock of card %s (key %d), the payment held %d locks of card %s (key %d); want 1: the locks were not taken in ascending key order, and a payment whose chain lists the two cards the other way round would deadlock with it",
			hi, budgetLockKey(hi), n, lo, budgetLockKey(lo))
	}
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_unlock(?, ?)`, pgLockBudgetClass, budgetLockKey(hi)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("lockBudgets once the lock was released: %v", err)
	}
}
