//go:build !wasip1

package maiden_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/mwproto"
	"github.com/maiden-run/maiden/internal/sandbox"
	maiden "github.com/maiden-run/maiden/sdk/go"
)

// TestMiddlewareTypesMatchHost: what the host's mwproto writes, the SDK's
// Event reads field for field, and every verdict the SDK's constructors
// make is one the host's parser accepts as meant.
func TestMiddlewareTypesMatchHost(t *testing.T) {
	hostLogs := []api.LogEntry{{Level: api.LevelWarn, Source: api.SourceLog, Message: "the password is 1234"}, {Level: api.LevelInfo, Source: api.SourceStdout, Message: "done"}}
	sdkLogs := []maiden.EventLog{{Level: "warn", Source: "log", Message: "the password is 1234"}, {Level: "info", Source: "stdout", Message: "done"}}
	for _, phase := range []mwproto.Phase{mwproto.Before, mwproto.After, mwproto.Failed} {
		text, err := mwproto.Event{Phase: phase, Tool: "weather", Agent: "alice", Session: "s", Rendered: "--city=Paris",
			Input: json.RawMessage(`{"city":"Paris"}`), Output: "sunny", Error: mwproto.Failure{Kind: "tool", Message: "no sun"}, Logs: hostLogs}.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var ev maiden.Event
		if err := json.Unmarshal([]byte(text), &ev); err != nil {
			t.Fatal(err)
		}
		want := maiden.Event{Version: mwproto.Version, Phase: string(phase), Tool: "weather", Agent: "alice", Session: "s", Rendered: "--city=Paris", Input: json.RawMessage(`{"city":"Paris"}`)}
		switch phase {
		case mwproto.After:
			want.Output, want.Logs = "sunny", sdkLogs
		case mwproto.Failed:
			want.Error, want.Logs = maiden.EventError{Kind: "tool", Message: "no sun"}, sdkLogs
		}
		if ev.Version != want.Version || ev.Phase != want.Phase || ev.Tool != want.Tool || ev.Agent != want.Agent || ev.Session != want.Session ||
			ev.Rendered != want.Rendered || string(ev.Input) != string(want.Input) || ev.Output != want.Output || ev.Error != want.Error || !slices.Equal(ev.Logs, want.Logs) {
			t.Errorf("%s: SDK read %+v from %s", phase, ev, text)
		}
	}
	if maiden.PhaseBefore != string(mwproto.Before) || maiden.PhaseAfter != string(mwproto.After) || maiden.PhaseFailed != string(mwproto.Failed) {
		t.Errorf("the SDK's phases %q, %q, %q are not the host's", maiden.PhaseBefore, maiden.PhaseAfter, maiden.PhaseFailed)
	}
	rewrite, err := maiden.RewriteInput(map[string]any{"city": "Paris"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		phase mwproto.Phase
		v     maiden.Verdict
		want  mwproto.Verdict
	}{
		{mwproto.Before, maiden.Pass(), mwproto.Verdict{Kind: mwproto.Pass}},
		{mwproto.After, maiden.Pass(), mwproto.Verdict{Kind: mwproto.Pass}},
		{mwproto.Before, maiden.Reject("no"), mwproto.Verdict{Kind: mwproto.Reject, Message: "no"}},
		{mwproto.Before, rewrite, mwproto.Verdict{Kind: mwproto.Rewrite, Input: json.RawMessage(`{"city":"Paris"}`)}},
		{mwproto.After, maiden.RewriteOutput("x"), mwproto.Verdict{Kind: mwproto.Rewrite, Output: "x"}},
		// An empty output is still an output.
		{mwproto.After, maiden.RewriteOutput(""), mwproto.Verdict{Kind: mwproto.Rewrite}},
		{mwproto.Failed, maiden.Pass(), mwproto.Verdict{Kind: mwproto.Pass}},
		{mwproto.Failed, maiden.Reject("withheld"), mwproto.Verdict{Kind: mwproto.Reject, Message: "withheld"}},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mwproto.ParseVerdict(c.phase, string(b))
		if err != nil {
			t.Errorf("%s %s: %v", c.phase, b, err)
			continue
		}
		if got.Kind != c.want.Kind || got.Message != c.want.Message || string(got.Input) != string(c.want.Input) || got.Output != c.want.Output {
			t.Errorf("%s %s: host read %+v, want %+v", c.phase, b, got, c.want)
		}
	}
}

// TestMiddlewareInSandbox builds testdata/mwprobe as maiden build does and
// runs it: a middleware's Fetch fails without reaching the host (the
// component does not even import http-fetch), a panic traps, an error or
// an empty verdict is handle's err, and a rewrite comes back as JSON.
func TestMiddlewareInSandbox(t *testing.T) {
	path := buildTool(t, "mwprobe")
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatal(err)
	}
	tool, err := sb.Open(context.Background(), path, limits)
	if err != nil {
		t.Fatal(err)
	}
	if tool.World != sandbox.WorldMiddleware || tool.Description != "Probes the SDK's middleware build." {
		t.Fatalf("info %+v", tool.Info)
	}
	run := func(toolName string) sandbox.Outcome {
		t.Helper()
		ev, err := mwproto.Event{Phase: mwproto.After, Tool: toolName, Input: json.RawMessage(`{}`), Output: "out"}.JSON()
		if err != nil {
			t.Fatal(err)
		}
		out, err := tool.Execute(context.Background(), sandbox.Call{Limits: limits, Input: ev,
			Fetch: func(context.Context, sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
				t.Errorf("a middleware reached the host's http-fetch")
				return nil, &sandbox.FetchError{Kind: sandbox.FetchFailed, Message: "unexpected"}
			}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Logs) == 0 || out.Logs[0].Message != "probe "+toolName || out.Logs[0].Level != "warn" {
			t.Errorf("%s: logs %+v", toolName, out.Logs)
		}
		return out
	}
	if out := run("fetch"); out.Failure != nil || out.Output != `{"verdict":"reject","message":"fetch denied: a middleware has no network"}` {
		t.Errorf("fetch: %+v", out)
	}
	if out := run("output"); out.Failure != nil || out.Output != `{"verdict":"rewrite","output":"out!"}` {
		t.Errorf("output: %+v", out)
	}
	if out := run("pass"); out.Failure != nil || out.Output != `{"verdict":"pass"}` {
		t.Errorf("pass: %+v", out)
	}
	if out := run("panic"); out.Failure == nil || out.Failure.Kind != sandbox.KindTrap {
		t.Errorf("panic: %+v, want a trap", out)
	}
	for name, msg := range map[string]string{"fail": "probe failed", "empty": "empty Verdict"} {
		if out := run(name); out.Failure == nil || out.Failure.Kind != sandbox.KindTool || !strings.Contains(out.Failure.Message, msg) {
			t.Errorf("%s: %+v, want kind tool containing %q", name, out, msg)
		}
	}
}

// TestMiddlewareHandleOnHost: on the development machine Handle runs the
// registered middleware as the component would (registration is global, so
// this test registers the process's one middleware).
func TestMiddlewareHandleOnHost(t *testing.T) {
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", what)
			}
		}()
		f()
	}
	mustPanic("Handle before Middleware", func() { _, _ = maiden.Handle(`{}`) })
	mustPanic("Middleware(nil)", func() { maiden.Middleware("d", nil) })
	maiden.Middleware("host test", func(ev maiden.Event) (maiden.Verdict, error) {
		var in struct{ N int }
		if err := ev.DecodeInput(&in); err != nil {
			return maiden.Verdict{}, err
		}
		if ev.Phase == maiden.PhaseFailed {
			// What a failed call carries: its error and its log lines.
			for _, l := range ev.Logs {
				if strings.Contains(l.Message, "password") {
					return maiden.Reject("withheld: a " + l.Level + " line of " + l.Source), nil
				}
			}
			if strings.Contains(ev.Error.Message, "password") {
				return maiden.Reject("withheld: a " + ev.Error.Kind + " error"), nil
			}
			return maiden.Pass(), nil
		}
		switch in.N {
		case 1:
			return maiden.Reject("one"), nil
		case 2:
			return maiden.Verdict{Verdict: "allow"}, nil
		}
		return maiden.Pass(), nil
	})
	mustPanic("a second Middleware", func() {
		maiden.Middleware("d", func(maiden.Event) (maiden.Verdict, error) { return maiden.Pass(), nil })
	})
	for _, c := range []struct{ event, out, err string }{
		{`{"phase":"before","input":{"N":0}}`, `{"verdict":"pass"}`, ""},
		{`{"phase":"before","input":{"N":1}}`, `{"verdict":"reject","message":"one"}`, ""},
		{`{"phase":"before","input":{"N":2}}`, "", `unknown verdict "allow"`},
		{`{"phase":"before","input":{"N":"x"}}`, "", "decoding"},
		{`[1]`, "", "not a JSON object"},
		{`{"phase":"failed","input":{},"error":{"kind":"tool","message":"the password is 1234"},"logs":[]}`, `{"verdict":"reject","message":"withheld: a tool error"}`, ""},
		{`{"phase":"failed","input":{},"error":{"kind":"tool","message":"no"},"logs":[{"level":"info","source":"stderr","message":"my password"}]}`, `{"verdict":"reject","message":"withheld: a info line of stderr"}`, ""},
		{`{"phase":"failed","input":{},"error":{"kind":"deadline","message":"too slow"},"logs":[{"level":"info","source":"log","message":"fine"}]}`, `{"verdict":"pass"}`, ""},
	} {
		out, err := maiden.Handle(c.event)
		if out != c.out || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Handle(%s) = %q, %v; want %q, %q", c.event, out, err, c.out, c.err)
		}
	}
}
