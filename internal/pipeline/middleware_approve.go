package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/store"
)

// The approve middleware: when its condition holds, a human must approve
// the call. The request is stored before anything runs (agent, session,
// tool, rendered arguments, a digest of the exact input, the rule and its
// reason, the agent's card revision, when it expires); the call then waits
// for a decision (Call.ApprovalWait), releasing its admission turn while
// it waits. An approval is bound to the input digest, the agent, the
// card revision and the tool's binding (its code identity and effective
// policy, approvalbinding.go): if any changed, it asks again. A denial is remembered for
// the same call until the request expires. A wait that ends undecided is a
// result of kind pending with the request's ID; the same call repeated
// after the approval runs, and the approval is consumed exactly once, in
// one transaction with marking the call started (runApproved). A call
// whose process died while it ran is marked interrupted when a process
// opens the store again, and is never re-run by itself.

// approveLayer is the approve layers' work, holding what it needs of the
// Host: the state store's getter (the requests, the approvals), the
// wallet's getter (the agent's cards pinned again after a wait), the audit
// trail (an approval requested is a record of it) and the one wait for a
// human (humanwait.go).
type approveLayer struct {
	state  func(ctx context.Context, cfg *config.Config) (store.Store, error)
	wallet func(ctx context.Context, cfg *config.Config, agent string, at time.Time) (*cards.Wallet, error)
	trail  *callaudit.Trail
	human  *humanWait
}

// run runs one approve layer whose condition held.
func (l approveLayer) run(ctx context.Context, inv *invocation, m config.Middleware) (bool, error) {
	st, err := l.state(ctx, inv.cfg)
	if err != nil {
		return true, err
	}
	now := time.Now()
	w := inv.wallet
	if w == nil {
		if w, err = l.wallet(ctx, inv.cfg, inv.agent, now); err != nil {
			return true, err
		}
	}
	digest := inv.digest()
	// What the human is asked about besides the input: the tool's code and
	// its effective policy as this call would run them.
	bind := approvalBinding(inv)
	// Whatever lets this call through here (an always-card or a human's
	// approval) covers this exact input and this tool: a later layer that
	// rewrites the input, or a different version of the tool by the time
	// it runs, voids it (runApproved checks).
	inv.approvedDigests = append(inv.approvedDigests, digest)
	inv.approvedBinding = &bind
	if m.AllowAlways {
		// An always-card minted from an approval counts only for the tool
		// and policy that approval showed (Wallet.BoundTo). The answer is
		// the layer's verdict's decision, as Decide returned it, whichever
		// verdict follows (pass by the card; pending, approved or denied
		// by a human when no card said yes): what a what-if replays.
		d := decide.Decide(decide.Basis{Wallet: w.BoundTo(boundKey(bind))}, decide.AlwaysApprove(inv.alwaysTarget()))
		always := d.API()
		n := len(inv.trail)
		defer func() {
			if len(inv.trail) > n && inv.trail[n].Decision == nil {
				inv.trail[n].Decision = &always
			}
		}()
		if d.Allow {
			inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "pass", Detail: "approved always by card " + d.Card})
			// A one-time approval of this same call (the request the
			// always-card was minted from) is used up by this run too:
			// otherwise it would outlive the card and run the call once
			// more after the card is revoked.
			if a, found, err := st.LatestApproval(ctx, inv.agent, inv.tool.Name, digest, m.Rule, bind); err != nil {
				return true, fmt.Errorf("%w: %v", ErrState, err)
			} else if found && a.State == store.ApprovalApproved && a.Expires.After(now) && a.Binding == bind {
				approved(inv, m, a)
			}
			return false, nil
		}
	}
	rev := walletRevision(w)
	if a, found, err := st.RecentDenial(ctx, inv.agent, inv.tool.Name, digest, now); err != nil {
		return true, fmt.Errorf("%w: %v", ErrState, err)
	} else if found {
		return denied(inv, m, a, "this same call was denied")
	}
	a, found, err := st.LatestApproval(ctx, inv.agent, inv.tool.Name, digest, m.Rule, bind)
	if err != nil {
		return true, fmt.Errorf("%w: %v", ErrState, err)
	}
	note := ""
	live := found && (a.State == store.ApprovalApproved || a.State == store.ApprovalPending) && a.Expires.After(now)
	changed := ""
	if found {
		changed = bindingChange(a.Binding, bind)
	}
	switch {
	case live && changed != "":
		// Approved (or asked) for another tool or policy than this call
		// would run under: it releases nothing; the human is asked about
		// what the tool is now.
		note = fmt.Sprintf("request %s was made for the tool as it was then, and %s, so it asks again", a.ID, changed)
	case live && a.State == store.ApprovalApproved && a.CardGeneration == rev:
		return approved(inv, m, a)
	case live && a.State == store.ApprovalPending && a.CardGeneration == rev:
		return l.await(ctx, inv, m, st, a, "")
	case found && a.State == store.ApprovalInterrupted:
		note = fmt.Sprintf("the approved run of this same call (request %s) was interrupted when maiden stopped while it ran; it is never re-run by itself, so a human must approve it again", a.ID)
	case found && (a.State == store.ApprovalApproved || a.State == store.ApprovalPending) && a.CardGeneration != rev:
		note = fmt.Sprintf("the agent's cards changed since request %s was made, so it asks again", a.ID)
	}
	reason := m.Reason
	if note != "" {
		reason += " (" + note + ")"
	}
	a, err = st.CreateApproval(ctx, store.Approval{
		Agent: inv.agent, Session: inv.call.Session, Tool: inv.tool.Name, Rendered: inv.renderText(),
		Digest: digest, Middleware: m.Rule, Reason: reason, AllowAlways: m.AllowAlways, CardGeneration: rev, Binding: bind,
		Expires: now.Add(m.Expires),
	}, inv.maxPending())
	if errors.Is(err, store.ErrTooManyPending) {
		// The human's inbox is full of this agent's questions: nothing is
		// asked and nothing runs; the identical calls of a pending request
		// still wait on it (the case above).
		inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "too many approval requests pending"})
		return true, inv.fail(KindDenied, fmt.Sprintf("rule %s needs a human's approval, and agent %s already has %d approval requests waiting for a human, the most one agent may have (its max_pending): nothing was asked or run. Repeat the call once the operator has decided some of them (maiden pending lists them) or they have expired",
			m.Rule, inv.agent, inv.maxPending()))
	}
	if err != nil {
		return true, fmt.Errorf("%w: storing the approval request: %v", ErrState, err)
	}
	l.trail.Event(ctx, inv.auditCall(), store.AuditApproval, map[string]any{"event": "requested", "approval": a.ID, "rule": m.Rule, "reason": reason, "rendered": a.Rendered, "expires": a.Expires,
		"tool_digest": bind.ToolDigest, "policy": json.RawMessage(bind.Policy)})
	return l.await(ctx, inv, m, st, a, note)
}

