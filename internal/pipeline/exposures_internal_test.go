package pipeline

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestExposuresFollowConfiguration: what resolveTool keeps (exposures,
// issue 23) is an agent's view of a tool under one configuration, and
// only that. Another agent, another configuration (the one now in force,
// or an older one a call in flight still runs under) and a name the
// configuration does not expose are each resolved as without the cache:
// a tool unbound from an agent is unknown to it at once, the binding's
// narrowing is the agent's own, and the input is each call's.
func TestExposuresFollowConfiguration(t *testing.T) {
	dir := t.TempDir()
	echo := testkit.Component(t, "echo")
	h, first := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.echo]
path = %q
timeout_ms = 4000
[agents.narrow.tools.echo]
timeout_ms = 1000
[agents.plain]
tools = ["echo"]
[agents.none]
tools = []
`, echo), &Options{Isolation: api.InProcess})
	defer h.Close(t.Context())
	second := testConfig(t, dir, fmt.Sprintf(`version = 1
[tools.echo]
path = %q
timeout_ms = 3000
[agents.narrow]
tools = []
[agents.plain]
tools = ["echo"]
[agents.none.tools.echo]
timeout_ms = 2000
`, echo))
	wasm := h.kinds.backends.wasm
	resolve := func(cfgName string, agent, input string) (resolved, error) {
		t.Helper()
		cfg := first
		if cfgName == "second" {
			cfg = second
		}
		r, terr, err := wasm.resolve(t.Context(), cfg, Call{Tool: "echo", Agent: agent, Input: input}, time.Now())
		if terr != nil {
			t.Fatalf("%s, agent %s: refused with %+v", cfgName, agent, terr)
		}
		return r, err
	}
	for round := range 2 { // a view resolved again, after other agents and configurations
		for _, c := range []struct {
			cfg, agent string
			timeout    time.Duration // 0: the agent must not see the tool
		}{
			{"first", "narrow", time.Second},
			{"first", "plain", 4 * time.Second},
			{"first", "none", 0},
			{"second", "narrow", 0},
			{"second", "plain", 3 * time.Second},
			{"second", "none", 2 * time.Second},
			{"first", "narrow", time.Second}, // an older configuration, after the newer one's calls
		} {
			input := fmt.Sprintf(`{"message":"%s-%s-%d"}`, c.cfg, c.agent, round)
			r, err := resolve(c.cfg, c.agent, input)
			if c.timeout == 0 {
				if !errors.Is(err, ErrUnknownTool) {
					t.Errorf("round %d, %s configuration, agent %s: err %v, want ErrUnknownTool (echo is not bound to it)", round, c.cfg, c.agent, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("round %d, %s configuration, agent %s: %v", round, c.cfg, c.agent, err)
			}
			if r.agent != c.agent || r.tool.Timeout != c.timeout || r.input != input || r.policy == nil {
				t.Errorf("round %d, %s configuration, agent %s: resolved agent %q, timeout %v, input %q, a policy %t; want agent %q, timeout %v (its binding under that configuration), input %q",
					round, c.cfg, c.agent, r.agent, r.tool.Timeout, r.input, r.policy != nil, c.agent, c.timeout, input)
			}
		}
	}
	// What is kept is shared, never copied per call: the second
	// resolution of one view is the first's tool.
	a, _ := resolve("second", "plain", "{}")
	b, _ := resolve("second", "plain", "{}")
	if a.tool != b.tool {
		t.Errorf("two resolutions of one agent's view of echo under one configuration made two tools: the cache does not serve them")
	}
}
