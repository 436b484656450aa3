package cards

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Budgets (docs/cards.md, "Budgets"): a card may say how much it may be
// used, besides what it allows. This file is their arithmetic, pure like
// the rest of the package: the store keeps what each card has spent and
// calls Admit, FillBudget and CheckBudget inside its transactions.

// The budget keys, in the order they are written.
const (
	// BudgetCalls counts the calls a card allowed.
	BudgetCalls = "calls"
	// BudgetWallMS counts the milliseconds those calls ran (host calls
	// such as http-fetch included, a human's approval not).
	BudgetWallMS = "wall_ms"
	// BudgetBytesOut counts the bytes the calls sent through http-fetch
	// and web_fetch (method, URL, headers and body of each request) and
	// through a wrapped CLI's CONNECT tunnels.
	BudgetBytesOut = "bytes_out"
	// BudgetCost counts cost units: each call costs its tool's cost
	// (agent.toml, the tool's cost key; 1 when it declares none).
	BudgetCost = "cost"
)

// BudgetKeys are the budget keys, in the order they are written.
var BudgetKeys = []string{BudgetCalls, BudgetWallMS, BudgetBytesOut, BudgetCost}

// MaxBudget bounds a budget's value, so that sums of spending cannot
// overflow.
const MaxBudget = math.MaxInt64 / 4

var (
	// ErrBudgetTooBroad: a derived card's budget is more than its parent
	// (or an ancestor) has left.
	ErrBudgetTooBroad = errors.New("budget-too-broad")
	// ErrBudgetExhausted: a card (or an ancestor) has too little of a
	// budget left for the call.
	ErrBudgetExhausted = errors.New("budget-exhausted")
	// ErrBadBudget: a budget text is malformed.
	ErrBadBudget = errors.New("bad budget")
)

// Budget is a card's budgets, by key (BudgetKeys); a key that is absent is
// not limited by this card. As spending it is what a card has spent. The
// nil Budget limits nothing.
type Budget map[string]int64

// ParseBudget reads "calls=100,wall_ms=60000": any subset of BudgetKeys,
// each once, with a whole number from 0 to MaxBudget.
func ParseBudget(s string) (Budget, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty (write KEY=N,...; keys: %s)", ErrBadBudget, strings.Join(BudgetKeys, ", "))
	}
	b := Budget{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not KEY=N (keys: %s)", ErrBadBudget, part, strings.Join(BudgetKeys, ", "))
		}
		if !slices.Contains(BudgetKeys, k) {
			return nil, fmt.Errorf("%w: unknown key %q (keys: %s)", ErrBadBudget, k, strings.Join(BudgetKeys, ", "))
		}
		if _, dup := b[k]; dup {
			return nil, fmt.Errorf("%w: %s is given twice", ErrBadBudget, k)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > MaxBudget {
			return nil, fmt.Errorf("%w: %s=%s: expected a whole number from 0 to %d", ErrBadBudget, k, v, int64(MaxBudget))
		}
		b[k] = n
	}
	return b, nil
}

// Check says whether b is well formed (known keys, values in range): what
// the store checks of a budget that did not come from ParseBudget.
func (b Budget) Check() error {
	for k, v := range b {
		if !slices.Contains(BudgetKeys, k) {
			return fmt.Errorf("%w: unknown key %q (keys: %s)", ErrBadBudget, k, strings.Join(BudgetKeys, ", "))
		}
		if v < 0 || v > MaxBudget {
			return fmt.Errorf("%w: %s=%d: expected a whole number from 0 to %d", ErrBadBudget, k, v, int64(MaxBudget))
		}
	}
	return nil
}

// String is b in the grammar ParseBudget reads, keys in BudgetKeys order
// ("" for no budget).
func (b Budget) String() string {
	var parts []string
	for _, k := range BudgetKeys {
		if v, ok := b[k]; ok {
			parts = append(parts, k+"="+strconv.FormatInt(v, 10))
		}
	}
	return strings.Join(parts, ",")
}

// Left is what remains of limit after spent, per key of limit (never
// below 0: wall time and bytes are charged after the call and may go
// over).
func Left(limit, spent Budget) Budget {
	if len(limit) == 0 {
		return nil
	}
	out := make(Budget, len(limit))
	for k, v := range limit {
		out[k] = max(0, v-spent[k])
	}
	return out
}

