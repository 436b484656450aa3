package sandbox

import (
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestReallocOutOfBounds: a guest allocator that answers with a pointer
// past its memory when the host copies the input in makes the call a trap
// (wasmtime checks the pointer before writing), never a write elsewhere;
// the sandbox serves the next call.
func TestReallocOutOfBounds(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out := execute(t, sb, testkit.Component(t, "badrealloc"), `{"message":"x"}`, defaultLimits)
	if out.Failure == nil || out.Failure.Kind != KindTrap || !strings.Contains(out.Failure.Message, "realloc return: beyond end of memory") {
		t.Fatalf("got %+v, want a trap naming the realloc's return", out.Failure)
	}
	if out := execute(t, sb, testkit.Component(t, "echo"), `{"message":"still here"}`, defaultLimits); out.Failure != nil {
		t.Fatalf("next call: %+v", out.Failure)
	}
}
