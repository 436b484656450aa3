package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/budget"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// budgetStage is budgets on cards (internal/budget): a call allowed by a
// card with a budget spends one call and its tool's cost on that card and
// its ancestors before it runs, or is denied naming the card, the budget
// and what is left; its wall time and http-fetch bytes are charged when
// it ends, however it ends. It runs after the approvals, so a human's
// wait is not the tool's time. One agent call is one charge: when the
// version it opened was replaced as it started (sandbox.ErrStale) and
// loadAndValidate runs the rest again, the retry runs on the reservation
// already made, and it is ended once, after the last attempt.
type budgetStage struct {
	state func(ctx context.Context, cfg *config.Config) (store.Store, error)
	log   *slog.Logger
}

// decidedCard is the card that decided the call ("" when the cards were
// not asked, or no card allowed it).
func (inv *invocation) decidedCard() string {
	if inv.decision == nil {
		return ""
	}
	return inv.decision.Card
}

func (b budgetStage) spend(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.budget != nil {
			// Reserved by an earlier attempt of this call (a stale version's
			// retry): not again.
			return b.endAfter(ctx, inv, next)
		}
		if inv.decision == nil || !inv.decision.Allow || !budget.Applies(inv.wallet, inv.decision.Card) {
			return next(ctx, inv)
		}
		st, err := b.state(ctx, inv.cfg)
		if err != nil {
			return err
		}
		m, denial, err := budget.Reserve(ctx, st, inv.wallet, inv.decision.Card, inv.tool.CallCost(), maxWall(inv.tool))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrState, err)
		}
		if denial != "" {
			return inv.fail(KindDenied, denial)
		}
		inv.budget = m
		return b.endAfter(ctx, inv, next)
	}
}

// budgetSlack is wall time a call reserves beyond its tool's timeout: the
// stages after the run (the output's check, the audit record) count
// against wall_ms too, and the reservation must not end a call its own
// deadline would let finish.
const budgetSlack = time.Second

// maxWall is the most wall time a call of tool may take, as the budget
// reserves it: the tool's timeout and budgetSlack.
func maxWall(tool *config.Tool) time.Duration {
	t := tool.Timeout
	if t <= 0 {
		t = config.DefaultTimeout
	}
	return t + budgetSlack
}

// endAfter runs the rest of the call, held to the wall time its budget
// reserved, and then settles its wall time and charges its bytes, unless
// it found its version stale and loadAndValidate will run it again on the
// same reservation.
func (b budgetStage) endAfter(ctx context.Context, inv *invocation, next handler) (err error) {
	defer func() {
		if !(inv.staleRetry && errors.Is(err, sandbox.ErrStale)) {
			inv.budget.End(context.WithoutCancel(ctx), b.log)
		}
	}()
	at, limited := inv.budget.Deadline()
	if !limited {
		return next(ctx, inv)
	}
	// Less wall time left on the card (or an ancestor) than the call may
	// run: it ends when that runs out, however the run reports its end.
	bctx, cancel := context.WithDeadline(ctx, at)
	defer cancel()
	err = next(bctx, inv)
	if ctx.Err() == nil && errors.Is(bctx.Err(), context.DeadlineExceeded) && (err != nil || inv.res.Error != nil) &&
		!(inv.staleRetry && errors.Is(err, sandbox.ErrStale)) {
		d, card := inv.budget.Reserved()
		inv.res.OK, inv.res.Output = false, ""
		return inv.fail(KindDeadline, fmt.Sprintf("the call ran for the %v of wall time its card's budget had left (wall_ms; card %s or an ancestor: maiden cards show %s)", d, card, card))
	}
	return err
}
