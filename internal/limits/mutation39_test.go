package limits

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestMutation39SpanBounds: a bucket whose span (Capacity·Interval/Refill
// ns) does not fit an int64 is refused, at the exact edges of mulDiv's
// 128-bit product: a high word equal to the divisor (a quotient of 2^64)
// and a quotient between 2^63 and 2^64; and a bucket of capacity 0 is not
// a bucket.
func TestMutation39SpanBounds(t *testing.T) {
	for _, b := range []Bucket{
		{Capacity: 1 << 62, Refill: 1, Interval: 4}, // 2^64 ns: high word 1 = Refill
		{Capacity: 1 << 62, Refill: 1, Interval: 3}, // 3·2^62 ns: fits a uint64, not an int64
		{Capacity: 0, Refill: 1, Interval: time.Second},
	} {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return b.Check()
		}()
		if !errors.Is(err, ErrConfig) {
			t.Errorf("Check of %+v = %v; want ErrConfig", b, err)
		}
	}
}

// TestMutation39SpendNegativeCost: a negative cost is an error and gives
// no units back.
func TestMutation39SpendNegativeCost(t *testing.T) {
	w := Window{Limit: 10, Length: time.Hour}
	st := WindowState{Start: t0.UnixNano(), Used: 10}
	d, next, err := Spend(w, st, -5, t0)
	if !errors.Is(err, ErrConfig) || d.Allowed || next != st {
		t.Fatalf("Spend of -5 units in a spent window = %+v, %+v, %v; want ErrConfig, the state unchanged", d, next, err)
	}
}

// TestMutation39SpendLimitLowered: a window holding more units than its
// (lowered) limit says 0 remain, never a negative number, and still allows
// a call of cost 0.
func TestMutation39SpendLimitLowered(t *testing.T) {
	w := Window{Limit: 50, Length: time.Hour}
	st := WindowState{Start: t0.UnixNano(), Used: 80} // t0 is on the hour
	d, _, err := Spend(w, st, 0, t0.Add(time.Minute))
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Errorf("Spend of 0 units with 80 used of 50 = %+v, %v; want allowed, 0 remaining", d, err)
	}
	d, next, err := Spend(w, st, 1, t0.Add(time.Minute))
	if err != nil || d.Allowed || d.Remaining != 0 || next != st || d.Wait != 59*time.Minute {
		t.Errorf("Spend of 1 unit with 80 used of 50 = %+v, %+v, %v; want refused, 0 remaining, a wait of 59m", d, next, err)
	}
}

// TestMutation39SpendNeverKeepsState: a cost above the limit is refused
// for ever and the state comes back as given, in a later window too.
func TestMutation39SpendNeverKeepsState(t *testing.T) {
	w := Window{Limit: 10, Length: time.Hour}
	st := WindowState{Start: t0.UnixNano(), Used: 7}
	d, next, err := Spend(w, st, 11, t0.Add(3*time.Hour))
	if err != nil || d.Allowed || !d.Never || next != st || d.Remaining != 10 {
		t.Errorf("Spend of 11 units (limit 10) three windows later = %+v, %+v, %v; want never, 10 remaining, the state %+v unchanged", d, next, err, st)
	}
}

// TestMutation39WindowBeforeEpoch: windows before the Unix epoch are
// aligned too: 1 ns before it is in the window starting one length before.
func TestMutation39WindowBeforeEpoch(t *testing.T) {
	w := Window{Limit: 1, Length: 60}
	for _, ns := range []int64{-1, -59, -60, -61} {
		want := ns - ((ns%60)+60)%60
		_, next, err := Spend(w, WindowState{Start: -1 << 62}, 1, time.Unix(0, ns))
		if err != nil || next.Start != want {
			t.Errorf("Spend at %d ns: window start %d, %v; want %d", ns, next.Start, err, want)
		}
	}
}
