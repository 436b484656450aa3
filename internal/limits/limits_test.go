package limits

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

func TestBucketTenPerMinute(t *testing.T) {
	b := Bucket{Capacity: 10, Refill: 10, Interval: time.Minute}
	var st BucketState
	for i := range 10 {
		d, next, err := Take(b, st, 1, t0)
		if err != nil || !d.Allowed || d.Remaining != int64(9-i) {
			t.Fatalf("take %d: %+v, %v", i, d, err)
		}
		st = next
	}
	d, next, err := Take(b, st, 1, t0.Add(1800*time.Millisecond))
	if err != nil || d.Allowed || d.Wait != 4200*time.Millisecond || d.Remaining != 0 || next != st {
		t.Fatalf("11th: %+v, %+v, %v", d, next, err)
	}
	want := "rate limit: 10 per minute for agent ops on tool weather; try again in 4.2 s"
	if got := d.Message("rate limit", b.Describe(), "ops", "weather"); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	// Exactly at the refill instant, not a nanosecond before.
	if d, _, _ := Take(b, st, 1, t0.Add(6*time.Second-1)); d.Allowed {
		t.Error("allowed 1 ns before the refill")
	}
	if d, _, _ := Take(b, st, 1, t0.Add(6*time.Second)); !d.Allowed || d.Remaining != 0 {
		t.Errorf("at the refill: %+v", d)
	}
	// Left alone for a minute, the bucket is full again.
	if d, _, _ := Take(b, st, 10, t0.Add(time.Minute)); !d.Allowed || d.Remaining != 0 {
		t.Errorf("after a minute: %+v", d)
	}
	if d, _, _ := Take(b, st, 10, t0.Add(time.Minute-1)); d.Allowed {
		t.Errorf("1 ns before a full minute: %+v", d)
	}
	// Never: a cost above capacity.
	d, _, _ = Take(b, BucketState{}, 11, t0)
	if d.Allowed || !d.Never || d.Remaining != 10 || !strings.Contains(d.Message("rate limit", b.Describe(), "ops", "weather"), "never be allowed") {
		t.Errorf("cost 11: %+v", d)
	}
}

func TestBucketCheck(t *testing.T) {
	for _, b := range []Bucket{
		{}, {Capacity: 1, Refill: 1}, {Capacity: -1, Refill: 1, Interval: time.Second}, {Capacity: 1, Refill: 0, Interval: time.Second},
		{Capacity: 1 << 40, Refill: 1, Interval: 24 * time.Hour},
	} {
		if _, _, err := Take(b, BucketState{}, 1, t0); !errors.Is(err, ErrConfig) {
			t.Errorf("Take with %+v: %v, want ErrConfig", b, err)
		}
	}
	if _, _, err := Take(Bucket{Capacity: 1, Refill: 1, Interval: time.Second}, BucketState{}, -1, t0); !errors.Is(err, ErrConfig) {
		t.Errorf("negative cost: %v", err)
	}
}

type event struct {
	at   int64
	cost int64
}

func randBucket(r *rand.Rand) Bucket {
	intervals := []time.Duration{time.Second, time.Minute, 7 * time.Second, 3*time.Millisecond + 17, time.Hour}
	b := Bucket{Capacity: 1 + r.Int64N(20), Refill: 1 + r.Int64N(1000), Interval: intervals[r.IntN(len(intervals))]}
	return b
}

// Over any span, the cost allowed is at most Capacity + span/step tokens,
// and exactly Capacity + Refill·span/Interval when the division is exact.
func TestBucketNeverExceedsCapacityInAnyWindow(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for range 200 {
		b := randBucket(r)
		step := int64(b.Interval) / b.Refill
		burst, _ := mulDiv(b.Capacity, int64(b.Interval), b.Refill)
		var st BucketState
		now := t0.UnixNano()
		var allowed []event
		for range 300 {
			now += r.Int64N(3 * step)
			cost := r.Int64N(b.Capacity + 2)
			d, next, err := Take(b, st, cost, time.Unix(0, now))
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed && next != st {
				t.Fatalf("%+v: a refusal changed the state", b)
			}
			st = next
			if d.Allowed {
				allowed = append(allowed, event{now, cost})
			}
		}
		for i := range allowed {
			var sum int64
			for j := i; j < len(allowed); j++ {
				sum += allowed[j].cost
				span := allowed[j].at - allowed[i].at
				// Each allowed take moves the arrival time by at least
				// cost*step and the last one left it within burst of
				// now, so sum*step <= burst + span (burst is rounded
				// down from the exact Capacity*Interval/Refill, which
				// can hold one more step than Capacity*step).
				if bound := (burst + span) / step; sum > bound {
					t.Fatalf("%+v: %d allowed over %v, bound %d", b, sum, time.Duration(span), bound)
				}
				if int64(b.Interval)%b.Refill == 0 {
					if exact := b.Capacity + span*b.Refill/int64(b.Interval); sum > exact {
						t.Fatalf("%+v: %d allowed over %v, exact bound %d", b, sum, time.Duration(span), exact)
					}
				}
			}
		}
	}
}

