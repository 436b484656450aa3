package maiden_test

import (
	"context"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestWrappedCLIOutputCappedAfterRedaction: what a wrapped CLI prints is
// read a little past max_output_bytes, so that an echo of a secret across
// the cap can be redacted whole, and then cut to max_output_bytes: the
// agent never gets more than the cap, and a warning says how much was
// dropped.
func TestWrappedCLIOutputCappedAfterRedaction(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.cat]
path = "/bin/cat"
command = '{"maiden_command": 1, "name": "cat", "stdin": {"media_type": "text/plain"}}'
max_output_bytes = 1000
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	in := `{"stdin":"` + strings.Repeat("x", 5000) + `"}`
	res, err := h.Call(context.Background(), maiden.Call{Tool: "cat", Input: in})
	if err != nil || !res.OK {
		t.Fatalf("cat of 5000 bytes: %+v %+v %v", res, res.Error, err)
	}
	if len(res.Output) != 1000 {
		t.Errorf("cat of 5000 bytes under max_output_bytes = 1000 returned %d bytes; want 1000", len(res.Output))
	}
	warned := false
	for _, l := range res.Logs {
		warned = warned || strings.Contains(l.Message, "4000 bytes of stdout and 0 of stderr dropped")
	}
	if !warned {
		t.Errorf("no warning that 4000 bytes of stdout were dropped; logs %+v", res.Logs)
	}
}
