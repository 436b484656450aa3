package maiden

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/condition"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/limits"
	"github.com/maiden-run/maiden/internal/mwproto"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the middleware chain (agent.toml [[middleware]], a tool's
// and a binding's middleware lists; config.Chain merges them). The runtime
// owns the traversal: every layer of the chain sees the call, outermost
// first, before the tool runs, and the output, innermost first, after it.
// A layer returns a verdict (pass, reject, rewrite); it has no handle on
// the next layer, so it cannot skip one, reorder them or act after it
// returned (CARDS.md A13–A15). Agents never see the chain: nothing of it
// is in tools/list, and a result carries only a rejection's message.
//
// A rewritten input is checked again as if the agent had sent it: against
// the tool's schema and against the agent's cards. A condition that fails
// to evaluate denies.

// verdict is one layer's decision, for the audit trail.
type verdict struct {
	Rule    string `json:"rule"`
	Use     string `json:"use"`
	Verdict string `json:"verdict"` // skip (its condition was false), pass, reject, rewrite, approved, pending, denied
	Detail  string `json:"detail,omitempty"`
}

// middleware runs the call's chain around the rest of the pipeline.
func (h *Host) middleware(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.chainDone {
			// The tool's file changed as it started (sandbox.ErrStale) and
			// loadAndValidate runs the rest again: the layers have
			// decided already, and the approval is consumed.
			return next(ctx, inv)
		}
		// An imported tool has its [mcp.NAME]'s and binding's layers.
		chain := inv.cfg.Chain(inv.agent, inv.bindName)
		if len(chain) == 0 {
			inv.chainDone = true
			return next(ctx, inv)
		}
		if err := inv.render(); err != nil {
			return inv.fail(KindInput, "input cannot be rendered for the policy: "+err.Error())
		}
		for _, m := range chain {
			done, err := h.before(ctx, inv, m)
			if err != nil || done {
				return err
			}
		}
		inv.wrapLogs()
		inv.chainDone = true
		if err := next(ctx, inv); err != nil {
			return err
		}
		// After the run, innermost first. A failed call's logs and
		// message still pass the redact layers; only a success's output
		// goes to the others.
		for i := len(chain) - 1; i >= 0; i-- {
			if !inv.res.OK && chain[i].Use != config.UseRedact {
				continue
			}
			if done, err := h.after(ctx, inv, chain[i]); err != nil || done {
				return err
			}
		}
		return nil
	}
}

// vars are the condition variables of the call as it stands.
func (inv *invocation) vars() condition.Vars {
	args, _ := inv.input.(map[string]any)
	return condition.Vars{Tool: inv.tool.Name, Args: celArgs(args), Rendered: inv.renderText(), Agent: inv.agent, Session: inv.call.Session}
}

// celArgs converts the parsed input to what CEL expects (numbers as int64
// when whole, float64 otherwise).
func celArgs(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil
	}
	m, err := condition.ArgsFromJSON(b)
	if err != nil {
		return nil
	}
	return m
}

// applies evaluates a layer's when condition; an evaluation error denies.
func (h *Host) applies(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	if m.When == nil {
		return true, nil
	}
	ok, err := m.When.EvalContext(ctx, inv.vars())
	if err != nil {
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "condition failed: " + err.Error()})
		return false, inv.fail(KindDenied, "refused by policy: a condition on this call could not be evaluated ("+condMessage(err)+")")
	}
	if !ok {
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "skip"})
	}
	return ok, nil
}

// condMessage is a CEL evaluation error without the expression (the agent
// sees it; the chain stays invisible).
func condMessage(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); i >= 0 && strings.HasPrefix(s, "condition ") {
		s = s[i+2:]
	}
	return s
}