// walletRevision identifies the cards of a wallet: an approval made under
// one revision asks again under another.
func walletRevision(w *cards.Wallet) int64 {
	return w.Revision()
}

// approved lets the call go on under approval a; the approval is consumed
// right before the tool runs (runApproved), after every later layer passed.
func approved(inv *invocation, m config.Middleware, a store.Approval) (bool, error) {
	if inv.approval != "" && inv.approval != a.ID {
		// Two approve layers matched the same call and both found an
		// approval: each must be consumed; one call consumes one.
		inv.extraApprovals = append(inv.extraApprovals, a.ID)
	} else {
		inv.approval = a.ID
	}
	inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "approved", Detail: a.ID + " by " + a.DecidedBy})
	return false, nil
}

// denied ends the call with a human's denial.
func denied(inv *invocation, m config.Middleware, a store.Approval, what string) (bool, error) {
	inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "denied", Detail: a.ID})
	msg := fmt.Sprintf("%s by a human (request %s)", what, a.ID)
	if a.State == store.ApprovalExpired {
		msg = fmt.Sprintf("the approval request %s expired without a decision", a.ID)
	} else if a.DecisionReason != "" {
		msg += ": " + a.DecisionReason
	}
	if a.State == store.ApprovalDenied {
		msg += fmt.Sprintf("; the same call is refused until %s", a.Expires.UTC().Format(time.RFC3339))
	}
	inv.res.Error = &ToolError{Kind: KindDenied, Message: msg, Approval: a.ID}
	return true, nil
}

