package maiden_test

import (
	"context"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestGrantReach: what a tool grant can match of an agent's tools, read
// from their input schemas (docs/cards.md, "Prohibiting a tool"). Grants
// match arguments exactly (CARDS.md A10), prohibitions too (A4): a bare
// 'tool:invoke echo' matches no call echo accepts (message is required);
// with --... it matches every call. A typed command is reported as one, its
// JSON projection not read as properties (its calls are command words,
// options and positionals).
func TestGrantReach(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[tools.cmdecho]
path = %q
[agents.bob]
tools = ["echo", "cmdecho"]
[agents.ann]
tools = ["cmdecho"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo", "cmdecho")
	ctx := context.Background()
	reach := func(agent, g string) map[string]maiden.ToolReach {
		t.Helper()
		rs, err := h.GrantReach(ctx, agent, g)
		if err != nil {
			t.Fatalf("GrantReach(%s, %q): %v", agent, g, err)
		}
		m := map[string]maiden.ToolReach{}
		for _, r := range rs {
			m[r.Tool] = r
		}
		return m
	}
	if r := reach("bob", "tool:invoke echo"); len(r) != 1 || !strings.Contains(r["echo"].Never, `requires the argument "message"`) || r["echo"].Command {
		t.Errorf("A4+A10 bare echo: %+v", r)
	}
	if r := reach("bob", "tool:invoke echo --..."); len(r) != 1 || r["echo"] != (maiden.ToolReach{Tool: "echo"}) {
		t.Errorf("A4+A10 echo --...: %+v", r)
	}
	if r := reach("bob", "tool:invoke echo --message=hello"); r["echo"].Never != "" || r["echo"].Escapes == "" {
		t.Errorf("A4+A10 echo --message=hello: %+v", r)
	}
	if r := reach("bob", "tool:invoke cmdecho"); len(r) != 1 || !r["cmdecho"].Command || r["cmdecho"].Never != "" || r["cmdecho"].Escapes != "" {
		t.Errorf("typed command: %+v", r)
	}
	if r := reach("bob", "tool:invoke * --..."); len(r) != 2 || !r["cmdecho"].Command || r["echo"].Command {
		t.Errorf("every tool: %+v", r)
	}
	if r := reach("ann", "tool:invoke echo"); len(r) != 0 {
		t.Errorf("a tool not bound to the agent: %+v", r)
	}
}