// before runs one layer before the tool. done means the call ended (its
// result is set).
func (h *Host) before(ctx context.Context, inv *invocation, m config.Middleware) (done bool, err error) {
	ok, err := h.applies(ctx, inv, m)
	if err != nil || inv.res.Error != nil {
		return true, err
	}
	if !ok {
		return false, nil
	}
	pass := func(detail string) (bool, error) {
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "pass", Detail: detail})
		return false, nil
	}
	reject := func(kind ErrorKind, msg, detail string) (bool, error) {
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: detail})
		return true, inv.fail(kind, msg)
	}
	switch m.Use {
	case config.UseValidate:
		ok, err := m.Check.EvalContext(ctx, inv.vars())
		if err != nil {
			return reject(KindDenied, "refused by policy: a rule on the arguments could not be evaluated ("+condMessage(err)+")", err.Error())
		}
		if !ok {
			return reject(KindInput, m.Message, m.Check.String())
		}
		return pass("")
	case config.UseRateLimit:
		st, err := h.state(ctx, inv.cfg)
		if err != nil {
			return true, err
		}
		rate := store.Rate{Capacity: m.Burst, Refill: m.Limit, Interval: m.Per}
		now := time.Now()
		allowed, at, err := st.Take(ctx, store.BucketKey{Agent: inv.agent, Tool: inv.tool.Name, Rule: m.Rule}, rate, 1, now)
		if err != nil {
			return true, fmt.Errorf("%w: rate limit: %v", ErrState, err)
		}
		if !allowed {
			wait := limits.WaitText(at.Sub(now))
			return reject(KindDenied, fmt.Sprintf("rate limit: at most %d calls of %s per %v; try again in %s", m.Limit, inv.tool.Name, m.Per, wait), "wait "+wait)
		}
		return pass("")
	case config.UseQuota:
		cost := int64(1)
		if m.Cost != nil {
			c, err := m.Cost.EvalInt(ctx, inv.vars())
			if err != nil {
				return reject(KindDenied, "refused by policy: the cost of this call could not be evaluated ("+condMessage(err)+")", err.Error())
			}
			if c < 0 {
				return reject(KindDenied, fmt.Sprintf("refused by policy: the cost of this call is negative (%d)", c), "negative cost")
			}
			cost = c
		}
		st, err := h.state(ctx, inv.cfg)
		if err != nil {
			return true, err
		}
		now := time.Now()
		allowed, reset, err := st.Spend(ctx, store.QuotaKey{Agent: inv.agent, Rule: m.Rule}, m.Limit, m.Window, cost, now)
		if err != nil {
			return true, fmt.Errorf("%w: quota: %v", ErrState, err)
		}
		if !allowed {
			return reject(KindDenied, fmt.Sprintf("quota exceeded: this call costs %d of %d units per %v; the quota resets at %s", cost, m.Limit, m.Window, reset.UTC().Format(time.RFC3339)), fmt.Sprintf("cost %d", cost))
		}
		return pass(fmt.Sprintf("cost %d", cost))
	case config.UseRedact:
		inv.liveRedact = append(inv.liveRedact, m) // its condition held: the live logs too
		return pass("")                            // acts on the output and the logs (wrapLogs, after)
	case config.UseApprove:
		return h.approve(ctx, inv, m)
	}
	if m.Component != nil {
		return h.componentBefore(ctx, inv, m)
	}
	return reject(KindConfig, fmt.Sprintf("middleware %s: unknown middleware %q", m.Rule, m.Use), "unknown")
}

// after runs one layer on a successful call's output.
func (h *Host) after(ctx context.Context, inv *invocation, m config.Middleware) (done bool, err error) {
	switch {
	case m.Use == config.UseRedact:
		if ok, err := h.applies(ctx, inv, m); err != nil || !ok {
			if ok || inv.trail[len(inv.trail)-1].Verdict == "reject" {
				inv.res.OK, inv.res.Output, inv.res.Logs = false, "", nil
				return true, err
			}
			return false, err
		}
		out, n := m.Redactor.Count(inv.res.Output)
		inv.res.Output = out
		if inv.res.Error != nil {
			inv.res.Error.Message = m.Redactor.Redact(inv.res.Error.Message)
		}
		for i := range inv.res.Logs {
			inv.res.Logs[i].Message = m.Redactor.Redact(inv.res.Logs[i].Message)
		}
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "pass", Detail: fmt.Sprintf("%d redacted", n)})
		return false, nil
	case m.Component != nil:
		if ok, err := h.applies(ctx, inv, m); err != nil || !ok {
			if ok || inv.trail[len(inv.trail)-1].Verdict == "reject" {
				inv.res.OK, inv.res.Output = false, ""
				return true, err
			}
			return false, err
		}
		return h.componentAfter(ctx, inv, m)
	}
	return false, nil
}

// wrapLogs makes the call's live log callback see lines as the chain's
// redact layers that apply to the call leave them (outermost last, as
// after does for the result's copy).
func (inv *invocation) wrapLogs() {
	reds := inv.liveRedact
	if len(reds) == 0 || inv.call.OnLog == nil {
		return
	}
	onLog := inv.call.OnLog
	inv.call.OnLog = func(e LogEntry) {
		for i := len(reds) - 1; i >= 0; i-- {
			e.Message = reds[i].Redactor.Redact(e.Message)
		}
		onLog(e)
	}
}

