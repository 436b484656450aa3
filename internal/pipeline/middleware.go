package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/chain"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/jsonschema"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the middleware chain (agent.toml [[middleware]], a tool's
// and a binding's middleware lists; config.Chain merges them). The runtime
// owns the traversal: every layer of the chain sees the call, outermost
// first, before the tool runs, and the result, innermost first, after it
// (a component: a success's output and log lines, or, once the tool ran, a
// failure's message and log lines; the log lines of a call a component
// watches reach the caller only after that, and its progress never).
// A layer returns a verdict (pass, reject, rewrite); it has no handle on
// the next layer, so it cannot skip one, reorder them or act after it
// returned (CARDS.md A13–A15). Agents never see the chain: nothing of it
// is in tools/list, and a result carries only a rejection's message.
//
// A rewritten input is checked again as if the agent had sent it: against
// the tool's schema and against the agent's cards. A condition that fails
// to evaluate denies.
//
// What each layer decides is internal/chain's; this file keeps the
// traversal, the invocation's side of each step (its trail, its result,
// its live logs) and the check of a rewritten input.

// verdict is one layer's decision, for the audit trail.
type verdict = chain.Verdict

// middlewareStage is the middleware stage: the layers' decisions
// (internal/chain) with the store and the component runner given, and the
// two that stay with the pipeline, the approve layers (the wait for a
// human: approveLayer, middleware_approve.go) and the check of a rewritten
// input (rewriteCheck). pipeline() builds each part from the Host's fields.
type middlewareStage struct {
	layers     chain.Layers
	components chain.Components
	approve    approveLayer
	rewrite    rewriteCheck
}

// chainState is the state store's getter as the layers (internal/chain)
// read it: the store's limits.
func chainState(state func(ctx context.Context, cfg *config.Config) (store.Store, error)) func(context.Context, *config.Config) (chain.Limits, error) {
	return func(ctx context.Context, cfg *config.Config) (chain.Limits, error) { return state(ctx, cfg) }
}

// chain runs the call's chain around the rest of the pipeline.
func (s middlewareStage) chain(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		// An imported tool has its [mcp.NAME]'s and binding's layers.
		layers := inv.cfg.Chain(inv.agent, inv.bindName)
		if len(layers) == 0 {
			inv.chainDone = true
			return next(ctx, inv)
		}
		// chainDone: the tool's file changed as it started
		// (sandbox.ErrStale) and loadAndValidate runs the rest again. The
		// layers have decided already (and the approval is consumed), so
		// the before phase is not run twice; the after phase, which the
		// stale attempt never reached, still is: skipping it would hand
		// the retried run's output to the agent past every redact layer
		// and component.
		if !inv.chainDone {
			// The layers read the value (chainCall): decoded here, once.
			if _, err := inv.value(); err != nil {
				return err
			}
			if err := inv.render(); err != nil {
				return inv.fail(KindInput, "input cannot be rendered for the policy: "+err.Error())
			}
			// seen: the call as each layer saw it (recheckOuter).
			seen := make([]chain.Call, 0, len(layers))
			for i, m := range layers {
				seen = append(seen, inv.chainCall())
				n := len(inv.trail)
				done, err := s.beforeTraced(ctx, inv, m)
				if err != nil || done {
					return err
				}
				if len(inv.trail) > n && inv.trail[len(inv.trail)-1].Verdict == "rewrite" {
					if done, err := s.recheckOuter(ctx, inv, layers[:i], seen, m); err != nil || done {
						return err
					}
				}
			}
			inv.wrapLogs()
			inv.chainDone = true
		}
		if err := next(ctx, inv); err != nil {
			return err
		}
		// After the run, innermost first. A success's output and logs go
		// to every layer (a component's after phase); a call that failed
		// once its tool ran, to the redact layers and, its message and
		// logs, to the components (their failed phase): a tool that
		// fails, or logs, with what a component would withhold gets no
		// road around it. A call refused before its tool ran carries only
		// maiden's own words, which the redact layers still see.
		for i := len(layers) - 1; i >= 0; i-- {
			m := layers[i]
			if !inv.res.OK && m.Use != config.UseRedact && (m.Component == nil || !inv.ran) {
				continue
			}
			if done, err := s.afterTraced(ctx, inv, m); err != nil || done {
				return err
			}
		}
		inv.deliverHeld()
		return nil
	}
}

