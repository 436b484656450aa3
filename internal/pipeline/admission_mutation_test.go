package pipeline

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestAdmissionBounds: the numbers newAdmission derives: no limit given
// is the default (never zero turns, where every call would wait for
// ever); a negative queue is no queue; four turns give a tool three.
func TestAdmissionBounds(t *testing.T) {
	t.Parallel()
	a := newAdmission(0, 0)
	if want := max(4, 4*runtime.GOMAXPROCS(0)); a.turns != want || a.max != DefaultMaxQueued {
		t.Errorf("newAdmission(0, 0): %d turns, %d places; want %d and %d", a.turns, a.max, want, DefaultMaxQueued)
	}
	if a := newAdmission(4, 4); a.perTool != 3 || a.perAgentQueue != 3 {
		t.Errorf("newAdmission(4, 4): perTool %d, perAgentQueue %d; want 3 and 3", a.perTool, a.perAgentQueue)
	}
	// No queue: the second call is refused at once, as overloaded, naming
	// the running call and no place.
	a = newAdmission(1, -1)
	release, err := a.enter(context.Background(), "t", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // had it been queued, it would end canceled rather than wait
	if _, err := a.enter(ctx, "u", "b"); !errors.Is(err, ErrOverloaded) || !strings.Contains(err.Error(), "1 calls running and 0 waiting; retry later") {
		t.Errorf("a second call with no queue: %v; want ErrOverloaded, 1 running and 0 waiting", err)
	}
}

// TestAdmissionQueueFull: the queue holds at most its places, whichever
// agents wait; the refusal of a full queue says so (not an agent's share).
func TestAdmissionQueueFull(t *testing.T) {
	t.Parallel()
	a := newAdmission(1, 2) // one turn, two places, two for one agent
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release, err := a.enter(ctx, "t", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for i, agent := range []string{"b", "c"} {
		go func() {
			if _, err := a.enter(ctx, "t", agent); err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		}()
		waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == i+1 })
	}
	over, stop := context.WithCancel(ctx)
	stop()
	if _, err := a.enter(over, "t", "d"); !errors.Is(err, ErrOverloaded) || !strings.Contains(err.Error(), "1 calls running and 2 waiting; retry later") {
		t.Errorf("a third waiting call, of a third agent, with two places: %v; want ErrOverloaded, 1 running and 2 waiting", err)
	}
}

// TestAdmissionOrder: a call never takes a turn ahead of a waiting call
// that a freed turn would go to (here: a tool that was troubled and is no
// longer, whose waiting call's agent runs fewer calls); a freed turn goes
// to the agent running fewer calls even when the other's tool runs fewer;
// among equals, to the oldest waiting call.
func TestAdmissionOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 8)
	wait := func(a *admission, tool, agent, label string, queued int) {
		go func() {
			if _, err := a.enter(ctx, tool, agent); err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
			got <- label
		}()
		waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == queued })
	}
	enter := func(a *admission, tool, agent string) func() {
		r, err := a.enter(ctx, tool, agent)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// No jumping the queue.
	troubled := true
	a := newAdmission(3, 10)
	a.troubled = func(tool string) bool { return tool == "t" && troubled }
	enter(a, "t", "a")
	enter(a, "x", "a")
	wait(a, "t", "b", "b:t", 1) // t runs one at a time
	a.mu.Lock()
	troubled = false // t is proven; its waiting call fits, no turn was given back yet
	a.mu.Unlock()
	go func() {
		if _, err := a.enter(ctx, "y", "a"); err == nil {
			got <- "a:y"
		}
	}()
	if first := <-got; first != "b:t" {
		t.Errorf("the free turn went to %s, which arrived after b's call waiting for it; want b:t", first)
	}

	// Fewer calls of the agent first, then fewer of the tool.
	a = newAdmission(4, 10)
	enter(a, "p", "flood")
	enter(a, "q", "flood")
	r := enter(a, "r", "flood")
	enter(a, "s", "b")
	wait(a, "p", "b", "b:p", 1)         // b runs 1; p runs 1
	wait(a, "z", "flood", "flood:z", 2) // flood runs 3; z runs none
	r()                                 // flood runs 2, b 1
	if first := <-got; first != "b:p" {
		t.Errorf("the freed turn went to %s; want b:p, the agent running fewer calls, though z runs fewer than p", first)
	}

	// Among equals, the oldest.
	a = newAdmission(1, 10)
	r = enter(a, "t", "a")
	wait(a, "t", "a", "first", 1)
	wait(a, "t", "a", "second", 2)
	r()
	if first := <-got; first != "first" {
		t.Errorf("the freed turn went to the %s of two equal waiting calls; want the first", first)
	}
}

// TestAdmissionCanceledWaiterLeaksNoTurn: a waiting call whose caller
// gives up leaves the queue, and a turn granted as its context ended is
// given back: the turns stay all usable.
func TestAdmissionCanceledWaiterLeaksNoTurn(t *testing.T) {
	t.Parallel()
	a := newAdmission(1, 10)
	release, err := a.enter(context.Background(), "t", "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.enter(ctx, "t", "b")
		done <- err
	}()
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the canceled waiter: %v", err)
	}
	release()
	a.mu.Lock()
	running, queued := a.running, a.queue.Len()
	a.mu.Unlock()
	if running != 0 || queued != 0 {
		t.Fatalf("after the waiter gave up and the turn was given back: %d running, %d queued; want none", running, queued)
	}

	// Granted as its context ended (the turn handed over while the test
	// holds the lock, after the cancellation): whichever way the waiter's
	// select goes, no turn stays taken.
	for range 50 {
		// The running call's turn is handed over below, not released.
		if _, err := a.enter(context.Background(), "t", "a"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			r, err := a.enter(ctx, "t", "b")
			if err == nil {
				r()
			}
			done <- err
		}()
		waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == 1 })
		a.mu.Lock()
		cancel()
		// give's bookkeeping, then its dispatch, under the lock.
		a.running--
		delete(a.byTool, "t")
		delete(a.byAgent, "a")
		a.dispatchLocked()
		a.mu.Unlock()
		<-done
		if n := a.active(); n != 0 {
			t.Fatalf("%d calls active after a waiter granted as its context ended returned; want 0", n)
		}
	}
}