// Metered is a card as budgets see it: its ID, its budget and what it has
// spent so far. A chain is a card followed by its ancestors.
type Metered struct {
	ID     string
	Budget Budget
	Spent  Budget
}

// ChainLeft is the least each key has left over a chain: what a card
// derived from chain[0] may be given at most.
func ChainLeft(chain []Metered) Budget {
	var out Budget
	for _, m := range chain {
		for k, v := range Left(m.Budget, m.Spent) {
			if out == nil {
				out = Budget{}
			}
			if cur, ok := out[k]; !ok || v < cur {
				out[k] = v
			}
		}
	}
	return out
}

// FillBudget is child with every key the chain limits and child does not
// given what the chain has left: a derived card shows the budgets it is
// under, as it shows its parent's expiry (Child).
func FillBudget(child Budget, chain []Metered) Budget {
	left := ChainLeft(chain)
	if len(left) == 0 {
		return child
	}
	out := make(Budget, len(left)+len(child))
	for k, v := range left {
		out[k] = v
	}
	for k, v := range child {
		out[k] = v
	}
	return out
}

// CheckBudget says whether a card with budget child may be derived from
// chain[0] (whose ancestors follow): budgets only shrink, so every key
// any card of the chain limits must be in child, at most what that card
// has left. The error (ErrBudgetTooBroad) names the card, the key, what
// was asked and what is left.
func CheckBudget(child Budget, chain []Metered) error {
	for _, m := range chain {
		left := Left(m.Budget, m.Spent)
		for _, k := range BudgetKeys {
			l, limited := left[k]
			if !limited {
				continue
			}
			c, ok := child[k]
			switch {
			case !ok:
				return fmt.Errorf("%w: card %s has a %s budget (%d left) and the child has none", ErrBudgetTooBroad, m.ID, k, l)
			case c > l:
				return fmt.Errorf("%w: the child's %s=%d is more than card %s has left (%d of %d)", ErrBudgetTooBroad, k, c, m.ID, l, m.Budget[k])
			}
		}
	}
	return nil
}

// Exhausted is why a call may not spend a chain's budgets: the card, the
// key and what is left of it.
type Exhausted struct {
	Card  string
	Key   string
	Limit int64
	Left  int64
	Need  int64 // what the call needs of it (1 call, its cost; 1 for wall_ms and bytes_out: some left)
}

func (e *Exhausted) Error() string {
	return fmt.Sprintf("%s: card %s has %d of its %s budget of %d left, this call needs %d", ErrBudgetExhausted, e.Card, e.Left, e.Key, e.Limit, e.Need)
}

// Is makes errors.Is(e, ErrBudgetExhausted) hold.
func (e *Exhausted) Is(target error) bool { return target == ErrBudgetExhausted }

// Admit says whether a call costing cost may start on chain (the card that
// allowed it and its ancestors), and what it then spends up front: one
// call and its cost on every card of the chain that limits them. Wall
// time and bytes are known only when the call ends (Charge); a call may
// start while some of each is left. The first card whose budget is short
// is the *Exhausted error.
func Admit(chain []Metered, cost int64) (Budget, error) {
	need := Budget{BudgetCalls: 1, BudgetCost: cost, BudgetWallMS: 1, BudgetBytesOut: 1}
	for _, m := range chain {
		left := Left(m.Budget, m.Spent)
		for _, k := range BudgetKeys {
			if l, limited := left[k]; limited && l < need[k] {
				return nil, &Exhausted{Card: m.ID, Key: k, Limit: m.Budget[k], Left: l, Need: need[k]}
			}
		}
	}
	return Budget{BudgetCalls: 1, BudgetCost: cost}, nil
}

// Add is spent plus more, per key (capped at MaxBudget).
func Add(spent, more Budget) Budget {
	out := make(Budget, len(spent)+len(more))
	for k, v := range spent {
		out[k] = v
	}
	for k, v := range more {
		out[k] = min(MaxBudget, out[k]+max(0, v))
	}
	return out
}