// recheckOuter asks the layers before by (outer, which saw the calls in
// seen) about the input by rewrote, where their decision reads only the
// arguments: a validate layer's check, and whether an approve layer's
// condition holds. Otherwise an inner layer could rewrite a call into one
// an outer validate refuses, or one an approve layer would have sent to a
// human, and it would run (the docs' advice, rewriting layers first, was
// the only guard). An approve layer whose condition held already asked a
// human about the call before the rewrite; runApproved refuses the call
// then (its input changed after it was approved). A quota layer counted
// the call as it saw it: a rewrite into a call that costs more of it (or
// that it now applies to) is refused, and nothing more is counted. Rate
// limits (a call counts one, rewritten or not) and components (they may
// rewrite in turn) are not asked again.
func (s middlewareStage) recheckOuter(ctx context.Context, inv *invocation, outer []config.Middleware, seen []chain.Call, by config.Middleware) (done bool, err error) {
	refuse := func(msg string) (bool, error) {
		inv.trail = append(inv.trail, verdict{Rule: by.Rule, Use: by.Use, Verdict: "reject", Detail: "rewrite refused: " + msg})
		return true, inv.fail(KindDenied, "refused by policy: "+msg)
	}
	now := inv.chainCall()
	for j, o := range outer {
		if o.Use != config.UseValidate && o.Use != config.UseApprove && o.Use != config.UseQuota {
			continue
		}
		ok, step := chain.Applies(ctx, o, now)
		if step.Refused != nil {
			return inv.step(step) // a condition that cannot be evaluated denies
		}
		if !ok {
			continue
		}
		switch o.Use {
		case config.UseValidate:
			step, _, err := s.layers.Before(ctx, o, now)
			if err != nil {
				return true, err
			}
			if step.Refused != nil {
				return refuse(fmt.Sprintf("the input a middleware rewrote is refused by an earlier rule: %s", step.Refused.Message))
			}
		case config.UseApprove:
			if before, _ := chain.Applies(ctx, o, seen[j]); !before {
				return refuse("a middleware rewrote the input into a call an earlier approve rule would ask a human about; put layers that rewrite before approve layers")
			}
		case config.UseQuota:
			cost, step := chain.QuotaCost(ctx, o, now)
			if step.Refused != nil {
				return inv.step(step)
			}
			var counted int64
			if before, _ := chain.Applies(ctx, o, seen[j]); before {
				counted, _ = chain.QuotaCost(ctx, o, seen[j])
			}
			if cost > counted {
				return refuse(fmt.Sprintf("a middleware rewrote the input into a call that costs %d of quota %s, where %d was counted; put layers that rewrite before quota layers", cost, o.Rule, counted))
			}
		}
	}
	return false, nil
}

// beforeTraced is before in a span of its own when tracing is on.
func (s middlewareStage) beforeTraced(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	if inv.tr == nil {
		return s.before(ctx, inv, m)
	}
	ctx, end := inv.layerSpan(ctx, "before", m)
	defer end()
	return s.before(ctx, inv, m)
}

// afterTraced is after in a span of its own when tracing is on (phase
// "failed" on a failed call).
func (s middlewareStage) afterTraced(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	if inv.tr == nil {
		return s.after(ctx, inv, m)
	}
	phase := "after"
	if !inv.res.OK {
		phase = "failed"
	}
	ctx, end := inv.layerSpan(ctx, phase, m)
	defer end()
	return s.after(ctx, inv, m)
}

// chainCall is what the layers read of the call as it stands.
func (inv *invocation) chainCall() chain.Call {
	return chain.Call{Tool: inv.tool.Name, Agent: inv.agent, Session: inv.call.Session,
		Input: inv.input, InputText: inv.call.Input, Rendered: inv.renderText(), Config: inv.cfg}
}

// step records a layer's step in the call's trail and ends the call with
// its refusal, if any (done).
func (inv *invocation) step(s chain.Step) (done bool, err error) {
	if s.Verdict.Verdict != "" {
		inv.trail = append(inv.trail, s.Verdict)
	}
	if s.Refused != nil {
		return true, inv.fail(s.Refused.Kind, s.Refused.Message)
	}
	return false, nil
}