// A refusal's Wait is exact: the same take succeeds at now+Wait and not a
// nanosecond earlier.
func TestBucketWaitIsExact(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	for range 2000 {
		b := randBucket(r)
		st := BucketState{TAT: t0.UnixNano() + r.Int64N(2*int64(b.Interval))}
		now := t0.Add(time.Duration(r.Int64N(int64(b.Interval))))
		cost := 1 + r.Int64N(b.Capacity)
		d, _, _ := Take(b, st, cost, now)
		if d.Allowed {
			continue
		}
		if d.Never || d.Wait <= 0 {
			t.Fatalf("%+v cost %d: %+v", b, cost, d)
		}
		if d2, _, _ := Take(b, st, cost, now.Add(d.Wait)); !d2.Allowed {
			t.Fatalf("%+v cost %d: refused again after the wait %v: %+v", b, cost, d.Wait, d2)
		}
		if d2, _, _ := Take(b, st, cost, now.Add(d.Wait-1)); d2.Allowed {
			t.Fatalf("%+v cost %d: allowed 1 ns before the wait %v", b, cost, d.Wait)
		}
	}
}

// A clock that goes backwards never gives tokens back: a take at an
// earlier time is allowed only if it would have been at the later one, and
// the state never moves back.
func TestBucketClockBackwards(t *testing.T) {
	seed := rand.Uint64()
	if s := os.Getenv("LIMITS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (LIMITS_SEED=%d reruns it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 3))
	for range 200 {
		b := randBucket(r)
		var st BucketState
		latest := t0.UnixNano()
		earliest := latest
		var total int64
		for range 300 {
			now := latest + r.Int64N(int64(b.Interval)) - int64(b.Interval)/2 // half the time backwards
			latest, earliest = max(latest, now), min(earliest, now)
			cost := r.Int64N(b.Capacity + 1)
			dLate, _, _ := Take(b, st, cost, time.Unix(0, latest))
			d, next, err := Take(b, st, cost, time.Unix(0, now))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed && !dLate.Allowed {
				t.Fatalf("%+v: allowed at an earlier time %d but not at the latest %d", b, now, latest)
			}
			if next.TAT < st.TAT {
				t.Fatalf("%+v: TAT went back", b)
			}
			st = next
			if d.Allowed {
				total += cost
			}
		}
		// A full bucket, then one token per step over the time the calls
		// spanned: from the earliest instant one was made at (the first
		// can be half an interval before t0), not from t0.
		step := int64(b.Interval) / b.Refill
		if bound := b.Capacity + (latest-earliest)/step; total > bound {
			t.Fatalf("%+v: %d allowed, bound %d", b, total, bound)
		}
	}
}

func TestWindow(t *testing.T) {
	w := Window{Limit: 100, Length: 24 * time.Hour}
	var st WindowState
	now := t0 // 06:00 UTC
	d, st, err := Spend(w, st, 60, now)
	if err != nil || !d.Allowed || d.Remaining != 40 {
		t.Fatalf("%+v %v", d, err)
	}
	d, st2, _ := Spend(w, st, 41, now.Add(time.Hour))
	if d.Allowed || d.Wait != 17*time.Hour || st2 != st || d.Remaining != 40 {
		t.Fatalf("over the limit: %+v %+v", d, st2)
	}
	want := "quota: 100 units per day for agent ops; try again in 17 h 0 min"
	if got := d.Message("quota", w.Describe(), "ops", ""); got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if d, _, _ := Spend(w, st, 40, now.Add(time.Hour)); !d.Allowed || d.Remaining != 0 {
		t.Errorf("up to the limit: %+v", d)
	}
	// The next day starts at 00:00 UTC.
	midnight := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if d, _, _ := Spend(w, st, 100, midnight.Add(-1)); d.Allowed {
		t.Error("allowed before midnight")
	}
	if d, _, _ := Spend(w, st, 100, midnight); !d.Allowed {
		t.Error("refused at midnight")
	}
	// A clock gone back a day does not reset the count.
	if d, s, _ := Spend(w, st, 41, now.Add(-24*time.Hour)); d.Allowed || s != st {
		t.Errorf("clock back: %+v", d)
	}
	if d, _, _ := Spend(w, st, 101, now); d.Allowed || !d.Never {
		t.Errorf("cost above the limit: %+v", d)
	}
	if mod(-10, 60) != 50 || mod(70, 60) != 10 {
		t.Error("mod of a negative time")
	}
	for _, bad := range []Window{{}, {Limit: 1}, {Length: time.Hour}, {Limit: -1, Length: time.Hour}} {
		if _, _, err := Spend(bad, WindowState{}, 1, now); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// Within any one window, the units spent never exceed Limit, whatever the
// order of the clock.
func TestWindowProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 4))
	for range 200 {
		w := Window{Limit: 1 + r.Int64N(50), Length: time.Duration(1 + r.Int64N(int64(time.Hour)))}
		var st WindowState
		spent := map[int64]int64{}
		now, latest := t0.UnixNano(), t0.UnixNano()
		for range 500 {
			now += r.Int64N(int64(w.Length)/4) - int64(w.Length)/16
			latest = max(latest, now)
			cost := r.Int64N(w.Limit/3 + 2)
			d, next, err := Spend(w, st, cost, time.Unix(0, now))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				spent[next.Start] += cost
				if spent[next.Start] > w.Limit {
					t.Fatalf("%+v: %d spent in the window at %d", w, spent[next.Start], next.Start)
				}
				if next.Start > latest || next.Start < st.Start {
					t.Fatalf("%+v: window start %d for now %d (was %d)", w, next.Start, now, st.Start)
				}
			} else if next != st {
				t.Fatal("a refusal changed the state")
			}
			st = next
		}
	}
}

