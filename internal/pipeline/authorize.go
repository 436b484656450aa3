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
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is authority: after exposure (agents.go) has found the tool as
// the agent sees it, the agent's cards must allow the call itself, argument
// by argument (CARDS.md "Decision"). Cards live in the state store; a
// configuration without [agents] needs neither.

// ErrState is returned when a call needs the state store (its agent's
// cards) and the store cannot answer: the call is refused, never run
// without its authorization.
var ErrState = errors.New("maiden: state store unavailable")

// authorizeStage renders the call's input canonically and decides on the
// agent's wallet (wallet: read from the state store, cached by its
// generation), pinned when the call reaches this stage. The implicit agent
// of a configuration without [agents] holds a card that allows everything,
// so it is not asked.
type authorizeStage struct {
	wallet func(ctx context.Context, cfg *config.Config, agent string, at time.Time) (*cards.Wallet, error)
}

func (s authorizeStage) decide(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.cfg.Implicit() || !inv.backend.carded() {
			return next(ctx, inv)
		}
		if err := inv.render(); err != nil {
			if errors.Is(err, grant.ErrNotObject) {
				return inv.fail(KindInput, err.Error()) // what is wrong, not where it was noticed
			}
			return inv.fail(KindInput, "input cannot be rendered for authorization: "+err.Error())
		}
		w, err := s.wallet(ctx, inv.cfg, inv.agent, time.Now())
		if err != nil {
			return err
		}
		d := inv.decideInvoke(w)
		if !d.Allow {
			return inv.fail(KindDenied, d.Reason)
		}
		// A credential the host itself sends for every call of the tool
		// (an import's, to its server) is the agent's use of that secret,
		// as an http-fetch's is: its cards decide it before anything is
		// sent or recorded as admitted.
		if why := inv.decideCredential(w); why != "" {
			return inv.fail(KindDenied, why)
		}
		// The same pinned wallet decides the call's http-fetches (run):
		// a card revoked while the call runs counts from the next call.
		inv.wallet = w
		return next(ctx, inv)
	}
}

// decideCredential asks wallet w's cards secret:use of the credential the
// host itself attaches to the call (backend.credential: an import's, which
// mcphub sends its server outside the egress gate), when it has one, and
// keeps the answer as the call's credentialDecision (what its records
// carry, so that a replay asks it again). It returns the refusal's message
// when the cards deny it, "" otherwise. authorize asks it once the call's
// tool:invoke allowed it, and an approve layer again after a human's wait,
// on the wallet pinned anew.
func (inv *invocation) decideCredential(w *cards.Wallet) string {
	name, sender := inv.backend.credential(inv.tool)
	if name == "" {
		return ""
	}
	d := decide.Decide(decide.Basis{Wallet: w}, decide.Use(name))
	inv.credentialDecision = &d
	if d.Allow {
		return ""
	}
	return credentialRefusal(&d, sender)
}

// credentialRefusal is the denial d of secret:use of the credential sender
// sends (an import, its server) in the cards' words (the grant to paste,
// or the card to revoke), the credential named beside the target refused:
// no card of agent "a" allows secret:use TOKEN, the credential import shop
// sends its server (grant it: maiden cards grant -agent a 'secret:use TOKEN').
func credentialRefusal(d *cards.Decision, sender string) string {
	note := ", the credential " + sender + " sends its server"
	for _, lead := range []string{"allows ", "forbids ", "does not cover "} {
		if i := strings.Index(d.Reason, lead+d.Target); d.Target != "" && i >= 0 {
			j := i + len(lead) + len(d.Target)
			return d.Reason[:j] + note + d.Reason[j:]
		}
	}
	return d.Reason + " (" + d.Target + note + ")"
}

// decideInvoke asks wallet w's cards about the call as it stands (its
// target: tool, component, rendering) and keeps the answer as the call's
// decision, allowed or not (what the audit records): authorize, a rewrite,
// an approval's wait and a stale retry of another component each ask so.
func (inv *invocation) decideInvoke(w *cards.Wallet) *cards.Decision {
	d := decide.Decide(decide.Basis{Wallet: w}, decide.Invoke(inv.target()))
	inv.decision = &d
	return &d
}

// stateHolder is the Host's state store: opened on first need, and the
// configuration whose agents and system cards were last written to it.
type stateHolder struct {
	// Given in New: Options.StatePath, the configuration in force and
	// the Host's logger.
	optPath string
	current *atomic.Pointer[config.Config]
	log     *slog.Logger

	mu     sync.Mutex
	st     store.Store
	path   string
	synced *config.Config // the configuration the store holds the system cards of
	closed bool           // set by closeState: the store is not opened again
	// journalHeld (tests: Host.HoldAuditJournal), if not zero, is the
	// bound of the audit journal's backlog, whose ingestion then waits
	// for a Flush.
	journalHeld int64
	// wallets caches each agent's pinned wallet while the store's
	// generation is unchanged and no card in it has expired since.
	wallets map[string]cachedWallet
}

