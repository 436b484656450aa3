// Package admin is maiden's operators' work on the state store: agents and
// their tokens, permission cards, approval requests, sessions and their
// boundaries, the audit trail, operator tokens, and the store itself
// (check and migrate). maiden's command line is built on it, the root
// package's Host serves the inbox page and the cards_* built-ins through
// it, and an embedder can use it as they do: every exported name speaks in
// public types (package api, or this package's own).
//
//	cfg, err := config.Load("agent.toml")
//	s, err := admin.Open(ctx, cfg, nil) // the store agent.toml names, its agents and system cards written
//	defer s.Close()
//	tok, info, err := s.MintToken(ctx, "research")
//	card, err := s.Grant(ctx, "research", admin.CardSpec{Allow: []string{"tool:invoke weather --city=Par*"}})
//	pending, err := s.Pending(ctx, time.Now())
//	r, err := s.Decide(ctx, pending[0].ID, admin.Answer{Approve: true, By: "cli:ann"})
//
// The name: "operators" already names a principal kind in maiden (the
// humans of [operators.NAME] who sign in to the inbox with mdo_ tokens),
// which this package manages among other things; admin is the work, not
// who does it.
//
// Whoever can open the store is an operator: every operation here acts as
// the operator (the card rules of attenuation still hold). Agents never
// reach this package; the cards_* built-ins act as their agent through
// State.As.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// Errors of the store's operations, for errors.Is. They are the store's and
// the card model's own values, so an error that wraps one of them matches
// here, whichever layer returned it.
var (
	// ErrUnknownAgent: no agent of that name (in agent.toml or the store).
	ErrUnknownAgent = store.ErrUnknownAgent
	// ErrUnknownCard: no card of that ID.
	ErrUnknownCard = store.ErrUnknownCard
	// ErrUnknownToken: no token of that ID.
	ErrUnknownToken = store.ErrUnknownToken
	// ErrBadInput: an argument is malformed (an empty or overlong name, an
	// expiry in the past, ...).
	ErrBadInput = store.ErrBadInput
	// ErrNotAllowed: the acting agent holds no card allowing the card
	// operation, or does not hold the card it acts on.
	ErrNotAllowed = store.ErrNotAllowed
	// ErrBadGrant: a grant's text is malformed; the message gives its
	// column and what was expected.
	ErrBadGrant = grant.ErrSyntax
	// ErrAuditBroken: the audit chain does not verify; the message names
	// the first bad record and why (edited, deleted, inserted, reordered).
	ErrAuditBroken = store.ErrAuditBroken
	// ErrUnavailable: the store cannot be reached (a PostgreSQL server
	// down or restarting).
	ErrUnavailable = store.ErrUnavailable
	// ErrPrivilege: the PostgreSQL role lacks a privilege the store needs.
	ErrPrivilege = store.ErrPrivilege
	// ErrSchemaTooNew: the store was migrated by a newer maiden.
	ErrSchemaTooNew = store.ErrSchemaTooNew
)

// The card rules' refusals (docs/cards.md), for errors.Is: nothing was
// written.
var (
	ErrLowerBoundTooBroad       = cards.ErrLowerBoundTooBroad
	ErrUpperBoundTooBroad       = cards.ErrUpperBoundTooBroad
	ErrCardExpired              = cards.ErrCardExpired
	ErrCardRevoked              = cards.ErrCardRevoked
	ErrInstallRecipientMismatch = cards.ErrInstallRecipientMismatch
	ErrSystemCard               = cards.ErrSystemCard
	ErrEmptyCard                = cards.ErrEmptyCard
	// ErrBudgetTooBroad: a derived card's budget is more than its parent
	// (or an ancestor) has left, or drops one of their budgets.
	ErrBudgetTooBroad = cards.ErrBudgetTooBroad
	// ErrBadBudget: a budget's text is malformed (not KEY=N,... with keys
	// calls, wall_ms, bytes_out, cost).
	ErrBadBudget = cards.ErrBadBudget
)

