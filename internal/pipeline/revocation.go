package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/config"
)

// revocationWatch ends a running call whose agent token is revoked while
// its tool runs (maiden agents revoke-token): a revocation is an
// operator's "this client has no authority any more", which a tool
// already running would otherwise outlive, its result sent to the client
// that lost it (a wrapped CLI or an imported tool may run for minutes).
// The waits for a human are the human wait's to check (principalCheck, at
// every poll), a boundary request's wait inside its built-in's run too
// (invocation.humanWaiting); this is the run.
//
// Only calls made with an agent token ("token:" and its ID, the HTTP
// front end's) are watched, from the admission record to the tool's
// return: one goroutine for all of them, alive while any runs, asks the
// state store about each distinct token in flight and cancels the calls
// of a revoked or unknown one. It asks when the store's cards generation
// (moved by every change of agents, tokens or cards, on PostgreSQL by
// another instance's too before that change returns; read every
// revocationQuick, with no round trip on PostgreSQL while nothing
// changed) is not the one it last asked under, and at least every 4 × the
// approval poll (1 s by default) whatever it says: a revocation ends
// the calls of its token within ~50 ms, not a second.
// Such a call ends denied, naming the token; what its tool did before it
// was stopped is done (its fetches, its writes). A store that cannot
// answer cancels nothing (logged): the call was authorized when it
// started, and a store's hiccup is not a revocation.
//
// Every running call of a declared agent, token or not, is held too, for
// the reload that removes its agent from the configuration (SetConfig
// calls reloaded): an agent removed is the operator's "this caller has no
// authority any more" as a revoked token is, and its calls end denied at
// the reload, with nothing asked of the store (a call that registers
// after the reload finds the new configuration itself). Any other change
// of the configuration leaves running calls alone: a call keeps the
// policy it started with (its tool's limits, the agent's grants). The
// implicit agent of a configuration without [agents] (whoever runs maiden
// on their own tools) is no principal an operator declared, so a reload
// that declares agents leaves its running calls alone, and they are not
// held: holding a call costs a context of its own (~0.7 µs and five
// allocations a call, with the sandbox's interrupt registered on it),
// which the in-process call of a configuration without agents, the
// cheapest maiden makes, does not pay.
type revocationWatch struct {
	principal principalCheck
	every     time.Duration
	log       *slog.Logger

	mu      sync.Mutex
	calls   map[*invocation]context.CancelCauseFunc // the calls made with an agent token (loop asks about them)
	all     map[*invocation]context.CancelCauseFunc // every call held: a declared agent's or a token's (reloaded checks their agents)
	running bool                                    // the goroutine (loop) is running
}

// revokedWhileRunning is the cause a watched call is cancelled with.
type revokedWhileRunning struct{ why string }

func (r *revokedWhileRunning) Error() string { return r.why }

// watch runs the rest of the call watched: a declared agent's held to
// every reload, its agent token (if it is made with one) to the store; a
// call cancelled for either ends denied.
func (w *revocationWatch) watch(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.cfg.Implicit() && !strings.HasPrefix(inv.call.Credential, "token:") {
			return next(ctx, inv)
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		w.add(inv, cancel)
		err := func() error {
			defer w.remove(inv) // a panic recovered above must not leave the call watched
			return next(ctx, inv)
		}()
		var revoked *revokedWhileRunning
		if !errors.As(context.Cause(ctx), &revoked) {
			return err
		}
		// A wait for a human that began as the watch asked ended with the
		// cancel: its request stays named.
		var request string
		if inv.res.Error != nil {
			request = inv.res.Error.Approval
		}
		// The tool's log lines are its result too: a watched call's held
		// ones are never given to the caller, and none are returned.
		inv.res.OK, inv.res.Output, inv.res.Logs = false, "", nil
		err = inv.fail(KindDenied, revoked.why)
		inv.res.Error.Approval = request
		return err
	}
}

func (w *revocationWatch) add(inv *invocation, cancel context.CancelCauseFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.all == nil {
		w.all = map[*invocation]context.CancelCauseFunc{}
	}
	w.all[inv] = cancel
	// A reload between the call's start and here held only the calls
	// added before it: this one reads the configuration it stored
	// (SetConfig stores before it calls reloaded, which takes w.mu).
	if w.principal.cfg != nil {
		if cur := w.principal.cfg.Load(); cur != nil && !declares(cur, inv.agent) {
			cancel(&revokedWhileRunning{agentRemoved(inv, cur)})
		}
	}
	if !strings.HasPrefix(inv.call.Credential, "token:") {
		return
	}
	if w.calls == nil {
		w.calls = map[*invocation]context.CancelCauseFunc{}
	}
	w.calls[inv] = cancel
	if !w.running {
		w.running = true
		go w.loop()
	}
}

