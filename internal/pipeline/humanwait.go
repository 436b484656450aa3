package pipeline

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/humanwait"
)

// humanWait is the one wait for a human's decision (internal/humanwait),
// shared by the approve middleware (an approval request,
// middleware_approve.go) and request_sandbox_boundary (a boundary request,
// sessionbuiltins.go). It holds what it needs of the Host, given in New:
// the Host's waiters (Decide wakes them), its admission (the turn given
// back while a call waits and taken again after), and
// Options.ApprovalWait and Options.ApprovalPoll, and the check that the
// caller may still make the call, asked at every poll while it waits and
// once the human answered (principal.go).
type humanWait struct {
	waiters *humanwait.Waiters
	adm     *admission
	// principal refuses a call whose token was revoked, or whose agent
	// was removed, while it waits (wait, at every poll) or waited (resume).
	principal principalCheck
	// timeout is Options.ApprovalWait; poll is Options.ApprovalPoll.
	timeout, poll time.Duration
}

// wait tells the caller what it waits for (Call.OnApproval, with view),
// then waits on the waiters, asking check at every wake: a decision
// through this Host (Decide wakes the waiter at once, by id), a poll
// (Options.ApprovalPoll; another process may have decided), until the
// wait ends (Call.ApprovalWait, else Options.ApprovalWait, else
// DefaultApprovalWait; below zero, no wait at all, nor for an agent
// with its max_pending calls waiting already) or ctx does. It returns
// decided true when check said done, false when the wait ended first: the
// caller answers kind pending with the request's ID, and the request stays
// for a human. The admission turn is given back while it waits and not
// taken again here: each caller does (resume), for the outcomes that go on
// to run.
//
// At every wake that finds the request undecided it asks principalCheck
// too, so a call whose token was revoked (by any process sharing the
// store: maiden agents revoke-token) or whose agent a reload removed does
// not hold its waiter slot, and its place among the agent's waiting calls,
// until a human answers or the wait times out: the wait ends at the next
// poll, refused is why (decided false), and the caller ends the call
// denied with it, nothing run, the request left as it is. That is one
// store read per poll of a waiting call (the token's), none for a call
// that does not wait. A store that cannot answer is asked again at the
// next poll, as check is.
func (w humanWait) wait(ctx context.Context, inv *invocation, id string, view ApprovalRequest, check func(context.Context) (done bool, err error)) (decided bool, refused string) {
	wait := inv.call.ApprovalWait
	if wait == 0 {
		wait = w.timeout
	}
	if wait == 0 {
		wait = DefaultApprovalWait
	}
	if inv.call.OnApproval != nil {
		inv.call.OnApproval(view)
	}
	poll := w.poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	atomic.StoreInt32(&inv.humanWaiting, 1)
	defer atomic.StoreInt32(&inv.humanWaiting, 0)
	// Waiters.Wait calls it in this goroutine: refused needs no lock.
	recheck := func(ctx context.Context) (bool, error) {
		done, err := check(ctx)
		if err != nil || done {
			return done, err // a decided call's caller is asked again in resume
		}
		why, err := w.principal.refusal(ctx, inv)
		if err != nil {
			return false, err
		}
		refused = why
		return why != "", nil
	}
	if inv.tr != nil {
		var sp oteltrace.Span
		ctx, sp = inv.humanWaitSpan(ctx, id)
		defer sp.End()
		done := w.waiters.Wait(ctx, inv.agent, inv.maxPending(), id, wait, poll, inv.suspend, recheck)
		sp.SetAttributes(attribute.Bool("maiden.human_wait.decided", done && refused == ""))
		return done && refused == "", refused
	}
	done := w.waiters.Wait(ctx, inv.agent, inv.maxPending(), id, wait, poll, inv.suspend, recheck)
	return done && refused == "", refused
}

// maxPending is how many of the call's agent's questions may wait for a
// human at once (its max_pending): its approval requests, its boundary
// requests, and its calls waiting in this process, each counted apart.
func (inv *invocation) maxPending() int {
	if inv.cfg == nil {
		return config.DefaultMaxPending
	}
	return inv.cfg.MaxPending(inv.agent)
}

// resume takes an admission turn again for a call that gave its turn back
// to wait (invocation.suspend) and goes on to run, then asks whether its
// caller still may (principalCheck): refused is why not ("" when it may),
// for the caller to end the call as denied with nothing run. It is asked
// after the turn is taken, the last moment before the call goes on, so a
// revocation made while it queued for the turn counts too.
func (w humanWait) resume(ctx context.Context, inv *invocation) (refused string, err error) {
	if inv.turn == nil {
		if err := w.adm.take(ctx, inv.call.Tool, inv.call.Agent); err != nil {
			return "", err
		}
		inv.turn = w.adm
	}
	return w.principal.refusal(ctx, inv)
}