// Refused reports whether err is a refusal by the card rules (a
// derivation that broadens, an expired or revoked card, a system card,
// ...) or an agent acting without the card that allows it: the request was
// well formed and nothing was written.
func Refused(err error) bool {
	for _, e := range []error{ErrLowerBoundTooBroad, ErrUpperBoundTooBroad, ErrCardExpired, ErrCardRevoked,
		ErrInstallRecipientMismatch, ErrSystemCard, ErrEmptyCard, ErrNotAllowed, ErrBudgetTooBroad} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Options configure opening a store; nil means the defaults.
type Options struct {
	// State is the store Open opens: a SQLite file or a postgres:// URL.
	// "" means the configuration's ([state] of agent.toml, else
	// maiden-state.db beside it). OpenStore takes its location itself.
	State string
	// Logger receives what the store reports on its own (an audit
	// journal's torn or damaged lines); nil discards it.
	Logger *slog.Logger
}

// State is an open state store and the configuration whose agents it
// holds. Its methods are safe for concurrent use, but Sync, which changes
// the configuration, must not run beside them; several processes may share
// one store.
type State struct {
	st    store.Store
	cfg   *config.Config // nil for a store opened without one (OpenStore)
	path  string         // the file or URL opened; "" over a Host's store
	owned bool           // Close closes st
}

func init() {
	adminlink.Over = func(st store.Store, cfg *config.Config) any {
		return &State{st: st, cfg: cfg}
	}
	adminlink.As = func(st store.Store, cfg *config.Config, w *cards.Wallet) any {
		a := (&State{st: st, cfg: cfg}).As(w.Agent())
		a.c.wallet = w
		return a
	}
}

// Open opens the store cfg names (or opts.State), migrating its schema if
// it is behind, and writes cfg's agents and their system cards to it, as a
// Host does before its first authorized call: the store an operator then
// changes is the one the next call reads.
func Open(ctx context.Context, cfg *config.Config, opts *Options) (*State, error) {
	if opts == nil {
		opts = &Options{}
	}
	loc := opts.State
	if loc == "" {
		loc = cfg.StatePath()
	}
	s, err := OpenStore(ctx, loc, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Sync(ctx, cfg); err != nil {
		s.Close()
		return nil, fmt.Errorf("state store %s: writing the agents of %s: %w", loc, cfg.File(), err)
	}
	return s, nil
}

// OpenStore opens the store at location (a SQLite file, created if
// missing, or a postgres:// URL) without a configuration: for the audit
// trail and migrations. Opening migrates the schema (each step once, when
// several instances open at once) and takes in the audit journals of
// maiden processes that died. Sync gives it a configuration.
func OpenStore(ctx context.Context, location string, opts *Options) (*State, error) {
	if opts == nil {
		opts = &Options{}
	}
	st, err := store.Open(ctx, location, &store.Options{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	return &State{st: st, path: st.Path(), owned: true}, nil
}

// systemSpecs are the system cards a's grants declare, one per grant.
func systemSpecs(a config.Agent) []cards.Spec {
	specs := make([]cards.Spec, len(a.Grants))
	for i, g := range a.Grants {
		specs[i] = cards.Spec{LowerPos: cards.Any(g.Grant), Budget: g.Budget}
	}
	return specs
}

// Close closes the store (not one the State was given by a Host).
func (s *State) Close() error {
	if !s.owned {
		return nil
	}
	return s.st.Close()
}

// Path is the store's file, or its PostgreSQL URL ("" over a Host's
// store).
func (s *State) Path() string { return s.path }

// Sync makes the store hold cfg's agents and, for each, exactly the system
// cards its grants declare (one card per grant, so the operator can revoke
// one without the others); from then on the State describes requests under
// cfg. A configuration without [agents] syncs its implicit agent, which
// approvals and always-cards name.
func (s *State) Sync(ctx context.Context, cfg *config.Config) error {
	if cfg.Implicit() {
		if err := s.st.EnsureAgent(ctx, config.DefaultAgent); err != nil {
			return err
		}
		s.cfg = cfg
		return nil
	}
	for _, a := range cfg.Agents() {
		if err := s.st.EnsureAgent(ctx, a.Name); err != nil {
			return err
		}
		if _, _, err := s.st.SyncSystemCards(ctx, a.Name, systemSpecs(a)); err != nil {
			return fmt.Errorf("system cards of agent %q: %w", a.Name, err)
		}
	}
	s.cfg = cfg
	return nil
}
