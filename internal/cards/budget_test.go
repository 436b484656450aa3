package cards

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseBudget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Budget
		err  string // substring of the error; "" for none
	}{
		{"calls=100,wall_ms=60000", Budget{"calls": 100, "wall_ms": 60000}, ""},
		{"calls=100, wall_ms=60000", Budget{"calls": 100, "wall_ms": 60000}, ""},
		{"bytes_out=0", Budget{"bytes_out": 0}, ""},
		{"calls=1,wall_ms=2,bytes_out=3,cost=4", Budget{"calls": 1, "wall_ms": 2, "bytes_out": 3, "cost": 4}, ""},
		{"", nil, "empty"},
		{"calls", nil, `"calls" is not KEY=N`},
		{"calls=-1", nil, "calls=-1: expected a whole number"},
		{"calls=1e3", nil, "calls=1e3: expected a whole number"},
		{"calls=9223372036854775807", nil, "expected a whole number from 0 to"},
		{"calls=1,calls=2", nil, "calls is given twice"},
		{"tokens=5", nil, `unknown key "tokens"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBudget(tc.in)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrBadBudget) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseBudget(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatal(diff)
			}
			if again, err := ParseBudget(got.String()); err != nil || !cmp.Equal(again, got) {
				t.Fatalf("String %q does not read back: %v, %v", got.String(), again, err)
			}
		})
	}
}

// TestBudgetArithmetic: what is left, over a chain, and what a call may
// start with.
func TestBudgetArithmetic(t *testing.T) {
	parent := Metered{ID: "p", Budget: Budget{"calls": 10, "cost": 100, "wall_ms": 1000}, Spent: Budget{"calls": 4, "cost": 90, "wall_ms": 1500}}
	grand := Metered{ID: "g", Budget: Budget{"calls": 5, "bytes_out": 50}, Spent: Budget{"calls": 3}}
	if diff := cmp.Diff(Budget{"calls": 6, "cost": 10, "wall_ms": 0}, Left(parent.Budget, parent.Spent)); diff != "" {
		t.Errorf("Left: %s", diff)
	}
	if diff := cmp.Diff(Budget{"calls": 2, "cost": 10, "wall_ms": 0, "bytes_out": 50}, ChainLeft([]Metered{parent, grand})); diff != "" {
		t.Errorf("ChainLeft: %s", diff)
	}
	if diff := cmp.Diff(Budget{"calls": 1, "cost": 10, "wall_ms": 0, "bytes_out": 50}, FillBudget(Budget{"calls": 1}, []Metered{parent, grand})); diff != "" {
		t.Errorf("FillBudget: %s", diff)
	}
	if FillBudget(nil, []Metered{{ID: "x"}}) != nil {
		t.Error("FillBudget of an unlimited chain limits something")
	}
	// What is spent never goes down: a negative amount (a cost expression
	// gone wrong) adds nothing, and a budget may not be negative.
	if diff := cmp.Diff(Budget{"cost": 5, "calls": 1}, Add(Budget{"cost": 5}, Budget{"cost": -3, "calls": 1})); diff != "" {
		t.Errorf("Add of a negative amount (-want +got):\n%s", diff)
	}
	if err := (Budget{"calls": -1}).Check(); !errors.Is(err, ErrBadBudget) {
		t.Errorf("Budget{calls: -1}.Check() = %v, want %v", err, ErrBadBudget)
	}

	for _, tc := range []struct {
		name  string
		chain []Metered
		cost  int64
		card  string // the exhausted card, "" when admitted
		key   string
		left  int64
	}{
		{"no budget", []Metered{{ID: "c"}}, 5, "", "", 0},
		{"calls left", []Metered{{ID: "c", Budget: Budget{"calls": 2}, Spent: Budget{"calls": 1}}}, 1, "", "", 0},
		{"calls spent", []Metered{{ID: "c", Budget: Budget{"calls": 2}, Spent: Budget{"calls": 2}}}, 1, "c", "calls", 0},
		{"zero calls", []Metered{{ID: "c", Budget: Budget{"calls": 0}}}, 1, "c", "calls", 0},
		{"cost short", []Metered{{ID: "c", Budget: Budget{"cost": 10}, Spent: Budget{"cost": 8}}}, 3, "c", "cost", 2},
		{"cost exact", []Metered{{ID: "c", Budget: Budget{"cost": 10}, Spent: Budget{"cost": 7}}}, 3, "", "", 0},
		{"wall time over", []Metered{{ID: "c", Budget: Budget{"wall_ms": 10}, Spent: Budget{"wall_ms": 12}}}, 1, "c", "wall_ms", 0},
		{"wall time left", []Metered{{ID: "c", Budget: Budget{"wall_ms": 10}, Spent: Budget{"wall_ms": 9}}}, 1, "", "", 0},
		{"bytes spent", []Metered{{ID: "c", Budget: Budget{"bytes_out": 10}, Spent: Budget{"bytes_out": 10}}}, 1, "c", "bytes_out", 0},
		{"child fine, parent spent", []Metered{{ID: "c", Budget: Budget{"calls": 5}}, {ID: "p", Budget: Budget{"calls": 5}, Spent: Budget{"calls": 5}}}, 1, "p", "calls", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spend, err := Admit(tc.chain, tc.cost)
			if tc.card == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(Budget{"calls": 1, "cost": tc.cost}, spend); diff != "" {
					t.Fatal(diff)
				}
				return
			}
			var ex *Exhausted
			if !errors.As(err, &ex) || !errors.Is(err, ErrBudgetExhausted) {
				t.Fatalf("Admit = %v, %v; want exhausted", spend, err)
			}
			if ex.Card != tc.card || ex.Key != tc.key || ex.Left != tc.left {
				t.Fatalf("exhausted %+v; want card %s, key %s, left %d", ex, tc.card, tc.key, tc.left)
			}
			if !strings.Contains(err.Error(), "budget-exhausted: card "+tc.card) {
				t.Fatalf("message %q", err)
			}
		})
	}
}

// TestCheckBudget: a derived card's budgets are at most what its parent
// and every ancestor have left; a key the chain limits cannot be dropped.
func TestCheckBudget(t *testing.T) {
	chain := []Metered{
		{ID: "p", Budget: Budget{"calls": 100, "wall_ms": 60000}, Spent: Budget{"calls": 40}},
		{ID: "g", Budget: Budget{"calls": 70, "cost": 9}, Spent: Budget{"calls": 40, "cost": 2}},
	}
	for _, tc := range []struct {
		name  string
		child Budget
		err   string
	}{
		{"exactly what is left", Budget{"calls": 30, "wall_ms": 60000, "cost": 7}, ""},
		{"less, and a new key", Budget{"calls": 1, "wall_ms": 1, "cost": 0, "bytes_out": 5}, ""},
		{"more calls than the parent has left", Budget{"calls": 61, "wall_ms": 1, "cost": 1}, "the child's calls=61 is more than card p has left (60 of 100)"},
		{"more calls than the grandparent has left", Budget{"calls": 31, "wall_ms": 1, "cost": 1}, "the child's calls=31 is more than card g has left (30 of 70)"},
		{"drops wall_ms", Budget{"calls": 1, "cost": 1}, "card p has a wall_ms budget (60000 left) and the child has none"},
		{"no budget at all", nil, "card p has a calls budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBudget(tc.child, chain)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrBudgetTooBroad) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("CheckBudget = %v; want budget-too-broad with %q", err, tc.err)
			}
		})
	}
	if err := CheckBudget(nil, []Metered{{ID: "p"}}); err != nil {
		t.Fatalf("an unlimited parent: %v", err)
	}
}

// TestWalletBudgeted: the wallet knows which of its live cards have a
// budget; a revoked one is not in it.
func TestWalletBudgeted(t *testing.T) {
	cs := []Card{
		{ID: "free", Spec: Spec{LowerPos: gs(t, "tool:invoke x --...")}},
		{ID: "metered", Spec: Spec{LowerPos: gs(t, "tool:invoke x --..."), Budget: Budget{"calls": 1}}},
		{ID: "gone", Spec: Spec{LowerPos: gs(t, "tool:invoke x --..."), Budget: Budget{"calls": 1}}, Revoked: t0},
	}
	w := NewWallet("a", t0, cs)
	for id, want := range map[string]bool{"free": false, "metered": true, "gone": false, "nope": false} {
		if got := w.Budgeted(id); got != want {
			t.Errorf("Budgeted(%s) = %v, want %v", id, got, want)
		}
	}
	if NewWallet("a", t0, cs[:1]).Budgeted("free") {
		t.Error("a wallet without budgets reports one")
	}
}
