package worker

import (
	"context"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// policies are the scheduling policies of every thread of worker w.
func policies(t *testing.T, w *proc) map[int]uint32 {
	t.Helper()
	tids, err := threads(w.pid)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]uint32{}
	for _, tid := range tids {
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread ended
		}
		got[tid] = attr.Policy
	}
	return got
}

func allPolicy(t *testing.T, w *proc, policy uint32) bool {
	got := policies(t, w)
	for _, p := range got {
		if p != policy {
			return false
		}
	}
	return len(got) > 0
}

// waitUntil polls cond (another goroutine's or process's observable state)
// for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLowPriorityCallRunsAtSchedIdle is issue 22's crash storm, in the
// pool: a call marked LowPriority (its tool lost workers recently) runs on
// a worker whose every thread is at SCHED_IDLE while the guest computes,
// and the next call of another tool on that same worker runs at normal
// priority again.
func TestLowPriorityCallRunsAtSchedIdle(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	loop := testkit.Component(t, "loop")
	echo := testkit.Component(t, "echo")
	l := sandbox.Limits{Timeout: 3 * time.Second, Memory: 32 << 20}
	tl, err := p.Open(context.Background(), loop, l)
	if err != nil {
		t.Fatal(err)
	}
	var w *proc
	done := make(chan sandbox.Outcome, 1)
	go func() {
		out, _ := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: `{}`, LowPriority: true})
		done <- out
	}()
	waitUntil(t, "the loop's call running", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for b := range p.busy {
			w = b
		}
		return w != nil
	})
	waitUntil(t, "every thread of the low-priority call's worker at SCHED_IDLE", func() bool { return allPolicy(t, w, unix.SCHED_IDLE) })
	if out := <-done; out.Failure == nil || out.Failure.Kind != sandbox.KindDeadline {
		t.Fatalf("the loop: %+v, want kind deadline", out)
	}
	// At SCHED_IDLE on a machine busy with other work the loop's worker may
	// get no CPU to notice its deadline within the grace period and be
	// killed (that is the point of the priority). The reuse is checked
	// with a low-priority call that ends by itself (echo, a generous
	// timeout) on the one worker of the pool, whichever it is now.
	te, err := p.Open(context.Background(), echo, lim)
	if err != nil {
		t.Fatal(err)
	}
	slow := sandbox.Limits{Timeout: 60 * time.Second, Memory: lim.Memory}
	if out, _ := te.Execute(context.Background(), sandbox.Call{Limits: slow, Input: `{"message":"low"}`, LowPriority: true}); out.Failure != nil || out.WorkerLost {
		t.Fatalf("echo at low priority: %+v", out)
	}
	p.mu.Lock()
	if len(p.idle) != 1 || !p.idle[0].idlePriority {
		t.Fatalf("after the low-priority echo: %d idle workers, want one, at SCHED_IDLE", len(p.idle))
	}
	w = p.idle[0]
	p.mu.Unlock()
	if !allPolicy(t, w, unix.SCHED_IDLE) {
		t.Fatalf("the low-priority echo's worker has thread policies %v, want all SCHED_IDLE", policies(t, w))
	}

	out := call(t, p, echo, `{"message":"hi"}`, lim)
	if out.Failure != nil {
		t.Fatalf("echo: %+v", out)
	}
	p.mu.Lock()
	idle := append([]*proc(nil), p.idle...)
	p.mu.Unlock()
	if len(idle) != 1 || idle[0] != w {
		t.Fatalf("idle workers %v, want the loop's worker, reused for echo", idle)
	}
	if got := policies(t, w); !allPolicy(t, w, schedOther) {
		t.Errorf("after a normal call the worker's threads have policies %v, want all SCHED_OTHER (0)", got)
	}
}

// TestLowPriorityCallTakesNoWarmWorker: a low-priority call that may start
// a worker of its own does so, at SCHED_IDLE from its start, rather than
// take the idle worker another tool's code is warm in; a normal call takes
// the idle worker that holds its code.
func TestLowPriorityCallTakesNoWarmWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 2})
	ctx := context.Background()
	warm, err := p.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	warm.loaded = []string{"echo-digest"} // as if it had run echo
	p.release(warm, true)

	low, err := p.acquirePriority(ctx, "bomb-digest", true)
	if err != nil {
		t.Fatal(err)
	}
	if low == warm {
		t.Fatal("the low-priority call took the worker warm with echo's code, though it could start one")
	}
	if !allPolicy(t, low, unix.SCHED_IDLE) {
		t.Errorf("the worker started for a low-priority call, once it runs the call, has thread policies %v, want all SCHED_IDLE (%d)", policies(t, low), unix.SCHED_IDLE)
	}
	p.release(low, true)

	// Two idle workers now; echo's call takes the one holding its code,
	// though the other was released last.
	got, err := p.acquireFor(ctx, "echo-digest", false)
	if err != nil {
		t.Fatal(err)
	}
	if got != warm {
		t.Error("echo's call did not get the idle worker holding its code")
	}
	p.release(got, true)
}

// TestWorkerThatCannotBeRestoredIsReplaced: where the parent may lower a
// worker's priority but not raise it again (no CAP_SYS_NICE), the next call
// of another tool does not run on the lowered worker: it is replaced, the
// call runs at normal priority, and replacements from then on start at
// normal priority (else each would be replaced again, a spawn per call).
func TestWorkerThatCannotBeRestoredIsReplaced(t *testing.T) {
	real := schedSetAttr
	schedSetAttr = func(pid int, attr *unix.SchedAttr, flags uint) error {
		if attr.Policy == schedOther {
			return unix.EPERM
		}
		return real(pid, attr, flags)
	}
	t.Cleanup(func() { schedSetAttr = real })
	p := newPool(t, &Options{Size: 1})
	ctx := context.Background()
	low, err := p.acquirePriority(ctx, "bomb-digest", true)
	if err != nil {
		t.Fatal(err)
	}
	if !low.idlePriority {
		t.Fatal("the low-priority call's worker was not lowered")
	}
	low.loaded = []string{"bomb-digest"}
	p.release(low, true)

	w, err := p.acquirePriority(ctx, "echo-digest", false)
	if err != nil {
		t.Fatal(err)
	}
	if w == low || w.idlePriority || !allPolicy(t, w, schedOther) {
		t.Errorf("the normal call got worker %d (the lowered one: %v), policies %v; want another at SCHED_OTHER", w.pid, w == low, policies(t, w))
	}
	if !p.cannotRestore.Load() {
		t.Error("the failed restore was not remembered")
	}
	// A worker lost at SCHED_IDLE now: its replacement starts normal.
	w.idlePriority = true
	p.release(w, false)
	p.starting.Wait()
	p.mu.Lock()
	idle := append([]*proc(nil), p.idle...)
	p.mu.Unlock()
	if len(idle) != 1 || idle[0].idlePriority || !allPolicy(t, idle[0], schedOther) {
		t.Errorf("the replacement: %d idle, policies %v; want one at SCHED_OTHER", len(idle), func() any {
			if len(idle) == 1 {
				return policies(t, idle[0])
			}
			return nil
		}())
	}
}
