package limits

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Pass 39's defect: Check accepted any bucket whose span (the time to
// refill from empty) fitted an int64 of nanoseconds, 292 years, and Take
// moved the stored time up to a span past today, so a span of a few centuries
// ("limit = 1, per = "2200000h"", which agent.toml took) wrapped the
// stored time negative: the next take found a full bucket, and every call
// after the first was allowed. Spans are now bounded by MaxSpan, windows
// too, and a take whose next time would not fit is an error, not an
// allowed call.
func TestLongSpansRefusedNotWrapped(t *testing.T) {
	now := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	for _, b := range []Bucket{
		{Capacity: 1, Refill: 1, Interval: 2200000 * time.Hour},   // the defect's: 251 years
		{Capacity: 110, Refill: 1, Interval: 20000 * time.Hour},   // 251 years in bursts of 110
		{Capacity: 1, Refill: 1, Interval: MaxSpan + time.Second}, // just past the bound
	} {
		if err := b.Check(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "more than 50 years") {
			t.Errorf("Check of %d per %v (bursts of %d) = %v; want ErrConfig, more than 50 years", b.Refill, b.Interval, b.Capacity, err)
		}
		// Whatever Check says, no take after a bucket's span is spent is
		// allowed within the span.
		var st BucketState
		allowed := 0
		for i := range b.Capacity + 5 {
			d, next, err := Take(b, st, 1, now.Add(time.Duration(i)*time.Second))
			if err == nil && d.Allowed {
				allowed++
			}
			st = next
		}
		if allowed != 0 {
			t.Errorf("a bucket of %d per %v (bursts of %d): %d of %d takes in %d s allowed; want none (refused as a configuration)", b.Refill, b.Interval, b.Capacity, allowed, b.Capacity+5, b.Capacity+5)
		}
	}
	// At the bound, the bucket works as written.
	b := Bucket{Capacity: 1, Refill: 1, Interval: MaxSpan}
	var st BucketState
	for i, want := range []bool{true, false, false} {
		d, next, err := Take(b, st, 1, now.Add(time.Duration(i)*time.Hour))
		if err != nil || d.Allowed != want {
			t.Fatalf("take %d of 1 per %v: %+v, %v; want allowed %v", i, MaxSpan, d, err, want)
		}
		st = next
	}
	// A take whose next time would pass 2262 is an error, not a wrap.
	late := time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC)
	b = Bucket{Capacity: 2, Refill: 1, Interval: 10 * 365 * 24 * time.Hour}
	st = BucketState{}
	for i := range 3 {
		d, next, err := Take(b, st, 1, late)
		if i < 1 && (err != nil || !d.Allowed) {
			t.Fatalf("take %d in 2250 of 1 per 10 years (bursts of 2): %+v, %v; want allowed", i, d, err)
		}
		if i >= 1 && (d.Allowed || !errors.Is(err, ErrConfig) || next != st) {
			t.Fatalf("take %d in 2250 of 1 per 10 years (bursts of 2), its next time past 2262: %+v, %+v, %v; want ErrConfig, the state unchanged", i, d, next, err)
		}
		st = next
	}
	if err := (Window{Limit: 1, Length: MaxSpan + time.Hour}).Check(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "longer than 50 years") {
		t.Errorf("Check of a window of %v = %v; want ErrConfig, longer than 50 years", MaxSpan+time.Hour, err)
	}
	if err := (Window{Limit: 1, Length: MaxSpan}).Check(); err != nil {
		t.Errorf("Check of a window of %v = %v; want nil", MaxSpan, err)
	}
}
