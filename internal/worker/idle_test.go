package worker

import (
	"context"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestIdleWorkerSleeps: a worker that served a call and has nothing to do
// sleeps. Over the second after a call it may use a little CPU (its spin
// after the answer, the Go runtime's sysmon until it goes to its deep
// sleep), not a timer's worth: an engine that advanced its epoch on a
// ticker woke the worker every millisecond for 200 ms after each call,
// 9.5-12 ms of CPU and 540-620 context switches in that second (measured on
// main before the ticker went; without it 0.05-0.07 ms and 3-6 switches,
// and up to 0.81 ms and 56 in a second that holds a garbage collection of
// the race-instrumented worker). The bounds leave a wide margin either way.
func TestIdleWorkerSleeps(t *testing.T) {
	p := newPool(t, &Options{Size: 1})
	echo := testkit.Component(t, "echo")
	tl, err := p.Open(context.Background(), echo, lim)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: `{"message":"hi"}`})
		if err != nil || out.Failure != nil {
			t.Fatalf("call: %v %+v", err, out.Failure)
		}
	}
	p.mu.Lock()
	if len(p.idle) != 1 {
		p.mu.Unlock()
		t.Fatalf("%d idle workers, want 1", len(p.idle))
	}
	pid := p.idle[0].pid
	p.mu.Unlock()
	before := processStat(pid)
	time.Sleep(time.Second) // the span measured, not a wait for the worker
	after := processStat(pid)
	cpu, switches := after.cpu-before.cpu, after.switches-before.switches
	t.Logf("worker %d over 1 s idle after a call: %v of CPU, %d context switches", pid, cpu, switches)
	if cpu > 4*time.Millisecond || switches > 250 {
		t.Errorf("an idle worker used %v of CPU and %d context switches in 1 s; want at most 4ms and 250", cpu, switches)
	}
}
