// Package chain decides the layers of the middleware chain (agent.toml
// [[middleware]], a tool's and a binding's lists; config.Chain merges
// them): a layer's when condition, the validate, ratelimit and quota
// verdicts, what a redact layer does to a result and to live log lines,
// and a middleware component's event and verdict. Every refusal is a
// value (Step.Refused) the caller ends the call with; a condition that
// fails to evaluate denies.
//
// The traversal (before outermost first, after innermost first), the
// approve layers and the check of a rewritten input stay with the
// pipeline (the root's middleware.go), which gives what the layers need:
// the call as it stands (Call), the store of the configuration in force
// (Layers.State), the component runner and the operator's log
// (Components):
//
//	l := chain.Layers{State: state, ErrState: maiden.ErrState}
//	if ok, step := chain.Applies(ctx, m, call); ok {
//		step, handled, err = l.Before(ctx, m, call)
//	}
package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/condition"
	"github.com/maiden-run/maiden/internal/limits"
	"github.com/maiden-run/maiden/internal/store"
)

// Verdict is one layer's decision, for the audit trail.
type Verdict struct {
	Rule    string `json:"rule"`
	Use     string `json:"use"`
	Verdict string `json:"verdict"` // skip (its condition was false), pass, reject, rewrite, approved, pending, denied
	Detail  string `json:"detail,omitempty"`
	// Decision is the cards' answer an approve layer that allows
	// "always" got to approve:always (the always-card that let the call
	// through, or the denial that had it ask a human), as Decide
	// returned it; absent for every other layer.
	Decision *api.Decision `json:"decision,omitempty"`
}

// Step is what one layer decided: the trail's entry (Verdict.Verdict ""
// when there is none) and, if it refused the call, the failure the
// caller sees.
type Step struct {
	Verdict Verdict
	Refused *api.ToolError
}

func pass(m config.Middleware, detail string) Step {
	return Step{Verdict: Verdict{Rule: m.Rule, Use: m.Use, Verdict: "pass", Detail: detail}}
}

func reject(m config.Middleware, kind api.ErrorKind, msg, detail string) Step {
	return Step{Verdict: Verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: detail}, Refused: &api.ToolError{Kind: kind, Message: msg}}
}

// Call is what a layer reads of the call as it stands.
type Call struct {
	Tool, Agent, Session string
	// Input is the decoded input (an object's arguments are the
	// conditions' args); InputText its text (a component's event).
	Input     any
	InputText string
	// Rendered is the call's canonical arguments as text.
	Rendered string
	// Config is the configuration in force for the call, whose store
	// holds its buckets and quota windows.
	Config *config.Config
}

