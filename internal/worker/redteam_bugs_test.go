package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"

	"github.com/maiden-run/maiden/internal/sandbox"
)

// BUG 2: lost wake-up in acquire. (Not parallel: A must reach p.mu within
// the 50 ms below.)
func TestRedTeamBugLostWakeup(t *testing.T) {
	p := fakePool(t, "redteam-ok", 1)
	w, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() { _, err := p.acquire(ctxA); errA <- err }()
	waitWaiters(t, p, 1)
	ctxB, cancelB := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelB()
	gotB := make(chan error, 1)
	go func() {
		w2, err := p.acquire(ctxB)
		if err == nil {
			p.release(w2, true)
		}
		gotB <- err
	}()
	waitWaiters(t, p, 2)
	// A gives up at the moment the worker comes back.
	p.mu.Lock()
	cancelA()
	time.Sleep(50 * time.Millisecond) // A is now blocked on p.mu in its ctx.Done branch
	delete(p.busy, w)
	p.idle = append(p.idle, w)
	p.wakeLocked() // wakes A, who has already given up
	p.mu.Unlock()
	<-errA
	start := time.Now()
	if err := <-gotB; err != nil {
		t.Fatalf("B waited %v with a worker idle the whole time: %v", time.Since(start), err)
	}
}

func waitWaiters(t *testing.T, p *Pool, n int) {
	for range 500 {
		p.mu.Lock()
		l := p.waiters.Len()
		p.mu.Unlock()
		if l == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("never %d waiters", n)
}

// BUG 3: starting a worker ignores the caller's context.
func TestRedTeamBugSpawnIgnoresCtx(t *testing.T) {
	// The start timeout is past any bound below (testkit.Slack's at most
	// 10 x 1 s): a start that ignores the context is not mistaken for load.
	p := newPool(t, &Options{Command: []string{"/bin/sleep", "60"}, Size: 1, StartTimeout: 30 * time.Second})
	_ = p.mem.Put("fake", []byte("x"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.run(ctx, "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
	if took := time.Since(start); took > testkit.Slack(t, time.Second) {
		t.Fatalf("a call with a 200ms context took %v (err %v)", took, err)
	}
}

// BUG 5: spawn keeps the child's socket end open while waiting for the hello,
// so a worker that exits at once is only noticed at StartTimeout.
// TestRedTeamBugNotAWorker: a program that exits without a hello is refused
// with its diagnosis; the slot is given back.
func TestRedTeamBugNotAWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Command: []string{"/bin/true"}, Size: 1})
	_ = p.mem.Put("fake", []byte("x"))
	_, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
	if err == nil || !strings.Contains(err.Error(), "before saying hello") {
		t.Fatalf("err = %v", err)
	}
	if n := p.Workers(); n != 0 {
		t.Errorf("%d workers counted", n)
	}
}

// TestRedTeamCompileAsleepIsBounded (the fourth review): a compile worker
// whose code generator was taken over and sleeps (no CPU, so its CPU limit
// never fires) does not hold the Open waiting for it, which may have no
// deadline of its own: the clock ends it at twice the CPU limit, and the
// component is invalid, saying so.
func TestRedTeamCompileAsleepIsBounded(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Command: []string{mustExe(t), "redteam-hang-compile"}, Size: 1, CompileCPU: 1})
	path := testkit.CopyToTemp(t, testkit.Component(t, "echo"))
	opened := make(chan error, 1)
	go func() { _, err := p.Open(context.Background(), path, lim); opened <- err }()
	select {
	case err := <-opened:
		if !errors.Is(err, sandbox.ErrInvalidTool) || !strings.Contains(err.Error(), "did not finish within 2s") {
			t.Fatalf("open: %v, want invalid: did not finish within 2s", err)
		}
		t.Logf("open: %v", err)
	case <-time.After(testkit.Slack(t, 30*time.Second)):
		t.Fatal("an Open without a deadline is held by a compile worker that sleeps")
	}
}

// BUG 8: a compile worker is not known to Shutdown; it outlives it, and
// the Open waiting for it never returns. (Not parallel: failing, it kills
// every child of this process.)
func TestRedTeamBugCompileOutlivesShutdown(t *testing.T) {
	p, err := New(&Options{Command: []string{mustExe(t), "redteam-hang-compile"}, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	path := testkit.CopyToTemp(t, testkit.Component(t, "echo"))
	opened := make(chan error, 1)
	go func() { _, err := p.Open(context.Background(), path, lim); opened <- err }()
	// Shut down once the compile worker is running (the pool tracks it),
	// however long it takes to start.
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		n := len(p.others)
		p.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no compile worker started in a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-opened:
		t.Logf("open: %v", err)
	case <-time.After(30 * time.Second):
		kids := childPIDs(t)
		for _, pid := range kids {
			unix.Kill(pid, unix.SIGKILL)
		}
		t.Errorf("Shutdown returned; Open still waits for the compile worker 30s later; live children: %v", kids)
	}
}

// BUG 10: compiled code evicted between the registry's load and describe()
// makes the tool fail (ErrLost, shown as kind invalid) on every Open until
// its file changes: Open never forgets the version.
func TestRedTeamBugLostDuringDescribeIsPermanent(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	path := testkit.CopyToTemp(t, testkit.Component(t, "echo"))
	if _, err := p.reg.get(context.Background(), path, ""); err != nil {
		t.Fatal(err)
	}
	p.mem = newMemArtifacts(1 << 30) // evicted (no disk cache)
	for i := range 2 {
		_, err := p.Open(context.Background(), path, lim)
		t.Logf("open %d: %v", i, err)
		if i == 1 && err != nil {
			t.Error("the tool stays broken: the registry keeps a version whose code is gone")
		}
	}
}

// BUG 12: the parent's writes to a worker have no deadline: a worker that
// stops reading holds a call with a large input forever (the kill timer
// starts only after the send; ctx is not consulted).
func TestRedTeamBugDeafWorker(t *testing.T) {
	p := fakePool(t, "redteam-deaf", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.run(ctx, "fake", "execute", sandbox.Call{Limits: fastLim, Input: strings.Repeat("x", 8<<20)})
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("returned after %v: %v", time.Since(start), err)
	case <-time.After(4 * time.Second):
		t.Errorf("a call with a %v timeout and a 2 s context still blocked after 4 s (writing its input to a worker that does not read)", fastLim.Timeout)
		p.mu.Lock()
		for w := range p.busy {
			w.kill(killedProtocol) // unblock, for cleanup
		}
		p.mu.Unlock()
		t.Logf("after the kill: %v", <-done)
	}
}

// BUG 13: an idle worker that died (OOM killer, its own doing) is handed
// to the next call, which fails for it.
func TestRedTeamBugDeadIdleWorkerHandedOut(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "redteam-ok", 1)
	if _, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	w := p.idle[0]
	p.mu.Unlock()
	unix.Kill(w.pid, unix.SIGKILL)
	<-w.exited
	out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
	if err != nil || out.Failure != nil {
		t.Errorf("the next call paid for an idle worker's death: %+v err=%v", out.Failure, err)
	}
}
