// Package budget is the call path's side of budgets on cards (docs/cards.md,
// "Budgets"): after the one decision (internal/decide, which stays pure)
// allowed a call by a card with a budget, Reserve spends one call and the
// tool's cost on that card and its ancestors in the store (or refuses the
// call, naming the card, the budget and what is left); the Meter then
// counts the bytes the call sends (through http-fetch, web_fetch, or a
// wrapped CLI's CONNECT tunnels), and End charges them
// and the call's wall time however the call ended (a result, a crash, a
// deadline, a kill).
//
//	m, denial, err := budget.Reserve(ctx, st, wallet, decision.Card, tool.Cost)
//	if denial != "" {
//		return denied(denial) // budget-exhausted: card card_1 has 0 of its calls budget of 5 left, this call needs 1
//	}
//	defer m.End(context.WithoutCancel(ctx), logger)
//	run(m.Fetch(fetch))
//
// Design notes:
//   - A call whose card has no budget costs nothing here: the store is not
//     asked. A card derived from a budgeted card always has a budget of its
//     own (the store fills in what the parent's chain limits), so whether a
//     call is metered is read off the pinned wallet.
//   - Wall time runs from the reservation to End: the reservation is made
//     after any human approval, so waiting for a human is not the tool's
//     time; everything after it (the run, its http-fetches and other host
//     calls) is.
//   - A call is admitted while some wall time and bytes are left. Where
//     the chain limits wall_ms, the call reserves its wall time up front
//     (its timeout, or what is left if less) and is held to it: the caller
//     ends it at Deadline, and End gives back what it did not use. So calls
//     running at once cannot together outrun a wall_ms budget; a call that
//     finds it all reserved by running calls is refused. Likewise each
//     request through http-fetch or web_fetch spends its bytes before it
//     is sent, or is refused (budget-exhausted) and sends nothing, and so
//     does an imported tool's input and each block a wrapped CLI's tunnels
//     are about to send (Pay); what was paid and not sent is given back at
//     the end. A maiden process killed mid-call never settles that call:
//     its reservation and what it paid stay spent.
package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// Spender is what budgets need of the state store.
type Spender interface {
	ReserveBudget(ctx context.Context, id string, cost, maxWallMS int64) (store.BudgetSpend, error)
	ChargeBudget(ctx context.Context, sp store.BudgetSpend, wallMS, bytesOut int64) error
	SpendBudgetBytes(ctx context.Context, sp store.BudgetSpend, n int64) error
}

// Applies reports whether card (the one that allowed a call, in w) has a
// budget: only then must the call be reserved.
func Applies(w *cards.Wallet, card string) bool {
	return w != nil && card != "" && w.Budgeted(card)
}

// Meter is one reserved call: what it spent up front, when it started and
// the bytes it has sent. A nil *Meter meters nothing.
type Meter struct {
	st    Spender
	spend store.BudgetSpend
	asked int64 // the wall time (ms) Reserve asked for
	start time.Time
	bytes atomic.Int64
	paid  atomic.Int64 // of bytes, what requests spent before they were sent
	ended atomic.Bool
	now   func() time.Time
}

// Reserve starts a call allowed by card, costing cost units and running
// for at most maxWall, on the store's budgets. It returns a nil Meter when
// no budget applies, the denial's text when one is exhausted, and an error
// when the store could not say.
func Reserve(ctx context.Context, st Spender, w *cards.Wallet, card string, cost int64, maxWall time.Duration) (m *Meter, denial string, err error) {
	if !Applies(w, card) {
		return nil, "", nil
	}
	ms := max(1, int64((maxWall+time.Millisecond-1)/time.Millisecond))
	sp, err := st.ReserveBudget(ctx, card, cost, ms)
	var ex *cards.Exhausted
	switch {
	case errors.As(err, &ex):
		return nil, fmt.Sprintf("%s (agent %q; the budget is the card's or an ancestor's: maiden cards show %s)", ex.Error(), w.Agent(), ex.Card), nil
	case err != nil:
		return nil, "", err
	case sp.Zero():
		return nil, "", nil
	}
	return &Meter{st: st, spend: sp, asked: ms, start: time.Now(), now: time.Now}, "", nil
}

// Record is what the call's audit record says of its budget: the card,
// the cards charged, what it spent up front and what was left after.
func (m *Meter) Record() string {
	if m == nil {
		return ""
	}
	s := fmt.Sprintf("card %s spent %s, %s left", m.spend.Card, m.spend.Spent, m.spend.Left)
	if len(m.spend.Cards) > 1 {
		s += " (with its ancestors " + strings.Join(m.spend.Cards[1:], ", ") + ")"
	}
	if m.spend.WallMS > 0 {
		return s + fmt.Sprintf(" (wall_ms=%d reserved: the most it may run); wall_ms settled and bytes_out charged when it ends", m.spend.WallMS)
	}
	return s + "; wall_ms and bytes_out charged when it ends"
}

// Deadline is when the call must end because its wall time reservation
// runs out: ok only where the budget reserved less than Reserve asked for
// (else the call's own deadline ends it first).
func (m *Meter) Deadline() (at time.Time, ok bool) {
	if m == nil || m.spend.WallMS <= 0 || m.spend.WallMS >= m.asked {
		return time.Time{}, false
	}
	return m.start.Add(time.Duration(m.spend.WallMS) * time.Millisecond), true
}

// Reserved is the wall time the call reserved (0 where no budget limits
// it), and the card that allowed it, for messages.
func (m *Meter) Reserved() (time.Duration, string) {
	if m == nil {
		return 0, ""
	}
	return time.Duration(m.spend.WallMS) * time.Millisecond, m.spend.Card
}