// applies evaluates a layer's when condition; an evaluation error denies.
func applies(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	ok, step := chain.Applies(ctx, m, inv.chainCall())
	_, err := inv.step(step)
	return ok, err
}

// before runs one layer before the tool. done means the call ended (its
// result is set).
func (s middlewareStage) before(ctx context.Context, inv *invocation, m config.Middleware) (done bool, err error) {
	ok, err := applies(ctx, inv, m)
	if err != nil || inv.res.Error != nil {
		return true, err
	}
	if !ok {
		return false, nil
	}
	if step, handled, err := s.layers.Before(ctx, m, inv.chainCall()); handled || err != nil {
		if err != nil {
			return true, err
		}
		return inv.step(step)
	}
	switch m.Use {
	case config.UseRedact:
		inv.liveRedact = append(inv.liveRedact, m) // its condition held: the live logs too
		// acts on the output and the logs (wrapLogs, after)
		return inv.step(chain.Step{Verdict: verdict{Rule: m.Rule, Use: m.Use, Verdict: "pass"}})
	case config.UseApprove:
		return s.approve.run(ctx, inv, m)
	}
	if m.Component != nil {
		inv.watched = true // its condition held: the logs wait for its verdict (wrapLogs)
		inv.judged = append(inv.judged, m.Rule)
		return s.componentBefore(ctx, inv, m)
	}
	return inv.step(chain.Unknown(m))
}

// after runs one layer on a call's result: a success's output, or a
// failure's message; and its logs.
func (s middlewareStage) after(ctx context.Context, inv *invocation, m config.Middleware) (done bool, err error) {
	switch {
	case m.Use == config.UseRedact:
		if ok, err := applies(ctx, inv, m); err != nil || !ok {
			if ok || inv.trail[len(inv.trail)-1].Verdict == "reject" {
				inv.res.OK, inv.res.Output, inv.res.Logs = false, "", nil
				return true, err
			}
			return false, err
		}
		inv.trail = append(inv.trail, chain.Redact(m, &inv.res.Output, inv.res.Error, inv.res.Logs).Verdict)
		return false, nil
	case m.Component != nil:
		n := len(inv.trail)
		ok, err := applies(ctx, inv, m)
		// A component that judged the call before it ran judges its
		// result, whatever a later layer's rewrite made of its condition
		// (an inner layer rewriting the field the condition reads would
		// otherwise take the result past it); one whose condition could
		// not be evaluated now refuses the call as before.
		evalFailed := len(inv.trail) > n && inv.trail[len(inv.trail)-1].Verdict == "reject"
		if err == nil && !ok && !evalFailed && slices.Contains(inv.judged, m.Rule) {
			ok = true
		}
		if err != nil || !ok {
			if ok || inv.trail[len(inv.trail)-1].Verdict == "reject" {
				// Its condition could not be evaluated: the call is
				// refused, and nothing the component was to judge (the
				// output, the logs) goes on unjudged.
				inv.res.OK, inv.res.Output, inv.res.Logs = false, "", nil
				return true, err
			}
			return false, err
		}
		if !inv.res.OK {
			return s.componentFailed(ctx, inv, m)
		}
		return s.componentAfter(ctx, inv, m)
	}
	return false, nil
}

// wrapLogs makes the call's live log callback see lines as the chain's
// redact layers that apply to the call leave them (outermost last, as
// after does for the result's copy). A call a component watches
// (watched) has no live callback: its lines could carry what the
// component withholds, so they wait in the result (bounded as it is)
// for the after or failed phase, and deliverHeld gives the caller those
// the chain let through. Its progress is not relayed at all (the numbers
// and messages could carry the same; reported after the call they would
// mean nothing).
func (inv *invocation) wrapLogs() {
	if inv.watched {
		inv.heldOnLog, inv.call.OnLog, inv.call.OnProgress = inv.call.OnLog, nil, nil
		return
	}
	inv.call.OnLog = chain.LiveLogs(inv.liveRedact, inv.call.OnLog)
}

// deliverHeld gives a watched call's caller its log lines once the after
// phase ended, in order, as the chain left them in the result (every
// redact layer applied): none when a component withheld them (a reject
// in the after or failed phase clears the result's logs).
func (inv *invocation) deliverHeld() {
	if inv.heldOnLog == nil {
		return
	}
	for _, e := range inv.res.Logs {
		inv.heldOnLog(e)
	}
}

