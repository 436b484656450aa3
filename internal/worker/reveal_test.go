package worker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestRevealInWorker: a worker's tool asks reveal over IPC; the parent's
// RevealFunc decides and only its answer crosses back. The redactor, in the
// parent, sees the value the tool echoes into its log and output.
func TestRevealInWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, nil)
	path := testkit.Component(t, "revealer")
	tl, err := p.Open(context.Background(), path, lim)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	reveal := func(_ context.Context, handle string) (string, error) {
		asked = append(asked, handle)
		if handle == "good-handle" {
			return "s3cr3t-value", nil
		}
		return "", errors.New("not a secret handle of this call")
	}
	redact := func(s string) string { return strings.ReplaceAll(s, "s3cr3t-value", "[REDACTED:K]") }
	out, err := tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: "good-handle", Reveal: reveal, Redact: redact})
	if err != nil || out.Failure != nil || out.Output != "[REDACTED:K]" {
		t.Fatalf("got %+v, %v; want the revealed value, redacted", out, err)
	}
	if len(out.Logs) != 1 || out.Logs[0].Message != "[REDACTED:K]" {
		t.Errorf("logs %+v, want the revealed value redacted", out.Logs)
	}
	out, err = tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: "stolen-handle", Reveal: reveal})
	if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindTool || out.Failure.Message != "not a secret handle of this call" {
		t.Errorf("refused: got %+v, %v", out, err)
	}
	// A string longer than any handle is refused in the worker, which
	// does not ask the parent (whose frame limit would take it for a
	// violation).
	out, err = tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: strings.Repeat("h", maxHandleBytes+1), Reveal: reveal})
	if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindTool || !strings.Contains(out.Failure.Message, "not a secret handle") {
		t.Errorf("long handle: got %+v, %v", out, err)
	}
	if strings.Join(asked, ",") != "good-handle,stolen-handle" {
		t.Errorf("the parent was asked %q", asked)
	}
	// The worker stays usable.
	out, err = tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: "good-handle", Reveal: reveal})
	if err != nil || out.Failure != nil || out.Output != "s3cr3t-value" {
		t.Errorf("again: got %+v, %v", out, err)
	}
}

// TestHostileReveal: a worker that sends reveals nobody can have asked for
// (two at once, another call's ID, a frame over the limit) is stopped and
// the call is a trap; the parent's RevealFunc answers at most the first.
func TestHostileReveal(t *testing.T) {
	t.Parallel()
	exe, _ := os.Executable()
	echo := testkit.Component(t, "echo")
	for _, mode := range []string{"hostile-reveal-twice", "hostile-reveal-wrong-id", "hostile-reveal-huge"} {
		t.Run(mode, func(t *testing.T) {
			good := newPool(t, nil)
			if _, err := good.Open(context.Background(), echo, lim); err != nil {
				t.Fatal(err)
			}
			// What is checked is the trap, not a time: the start timeout
			// and the deadline are past what a loaded machine needs (2 s
			// was missed there: "worker did not start within 2s").
			bad := newPool(t, &Options{Command: []string{exe, mode}, StartTimeout: 30 * time.Second})
			bad.mem = good.mem
			bad.setFingerprint(good.fingerprint)
			l := sandbox.Limits{Timeout: 30 * time.Second, Memory: 16 << 20}
			asked := make(chan string, 4)
			reveal := func(_ context.Context, h string) (string, error) {
				asked <- h
				// Slow, so the second reveal arrives while the first is
				// pending (a sandbox's tool cannot send one then).
				time.Sleep(300 * time.Millisecond)
				return "v", nil
			}
			out, err := bad.run(context.Background(), firstKey(good), "execute", sandbox.Call{Limits: l, Input: "{}", Reveal: reveal})
			if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindTrap || !strings.Contains(out.Failure.Message, "misbehaved") {
				t.Fatalf("got %+v, %v; want a trap for a misbehaving worker", out, err)
			}
			if n := len(asked); n > 1 || (mode != "hostile-reveal-twice" && n != 0) {
				t.Errorf("the parent answered %d reveals", n)
			}
		})
	}
}
