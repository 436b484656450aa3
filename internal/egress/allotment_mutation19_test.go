package egress

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestAllotmentExactlyWhatIsLeft guards take's use of what earlier blocks
// left: a write of exactly what is left is taken from it and pays nothing
// (a new block paid then would spend a budget's last 64 KiB on nothing, and
// refuse a write the budget had paid for).
func TestAllotmentExactlyWhatIsLeft(t *testing.T) {
	t.Parallel()
	var payments []int64
	a := &allotment{pay: func(n int64) error {
		payments = append(payments, n)
		return nil
	}}
	for _, n := range []int64{1000, tunnelBlock - 1000} {
		if err := a.take(n); err != nil {
			t.Fatalf("take(%d): %v", n, err)
		}
	}
	if len(payments) != 1 || a.left != 0 || a.paid != tunnelBlock {
		t.Fatalf("1,000 then the %d left of a block: payments %v, left %d, paid %d; want one block, 0 left", tunnelBlock-1000, payments, a.left, a.paid)
	}
}

// TestAllotmentTakesAtOnce guards the allotment's lock: the tunnels of one
// session write at once, and every byte they send is paid exactly once
// (what was paid is what was sent and what is left).
func TestAllotmentTakesAtOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var total int64
	a := &allotment{pay: func(n int64) error {
		mu.Lock()
		defer mu.Unlock()
		total += n
		return nil
	}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				if err := a.take(1000); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if sent := int64(8 * 2000 * 1000); a.paid != total || a.paid-a.left != sent {
		t.Fatalf("8 tunnels sending 2,000 writes of 1,000 bytes: paid %d (the budget saw %d), %d left; want paid - left = %d", a.paid, total, a.left, sent)
	}
}

// TestSessionPaysUnderItsLock guards SetPay against the tunnels of its
// session: the allotment is set and read under the session's lock (a
// tunnel's goroutine has no other ordering with the pipeline's SetPay),
// Stopped is read under it too, and Stopped keeps the first refusal, a
// tunnel's error being errUnpaid. Run with -race for the locks.
func TestSessionPaysUnderItsLock(t *testing.T) {
	t.Parallel()
	s := &ProxySession{}
	wrote, read := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(wrote)
		for range 1000 {
			_ = s.take(10)
		}
	}()
	go func() {
		defer close(read)
		for s.Stopped() == "" {
			select {
			case <-wrote:
				return
			default:
			}
		}
	}()
	refusals := 0
	s.SetPay(func(int64) error {
		refusals++
		return fmt.Errorf("budget-exhausted: refusal %d", refusals)
	})
	<-wrote
	<-read
	err := s.take(10)
	if !errors.Is(err, errUnpaid) {
		t.Fatalf("a write that cannot be paid: %v; want errUnpaid", err)
	}
	first := s.Stopped()
	if first == "" {
		t.Fatal("no Stopped after a write that could not be paid")
	}
	if err := s.take(10); !errors.Is(err, errUnpaid) {
		t.Fatalf("a second write that cannot be paid: %v; want errUnpaid", err)
	}
	if got := s.Stopped(); got != first {
		t.Fatalf("Stopped after further refusals: %q; want the first, %q", got, first)
	}
}
