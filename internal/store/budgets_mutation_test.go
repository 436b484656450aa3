package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
)

// TestReserveBudgetRefusesANegativeCost: a negative cost is bad input and
// spends nothing; it never gives back what a card has spent, so the card
// whose cost budget is used up stays used up.
func TestReserveBudgetRefusesANegativeCost(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		if err := s.EnsureAgent(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		c, err := s.Grant(ctx, "a", budgeted(t, "cost=10", "tool:invoke echo --..."))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReserveBudget(ctx, c.ID, 10, 1); err != nil {
			t.Fatal(err)
		}
		if sp, err := s.ReserveBudget(ctx, c.ID, -5, 1); !errors.Is(err, ErrBadInput) {
			t.Fatalf("a reservation of cost -5: %+v, %v; want ErrBadInput", sp, err)
		}
		got, err := s.Card(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Spent["cost"] != 10 {
			t.Fatalf("after a reservation of cost -5 the card has spent %d of its cost budget of 10; want 10, nothing given back", got.Spent["cost"])
		}
		var ex *cards.Exhausted
		if _, err := s.ReserveBudget(ctx, c.ID, 1, 1); !errors.As(err, &ex) || ex.Card != c.ID || ex.Key != "cost" || ex.Left != 0 {
			t.Fatalf("a call of cost 1 on a card whose cost budget is spent: %v; want budget-exhausted naming card %s and its cost budget", err, c.ID)
		}
	})
}

// failCardSpend makes every write of card_spend fail, as a full disk or a
// lost connection would, while every read still answers.
func failCardSpend(t *testing.T, s *DB) {
	t.Helper()
	stmts := []string{`CREATE TRIGGER refuse_spend BEFORE INSERT ON card_spend BEGIN SELECT RAISE(ABORT, 'no space left (test)'); END`}
	if s.pg != nil {
		stmts = []string{
			`CREATE FUNCTION refuse_spend() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no space left (test)'; END $$`,
			`CREATE TRIGGER refuse_spend BEFORE INSERT OR UPDATE ON card_spend FOR EACH ROW EXECUTE FUNCTION refuse_spend()`,
		}
	}
	for _, q := range stmts {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReserveBudgetRefusedWhenItsSpendCannotBeWritten: a reservation
// whose spend the store could not write is an error (the call refused),
// never a reservation made with nothing spent.
func TestReserveBudgetRefusedWhenItsSpendCannotBeWritten(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		if err := s.EnsureAgent(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		c, err := s.Grant(ctx, "a", budgeted(t, "calls=1", "tool:invoke echo --..."))
		if err != nil {
			t.Fatal(err)
		}
		failCardSpend(t, s)
		for i := range 2 {
			sp, err := s.ReserveBudget(ctx, c.ID, 1, 1)
			var ex *cards.Exhausted
			if err == nil || errors.As(err, &ex) {
				t.Fatalf("reservation %d of a card of 1 call, its spend not written: %+v, %v; want the store's error (the call would run with nothing spent)", i+1, sp, err)
			}
		}
	})
}

// reserveOnBudgetedCard grants agent "a" a card for echo with budget b on
// s and reserves one call on it.
func reserveOnBudgetedCard(t *testing.T, s *DB, b string) (cards.Card, BudgetSpend) {
	t.Helper()
	ctx := context.Background()
	if err := s.EnsureAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, err := s.Grant(ctx, "a", budgeted(t, b, "tool:invoke echo --..."))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := s.ReserveBudget(ctx, c.ID, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c, sp
}

// TestChargeBudgetWallTimeWithoutBytes: a call that sent nothing is
// charged its wall time all the same, and the card over its wall_ms
// budget refuses the next call.
func TestChargeBudgetWallTimeWithoutBytes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		c, sp := reserveOnBudgetedCard(t, s, "wall_ms=100")
		if err := s.ChargeBudget(ctx, sp, 150, 0); err != nil {
			t.Fatal(err)
		}
		var ex *cards.Exhausted
		if _, err := s.ReserveBudget(ctx, c.ID, 1, 1); !errors.As(err, &ex) || ex.Card != c.ID || ex.Key != "wall_ms" || ex.Left != 0 {
			t.Fatalf("a call after one of 150 ms that sent no bytes, wall_ms budget 100: %v; want budget-exhausted naming card %s and wall_ms", err, c.ID)
		}
	})
}