// pending ends the call undecided: kind pending with the request's ID.
func pending(inv *invocation, m config.Middleware, a store.Approval, note string) (bool, error) {
	inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "pending", Detail: a.ID})
	msg := fmt.Sprintf("a human must approve this call (request %s: %s). Ask the operator to decide (maiden approve %s, or the inbox page), then repeat the same call", a.ID, a.Reason, a.ID)
	if note != "" {
		msg = note + ". " + msg
	}
	inv.res.Error = &ToolError{Kind: KindPending, Message: msg, Approval: a.ID}
	return true, nil
}

// await waits for a decision on request a (humanWait) and goes on by what
// the human decided.
func (l approveLayer) await(ctx context.Context, inv *invocation, m config.Middleware, st store.Store, a store.Approval, note string) (bool, error) {
	cur := a
	expired := false
	decided, refused := l.human.wait(ctx, inv, a.ID, approvalRequest(a, inv.cfg), func(ctx context.Context) (bool, error) {
		got, err := st.Approval(ctx, a.ID)
		if err != nil {
			return false, err
		}
		cur = got
		if cur.State != store.ApprovalPending {
			return true, nil
		}
		if now := time.Now(); !now.Before(cur.Expires) {
			expired = true
			if _, err := st.Expire(ctx, now); err == nil {
				cur.State = store.ApprovalExpired
			}
			return true, nil
		}
		return false, nil
	})
	if refused != "" {
		// Revoked or removed while nobody had answered: the request stays
		// pending for a human, and this caller stops waiting for it.
		return authorityEnded(inv, m, a.ID, refused)
	}
	if !decided {
		return pending(inv, m, a, note)
	}
	switch {
	case cur.State == store.ApprovalApproved:
		refused, err := l.human.resume(ctx, inv)
		if err != nil {
			return true, err
		}
		if refused != "" {
			// The token the call was made with was revoked, or its agent
			// removed, as the human answered: the approval is left as the
			// human gave it, and nothing runs for this caller.
			return authorityEnded(inv, m, cur.ID, refused)
		}
		return l.afterWait(ctx, inv, m, cur)
	case cur.State == store.ApprovalDenied:
		return denied(inv, m, cur, "this call was denied")
	case cur.State == store.ApprovalExpired || expired:
		return denied(inv, m, cur, "")
	default: // consumed by an identical call meanwhile
		return pending(inv, m, cur, fmt.Sprintf("request %s was used by another identical call", cur.ID))
	}
}

// authorityEnded ends a call whose caller lost its authority (its token
// revoked, its agent removed: principalCheck) while it waited for request
// id: denied with why, nothing run.
func authorityEnded(inv *invocation, m config.Middleware, id, why string) (bool, error) {
	inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "caller's authority ended while it waited: " + why})
	inv.res.Error = &ToolError{Kind: KindDenied, Message: why, Approval: id}
	return true, nil
}

// afterWait lets an approved call go on if the agent's cards are still
// those it was asked under: the wallet is pinned again (the wait may have
// been long), the call decided on it again, and a changed card revision
// asks the human again.
func (l approveLayer) afterWait(ctx context.Context, inv *invocation, m config.Middleware, a store.Approval) (bool, error) {
	w, err := l.wallet(ctx, inv.cfg, inv.agent, time.Now())
	if err != nil {
		return true, err
	}
	if inv.wallet != nil {
		d := inv.decideInvoke(w)
		if !d.Allow {
			inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "cards changed while it waited: " + d.Reason})
			return true, inv.fail(KindDenied, d.Reason)
		}
		if why := inv.decideCredential(w); why != "" { // an import's credential (authorize.go)
			inv.trail = append(inv.trail, verdict{Rule: m.Rule, Use: m.Use, Verdict: "reject", Detail: "cards changed while it waited: " + why})
			return true, inv.fail(KindDenied, why)
		}
		inv.wallet = w
	}
	if walletRevision(w) == a.CardGeneration {
		return approved(inv, m, a)
	}
	if inv.reasked >= 3 {
		return pending(inv, m, a, "the agent's cards keep changing while it waits")
	}
	inv.reasked++
	return l.run(ctx, inv, m) // finds a's revision stale and asks again
}

// approvalStages are the two stages around the run of an approved call,
// holding what they need: the state store's getter and the log.
type approvalStages struct {
	state func(ctx context.Context, cfg *config.Config) (store.Store, error)
	log   *slog.Logger
}

