//go:build linux

package clitool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
)

// Pass 42's defect: confine kills the process group when the context ends
// as it does at the tool's timeout, and reports TimedOut for both, so a
// call canceled by its caller, or ended by a card budget's earlier
// deadline, came back as the tool's own overrun ("t ran past its 30s
// timeout", kind deadline) with no error, against Run's doc: the agent
// was told, and the trail recorded, a timeout the tool never reached.
// Now ctx's error; the tool's own timeout stays a deadline failure.
func TestRunEndedByItsContextIsTheContextsError(t *testing.T) {
	run := func(ctx context.Context, timeout time.Duration) (Outcome, error) { // 0: tool42's 30 s
		t.Helper()
		tl := tool42(t, "")
		if timeout != 0 {
			tl.Timeout = timeout
		}
		inv, err := Spec(tl.CLI).ParseJSON([]byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return Run(ctx, Call{Tool: tl, Cmd: inv, Env: []string{mode42 + "=sleep"}})
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if out, err := run(canceled, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a canceled context = %+v, %v; want context.Canceled", out.Failure, err)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if out, err := run(short, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run under a 300 ms context of a tool with a 30 s timeout = %+v, %v; want context.DeadlineExceeded", out.Failure, err)
	}
	out, err := run(ctx42(t), 300*time.Millisecond)
	if err != nil || out.Failure == nil || out.Failure.Kind != api.KindDeadline {
		t.Errorf("Run of a tool past its own 300 ms timeout = %+v, %v; want a deadline failure, no error", out.Failure, err)
	}
}
