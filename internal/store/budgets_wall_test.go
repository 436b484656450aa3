package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/cards"
)

// TestBudgetWallTimeReserved: a call on a card with a wall_ms budget
// reserves its wall time when it starts (what it asked for, or what is
// left if less), so calls running at once hold their shares and the next
// finds only the rest, or none; the end settles the reservation, giving
// back what a call did not use and adding what it ran past it.
func TestBudgetWallTimeReserved(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBudgetWallTimeReserved)
}

func testBudgetWallTimeReserved(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	if err := s.EnsureAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, err := s.Grant(ctx, "a", budgeted(t, "wall_ms=100", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	reserve := func(ask int64) BudgetSpend {
		t.Helper()
		sp, err := s.ReserveBudget(ctx, c.ID, 1, ask)
		if err != nil {
			t.Fatalf("reserve %d ms: %v", ask, err)
		}
		return sp
	}
	spentWall := func() int64 {
		t.Helper()
		got, err := s.Card(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Spent[cards.BudgetWallMS]
	}
	first, second := reserve(60), reserve(60)
	if first.WallMS != 60 || second.WallMS != 40 || spentWall() != 100 {
		t.Fatalf("two calls asking 60 ms of 100: reserved %d and %d, spent %d; want 60, 40 (what was left), 100", first.WallMS, second.WallMS, spentWall())
	}
	if diff := cmp.Diff(cards.Budget{cards.BudgetCalls: 1, cards.BudgetCost: 1, cards.BudgetWallMS: 40}, second.Spent); diff != "" {
		t.Errorf("the second call's spend up front: %s", diff)
	}
	_, err = s.ReserveBudget(ctx, c.ID, 1, 60)
	var ex *cards.Exhausted
	if !errors.As(err, &ex) || ex.Card != c.ID || ex.Key != cards.BudgetWallMS || ex.Left != 0 {
		t.Fatalf("a third call while both run: %v; want budget-exhausted naming wall_ms, 0 left", err)
	}
	// The first ends after 10 ms: 50 back.
	if err := s.ChargeBudget(ctx, first, 10, 0); err != nil {
		t.Fatal(err)
	}
	if got := spentWall(); got != 50 {
		t.Fatalf("after the first call's 10 of its 60 ms: spent %d; want 50", got)
	}
	third := reserve(60)
	if third.WallMS != 50 {
		t.Fatalf("a call after the refund: reserved %d; want the 50 left", third.WallMS)
	}
	// The second ran 5 ms past its 40 (its teardown): charged.
	if err := s.ChargeBudget(ctx, second, 45, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.ChargeBudget(ctx, third, 50, 0); err != nil {
		t.Fatal(err)
	}
	if got := spentWall(); got != 105 {
		t.Fatalf("10 + 45 + 50 ms run: spent %d; want 105", got)
	}
	// Asking for no wall time at all is bad input.
	if _, err := s.ReserveBudget(ctx, c.ID, 1, 0); !errors.Is(err, ErrBadInput) {
		t.Fatalf("a reservation of 0 ms: %v; want ErrBadInput", err)
	}
	// A chain without a wall_ms budget reserves nothing.
	calls, err := s.Grant(ctx, "a", budgeted(t, "calls=3", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	if sp, err := s.ReserveBudget(ctx, calls.ID, 1, 60); err != nil || sp.WallMS != 0 || sp.Spent[cards.BudgetWallMS] != 0 {
		t.Fatalf("a card limiting calls only: %+v, %v; want no wall time reserved", sp, err)
	}
}

// TestBudgetWallTimeAcrossInstances: three instances, 30 calls at once,
// each asking 30 ms of a card's 200: what they reserve together is the
// budget, never more (before reservations, every call saw wall time left
// and ran its full length: 30 calls, 900 ms).
func TestBudgetWallTimeAcrossInstances(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBudgetWallTimeAcrossInstances)
}

func testBudgetWallTimeAcrossInstances(t *testing.T, be backend) {
	ctx := context.Background()
	target := be.target(t)
	ins := []*DB{open(t, target, nil), open(t, target, nil), open(t, target, nil)}
	if err := ins[0].EnsureAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, err := ins[0].Grant(ctx, "a", budgeted(t, "wall_ms=200", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	var reserved, admitted, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 30 {
		s := ins[i%3]
		wg.Go(func() {
			<-start
			sp, err := s.ReserveBudget(ctx, c.ID, 1, 30)
			var ex *cards.Exhausted
			switch {
			case err == nil:
				admitted.Add(1)
				reserved.Add(sp.WallMS)
			case errors.As(err, &ex) && ex.Key == cards.BudgetWallMS:
				refused.Add(1)
			default:
				t.Errorf("reserve: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if reserved.Load() != 200 || admitted.Load() != 7 || refused.Load() != 23 {
		t.Fatalf("30 calls asking 30 ms of 200: %d admitted, %d refused, %d ms reserved; want 7 (six of 30 ms, one of the 20 left), 23, 200",
			admitted.Load(), refused.Load(), reserved.Load())
	}
}

// TestBudgetBytesSpentBeforeSending: a request's bytes are spent on the
// chain's bytes_out before it is sent, or refused whole (Exhausted naming
// what is left and what it needs, nothing spent); the end settles against
// what was paid, giving back a request's bytes that were paid and not sent.
func TestBudgetBytesSpentBeforeSending(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBudgetBytesSpentBeforeSending)
}

func testBudgetBytesSpentBeforeSending(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	if err := s.EnsureAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, err := s.Grant(ctx, "a", budgeted(t, "bytes_out=100", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := s.ReserveBudget(ctx, c.ID, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	spentBytes := func() int64 {
		t.Helper()
		got, err := s.Card(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Spent[cards.BudgetBytesOut]
	}
	if err := s.SpendBudgetBytes(ctx, sp, 60); err != nil || spentBytes() != 60 {
		t.Fatalf("60 of 100 bytes: %v, spent %d", err, spentBytes())
	}
	err = s.SpendBudgetBytes(ctx, sp, 50)
	var ex *cards.Exhausted
	if !errors.As(err, &ex) || ex.Card != c.ID || ex.Key != cards.BudgetBytesOut || ex.Left != 40 || ex.Need != 50 || spentBytes() != 60 {
		t.Fatalf("50 more with 40 left: %v, spent %d; want Exhausted (40 left, 50 needed), nothing spent", err, spentBytes())
	}
	if err := s.SpendBudgetBytes(ctx, sp, 40); err != nil || spentBytes() != 100 {
		t.Fatalf("the 40 left: %v, spent %d", err, spentBytes())
	}
	// Paid 100, sent 70 (a request the policy then refused sent nothing):
	// 30 back.
	sp.BytesPaid = 100
	if err := s.ChargeBudget(ctx, sp, 1, 70); err != nil || spentBytes() != 70 {
		t.Fatalf("settled at 70 sent of 100 paid: %v, spent %d", err, spentBytes())
	}
	if err := s.SpendBudgetBytes(ctx, sp, -1); !errors.Is(err, ErrBadInput) {
		t.Fatalf("a negative request: %v; want ErrBadInput", err)
	}
}
