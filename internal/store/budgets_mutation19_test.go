package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/internal/cards"
)

// TestBudgetBytesOnTheChain guards SpendBudgetBytes' chain: a request's
// bytes are checked against every card of the chain that limits bytes_out
// (and only those: an ancestor that limits calls alone refuses nothing)
// and spent on every card the call charges, so what a child's requests
// paid is gone from its parent for the parent's own calls; the zero
// BudgetSpend (no budget) pays nothing and is refused nothing. It also guards
// the bounds of both up-front spends: a wall time or a request beyond
// cards.MaxBudget is bad input, and nothing is spent.
func TestBudgetBytesOnTheChain(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBudgetBytesOnTheChain)
}

func testBudgetBytesOnTheChain(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	for _, a := range []string{"a", "b"} {
		if err := s.EnsureAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	spentOf := func(id string) cards.Budget {
		t.Helper()
		c, err := s.Card(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c.Spent
	}

	// A parent limiting calls only, a child limiting bytes_out: the
	// parent has no bytes_out to run out of.
	callsOnly, err := s.Grant(ctx, "a", budgeted(t, "calls=10", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	kid, err := s.Derive(ctx, Operator(), callsOnly.ID, "b", budgeted(t, "bytes_out=100", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := s.ReserveBudget(ctx, kid.ID, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SpendBudgetBytes(ctx, sp, 100); err != nil {
		t.Fatalf("100 bytes on a card of bytes_out=100 whose parent limits calls only: %v; want them spent", err)
	}
	if got := spentOf(kid.ID)[cards.BudgetBytesOut]; got != 100 {
		t.Fatalf("the child spent %d bytes; want 100", got)
	}

	// A parent of bytes_out=150 and a child of 100: the child's 100 are
	// the parent's too, and the parent's own call finds 50.
	root, err := s.Grant(ctx, "a", budgeted(t, "bytes_out=150", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	child, err := s.Derive(ctx, Operator(), root.ID, "b", budgeted(t, "bytes_out=100", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	csp, err := s.ReserveBudget(ctx, child.ID, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SpendBudgetBytes(ctx, csp, 100); err != nil {
		t.Fatal(err)
	}
	if got := spentOf(root.ID)[cards.BudgetBytesOut]; got != 100 {
		t.Fatalf("the parent spent %d bytes after its child's request of 100; want 100", got)
	}
	rsp, err := s.ReserveBudget(ctx, root.ID, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	err = s.SpendBudgetBytes(ctx, rsp, 60)
	var ex *cards.Exhausted
	if !errors.As(err, &ex) || ex.Card != root.ID || ex.Key != cards.BudgetBytesOut || ex.Left != 50 || ex.Need != 60 {
		t.Fatalf("the parent's request of 60 after its child's 100 of its 150: %v; want budget-exhausted naming %s, 50 left, 60 needed", err, root.ID)
	}

	// The zero BudgetSpend is a call no budget limits: its requests pay
	// nothing, and nothing refuses them.
	if err := s.SpendBudgetBytes(ctx, BudgetSpend{}, 10); err != nil {
		t.Fatalf("10 bytes of a call no budget limits: %v; want nil", err)
	}

	// Beyond cards.MaxBudget: bad input, nothing spent.
	wall, err := s.Grant(ctx, "a", budgeted(t, "wall_ms=1000,bytes_out=1000", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	if sp, err := s.ReserveBudget(ctx, wall.ID, 1, cards.MaxBudget+1); !errors.Is(err, ErrBadInput) || len(spentOf(wall.ID)) != 0 {
		t.Fatalf("a reservation of %d ms: %+v, %v (spent %v); want ErrBadInput and nothing spent", int64(cards.MaxBudget+1), sp, err, spentOf(wall.ID))
	}
	wsp, err := s.ReserveBudget(ctx, wall.ID, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SpendBudgetBytes(ctx, wsp, cards.MaxBudget+1); !errors.Is(err, ErrBadInput) || spentOf(wall.ID)[cards.BudgetBytesOut] != 0 {
		t.Fatalf("a request of %d bytes: %v (spent %v); want ErrBadInput and nothing spent", int64(cards.MaxBudget+1), err, spentOf(wall.ID))
	}
}

// TestBudgetBytesAcrossInstances guards that requests paid at once, from
// three instances on one database, never together spend past a bytes_out
// budget: 90 requests of 10 bytes on bytes_out=300 are 30 paid and 60
// refused. The check and the spend are one transaction under the write
// lock every instance takes.
func TestBudgetBytesAcrossInstances(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBudgetBytesAcrossInstances)
}

func testBudgetBytesAcrossInstances(t *testing.T, be backend) {
	ctx := context.Background()
	target := be.target(t)
	ins := []*DB{open(t, target, nil), open(t, target, nil), open(t, target, nil)}
	if err := ins[0].EnsureAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, err := ins[0].Grant(ctx, "a", budgeted(t, "bytes_out=300", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ins[0].ReserveBudget(ctx, c.ID, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var paid, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 90 {
		s := ins[i%3]
		wg.Go(func() {
			<-start
			err := s.SpendBudgetBytes(ctx, sp, 10)
			var ex *cards.Exhausted
			switch {
			case err == nil:
				paid.Add(1)
			case errors.As(err, &ex) && ex.Key == cards.BudgetBytesOut:
				refused.Add(1)
			default:
				t.Errorf("spend: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	got, err := ins[1].Card(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if paid.Load() != 30 || refused.Load() != 60 || got.Spent[cards.BudgetBytesOut] != 300 {
		t.Fatalf("90 requests of 10 bytes at once on bytes_out=300: %d paid, %d refused, %d spent; want 30, 60, 300",
			paid.Load(), refused.Load(), got.Spent[cards.BudgetBytesOut])
	}
}

// TestChargeBudgetRefusesANegativeReservation guards ChargeBudget's checks
// of what the reservation says: a BudgetSpend whose WallMS or BytesPaid is
// negative (a settlement computed from it would add to the card what the
// call never ran or sent) is bad input, and nothing is charged.
func TestChargeBudgetRefusesANegativeReservation(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		if err := s.EnsureAgent(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		c, err := s.Grant(ctx, "a", budgeted(t, "wall_ms=1000,bytes_out=1000", "tool:invoke echo --..."))
		if err != nil {
			t.Fatal(err)
		}
		sp, err := s.ReserveBudget(ctx, c.ID, 1, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []BudgetSpend{func() BudgetSpend { b := sp; b.WallMS = -500; return b }(), func() BudgetSpend { b := sp; b.BytesPaid = -500; return b }()} {
			if err := s.ChargeBudget(ctx, bad, 10, 10); !errors.Is(err, ErrBadInput) {
				t.Fatalf("a charge of a reservation of %d ms and %d bytes paid: %v; want ErrBadInput", bad.WallMS, bad.BytesPaid, err)
			}
		}
		got, err := s.Card(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Spent[cards.BudgetWallMS] != 100 || got.Spent[cards.BudgetBytesOut] != 0 {
			t.Fatalf("after two refused charges the card spent %v; want the 100 ms reserved and nothing more", got.Spent)
		}
	})
}