// rewriteCheck is the check of a layer's rewritten input, holding what it
// needs of the Host: the input limit of a configuration (Options.MaxInputBytes,
// else the configuration's, as input.check applies it). The rest is the
// call's own: its pinned wallet, its schema.
type rewriteCheck struct {
	limit func(*config.Config) int64
}

// check replaces the call's input with a layer's rewrite, then checks it
// as if the agent had sent it: parsed, rendered, authorized against the
// agent's cards (a rewrite cannot broaden authority) and validated against
// the tool's schema.
func (r rewriteCheck) check(ctx context.Context, inv *invocation, m config.Middleware, input string) (done bool, err error) {
	reject := func(kind ErrorKind, msg string) (bool, error) {
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "rewrite refused: " + msg})
		return true, inv.fail(kind, "refused by policy: "+msg)
	}
	if int64(len(input)) > r.limit(inv.cfg) {
		return reject(KindDenied, "a middleware rewrote the input past the size limit")
	}
	// Scanned as the agent's input is (input.check), which refuses what
	// readers read differently, two keys differing only in case included.
	_, err = jsonschema.ScanInput(input)
	var doc any
	if err == nil {
		doc, err = parseInput(input)
	}
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
	prev := callaudit.Rewritten{Rendered: inv.renderText(), Decision: inv.recordedDecision()}
	inv.rendered, inv.cmd, inv.renderedText = args, cmd, ""
	if cmd != nil {
		inv.renderedText = cmd.String()
	}
	if inv.wallet != nil {
		// From here the record names the rewritten call and its
		// decision, refused or not, and keeps the one on the input
		// before it beside (a replay asks both).
		if !inv.rewritesCut {
			inv.beforeRewrite, inv.rewritesCut = callaudit.KeepRewrite(inv.beforeRewrite, prev)
		}
		d := inv.decideInvoke(inv.wallet)
		if !d.Allow {
			return reject(KindDenied, "the rewritten call is not allowed: "+d.Reason)
		}
	}
	if inv.schema != nil {
		if err := inv.schema.validateWithin(ctx, inv.tool.Timeout, doc); err != nil {
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			return reject(KindDenied, "the rewritten input does not match the tool's schema: "+err.Error())
		}
	}
	inv.setInput(input, doc)
	inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "rewrite", Detail: grant.Rendering(args)})
	return false, nil
}

// componentBefore asks a middleware component about the call; a rewrite
// it returns is checked as if the agent had sent it (rewriteCheck).
func (s middlewareStage) componentBefore(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	step, input, err := s.components.Before(ctx, m, inv.chainCall())
	if err != nil {
		return true, err
	}
	if input != nil {
		return s.rewrite.check(ctx, inv, m, *input)
	}
	return inv.step(step)
}

// componentAfter asks a middleware component about a successful call's
// output and logs; a refusal withholds the result, its logs included. A
// withheld call is a failed one, and the after phase goes on as for any
// failed call: the redact layers outside this one still see its message,
// and the components outside it judge it in their failed phase (ending
// here would hand it on unjudged).
func (s middlewareStage) componentAfter(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	step, out, err := s.components.After(ctx, m, inv.chainCall(), inv.res.Output, inv.res.Logs)
	if err != nil {
		return true, err
	}
	if step.Refused != nil {
		inv.res.OK, inv.res.Output, inv.res.Logs = false, "", nil
		_, err := inv.step(step)
		return false, err
	}
	inv.res.Output = out
	return inv.step(step)
}

// componentFailed asks a middleware component about a call that failed
// after its tool ran: its message (the tool's own, an upstream's, or an
// inner layer's refusal) and its logs. A reject replaces the failure with
// the component's message and withholds the logs; the after phase goes
// on, so the layers outside see the call as this one left it.
func (s middlewareStage) componentFailed(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	step, err := s.components.Failed(ctx, m, inv.chainCall(), inv.res.Error, inv.res.Logs)
	if err != nil {
		return true, err
	}
	if step.Refused != nil {
		inv.res.Logs = nil
		_, err := inv.step(step)
		return false, err
	}
	return inv.step(step)
}
