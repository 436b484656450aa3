package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/mwproto"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// Components runs middleware components (maiden:middleware) and reads
// their verdicts. Any failure (load, world, trap, deadline, memory, a
// malformed verdict) refuses the call; the host keeps serving, and the
// operator's log says why.
type Components struct {
	Runner sandbox.Runner
	// Log is the operator's log (a component's log lines, its failures).
	Log *slog.Logger
}

// event is the event a component's handle() sees: in the after phase
// with the output, in the failed phase with the failure, and in both with
// the call's log lines (as the layers inside this one left them).
func event(phase mwproto.Phase, c Call, output string, failure *api.ToolError, logs []api.LogEntry) (string, error) {
	ev := mwproto.Event{Phase: phase, Tool: c.Tool, Agent: c.Agent, Session: c.Session,
		Rendered: c.Rendered, Input: json.RawMessage(c.InputText), Logs: logs}
	switch phase {
	case mwproto.After:
		ev.Output = output
	case mwproto.Failed:
		if failure != nil {
			ev.Error = mwproto.Failure{Kind: string(failure.Kind), Message: failure.Message}
		}
	}
	return ev.JSON()
}

// run calls a component's handle() with the event and reads its verdict.
func (cs Components) run(ctx context.Context, m config.Middleware, event string, phase mwproto.Phase) (mwproto.Verdict, error) {
	c := m.Component
	lim := sandbox.Limits{Timeout: c.Timeout, Memory: c.MemoryBytes}
	t, err := cs.Runner.Open(ctx, c.Path, lim)
	if err != nil {
		return mwproto.Verdict{}, fmt.Errorf("loading %s: %w", c.Path, err)
	}
	if t.World != sandbox.WorldMiddleware {
		return mwproto.Verdict{}, fmt.Errorf("%s is a %s component, not middleware (maiden:middleware world)", c.Path, t.World)
	}
	out, err := t.Execute(ctx, sandbox.Call{Limits: lim, Input: event})
	for _, l := range out.Logs {
		// A component's log is the operator's, never the agent's.
		cs.Log.Info("middleware log", "component", c.Name, "level", l.Level, "source", l.Source, "message", l.Message)
	}
	if err != nil {
		return mwproto.Verdict{}, err
	}
	if out.Failure != nil {
		return mwproto.Verdict{}, fmt.Errorf("%s: %s", out.Failure.Kind, out.Failure.Message)
	}
	return mwproto.ParseVerdict(phase, out.Output)
}

// Before asks a component about the call before the tool runs: pass,
// reject, or a rewritten input (rewrite non-nil, and no verdict yet),
// which the caller checks as if the agent had sent it. An input that is
// not a JSON object is refused with no verdict. An error is the
// context's, when it ended.
func (cs Components) Before(ctx context.Context, m config.Middleware, c Call) (step Step, rewrite *string, err error) {
	ev, err := event(mwproto.Before, c, "", nil, nil)
	if err != nil {
		return Step{Refused: &api.ToolError{Kind: api.KindDenied, Message: "refused by policy: the input is not a JSON object, which middleware needs"}}, nil, nil
	}
	v, err := cs.run(ctx, m, ev, mwproto.Before)
	if err != nil {
		if ctx.Err() != nil {
			return Step{}, nil, ctx.Err()
		}
		cs.Log.Warn("middleware component failed; call refused", "rule", m.Rule, "component", m.Component.Name, "tool", c.Tool, "err", err)
		return reject(m, api.KindDenied, "refused by policy: a check on this call failed (the operator's log says why)", "failed: "+err.Error()), nil, nil
	}
	switch v.Kind {
	case mwproto.Reject:
		return reject(m, api.KindDenied, v.Message, v.Message), nil, nil
	case mwproto.Rewrite:
		input := string(v.Input)
		return Step{}, &input, nil
	}
	return pass(m, ""), nil, nil
}

// After asks a component about a successful call's output and its log
// lines: pass, reject (the result withheld, its logs too), or a rewritten
// output (output is what the caller returns). An error is the context's,
// when it ended.
func (cs Components) After(ctx context.Context, m config.Middleware, c Call, output string, logs []api.LogEntry) (step Step, out string, err error) {
	ev, err := event(mwproto.After, c, output, nil, logs)
	if err == nil {
		var v mwproto.Verdict
		if v, err = cs.run(ctx, m, ev, mwproto.After); err == nil {
			switch v.Kind {
			case mwproto.Reject:
				return reject(m, api.KindDenied, v.Message, v.Message), "", nil
			case mwproto.Rewrite:
				return Step{Verdict: Verdict{Rule: m.Rule, Use: m.Use, Verdict: "rewrite", Detail: "output"}}, v.Output, nil
			}
			return pass(m, ""), output, nil
		}
	}
	if ctx.Err() != nil {
		return Step{}, "", ctx.Err()
	}
	cs.Log.Warn("middleware component failed on the output; result withheld", "rule", m.Rule, "tool", c.Tool, "err", err)
	return reject(m, api.KindDenied, "refused by policy: a check on this call's output failed (the operator's log says why)", "failed: "+err.Error()), "", nil
}

// Failed asks a component about a call that failed after its tool ran
// (failure, as the layers inside this one left it) and its log lines:
// pass (the failure goes on as it is) or reject (the agent sees the
// component's message instead, and no log line). A rewrite is not a
// verdict of this phase: ParseVerdict refuses it, and a refused verdict
// fails the component, which refuses the call as any failure does. An
// error is the context's, when it ended.
func (cs Components) Failed(ctx context.Context, m config.Middleware, c Call, failure *api.ToolError, logs []api.LogEntry) (step Step, err error) {
	ev, err := event(mwproto.Failed, c, "", failure, logs)
	if err == nil {
		var v mwproto.Verdict
		if v, err = cs.run(ctx, m, ev, mwproto.Failed); err == nil {
			if v.Kind == mwproto.Reject {
				return reject(m, api.KindDenied, v.Message, v.Message), nil
			}
			return pass(m, ""), nil
		}
	}
	if ctx.Err() != nil {
		return Step{}, ctx.Err()
	}
	cs.Log.Warn("middleware component failed in the failed phase; the call's error withheld", "rule", m.Rule, "tool", c.Tool, "err", err)
	return reject(m, api.KindDenied, "refused by policy: a check on this call's error failed (the operator's log says why)", "failed: "+err.Error()), nil
}
