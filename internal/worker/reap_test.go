package worker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestShutdownReapsWorkers: when Shutdown returns, every worker process it
// killed has been reaped: none is left as a zombie (a /proc entry in state
// Z) for init to adopt after maiden exits (issue 22, finding 13: `maiden
// serve` left its workers as zombies for ~1.5 s on SIGTERM).
func TestShutdownReapsWorkers(t *testing.T) {
	t.Parallel()
	p, err := New(&Options{Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	echo := testkit.Component(t, "echo")
	l := sandbox.Limits{Timeout: 30 * time.Second, Memory: 64 << 20}
	tl, err := p.Open(context.Background(), echo, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: `{"message":"hi"}`}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	var pids []int
	for _, w := range p.idle {
		pids = append(pids, w.pid)
	}
	for w := range p.busy {
		pids = append(pids, w.pid)
	}
	for w := range p.others {
		pids = append(pids, w.pid)
	}
	p.mu.Unlock()
	if len(pids) == 0 {
		t.Fatal("no worker process after a call")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil {
			t.Errorf("worker %d still has a process entry after Shutdown returned (not reaped): %s", pid, stat)
		}
	}
}