// Fetch wraps a call's http-fetch so that the bytes of every request the
// host sends (method, URL, headers, body) count against bytes_out: where
// the chain limits bytes_out they are spent before the request goes, and
// a request they do not fit is refused (denied, budget-exhausted) without
// being sent; a request the policy refused sent nothing.
func (m *Meter) Fetch(f sandbox.FetchFunc) sandbox.FetchFunc {
	if m == nil {
		return f
	}
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		n := RequestBytes(req)
		if refusal, failed := m.pay(ctx, n); refusal != "" {
			kind := sandbox.FetchDenied
			if failed {
				kind = sandbox.FetchFailed
			}
			return nil, &sandbox.FetchError{Kind: kind, Message: refusal}
		}
		resp, ferr := f(ctx, req)
		if ferr == nil || ferr.Kind != sandbox.FetchDenied {
			m.bytes.Add(n)
		}
		return resp, ferr
	}
}

// pay spends n bytes of bytes_out before a request of n bytes is sent,
// where the call's chain limits bytes_out. It returns why the request may
// not go ("" when it may), and whether that is the store's failure
// rather than the budget's refusal. What a request paid and did not send
// (the policy refused it) End gives back.
func (m *Meter) pay(ctx context.Context, n int64) (refusal string, failed bool) {
	if _, limited := m.spend.Left[cards.BudgetBytesOut]; !limited {
		return "", false
	}
	err := m.st.SpendBudgetBytes(ctx, m.spend, n)
	var ex *cards.Exhausted
	switch {
	case errors.As(err, &ex):
		return fmt.Sprintf("%s (maiden cards show %s)", ex.Error(), ex.Card), false
	case err != nil:
		return "the bytes_out budget could not be checked: " + err.Error(), true
	}
	m.paid.Add(n)
	return "", false
}

// SendFunc is how a host built-in sends a request through the egress gate
// (web_fetch's: session.WebFetch.Send).
type SendFunc func(ctx context.Context, p *egress.Policy, r egress.Request) (*egress.Response, *egress.FetchError)

// Send wraps a host built-in's egress send as Fetch wraps a tool's
// http-fetch: web_fetch sends what its input says (a body of up to 2 MiB
// a call) to the hosts its binding allows, and a bytes_out budget that
// counted only http-fetch would admit every such call, each charged
// nothing. A request the policy refused sent nothing.
func (m *Meter) Send(send SendFunc) SendFunc {
	if m == nil {
		return send
	}
	return func(ctx context.Context, p *egress.Policy, r egress.Request) (*egress.Response, *egress.FetchError) {
		n := int64(len(r.Method) + len(r.URL) + len(r.Body))
		for _, h := range r.Headers {
			n += int64(len(h.Name) + len(h.Value))
		}
		if refusal, failed := m.pay(ctx, n); refusal != "" {
			kind := egress.FetchDenied
			if failed {
				kind = egress.FetchFailed
			}
			return nil, &egress.FetchError{Kind: kind, Message: refusal}
		}
		resp, ferr := send(ctx, p, r)
		if ferr == nil || ferr.Kind != egress.FetchDenied {
			m.bytes.Add(n)
		}
		return resp, ferr
	}
}

// LimitsBytes reports whether the call's chain limits bytes_out: only then
// has Pay anything to do.
func (m *Meter) LimitsBytes() bool {
	if m == nil {
		return false
	}
	_, limited := m.spend.Left[cards.BudgetBytesOut]
	return limited
}

// Pay spends n bytes of bytes_out before a call sends them by a way of its
// own (an imported MCP tool's input to its upstream, a wrapped CLI's
// tunnels: egress.ProxySession.SetPay), where the chain limits bytes_out;
// what it returns is as pay's. The caller counts the bytes with Sent once
// they are sent; what was paid and not sent is given back at End.
func (m *Meter) Pay(ctx context.Context, n int64) (refusal string, failed bool) {
	if m == nil {
		return "", false
	}
	return m.pay(ctx, n)
}

// Sent counts n bytes a call sent by a way of its own against bytes_out:
// what a wrapped CLI sent through maiden's CONNECT proxy
// (egress.ProxySession.Sent), what an imported MCP tool's call sent its
// upstream server (its input, paid before with Pay). The same budget must
// not be spent through http-fetch and be free through a tunnel or an
// import.
func (m *Meter) Sent(n int64) {
	if m != nil && n > 0 {
		m.bytes.Add(n)
	}
}

// RequestBytes is what a request sends, as bytes_out counts it.
func RequestBytes(req sandbox.FetchRequest) int64 {
	n := len(req.Method) + len(req.URL) + len(req.Body)
	for _, h := range req.Headers {
		n += len(h.Name) + len(h.Value)
	}
	return int64(n)
}

// End charges the call's wall time and bytes, once; a failure is logged
// (the call has run: its result stands).
func (m *Meter) End(ctx context.Context, log *slog.Logger) {
	if m == nil || m.ended.Swap(true) {
		return
	}
	// Rounded up: a call always takes some time, and a budget of
	// milliseconds must not be spent by calls shorter than one for free.
	ms := int64((m.now().Sub(m.start) + time.Millisecond - 1) / time.Millisecond)
	sp := m.spend
	sp.BytesPaid = m.paid.Load()
	if err := m.st.ChargeBudget(ctx, sp, max(ms, 1), m.bytes.Load()); err != nil && log != nil {
		log.Error("budget not charged", "card", m.spend.Card, "wall_ms", ms, "bytes_out", m.bytes.Load(), "err", err)
	}
}
