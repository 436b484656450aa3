package egress

import (
	"errors"
	"testing"
)

// TestAllotmentPaysAheadAndExactly: a session's tunnels pay for what they
// send in blocks of tunnelBlock ahead, from what earlier blocks left, and
// exactly what is missing where a block does not fit the budget; a send
// that cannot be paid for is refused and pays nothing.
func TestAllotmentPaysAheadAndExactly(t *testing.T) {
	budget := int64(100_000)
	var payments []int64
	a := &allotment{pay: func(n int64) error {
		if n > budget {
			return errors.New("budget-exhausted")
		}
		budget -= n
		payments = append(payments, n)
		return nil
	}}
	for _, n := range []int64{517, 30_000, 40_000} {
		if err := a.take(n); err != nil {
			t.Fatalf("take(%d): %v", n, err)
		}
	}
	// 517: a block (65,536); 30,000 from it (35,019 left); 40,000: 4,981
	// missing, a block does not fit the 34,464 left, so exactly 4,981.
	if len(payments) != 2 || payments[0] != tunnelBlock || payments[1] != 4_981 || a.left != 0 || a.paid != tunnelBlock+4_981 {
		t.Fatalf("payments %v, left %d, paid %d; want [65536 4981], 0, 70517", payments, a.left, a.paid)
	}
	if err := a.take(40_000); err == nil || a.paid != tunnelBlock+4_981 || budget != 29_483 {
		t.Fatalf("a send of 40,000 with 29,483 left: %v (paid %d, budget %d); want refused, nothing paid", err, a.paid, budget)
	}
	if err := a.take(29_483); err != nil || budget != 0 {
		t.Fatalf("the last 29,483: %v (budget %d)", err, budget)
	}
}