func TestWaitText(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0 s"}, {-time.Second, "0.0 s"}, {1, "0.1 s"}, {4200 * time.Millisecond, "4.2 s"}, {4200*time.Millisecond + 1, "4.3 s"},
		{59 * time.Second, "59.0 s"}, {59950 * time.Millisecond, "1 min 0 s"}, {time.Minute, "1 min 0 s"},
		{185 * time.Second, "3 min 5 s"}, {time.Hour, "1 h 0 min"}, {2*time.Hour + 1, "2 h 1 min"}, {17 * time.Hour, "17 h 0 min"},
	} {
		if got := WaitText(tt.d); got != tt.want {
			t.Errorf("WaitText(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	for _, tt := range []struct {
		b    Bucket
		want string
	}{
		{Bucket{10, 10, time.Minute}, "10 per minute"}, {Bucket{20, 5, 30 * time.Second}, "5 per 30s (bursts of 20)"},
		{Bucket{1, 1, time.Second}, "1 per second"}, {Bucket{100, 100, 24 * time.Hour}, "100 per day"},
	} {
		if got := tt.b.Describe(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.b, got, tt.want)
		}
	}
}

func FuzzTake(f *testing.F) {
	f.Add(int64(10), int64(10), int64(time.Minute), int64(0), int64(1), int64(0))
	f.Add(int64(1<<62), int64(1), int64(1<<62), int64(-1<<63), int64(1<<62), int64(1<<62))
	f.Fuzz(func(t *testing.T, capacity, refill, interval, tat, cost, now int64) {
		b := Bucket{capacity, refill, time.Duration(interval)}
		d, next, err := Take(b, BucketState{tat}, cost, time.Unix(0, now))
		if err != nil {
			return
		}
		if d.Allowed && (next.TAT < tat || next.TAT < now || d.Remaining < 0 || d.Remaining > capacity) {
			t.Fatalf("%+v tat %d cost %d now %d: %+v %+v", b, tat, cost, now, d, next)
		}
		if !d.Allowed && (next.TAT != tat || d.Wait < 0) {
			t.Fatalf("refusal: %+v %+v", d, next)
		}
	})
}

func BenchmarkTake(b *testing.B) {
	bk := Bucket{Capacity: 10, Refill: 10, Interval: time.Minute}
	var st BucketState
	now := t0
	for b.Loop() {
		now = now.Add(6 * time.Second)
		_, st, _ = Take(bk, st, 1, now)
	}
}

func BenchmarkSpend(b *testing.B) {
	w := Window{Limit: 1000, Length: time.Hour}
	var st WindowState
	now := t0
	for b.Loop() {
		now = now.Add(time.Second)
		_, st, _ = Spend(w, st, 1, now)
	}
}
