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

// TestExposuresBoundedByConfiguration: what callers name does not grow
// the kept set. An import's NAME.TOOL is exposed for any TOOL (whether
// the server offers it is asked at open), so those are resolved each
// time and never kept; names the configuration does not expose are
// refused and never kept; and maxExposures bounds a set whatever else.
func TestExposuresBoundedByConfiguration(t *testing.T) {
	dir := t.TempDir()
	h, cfg := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[mcp.calc]
url = "http://127.0.0.1:1/mcp"
`, testkit.Component(t, "echo")), &Options{Isolation: api.InProcess, CacheDir: "off"})
	defer h.Close(t.Context())
	b := h.kinds.backends
	kept := func() int {
		if s := b.wasm.exposures.cur.Load(); s != nil && s.cfg == cfg {
			return len(s.m)
		}
		return 0
	}
	for i := range 2000 {
		name := fmt.Sprintf("calc.t%d", i)
		r, terr, err := b.imp.resolve(t.Context(), cfg, Call{Tool: name, Input: "{}"}, time.Now())
		if err != nil || terr != nil || r.tool.Name != name {
			t.Fatalf("%s: resolved %+v, %+v, %v; want the import's tool of that name", name, r.tool, terr, err)
		}
		if _, _, err := b.wasm.resolve(t.Context(), cfg, Call{Tool: fmt.Sprintf("nosuch%d", i), Input: "{}"}, time.Now()); !errors.Is(err, ErrUnknownTool) {
			t.Fatalf("nosuch%d: err %v, want ErrUnknownTool", i, err)
		}
	}
	if _, _, err := b.wasm.resolve(t.Context(), cfg, Call{Tool: "echo", Input: "{}"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := kept(); n != 1 {
		t.Errorf("after 2,000 import tool names, 2,000 unknown names and echo, %d views kept; want 1 (echo's)", n)
	}
	// The bound itself, whatever keys a configuration could make.
	ex := &exposures{pols: &h.pols}
	for i := range maxExposures + 100 {
		ex.keep(cfg, exposureKey{agent: "a", tool: fmt.Sprint(i)}, &resolved{})
	}
	if n := len(ex.cur.Load().m); n != maxExposures {
		t.Errorf("a set kept %d views; want at most %d", n, maxExposures)
	}
}
