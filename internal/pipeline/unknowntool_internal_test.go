package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestRefuseUnknownToolTakesATurn: recording a call of a tool its agent
// does not have goes through admission as any call does, so a flood of
// them is no cheaper than calls the cards deny: with the only turn taken
// and no place to wait, it is ErrOverloaded and writes nothing; with the
// turn free again, it is ErrUnknownTool and recorded.
func TestRefuseUnknownToolTakesATurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf("version = 1\n[tools.loop]\npath = %q\ntimeout_ms = 60000\n[agents.a]\ntools = [\"loop\"]\ngrants = [\"tool:invoke loop --...\"]\n", testkit.Component(t, "loop")),
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), MaxConcurrent: 1, MaxQueued: -1})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	records := func() int {
		st, _, err := h.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Journal().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		n := 0
		all, err := st.AuditTail(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			if r.Kind == "call-refused" && r.Tool == "shell" {
				n++
			}
		}
		return n
	}
	running, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Call(running, Call{Agent: "a", Tool: "loop", Input: "{}"})
	}()
	for h.Active() < 1 {
		time.Sleep(time.Millisecond)
	}
	if err := h.RefuseUnknownTool(ctx, Call{Agent: "a", Tool: "shell"}); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("with the only turn taken: %v, want ErrOverloaded", err)
	}
	stop()
	<-done
	if err := h.RefuseUnknownTool(ctx, Call{Agent: "a", Tool: "shell"}); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("with the turn free: %v, want ErrUnknownTool", err)
	}
	if n := records(); n != 1 {
		t.Fatalf("%d call-refused records of shell, want 1 (none for the overloaded attempt)", n)
	}
}
