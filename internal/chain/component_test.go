package chain

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The tests below run real middleware components (testdata/middleware,
// built by testkit) in a real sandbox: the component is the adversary.
// Whatever it does wrong (traps, runs past its timeout, grows past its
// memory, is not a middleware at all) refuses the call in every phase,
// with the phase's refusal for the agent and the cause for the operator.

// opLog is an operator's log that several goroutines may write.
type opLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *opLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *opLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// components is Components on a sandbox of this test, and its log.
func components(t *testing.T) (Components, *opLog) {
	t.Helper()
	sb, err := sandbox.New(&sandbox.Options{CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	log := &opLog{}
	return Components{Runner: sb, Log: slog.New(slog.NewTextHandler(log, nil))}, log
}

// layer is a [[middleware]] layer running the component at path under
// timeout and memory.
func layer(name, path string, timeout time.Duration, memory uint64) config.Middleware {
	return config.Middleware{Rule: "middleware[0]", Use: name,
		Component: &config.MiddlewareComponent{Name: name, Path: path, Timeout: timeout, MemoryBytes: memory}}
}

// TestFailedComponentRefusesEveryPhase: a component that traps, runs past
// its timeout, grows past its memory ceiling, or is a tool and not a
// middleware at all refuses the call before the tool runs, withholds a
// successful call's output, and withholds a failed call's error: the
// agent gets the phase's refusal (kind denied), the trail and the
// operator's log the cause, with the limits the operator set.
func TestFailedComponentRefusesEveryPhase(t *testing.T) {
	cs, log := components(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		m     config.Middleware
		cause string // the trail's detail after "failed: "
	}{
		{"trap", layer("trap", testkit.Middleware(t, "trap"), time.Second, 64<<20), "trap: "},
		{"loop", layer("loop", testkit.Middleware(t, "loop"), 300*time.Millisecond, 64<<20), "deadline: did not finish within its 300ms timeout"},
		{"memhog", layer("memhog", testkit.Middleware(t, "memhog"), time.Second, 2<<20), "memory: memory ceiling of 2 MiB reached"},
		{"a tool", layer("echo", testkit.Component(t, "echo"), time.Second, 64<<20), "is a tool component, not middleware (maiden:middleware world)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(phase string, s Step, want string) {
				t.Helper()
				if s.Refused == nil || s.Refused.Kind != api.KindDenied || s.Refused.Message != want {
					t.Errorf("%s phase: refusal %+v (verdict %+v); want kind denied %q", phase, s.Refused, s.Verdict, want)
					return
				}
				if s.Verdict.Verdict != "reject" || !strings.HasPrefix(s.Verdict.Detail, "failed: ") || !strings.Contains(s.Verdict.Detail, tc.cause) {
					t.Errorf("%s phase: verdict %+v; want a reject whose detail names the cause %q", phase, s.Verdict, tc.cause)
				}
			}
			s, rewrite, err := cs.Before(ctx, tc.m, call)
			if err != nil || rewrite != nil {
				t.Fatalf("before phase: rewrite %v, error %v", rewrite, err)
			}
			check("before", s, "refused by policy: a check on this call failed (the operator's log says why)")

			s, out, err := cs.After(ctx, tc.m, call, "the tool's output", []api.LogEntry{{Message: "a line"}})
			if err != nil {
				t.Fatal(err)
			}
			if out != "" {
				t.Errorf("after phase: the output %q passed a component that failed; want it withheld", out)
			}
			check("after", s, "refused by policy: a check on this call's output failed (the operator's log says why)")

			s, err = cs.Failed(ctx, tc.m, call, &api.ToolError{Kind: api.KindTool, Message: "the tool's error"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			check("failed", s, "refused by policy: a check on this call's error failed (the operator's log says why)")
		})
	}
	if l := log.String(); strings.Count(l, "level=WARN") != 12 {
		t.Errorf("the operator's log holds %d warnings; want one per refused call (12):\n%s", strings.Count(l, "level=WARN"), l)
	}
}

// TestAfterRewriteReplacesTheOutput: a component's rewrite in the after
// phase is what the caller returns, never the tool's own output (a mask
// that did not replace would hand on what it was there to hide); the
// before and failed phases pass (the mask component's other answers).
func TestAfterRewriteReplacesTheOutput(t *testing.T) {
	cs, _ := components(t)
	ctx := context.Background()
	m := layer("mask", testkit.Middleware(t, "mask"), time.Second, 64<<20)
	s, out, err := cs.After(ctx, m, call, "the password is hunter2-mask", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out != "masked by mask" || s.Refused != nil || s.Verdict.Verdict != "rewrite" {
		t.Fatalf("after phase: output %q, step %+v (refused %+v); want the rewrite \"masked by mask\"", out, s.Verdict, s.Refused)
	}
	if s, rewrite, err := cs.Before(ctx, m, call); err != nil || rewrite != nil || s.Refused != nil || s.Verdict.Verdict != "pass" {
		t.Errorf("before phase: %+v, rewrite %v, %v; want a pass", s, rewrite, err)
	}
	if s, err := cs.Failed(ctx, m, call, &api.ToolError{Kind: api.KindTool, Message: "no"}, nil); err != nil || s.Refused != nil || s.Verdict.Verdict != "pass" {
		t.Errorf("failed phase: %+v, %v; want a pass", s, err)
	}
}

// TestInputNotAnObjectRefusedBefore: a call whose input is not a JSON
// object is refused before the component is asked (the event needs an
// object): it does not pass the layer unjudged. The component would trap:
// a refusal that names the input, not a failure, shows it was not run.
func TestInputNotAnObjectRefusedBefore(t *testing.T) {
	cs, _ := components(t)
	m := layer("trap", testkit.Middleware(t, "trap"), time.Second, 64<<20)
	for _, text := range []string{`[1]`, `"x"`, `null`, ``} {
		c := call
		c.InputText = text
		s, rewrite, err := cs.Before(context.Background(), m, c)
		if err != nil || rewrite != nil || s.Refused == nil || s.Refused.Kind != api.KindDenied ||
			s.Refused.Message != "refused by policy: the input is not a JSON object, which middleware needs" {
			t.Errorf("input %q: step %+v (refused %+v), rewrite %v, %v; want it refused as not a JSON object", text, s.Verdict, s.Refused, rewrite, err)
		}
	}
}