type cachedWallet struct {
	gen int64
	w   *cards.Wallet
}

// State returns the state store for cfg, opening it at Options.StatePath
// (or cfg.StatePath()) and writing cfg's agents and system cards to it the
// first time cfg is seen. A failure is ErrState with the cause.
func (h *Host) state(ctx context.Context, cfg *config.Config) (store.Store, error) {
	return h.stateHolder.get(ctx, cfg)
}

func (s *stateHolder) get(ctx context.Context, cfg *config.Config) (store.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.st != nil && s.synced == cfg {
		return s.st, nil
	}
	if s.st != nil && s.synced != nil && cfg != s.current.Load() {
		// A call that started under a configuration since replaced: it
		// must not write that older configuration's system cards back
		// over the newer one's.
		return s.st, nil
	}
	if s.st == nil {
		path := s.optPath
		if path == "" {
			path = cfg.StatePath()
		}
		// The store reports what it handles on its own (an audit
		// journal's torn or damaged lines) to the Host's logger.
		opts := &store.Options{Logger: s.log}
		if s.journalHeld != 0 {
			opts.JournalBacklog, opts.JournalInterval = s.journalHeld, time.Hour
		}
		st, err := store.Open(ctx, path, opts)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrState, err)
		}
		s.st, s.path = st, path
		// Calls that a process now gone started under an approval are
		// interrupted: never re-run by themselves, reported to the caller
		// who repeats one.
		if n, err := st.MarkInterruptedOnStartup(ctx); err != nil {
			s.log.Warn("could not mark interrupted calls", "err", err)
		} else if n > 0 {
			s.log.Warn("approved calls were interrupted by a restart; they will not be re-run by themselves", "count", n)
		}
		// Boundary requests whose waiting process is gone are denied
		// with host_restarted (BOUNDARIES.md B16): their call cannot
		// be answered any more; the session asks again if it must.
		if n, err := st.DenyPendingBoundaryRequests(ctx, boundary.ReasonHostRestarted); err != nil {
			s.log.Warn("could not deny the boundary requests of a restarted host", "err", err)
		} else if n > 0 {
			s.log.Warn("boundary requests of a process now gone were denied (host_restarted)", "count", n)
		}
	}
	if err := syncAgents(ctx, s.st, cfg); err != nil {
		return nil, fmt.Errorf("%w: writing the agents of %s: %v", ErrState, cfg.File(), err)
	}
	s.synced = cfg
	s.wallets = map[string]cachedWallet{}
	return s.st, nil
}

// syncAgents makes the store hold cfg's agents and, for each, exactly the
// system cards its grants declare: package admin's Sync, which maiden's
// command line runs before an operator's command, so both write the same.
// Package admin sits above this one (it is the operators' public API), so
// its State is reached through internal/adminlink and asserted to the one
// method needed here.
func syncAgents(ctx context.Context, st store.Store, cfg *config.Config) error {
	return adminlink.Over(st, cfg).(interface {
		Sync(context.Context, *config.Config) error
	}).Sync(ctx, cfg)
}

// wallet is agent's wallet at time at. It is re-read whenever the store's
// cards changed (any process's grant or revocation moves its
// CardsGeneration; sessions, limits and the audit trail do not) or a card
// in it expired, so a revocation holds from the next call on.
func (h *Host) wallet(ctx context.Context, cfg *config.Config, agent string, at time.Time) (*cards.Wallet, error) {
	return h.stateHolder.wallet(ctx, cfg, agent, at)
}

func (s *stateHolder) wallet(ctx context.Context, cfg *config.Config, agent string, at time.Time) (*cards.Wallet, error) {
	st, err := s.get(ctx, cfg)
	if err != nil {
		return nil, err
	}
	gen, err := cardsGeneration(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	s.mu.Lock()
	c, ok := s.wallets[agent]
	s.mu.Unlock()
	if ok && c.gen == gen {
		if next := c.w.NextExpiry(); next.IsZero() || at.Before(next) {
			return c.w, nil // nothing in it has expired since it was read
		}
	}
	w, err := st.Wallet(ctx, agent, at)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	s.mu.Lock()
	if s.synced == cfg {
		s.wallets[agent] = cachedWallet{gen: gen, w: w}
	}
	s.mu.Unlock()
	return w, nil
}

// closeState closes the store, if it was opened.
func (h *Host) closeState() error {
	s := &h.stateHolder
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.st == nil {
		return nil
	}
	err := s.st.Close()
	s.st = nil
	return err
}

// cardsGeneration is the store's CardsGeneration where it has one (a
// value that moves only when agents, tokens or cards change: on
// PostgreSQL, read with no round trip while nothing changed), else its
// Generation.
func cardsGeneration(ctx context.Context, st store.Store) (int64, error) {
	if c, ok := st.(interface {
		CardsGeneration(context.Context) (int64, error)
	}); ok {
		return c.CardsGeneration(ctx)
	}
	return st.Generation(ctx)
}