func (w *revocationWatch) remove(inv *invocation) {
	w.mu.Lock()
	delete(w.all, inv)
	delete(w.calls, inv)
	w.mu.Unlock()
}

// reloaded ends the running calls of the agents cfg, the configuration
// now in force, no longer declares (SetConfig, after storing it). A call
// waiting for a human (a boundary request's wait in its built-in's run)
// is left to that wait, which asks principalCheck at its every poll and
// after, and says so in its own words.
func (w *revocationWatch) reloaded(cfg *config.Config) {
	type removed struct {
		cancel context.CancelCauseFunc
		why    string
	}
	var ends []removed
	w.mu.Lock()
	for inv, cancel := range w.all {
		if !declares(cfg, inv.agent) && atomic.LoadInt32(&inv.humanWaiting) == 0 {
			ends = append(ends, removed{cancel, agentRemoved(inv, cfg)})
		}
	}
	w.mu.Unlock()
	for _, e := range ends {
		e.cancel(&revokedWhileRunning{e.why})
	}
}

// agentRemoved is why a running call of an agent cfg does not declare
// was stopped.
func agentRemoved(inv *invocation, cfg *config.Config) string {
	return fmt.Sprintf("agent removed: agent %q was removed from %s while the tool ran (the configuration was reloaded without it), so the call was stopped and its result withheld; what the tool did before it was stopped is done", inv.agent, cfg.File())
}

// revocationQuick is how often the revocation watch reads the store's
// cards generation while calls are watched.
const revocationQuick = 50 * time.Millisecond

// loop asks about the tokens of the calls watched when the cards
// generation moved and at least every w.every, until none is left.
func (w *revocationWatch) loop() {
	every := w.every
	if every <= 0 {
		every = 4 * 250 * time.Millisecond // 4 × ApprovalPoll's default
	}
	tick := min(every, revocationQuick)
	t := time.NewTicker(tick)
	period := int((every + tick - 1) / tick) // ticks between two asks whatever the generation says
	defer t.Stop()
	type watched struct {
		inv    *invocation
		cancel context.CancelCauseFunc
	}
	var calls []watched
	var (
		since   = period // ticks since the tokens were last asked about
		gen     int64    // the cards generation they were asked under
		haveGen bool
	)
	for range t.C {
		w.mu.Lock()
		if len(w.calls) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		calls = calls[:0]
		for inv, cancel := range w.calls {
			calls = append(calls, watched{inv, cancel})
		}
		w.mu.Unlock()
		if g, ok := w.generation(calls[0].inv, every); ok && (!haveGen || g != gen) {
			gen, haveGen = g, true // read before the tokens: a change after it is asked about next time
		} else if since++; since < period {
			continue
		}
		since = 0
		answers := map[string]string{} // agent and credential → why not ("" when live)
		for _, c := range calls {
			if atomic.LoadInt32(&c.inv.humanWaiting) != 0 {
				continue // the wait asks at its every poll, and says so in its own words
			}
			key := c.inv.agent + "\x00" + c.inv.call.Credential
			why, ok := answers[key]
			if !ok {
				why = w.refusal(c.inv, every)
				answers[key] = why
			}
			if why != "" && atomic.LoadInt32(&c.inv.humanWaiting) == 0 {
				c.cancel(&revokedWhileRunning{why})
			}
		}
	}
}

// generation reads the store's cards generation (no round trip on
// PostgreSQL while nothing changed), within a bound; false when it cannot
// be read (the watch then asks every w.every).
func (w *revocationWatch) generation(inv *invocation, every time.Duration) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), max(every, 5*time.Second))
	defer cancel()
	if w.principal.state == nil {
		return 0, false
	}
	st, err := w.principal.state(ctx, inv.cfg)
	if err != nil {
		return 0, false
	}
	g, err := cardsGeneration(ctx, st)
	return g, err == nil
}

// refusal asks the store about inv's token, within a bound (a store that
// does not answer in time is logged, and nothing is cancelled).
func (w *revocationWatch) refusal(inv *invocation, every time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), max(every, 5*time.Second))
	defer cancel()
	id, state, err := w.principal.token(ctx, inv)
	switch {
	case err != nil:
		w.log.Warn("could not check a running call's agent token; the call goes on", "agent", inv.agent, "token", id, "err", err)
	case state == tokenRevoked:
		return fmt.Sprintf("token revoked: the agent token this call was made with (ID %s) was revoked while the tool ran, so the call was stopped and its result withheld; what the tool did before it was stopped is done", id)
	case state == tokenUnknown:
		return fmt.Sprintf("token unknown: the agent token this call was made with (ID %s) is no longer one of agent %q's tokens in the state store, so the call was stopped while the tool ran and its result withheld", id, inv.agent)
	}
	return ""
}