// TestChargeBudgetRefusesNegativeAmounts: a charge cannot give a card back
// what it spent: a negative wall time or byte count is ErrBadInput and
// changes nothing (the card still refuses the call its spend exhausted).
func TestChargeBudgetRefusesNegativeAmounts(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		c, sp := reserveOnBudgetedCard(t, s, "wall_ms=100,bytes_out=100")
		if err := s.ChargeBudget(ctx, sp, 150, 150); err != nil {
			t.Fatal(err)
		}
		for _, amounts := range [][2]int64{{-1000, 0}, {0, -1000}, {-1000, -1000}} {
			if err := s.ChargeBudget(ctx, sp, amounts[0], amounts[1]); !errors.Is(err, ErrBadInput) {
				t.Fatalf("charging wall_ms %d, bytes_out %d: %v; want ErrBadInput", amounts[0], amounts[1], err)
			}
		}
		var ex *cards.Exhausted
		if _, err := s.ReserveBudget(ctx, c.ID, 1, 1); !errors.As(err, &ex) || ex.Card != c.ID {
			t.Fatalf("a call after the card's budget was spent and negative charges were tried: %v; want budget-exhausted naming card %s", err, c.ID)
		}
	})
}

// TestSpendKeysArePrintable: a quota key's agent or rule holding the
// separator is bad input, so one key's parts cannot name another's
// window (agent "a", rule "x\x1fy" and agent "a\x1fx", rule "y").
func TestSpendKeysArePrintable(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		now := time.Unix(1_700_000_000, 0)
		for _, k := range []QuotaKey{{"a", "x\x1fy"}, {"a\x1fx", "y"}} {
			if ok, _, err := s.Spend(ctx, k, 10, time.Hour, 1, now); !errors.Is(err, ErrBadInput) {
				t.Fatalf("a quota key %q with the separator: allowed %v, %v; want ErrBadInput", k.String(), ok, err)
			}
		}
	})
}

// TestFirstTakeAndSpendAcrossInstances: a bucket or a quota window used
// for the first time by several takers at once, through two instances,
// gives out what it holds and no more: of six takes from a bucket of one
// token, one is allowed; of six spends of a window of one unit, one. The
// first use has no row to lock yet; twenty fresh keys of each.
func TestFirstTakeAndSpendAcrossInstances(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		target := be.target(t)
		ins := []*DB{open(t, target, nil), open(t, target, nil)}
		now := time.Unix(1_700_000_000, 0)
		for round := range 20 {
			agent := "a" + strconv.Itoa(round)
			for _, what := range []string{"take", "spend"} {
				var allowed atomic.Int32
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i := range 6 {
					s := ins[i%2]
					wg.Go(func() {
						<-start
						var ok bool
						var err error
						if what == "take" {
							ok, _, err = s.Take(ctx, BucketKey{agent, "t", "r"}, Rate{Capacity: 1, Refill: 1, Interval: time.Hour}, 1, now)
						} else {
							ok, _, err = s.Spend(ctx, QuotaKey{agent, "q"}, 1, time.Hour, 1, now)
						}
						if err != nil {
							t.Error(err)
						}
						if ok {
							allowed.Add(1)
						}
					})
				}
				close(start)
				wg.Wait()
				if n := allowed.Load(); n != 1 {
					t.Fatalf("agent %s's first %s, six at once through two instances, of one token or unit: %d allowed; want 1", agent, what, n)
				}
			}
		}
	})
}
