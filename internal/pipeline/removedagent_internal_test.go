package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestReloadWithoutTheAgentStopsItsRunningCall: a reload that removes an
// agent from agent.toml stops that agent's running calls, denied naming
// the agent and the file, their output withheld, with or without an agent
// token; another agent's running call, and any change that keeps the
// agent, leave the run alone (it keeps the policy it started with: the
// call of agent b, whose tool loses its binding to b in the same reload,
// runs on to its own deadline).
func TestReloadWithoutTheAgentStopsItsRunningCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loop := testkit.Component(t, "loop")
	const body = `version = 1
[tools.loop]
path = %q
timeout_ms = 60000
[tools.loop2]
path = %q
timeout_ms = 60000
[tools.short]
path = %q
timeout_ms = 8000
%s`
	agents := `[agents.a]
tools = ["loop", "loop2"]
grants = ["tool:invoke loop --...", "tool:invoke loop2 --..."]
[agents.b]
tools = ["short"]
grants = ["tool:invoke short --..."]
`
	h, _ := testHost(t, dir, fmt.Sprintf(body, loop, loop, loop, agents),
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: 30 * time.Second, MaxConcurrent: 4})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := st.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res Result
		err error
	}
	start := func(c Call) chan outcome {
		done := make(chan outcome, 1)
		go func() {
			res, err := h.Call(ctx, c)
			done <- outcome{res, err}
		}()
		return done
	}
	byToken := start(Call{Agent: "a", Tool: "loop", Input: "{}", Credential: TokenCredential(tok)})
	byStdio := start(Call{Agent: "a", Tool: "loop2", Input: "{}", Credential: "stdio"})
	other := start(Call{Agent: "b", Tool: "short", Input: "{}", Credential: "stdio"})
	for h.revocationHeld() < 3 || h.Active() < 3 {
		select {
		case o := <-byToken:
			t.Fatalf("a's token call ended before the reload: %+v %v", o.res.Error, o.err)
		case o := <-byStdio:
			t.Fatalf("a's stdio call ended before the reload: %+v %v", o.res.Error, o.err)
		case o := <-other:
			t.Fatalf("b's call ended before the reload: %+v %v (the watch held %d of the 3 calls)", o.res.Error, o.err, h.revocationHeld())
		case <-time.After(time.Millisecond):
		}
	}
	// Agent a gone; b still declared, but bound to loop instead of short.
	h.SetConfig(testConfig(t, dir, fmt.Sprintf(body, loop, loop, loop, `[agents.b]
tools = ["loop"]
grants = ["tool:invoke loop --..."]
`)))
	want := `agent removed: agent "a" was removed from ` + h.Config().File() + ` while the tool ran`
	for name, done := range map[string]chan outcome{"token": byToken, "stdio": byStdio} {
		select {
		case o := <-done:
			if o.err != nil || o.res.OK || o.res.Output != "" || o.res.Error == nil || o.res.Error.Kind != KindDenied || !strings.HasPrefix(o.res.Error.Message, want) {
				t.Errorf("a's %s call after a reload without a: %+v %v; want denied: %s", name, o.res.Error, o.err, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("a's %s call still ran 30 s after a reload removed agent a (deadline 60 s)", name)
		}
	}
	o := <-other
	if o.err != nil || o.res.Error == nil || o.res.Error.Kind != KindDeadline {
		t.Errorf("b's call, its tool's binding to b removed by the reload: %+v %v; want it to run on to its own 8 s deadline", o.res.Error, o.err)
	}
}

// TestRemovedAgentCallRegisteringLate: a call that reaches the watch after
// the reload that removed its agent (it started on the configuration
// before) finds the configuration in force itself and is stopped: the
// reload's sweep held only the calls already there.
func TestRemovedAgentCallRegisteringLate(t *testing.T) {
	t.Parallel()
	echo := testkit.Component(t, "echo")
	before := testConfig(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+echo+"\"\n[agents.a]\ntools = [\"echo\"]\n")
	after := testConfig(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+echo+"\"\n[agents.b]\ntools = [\"echo\"]\n")
	var cur atomic.Pointer[config.Config]
	cur.Store(after)
	w := &revocationWatch{principal: principalCheck{cfg: &cur}}
	for _, agent := range []string{"a", "b"} {
		inv := &invocation{cfg: before, agent: agent, call: Call{Agent: agent, Tool: "echo", Credential: "stdio"}}
		ran := false
		err := w.watch(func(ctx context.Context, inv *invocation) error {
			ran = true
			if ctx.Err() == nil {
				inv.res.OK, inv.res.Output = true, "out"
			}
			return nil
		})(context.Background(), inv)
		switch {
		case err != nil || !ran:
			t.Fatalf("agent %s: err %v, ran %v", agent, err, ran)
		case agent == "a" && (inv.res.OK || inv.res.Error == nil || !strings.HasPrefix(inv.res.Error.Message, `agent removed: agent "a" was removed from `+after.File())):
			t.Errorf("agent a, removed before its call reached the watch: %+v; want stopped, agent removed", inv.res)
		case agent == "b" && (!inv.res.OK || inv.res.Error != nil):
			t.Errorf("agent b, declared: %+v; want the run's result", inv.res)
		}
	}
	if n := len(w.all); n != 0 {
		t.Errorf("the watch still holds %d calls after they returned", n)
	}
}