// Vars are the condition variables of the call.
func (c Call) Vars() condition.Vars {
	args, _ := c.Input.(map[string]any)
	return condition.Vars{Tool: c.Tool, Args: celArgs(args), Rendered: c.Rendered, Agent: c.Agent, Session: c.Session}
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

// Applies evaluates a layer's when condition. When the layer does not
// apply the step says skip, or, if the condition failed to evaluate,
// reject with the refusal.
func Applies(ctx context.Context, m config.Middleware, c Call) (bool, Step) {
	if m.When == nil {
		return true, Step{}
	}
	ok, err := m.When.EvalContext(ctx, c.Vars())
	if err != nil {
		return false, reject(m, api.KindDenied, "refused by policy: a condition on this call could not be evaluated ("+condMessage(err)+")", "condition failed: "+err.Error())
	}
	if !ok {
		return false, Step{Verdict: Verdict{Rule: m.Rule, Use: m.Use, Verdict: "skip"}}
	}
	return true, Step{}
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

// Limits are the store's rate-limit buckets and quota windows.
type Limits interface {
	Take(ctx context.Context, key store.BucketKey, rate store.Rate, cost int64, now time.Time) (allowed bool, wait time.Time, err error)
	Spend(ctx context.Context, key store.QuotaKey, limit int64, window time.Duration, cost int64, now time.Time) (allowed bool, reset time.Time, err error)
}

// Layers decides the validate, ratelimit and quota layers.
type Layers struct {
	// State is the store of a configuration; its error is returned as
	// it is.
	State func(ctx context.Context, cfg *config.Config) (Limits, error)
	// ErrState wraps the store's own failures (maiden.ErrState).
	ErrState error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (l Layers) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Before decides a validate, ratelimit or quota layer whose condition
// held; handled is false for any other layer, which the caller decides.
// An error means the call could not be decided (the store failed).
func (l Layers) Before(ctx context.Context, m config.Middleware, c Call) (step Step, handled bool, err error) {
	switch m.Use {
	case config.UseValidate:
		ok, err := m.Check.EvalContext(ctx, c.Vars())
		if err != nil {
			return reject(m, api.KindDenied, "refused by policy: a rule on the arguments could not be evaluated ("+condMessage(err)+")", err.Error()), true, nil
		}
		if !ok {
			return reject(m, api.KindInput, m.Message, m.Check.String()), true, nil
		}
		return pass(m, ""), true, nil
	case config.UseRateLimit:
		st, err := l.State(ctx, c.Config)
		if err != nil {
			return Step{}, true, err
		}
		rate := store.Rate{Capacity: m.Burst, Refill: m.Limit, Interval: m.Per}
		now := l.now()
		allowed, at, err := st.Take(ctx, store.BucketKey{Agent: c.Agent, Tool: c.Tool, Rule: m.Rule}, rate, 1, now)
		if err != nil {
			return Step{}, true, fmt.Errorf("%w: rate limit: %v", l.ErrState, err)
		}
		if !allowed {
			wait := limits.WaitText(at.Sub(now))
			return reject(m, api.KindDenied, fmt.Sprintf("rate limit: at most %d calls of %s per %v; try again in %s", m.Limit, c.Tool, m.Per, wait), "wait "+wait), true, nil
		}
		return pass(m, ""), true, nil
	case config.UseQuota:
		cost, refused := QuotaCost(ctx, m, c)
		if refused.Refused != nil {
			return refused, true, nil
		}
		st, err := l.State(ctx, c.Config)
		if err != nil {
			return Step{}, true, err
		}
		now := l.now()
		allowed, reset, err := st.Spend(ctx, store.QuotaKey{Agent: c.Agent, Rule: m.Rule}, m.Limit, m.Window, cost, now)
		if err != nil {
			return Step{}, true, fmt.Errorf("%w: quota: %v", l.ErrState, err)
		}
		if !allowed {
			return reject(m, api.KindDenied, fmt.Sprintf("quota exceeded: this call costs %d of %d units per %v; the quota resets at %s", cost, m.Limit, m.Window, reset.UTC().Format(time.RFC3339)), fmt.Sprintf("cost %d", cost)), true, nil
		}
		return pass(m, fmt.Sprintf("cost %d", cost)), true, nil
	}
	return Step{}, false, nil
}

// QuotaCost is what call c costs of quota layer m (1 without a cost
// expression), or the refusal of a cost that cannot be evaluated or is
// negative.
func QuotaCost(ctx context.Context, m config.Middleware, c Call) (int64, Step) {
	if m.Cost == nil {
		return 1, Step{}
	}
	n, err := m.Cost.EvalInt(ctx, c.Vars())
	if err != nil {
		return 0, reject(m, api.KindDenied, "refused by policy: the cost of this call could not be evaluated ("+condMessage(err)+")", err.Error())
	}
	if n < 0 {
		return 0, reject(m, api.KindDenied, fmt.Sprintf("refused by policy: the cost of this call is negative (%d)", n), "negative cost")
	}
	return n, Step{}
}

// Unknown is the refusal of a layer nothing decides.
func Unknown(m config.Middleware) Step {
	return reject(m, api.KindConfig, fmt.Sprintf("middleware %s: unknown middleware %q", m.Rule, m.Use), "unknown")
}

// Redact applies a redact layer to a result, in place: its output, its
// failure's message and its log lines. The verdict counts the output's
// redactions.
func Redact(m config.Middleware, output *string, failure *api.ToolError, logs []api.LogEntry) Step {
	out, n := m.Redactor.Count(*output)
	*output = out
	if failure != nil {
		failure.Message = m.Redactor.Redact(failure.Message)
	}
	for i := range logs {
		logs[i].Message = m.Redactor.Redact(logs[i].Message)
	}
	return pass(m, fmt.Sprintf("%d redacted", n))
}

// LiveLogs is onLog seeing lines as the redact layers that apply to the
// call leave them (outermost last, as the result's copy); onLog itself
// when there are none.
func LiveLogs(reds []config.Middleware, onLog func(api.LogEntry)) func(api.LogEntry) {
	if len(reds) == 0 || onLog == nil {
		return onLog
	}
	return func(e api.LogEntry) {
		for i := len(reds) - 1; i >= 0; i-- {
			e.Message = reds[i].Redactor.Redact(e.Message)
		}
		onLog(e)
	}
}
