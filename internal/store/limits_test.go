package store

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTakeBucket: a bucket of 3 refilling 1 per minute allows 3 at once,
// then refuses with the time the next token arrives, refills at that
// time, survives a restart, and keeps keys apart.
func TestTakeBucket(t *testing.T) {
	t.Parallel()
	eachBackend(t, testTakeBucket)
}

func testTakeBucket(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	k := BucketKey{"a", "weather", "r1"}
	rate := Rate{Capacity: 3, Refill: 1, Interval: time.Minute}
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for i := range 3 {
		if ok, _, err := s.Take(ctx, k, rate, 1, t0); !ok || err != nil {
			t.Fatalf("take %d: %v, %v", i, ok, err)
		}
	}
	ok, wait, err := s.Take(ctx, k, rate, 1, t0)
	if ok || err != nil || !wait.Equal(t0.Add(time.Minute)) {
		t.Fatalf("4th take: %v, wait %v, %v; want refused until %v", ok, wait, err, t0.Add(time.Minute))
	}
	// Another tool, agent or rule has its own bucket.
	for _, other := range []BucketKey{{"a", "other", "r1"}, {"b", "weather", "r1"}, {"a", "weather", "r2"}} {
		if ok, _, err := s.Take(ctx, other, rate, 1, t0); !ok || err != nil {
			t.Fatalf("take from %v: %v, %v", other, ok, err)
		}
	}
	// A restart keeps the state.
	s.Close()
	s = open(t, path, nil)
	if ok, _, _ := s.Take(ctx, k, rate, 1, t0.Add(59*time.Second)); ok {
		t.Fatal("allowed before a token came back (after a restart)")
	}
	if ok, _, _ := s.Take(ctx, k, rate, 1, t0.Add(time.Minute)); !ok {
		t.Fatal("refused once a token came back")
	}
	// After a long idle the bucket is full, never more.
	t1 := t0.Add(time.Hour)
	n := 0
	for range 10 {
		if ok, _, _ := s.Take(ctx, k, rate, 1, t1); ok {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("after an hour idle %d takes allowed; want the capacity, 3", n)
	}
	// A cost above the capacity is never allowed; bad rates are errors.
	if ok, _, err := s.Take(ctx, BucketKey{"a", "x", "r"}, rate, 4, t1); ok || err != nil {
		t.Fatalf("cost 4 of 3: %v, %v", ok, err)
	}
	// Keys are printable, so one key's parts cannot forge another's.
	if _, _, err := s.Take(ctx, BucketKey{"a", "weather\x1fr1", ""}, rate, 1, t1); !errors.Is(err, ErrBadInput) {
		t.Fatalf("a key with a separator: %v", err)
	}
	if _, _, err := s.Take(ctx, k, Rate{}, 1, t1); !errors.Is(err, ErrBadInput) {
		t.Fatalf("zero rate: %v", err)
	}
	if _, _, err := s.Take(ctx, k, Rate{Capacity: 1 << 62, Refill: 1, Interval: time.Hour}, 1, t1); !errors.Is(err, ErrBadInput) {
		t.Fatalf("overflowing rate: %v", err)
	}
}

// TestTakeAcrossProcesses: four child processes and four goroutines take
// from one bucket of capacity 25 (no refill in the test's time); exactly
// 25 takes are allowed in all: no lost update, no double spend.
func TestTakeAcrossProcesses(t *testing.T) {
	t.Parallel()
	eachBackend(t, testTakeAcrossProcesses)
}

func testTakeAcrossProcesses(t *testing.T, be backend) {
	const capacity, per = 25, 20
	path := be.target(t)
	s := open(t, path, nil)
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MAIDEN_STORE_TEST_CHILD=take", "MAIDEN_STORE_TEST_PATH="+path,
			"MAIDEN_STORE_TEST_FROM="+strconv.Itoa(capacity), "MAIDEN_STORE_TEST_COUNT="+strconv.Itoa(per))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	now := time.Unix(1_000_000, 0)
	for range 4 {
		wg.Go(func() {
			for range per {
				ok, _, err := s.Take(context.Background(), BucketKey{"a", "t", "r"}, Rate{Capacity: capacity, Refill: 1, Interval: time.Hour}, 1, now)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	total := allowed.Load()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(outs[i].String()))
		if err != nil {
			t.Fatalf("child output %q", outs[i].String())
		}
		total += int64(n)
	}
	if total != capacity {
		t.Fatalf("%d takes allowed across 4 processes and 4 goroutines (%d attempts); want exactly the capacity, %d", total, 8*per, capacity)
	}
}

// TestSpendQuota: a window of 10 units per hour.
func TestSpendQuota(t *testing.T) {
	t.Parallel()
	eachBackend(t, testSpendQuota)
}

func testSpendQuota(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	k := QuotaKey{"a", "q"}
	t0 := time.Unix(1_700_000_000, 0).UTC().Truncate(time.Hour)
	if ok, _, err := s.Spend(ctx, k, 10, time.Hour, 7, t0.Add(time.Minute)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	ok, reset, err := s.Spend(ctx, k, 10, time.Hour, 4, t0.Add(2*time.Minute))
	if ok || err != nil || !reset.Equal(t0.Add(time.Hour)) {
		t.Fatalf("over the quota: %v, reset %v, %v", ok, reset, err)
	}
	s.Close()
	s = open(t, path, nil)
	if ok, _, _ := s.Spend(ctx, k, 10, time.Hour, 3, t0.Add(3*time.Minute)); !ok {
		t.Fatal("the last 3 units were refused (after a restart)")
	}
	if ok, _, _ := s.Spend(ctx, k, 10, time.Hour, 1, t0.Add(4*time.Minute)); ok {
		t.Fatal("an 11th unit was allowed")
	}
	if ok, _, _ := s.Spend(ctx, k, 10, time.Hour, 10, t0.Add(time.Hour)); !ok {
		t.Fatal("the next window did not start empty")
	}
	// A clock that goes back to the spent window gives nothing back.
	if ok, reset, _ := s.Spend(ctx, k, 10, time.Hour, 1, t0.Add(30*time.Minute)); ok || !reset.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("a clock gone back: %v, reset %v", ok, reset)
	}
	if ok, _, _ := s.Spend(ctx, QuotaKey{"b", "q"}, 10, time.Hour, 10, t0.Add(time.Hour)); !ok {
		t.Fatal("another agent shares the window")
	}
}
