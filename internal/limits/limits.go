package limits

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Bucket is a token bucket's configuration.
type Bucket struct {
	Capacity int64         // most tokens held (the burst)
	Refill   int64         // tokens gained every Interval
	Interval time.Duration // the refill period
}

// BucketState is what the store persists for one bucket: the theoretical
// arrival time in Unix nanoseconds. The zero value is a full bucket.
type BucketState struct{ TAT int64 }

// Outcome is the outcome of one take or spend.
type Outcome struct {
	Allowed   bool
	Remaining int64         // tokens or units left after this call (when allowed) or now (when refused)
	Wait      time.Duration // when refused: how long until the same call would be allowed; 0 if never
	Never     bool          // when refused: the cost exceeds the capacity or limit, no wait helps
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid limit")

// mulDiv is a*b/c for non-negative a, b and positive c without overflow in
// between; ok is false when the result does not fit an int64.
func mulDiv(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q), q <= math.MaxInt64
}

// MaxSpan is the longest a bucket may take to refill from empty
// (Capacity×Interval/Refill) and the longest a window may be. A bucket's
// state is a time in Unix nanoseconds (an int64, which ends in 2262) up
// to a span ahead of now: a span of centuries wrapped that time negative,
// where the next take found a full bucket and every call was allowed. 50
// years keeps it inside an int64 until the year 2212; Take refuses, as an
// error, a next time that would still not fit.
const MaxSpan = 50 * 365 * 24 * time.Hour

// Check validates the configuration.
func (b Bucket) Check() error {
	if b.Capacity <= 0 || b.Refill <= 0 || b.Interval <= 0 {
		return fmt.Errorf("%w: a bucket's capacity, refill and interval must be positive (capacity %d, refill %d, interval %v)", ErrConfig, b.Capacity, b.Refill, b.Interval)
	}
	if span, ok := mulDiv(b.Capacity, int64(b.Interval), b.Refill); !ok || span > int64(MaxSpan) {
		return fmt.Errorf("%w: a bucket of %d tokens refilled %d per %v takes more than 50 years to refill from empty", ErrConfig, b.Capacity, b.Refill, b.Interval)
	}
	return nil
}

// Take takes cost tokens at now from a bucket in state st, and returns the
// decision and the state to persist (st itself when refused).
func Take(b Bucket, st BucketState, cost int64, now time.Time) (Outcome, BucketState, error) {
	if err := b.Check(); err != nil {
		return Outcome{}, st, err
	}
	if cost < 0 {
		return Outcome{}, st, fmt.Errorf("%w: a negative cost (%d)", ErrConfig, cost)
	}
	t := now.UnixNano()
	tat := max(st.TAT, t)
	// Times are spans "owed" ahead of now, in nanoseconds.
	burst, _ := mulDiv(b.Capacity, int64(b.Interval), b.Refill)
	owed := tat - t
	if cost > b.Capacity {
		return Outcome{Remaining: b.remaining(burst - owed), Never: true}, st, nil
	}
	step, _ := mulDiv(cost, int64(b.Interval), b.Refill)
	if owed+step > burst {
		return Outcome{Remaining: b.remaining(burst - owed), Wait: time.Duration(owed + step - burst)}, st, nil
	}
	if tat > math.MaxInt64-step {
		return Outcome{}, st, fmt.Errorf("%w: the bucket's next time, %d ns after %v, is past what an int64 of Unix nanoseconds holds", ErrConfig, step, time.Unix(0, tat).UTC())
	}
	next := tat + step
	return Outcome{Allowed: true, Remaining: b.remaining(burst - owed - step)}, BucketState{TAT: next}, nil
}

// remaining is the whole tokens a span of free time holds.
func (b Bucket) remaining(free int64) int64 {
	if free <= 0 {
		return 0
	}
	n, _ := mulDiv(free, b.Refill, int64(b.Interval))
	return min(n, b.Capacity)
}

// Window is a cost window's configuration.
type Window struct {
	Limit  int64         // units allowed per window
	Length time.Duration // the window, aligned to the Unix epoch
}

// WindowState is what the store persists for one window: the start of the
// window it counts (Unix nanoseconds) and the units used in it.
type WindowState struct {
	Start int64
	Used  int64
}

// Check validates the configuration.
func (w Window) Check() error {
	if w.Limit <= 0 || w.Length <= 0 {
		return fmt.Errorf("%w: a window's limit and length must be positive (limit %d, length %v)", ErrConfig, w.Limit, w.Length)
	}
	if w.Length > MaxSpan {
		return fmt.Errorf("%w: a window of %v is longer than 50 years", ErrConfig, w.Length)
	}
	return nil
}

// Spend spends cost units at now from a window in state st, and returns
// the decision and the state to persist.
func Spend(w Window, st WindowState, cost int64, now time.Time) (Outcome, WindowState, error) {
	if err := w.Check(); err != nil {
		return Outcome{}, st, err
	}
	if cost < 0 {
		return Outcome{}, st, fmt.Errorf("%w: a negative cost (%d)", ErrConfig, cost)
	}
	t := now.UnixNano()
	start := t - mod(t, int64(w.Length))
	cur := st
	if start > st.Start { // a later window: the count starts again
		cur = WindowState{Start: start}
	} // else the same window, or the clock went back: keep counting
	left := max(w.Limit-cur.Used, 0)
	if cost > w.Limit {
		return Outcome{Remaining: left, Never: true}, st, nil
	}
	if cost > left {
		end := cur.Start + int64(w.Length)
		wait := time.Duration(max(end-t, 1))
		return Outcome{Remaining: left, Wait: wait}, st, nil
	}
	cur.Used += cost
	return Outcome{Allowed: true, Remaining: left - cost}, cur, nil
}

func mod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// Describe is the bucket as an operator wrote it: "10 per minute", "5 per
// 30s (bursts of 20)".
func (b Bucket) Describe() string {
	s := strconv.FormatInt(b.Refill, 10) + " per " + per(b.Interval)
	if b.Capacity != b.Refill {
		s += fmt.Sprintf(" (bursts of %d)", b.Capacity)
	}
	return s
}

// Describe is the window as an operator wrote it: "1000 units per day".
func (w Window) Describe() string {
	return fmt.Sprintf("%d units per %s", w.Limit, per(w.Length))
}

func per(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}

// Message is the refusal an agent sees for a decision of the limit named
// kind ("rate limit", "quota") described as what, e.g. "rate limit: 10
// per minute for agent ops on tool weather; try again in 4.2 s". It is ""
// for an allowed decision.
func (d Outcome) Message(kind, what, agent, tool string) string {
	if d.Allowed {
		return ""
	}
	s := kind + ": " + what + " for agent " + agent
	if tool != "" {
		s += " on tool " + tool
	}
	if d.Never {
		return s + "; this call costs more than the limit allows at once, and will never be allowed"
	}
	return s + "; try again in " + WaitText(d.Wait)
}

// WaitText writes a wait rounded up to a tenth of a second under a minute
// ("4.2 s"), to a second under an hour ("3 min 5 s"), to a minute beyond
// ("2 h 0 min"), so that retrying after the written time succeeds.
func WaitText(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	const tenth = 100 * time.Millisecond
	if d < time.Minute-tenth {
		t := (d + tenth - 1) / tenth
		return fmt.Sprintf("%d.%d s", t/10, t%10)
	}
	if d < time.Hour-time.Second {
		s := int64((d + time.Second - 1) / time.Second)
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	}
	m := int64((d + time.Minute - 1) / time.Minute)
	return fmt.Sprintf("%d h %d min", m/60, m%60)
}