// runApproved consumes the call's approval (if a human approved it) and
// marks it started, in one transaction, right before the tool runs; and
// marks it done after. kill -9 before the consumption loses nothing (the
// approval stays, the repeated call uses it); after it, the call is marked
// interrupted when the store is next opened and never re-run by itself.
func (s approvalStages) runApproved(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if b := inv.approvedBinding; b != nil {
			// The tool that runs must be the one approved: the same code
			// (a stale version reopened by loadAndValidate's retry may be
			// another) under the same policy.
			if now := approvalBinding(inv); now != *b {
				inv.trail = append(inv.trail, verdict{Rule: "approve", Use: config.UseApprove, Verdict: "reject", Detail: "tool changed after approval: " + bindingChange(*b, now)})
				return inv.fail(KindDenied, "refused by policy: the tool changed after the call was approved ("+bindingChange(*b, now)+"), so the approval does not cover it; repeat the call to ask again")
			}
		}
		if inv.started {
			return next(ctx, inv)
		}
		// Hashed only when a layer approved it: a 1 MiB input costs ~0.7 ms.
		var final string
		if len(inv.approvedDigests) > 0 {
			final = inv.digest()
		}
		for _, d := range inv.approvedDigests {
			if d != final {
				// A layer after the approve layer rewrote the input: what
				// was approved is not what would run.
				inv.trail = append(inv.trail, verdict{Rule: "approve", Use: config.UseApprove, Verdict: "reject", Detail: "input rewritten after approval"})
				return inv.fail(KindDenied, "refused by policy: the call was changed after it was approved, so the approval does not cover it (a middleware after the approve rule rewrote it; the operator should put the rewriting layer first)")
			}
		}
		if inv.approval == "" {
			return next(ctx, inv)
		}
		st, err := s.state(ctx, inv.cfg)
		if err != nil {
			return err
		}
		ids := append([]string{inv.approval}, inv.extraApprovals...)
		for i, id := range ids {
			if _, err := st.ConsumeAndStart(ctx, id, *inv.approvedBinding); err != nil {
				// The ones consumed before it are given back: the call
				// does not run.
				s.unstart(ctx, st, ids[:i])
				if errors.Is(err, store.ErrApprovalState) {
					inv.res.Error = &ToolError{Kind: KindPending, Approval: id,
						Message: fmt.Sprintf("the approval %s was used by another identical call or expired (%v); repeat the call to ask again", id, err)}
					return nil
				}
				return fmt.Errorf("%w: starting the approved call: %v", ErrState, err)
			}
		}
		inv.started, inv.startedIDs = true, ids
		err = next(ctx, inv) // marked done by markDone once the run is over
		if !inv.ran {
			// Refused after the consumption and before the run (a budget
			// exhausted, the audit record not written): the tool never
			// ran, so the approvals are given back, as a layer's refusal
			// before the consumption leaves them.
			s.unstart(ctx, st, ids)
			inv.started, inv.startedIDs = false, nil
		}
		return err
	}
}

// unstart gives back approvals consumed for a call that did not run; one
// that cannot be given back stays started (the next process marks it
// interrupted), which is logged.
func (s approvalStages) unstart(ctx context.Context, st store.Store, ids []string) {
	for _, id := range ids {
		if err := st.Unstart(context.WithoutCancel(ctx), id); err != nil {
			s.log.Warn("could not give back an approval whose call did not run", "approval", id, "err", err)
		}
	}
}

// markDone records that the approved calls started by runApproved
// finished, once the run is really over (outside the stale-version retry).
// A call refused after its approval was consumed and before its run (a
// budget exhausted, its audit record not written) gives its approvals back
// (runApproved); one that cannot be given back stays started: the next
// process marks it interrupted, and it is never re-run by itself.
func (s approvalStages) markDone(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		err := next(ctx, inv)
		if !inv.started || !inv.ran {
			return err
		}
		st, serr := s.state(ctx, inv.cfg)
		if serr != nil {
			return err
		}
		for _, id := range inv.startedIDs {
			if merr := st.MarkDone(context.WithoutCancel(ctx), id); merr != nil {
				s.log.Warn("could not mark an approved call done", "approval", id, "err", merr)
			}
		}
		return err
	}
}