// rewrite replaces the call's input with a layer's rewrite, then checks it
// as if the agent had sent it: parsed, rendered, authorized against the
// agent's cards (a rewrite cannot broaden authority) and validated against
// the tool's schema.
func (h *Host) rewrite(ctx context.Context, inv *invocation, m config.Middleware, input string) (done bool, err error) {
	reject := func(kind ErrorKind, msg string) (bool, error) {
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "rewrite refused: " + msg})
		return true, inv.fail(kind, "refused by policy: "+msg)
	}
	if int64(len(input)) > h.maxInputBytes(inv.cfg) {
		return reject(KindDenied, "a middleware rewrote the input past the size limit")
	}
	doc, err := parseInput(input)
	if err != nil {
		if _, lax := parseOutput(input); lax == nil {
			return reject(KindDenied, "a middleware rewrote the input into JSON that readers read differently: "+err.Error())
		}
		return reject(KindDenied, "a middleware rewrote the input into something that is not JSON")
	}
	args, cmd, err := inv.reparse(doc)
	if err != nil {
		return reject(KindDenied, "the rewritten input cannot be rendered: "+err.Error())
	}
	prevArgs, prevCmd := inv.rendered, inv.cmd
	inv.rendered, inv.cmd = args, cmd
	if inv.wallet != nil {
		d := decide.Decide(decide.Basis{Wallet: inv.wallet}, decide.Invoke(inv.target()))
		if !d.Allow {
			inv.rendered, inv.cmd = prevArgs, prevCmd
			return reject(KindDenied, "the rewritten call is not allowed: "+d.Reason)
		}
		inv.decision = d
	}
	if inv.schema != nil {
		if err := inv.schema.validateWithin(ctx, inv.tool.Timeout, doc); err != nil {
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			return reject(KindDenied, "the rewritten input does not match the tool's schema: "+err.Error())
		}
	}
	inv.call.Input, inv.input, inv.renderedText = input, doc, ""
	if cmd != nil {
		inv.renderedText = cmd.String()
	}
	inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "rewrite", Detail: grant.Rendering(args)})
	return false, nil
}

// componentEvent is the event a middleware component's handle() sees.
func (inv *invocation) componentEvent(phase mwproto.Phase) (string, error) {
	ev := mwproto.Event{Phase: phase, Tool: inv.tool.Name, Agent: inv.agent, Session: inv.call.Session,
		Rendered: inv.renderText(), Input: json.RawMessage(inv.call.Input)}
	if phase == mwproto.After {
		ev.Output = inv.res.Output
	}
	return ev.JSON()
}

// runComponent calls a middleware component's handle() with the event and
// reads its verdict. Any failure (load, world, trap, deadline, memory, a
// malformed verdict) is an error: the call is refused, the host keeps
// serving.
func (h *Host) runComponent(ctx context.Context, m config.Middleware, event string, phase mwproto.Phase) (mwproto.Verdict, error) {
	c := m.Component
	lim := sandbox.Limits{Timeout: c.Timeout, Memory: c.MemoryBytes}
	t, err := h.runner.Open(ctx, c.Path, lim)
	if err != nil {
		return mwproto.Verdict{}, fmt.Errorf("loading %s: %w", c.Path, err)
	}
	if t.World != sandbox.WorldMiddleware {
		return mwproto.Verdict{}, fmt.Errorf("%s is a %s component, not middleware (maiden:middleware world)", c.Path, t.World)
	}
	out, err := t.Execute(ctx, sandbox.Call{Limits: lim, Input: event})
	for _, l := range out.Logs {
		// A component's log is the operator's, never the agent's.
		h.log.Info("middleware log", "component", c.Name, "level", l.Level, "source", l.Source, "message", l.Message)
	}
	if err != nil {
		return mwproto.Verdict{}, err
	}
	if out.Failure != nil {
		return mwproto.Verdict{}, fmt.Errorf("%s: %s", out.Failure.Kind, out.Failure.Message)
	}
	return mwproto.ParseVerdict(phase, out.Output)
}

func (h *Host) componentBefore(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	event, err := inv.componentEvent(mwproto.Before)
	if err != nil {
		return true, inv.fail(KindDenied, "refused by policy: the input is not a JSON object, which middleware needs")
	}
	v, err := h.runComponent(ctx, m, event, mwproto.Before)
	if err != nil {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		h.log.Warn("middleware component failed; call refused", "rule", m.Rule, "component", m.Component.Name, "tool", inv.tool.Name, "err", err)
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "failed: " + err.Error()})
		return true, inv.fail(KindDenied, "refused by policy: a check on this call failed (the operator's log says why)")
	}
	switch v.Kind {
	case mwproto.Reject:
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: v.Message})
		return true, inv.fail(KindDenied, v.Message)
	case mwproto.Rewrite:
		return h.rewrite(ctx, inv, m, string(v.Input))
	}
	inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "pass"})
	return false, nil
}

func (h *Host) componentAfter(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	event, err := inv.componentEvent(mwproto.After)
	if err == nil {
		var v mwproto.Verdict
		if v, err = h.runComponent(ctx, m, event, mwproto.After); err == nil {
			switch v.Kind {
			case mwproto.Reject:
				inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: v.Message})
				inv.res.OK, inv.res.Output = false, ""
				return true, inv.fail(KindDenied, v.Message)
			case mwproto.Rewrite:
				inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "rewrite", Detail: "output"})
				inv.res.Output = v.Output
				return false, nil
			}
			inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "pass"})
			return false, nil
		}
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	h.log.Warn("middleware component failed on the output; result withheld", "rule", m.Rule, "tool", inv.tool.Name, "err", err)
	inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "failed: " + err.Error()})
	inv.res.OK, inv.res.Output = false, ""
	return true, inv.fail(KindDenied, "refused by policy: a check on this call's output failed (the operator's log says why)")
}
