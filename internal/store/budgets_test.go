package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/cards"
)

// budgeted is spec with budget b (ParseBudget's grammar).
func budgeted(t *testing.T, b string, grants ...string) cards.Spec {
	t.Helper()
	s := spec(t, grants...)
	bud, err := cards.ParseBudget(b)
	if err != nil {
		t.Fatal(err)
	}
	s.Budget = bud
	return s
}

// TestBudgetsAcrossInstances: three stores on one database (three
// instances), 30 concurrent calls against a card with a budget of 5 calls:
// exactly 5 are reserved, the other 25 are refused as exhausted, naming
// the card, and the card shows 5 spent. The check and the spend are one
// transaction under the card's budget lock, which every instance takes.
func TestBudgetsAcrossInstances(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBudgetsAcrossInstances)
}

func testBudgetsAcrossInstances(t *testing.T, be backend) {
	ctx := context.Background()
	target := be.target(t)
	ins := []*DB{open(t, target, nil), open(t, target, nil), open(t, target, nil)}
	if err := ins[0].EnsureAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, err := ins[0].Grant(ctx, "a", budgeted(t, "calls=5", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	var ran, exhausted atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 30 {
		s := ins[i%3]
		wg.Go(func() {
			<-start
			sp, err := s.ReserveBudget(ctx, c.ID, 1, 1)
			var ex *cards.Exhausted
			switch {
			case err == nil && !sp.Zero():
				ran.Add(1)
			case errors.As(err, &ex) && ex.Card == c.ID && ex.Key == cards.BudgetCalls && ex.Left == 0:
				exhausted.Add(1)
			default:
				t.Errorf("reserve: %+v, %v", sp, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ran.Load() != 5 || exhausted.Load() != 25 {
		t.Fatalf("%d of 30 concurrent calls were reserved, %d refused as exhausted; want exactly 5 and 25", ran.Load(), exhausted.Load())
	}
	got, err := ins[2].Card(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Every key is counted on a card with a budget, limited or not.
	if diff := cmp.Diff(cards.Budget{"calls": 5, "cost": 5}, got.Spent); diff != "" {
		t.Fatalf("spent: %s", diff)
	}
}

// TestBudgetsOnlyShrink: a derived card gets at most what its parent (and
// every ancestor) has left; a key it does not name is filled in; spending
// on a child spends its ancestors, so siblings together cannot outspend
// their parent; wall time and bytes are charged at the end and can exhaust
// a card.
func TestBudgetsOnlyShrink(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBudgetsOnlyShrink)
}

func testBudgetsOnlyShrink(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	for _, a := range []string{"a", "b"} {
		if err := s.EnsureAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	root, err := s.Grant(ctx, "a", budgeted(t, "calls=4,wall_ms=1000", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveBudget(ctx, root.ID, 1, 1); err != nil {
		t.Fatal(err)
	}
	// 3 calls left: 4 is too broad, and nothing is written.
	before := dump(t, s)
	_, err = s.Derive(ctx, Operator(), root.ID, "b", budgeted(t, "calls=4", "tool:invoke echo --..."))
	if !errors.Is(err, cards.ErrBudgetTooBroad) || !strings.Contains(err.Error(), "budget-too-broad: the child's calls=4 is more than card "+root.ID+" has left (3 of 4)") {
		t.Fatalf("derive calls=4 from a card with 3 left: %v", err)
	}
	if after := dump(t, s); after != before {
		t.Fatalf("a refused derivation wrote:\n%s", cmp.Diff(before, after))
	}
	// Two siblings of 3 calls each (wall_ms filled in from the parent: what
	// it has left, less the 1 ms the call above reserved and never settled).
	var kids []cards.Card
	for range 2 {
		k, err := s.Derive(ctx, Operator(), root.ID, "b", budgeted(t, "calls=3", "tool:invoke echo --..."))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(cards.Budget{"calls": 3, "wall_ms": 999}, k.Budget); diff != "" {
			t.Fatalf("the child's budget: %s", diff)
		}
		kids = append(kids, k)
	}
	// A grandchild under a child: deriving checks the whole chain.
	grand, err := s.Derive(ctx, Operator(), kids[0].ID, "b", budgeted(t, "calls=2,wall_ms=10", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	// The siblings share the parent's 3 calls: 2 through the grandchild
	// and kids[0], 1 through kids[1], then nothing anywhere.
	for i, id := range []string{grand.ID, grand.ID, kids[1].ID} {
		sp, err := s.ReserveBudget(ctx, id, 1, 1)
		if err != nil {
			t.Fatalf("call %d on %s: %v", i, id, err)
		}
		if i == 0 && (!cmp.Equal(sp.Cards, []string{grand.ID, kids[0].ID, root.ID}) || sp.Left["calls"] != 1) {
			t.Fatalf("the first grandchild call spent %+v", sp)
		}
	}
	for _, id := range []string{kids[0].ID, kids[1].ID, grand.ID, root.ID} {
		_, err := s.ReserveBudget(ctx, id, 1, 1)
		var ex *cards.Exhausted
		if !errors.As(err, &ex) || ex.Key != "calls" || ex.Left != 0 {
			t.Fatalf("a call on %s after the parent's budget is spent: %v (want exhausted)", id, err)
		}
	}
	for id, want := range map[string]int64{root.ID: 4, kids[0].ID: 2, kids[1].ID: 1, grand.ID: 2} {
		c, err := s.Card(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Spent["calls"] != want {
			t.Errorf("card %s spent %d calls, want %d", id, c.Spent["calls"], want)
		}
	}

	// Wall time and bytes: charged at the end, over the limit if need be;
	// the next call is then refused.
	w, err := s.Grant(ctx, "a", budgeted(t, "wall_ms=100,bytes_out=10", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := s.ReserveBudget(ctx, w.ID, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ChargeBudget(ctx, sp, 150, 4); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReserveBudget(ctx, w.ID, 1, 1)
	var ex *cards.Exhausted
	if !errors.As(err, &ex) || ex.Card != w.ID || ex.Key != "wall_ms" || ex.Left != 0 || ex.Limit != 100 {
		t.Fatalf("a call after 150 of 100 ms: %v", err)
	}
	c, _ := s.Card(ctx, w.ID)
	if diff := cmp.Diff(cards.Budget{"calls": 1, "cost": 1, "wall_ms": 150, "bytes_out": 4}, c.Spent); diff != "" {
		t.Fatalf("spent: %s", diff)
	}

	// Cost: a call costing more than is left is refused, one that fits
	// runs.
	cost, err := s.Grant(ctx, "a", budgeted(t, "cost=10", "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveBudget(ctx, cost.ID, 7, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveBudget(ctx, cost.ID, 4, 1); !errors.As(err, &ex) || ex.Key != "cost" || ex.Left != 3 || ex.Need != 4 {
		t.Fatalf("cost 4 with 3 left: %v", err)
	}
	if _, err := s.ReserveBudget(ctx, cost.ID, 3, 1); err != nil {
		t.Fatal(err)
	}

	// A card without a budget, under none: nothing is reserved or written.
	free, err := s.Grant(ctx, "a", spec(t, "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	if sp, err := s.ReserveBudget(ctx, free.ID, 1, 1); err != nil || !sp.Zero() {
		t.Fatalf("reserve on a card without budget: %+v, %v", sp, err)
	}
	// A malformed budget is refused at grant.
	bad := spec(t, "tool:invoke echo --...")
	bad.Budget = cards.Budget{"tokens": 1}
	if _, err := s.Grant(ctx, "a", bad); !errors.Is(err, ErrBadInput) || !errors.Is(err, cards.ErrBadBudget) {
		t.Fatalf("grant with an unknown budget key: %v", err)
	}
}
