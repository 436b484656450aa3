package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestSessionDecisions: OpenSession opens a session only for an agent the
// configuration declares; a call of a tool that reaches the network, in a
// session whose boundary has the network off, is refused by the session
// stage, and its tool is not run.
func TestSessionDecisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := testHost(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\nhttp_allow = [\"api.example.com\"]\n[agents.a]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n[agents.a.boundary]\nnetwork = false\n",
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	if id, err := h.OpenSession(ctx, "nobody"); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("OpenSession for an undeclared agent: %q %v; want ErrUnknownAgent", id, err)
	}
	id, err := h.OpenSession(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "echo", Input: `{"message":"hi"}`, Session: id})
	if err != nil || res.OK || res.Error == nil || res.Error.Kind != KindDenied ||
		!strings.Contains(res.Error.Message, "boundary has network disabled (sandbox_boundary_required") || res.Output != "" {
		t.Errorf("a networked tool's call in a session without network: %v %+v %q; want denied, nothing run", err, res.Error, res.Output)
	}
}
