package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is agents, their tokens and their permission cards
// (docs/cards.md).

// Agent is an identity calls are made as, as the store holds it (an agent
// removed from agent.toml stays, with its cards and tokens, but no call
// can run as it).
type Agent struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// TokenInfo describes an agent's bearer token without its secret.
type TokenInfo struct {
	ID      string    `json:"id"`
	Agent   string    `json:"agent"`
	Created time.Time `json:"created"`
	Revoked time.Time `json:"revoked,omitzero"`
}

// Agents lists the agents the store holds, by name.
func (s *State) Agents(ctx context.Context) ([]Agent, error) {
	list, err := s.st.Agents(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Agent, len(list))
	for i, a := range list {
		out[i] = Agent{Name: a.Name, Created: a.Created}
	}
	return out, nil
}

// MintToken makes a bearer token for agent: returned once, only a hash of
// its secret is kept. The caller checks that agent.toml declares agent.
func (s *State) MintToken(ctx context.Context, agent string) (token string, info TokenInfo, err error) {
	token, t, err := s.st.MintToken(ctx, agent)
	return token, TokenInfo(t), err
}

// Tokens lists agent's tokens ("" for every agent's).
func (s *State) Tokens(ctx context.Context, agent string) ([]TokenInfo, error) {
	list, err := s.st.Tokens(ctx, agent)
	if err != nil {
		return nil, err
	}
	out := make([]TokenInfo, len(list))
	for i, t := range list {
		out[i] = TokenInfo(t)
	}
	return out, nil
}

// RevokeToken revokes an agent's token by its ID: every process sharing
// the store refuses its next request.
func (s *State) RevokeToken(ctx context.Context, id string) error { return s.st.RevokeToken(ctx, id) }

// CardSpec is what an operator grants: grant texts ("class:verb resource")
// for each list, and an expiry (zero: never); a malformed text is
// ErrBadGrant, its message giving the column and what was expected. Allow is what the card
// allows; Ceiling, when not empty, bounds the agent's whole wallet (the
// card then allows nothing by itself); Forbid is a prohibition over the
// whole wallet that no other card overrides.
type CardSpec struct {
	Allow   []string
	Ceiling []string
	Forbid  []string
	Expires time.Time
	// Budget is the card's budgets, "calls=N,wall_ms=N,bytes_out=N,cost=N"
	// (any subset; "" for none): how much the card and every card derived
	// from it may be used (docs/cards.md, "Budgets"). Malformed:
	// ErrBadBudget.
	Budget string
}

// parseBudget reads a budget text ("" is none).
func parseBudget(text string) (cards.Budget, error) {
	if text == "" {
		return nil, nil
	}
	return cards.ParseBudget(text)
}

func parseGrants(texts []string) ([]cards.Grant, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	gs := make([]grant.Grant, len(texts))
	for i, t := range texts {
		g, err := grant.Parse(t)
		if err != nil {
			return nil, fmt.Errorf("GRANT %d: %w", i+1, err)
		}
		gs[i] = g
	}
	return cards.Any(gs...), nil
}

// Grant installs a new card in agent's wallet, as the operator.
func (s *State) Grant(ctx context.Context, agent string, spec CardSpec) (api.Card, error) {
	var cs cards.Spec
	var err error
	if cs.LowerPos, err = parseGrants(spec.Allow); err != nil {
		return api.Card{}, err
	}
	if cs.UpperPos, err = parseGrants(spec.Ceiling); err != nil {
		return api.Card{}, err
	}
	if cs.UpperNeg, err = parseGrants(spec.Forbid); err != nil {
		return api.Card{}, err
	}
	cs.Expires = spec.Expires
	if cs.Budget, err = parseBudget(spec.Budget); err != nil {
		return api.Card{}, err
	}
	c, err := s.st.Grant(ctx, agent, cs)
	if err != nil {
		return api.Card{}, err
	}
	return adminlink.Card(c), nil
}

// The card operations an operator and an agent share (Derive, Revoke,
// Transfer, Card, Cards) run on a cardActor: the operator's (State) with
// no agent, reaching every card; an agent's (AgentState) reaching only
// what its cards allow.
type cardActor struct {
	st    store.Store
	cfg   *config.Config // nil for a store opened without one
	actor store.Actor
	agent string // "" for the operator
	// wallet is the agent's wallet as a call pinned it (adminlink.As),
	// which cards decides on; nil: read from the store when needed.
	wallet *cards.Wallet
}

// operator is s's card operations, with the operator's authority.
func (s *State) operator() cardActor {
	return cardActor{st: s.st, cfg: s.cfg, actor: store.Operator()}
}

// Derive makes a child of card parentID in agent to's wallet, allowing
// grants: attenuation only (docs/cards.md, Derivation). The child keeps
// the parent's exceptions, prohibitions and ceiling and expires with it,
// or at expires if that is earlier (zero: with the parent). Revoking the
// parent revokes the child. budget ("calls=N,..." or "" for none) is the
// child's budgets: at most what the parent and each ancestor have left
// (ErrBudgetTooBroad); a budget of theirs the child does not name is
// given what they have left.
func (s *State) Derive(ctx context.Context, parentID, to string, grants []string, expires time.Time, budget string) (api.Card, error) {
	return s.operator().derive(ctx, parentID, to, grants, expires, budget)
}

// Revoke revokes card id and every card derived from it, transitively, in
// one transaction, and returns how many cards that was. The next call of
// every agent, in every process sharing the store, sees it.
func (s *State) Revoke(ctx context.Context, id string) (int, error) {
	return s.operator().revoke(ctx, id)
}

// Transfer moves card id to agent to's wallet (system cards stay put).
func (s *State) Transfer(ctx context.Context, id, to string) error {
	return s.operator().transfer(ctx, id, to)
}

// Card returns one card, revoked or not.
func (s *State) Card(ctx context.Context, id string) (api.Card, error) {
	return s.operator().card(ctx, id)
}

// Cards lists agent's cards ("" for every agent's), revoked and expired
// ones included, in the order they were made.
func (s *State) Cards(ctx context.Context, agent string) ([]api.Card, error) {
	return s.operator().cards(ctx, agent)
}

func (a cardActor) derive(ctx context.Context, parentID, to string, grants []string, expires time.Time, budget string) (api.Card, error) {
	gs, err := parseGrants(grants)
	if err != nil {
		return api.Card{}, err
	}
	b, err := parseBudget(budget)
	if err != nil {
		return api.Card{}, err
	}
	if err := a.recipient(to); err != nil {
		return api.Card{}, err
	}
	parent, err := a.held(ctx, parentID)
	if err != nil {
		return api.Card{}, err
	}
	plain := make([]grant.Grant, len(gs))
	for i, g := range gs {
		plain[i] = g.Grant
	}
	// Derive checks the parent again inside its transaction: a revocation
	// in between is refused there.
	spec := cards.Child(parent, plain, expires)
	spec.Budget = b
	c, err := a.st.Derive(ctx, a.actor, parent.ID, to, spec)
	if err != nil {
		return api.Card{}, err
	}
	return adminlink.Card(c), nil
}

func (a cardActor) revoke(ctx context.Context, id string) (int, error) {
	n, err := a.st.Revoke(ctx, a.actor, id)
	if a.agent != "" && errors.Is(err, ErrUnknownCard) {
		// Worded as for a card outside the agent's reach.
		return 0, fmt.Errorf("%w: agent %q holds neither it nor any card it was derived from", ErrNotAllowed, a.agent)
	}
	return n, err
}

func (a cardActor) transfer(ctx context.Context, id, to string) error {
	if err := a.recipient(to); err != nil {
		return err
	}
	if _, err := a.held(ctx, id); err != nil {
		return err
	}
	return a.st.Transfer(ctx, a.actor, id, to)
}

func (a cardActor) card(ctx context.Context, id string) (api.Card, error) {
	c, err := a.held(ctx, id)
	if err != nil {
		return api.Card{}, err
	}
	return adminlink.Card(c), nil
}

func (a cardActor) cards(ctx context.Context, agent string) ([]api.Card, error) {
	if a.agent != "" {
		if agent != "" && agent != a.agent {
			return nil, fmt.Errorf("%w: agent %q sees only its own cards", ErrNotAllowed, a.agent)
		}
		agent = a.agent
	}
	list, err := a.st.Cards(ctx, agent)
	if err != nil {
		return nil, err
	}
	if a.agent != "" {
		w := a.wallet
		if w == nil {
			if w, err = a.st.Wallet(ctx, a.agent, time.Now()); err != nil {
				return nil, err
			}
		}
		list = slices.DeleteFunc(list, func(c cards.Card) bool {
			return !decide.Decide(decide.Basis{Wallet: w}, decide.Operate("inspect", c.ID)).Allow
		})
	}
	return adminlink.Cards(list), nil
}

// held is card id; acting as an agent, only one the agent holds: a card
// held by another agent is answered exactly like one that does not exist.
func (a cardActor) held(ctx context.Context, id string) (cards.Card, error) {
	c, err := a.st.Card(ctx, id)
	if a.agent != "" && (errors.Is(err, ErrUnknownCard) || err == nil && c.Holder != a.agent) {
		return cards.Card{}, fmt.Errorf("%w: agent %q holds no card %q", ErrNotAllowed, a.agent, id)
	}
	return c, err
}

// recipient checks, acting as an agent, that to is an agent of the
// configuration: an agent hands cards only to agents that can call.
func (a cardActor) recipient(to string) error {
	if a.agent == "" || a.cfg == nil {
		return nil
	}
	if _, ok := a.cfg.Agent(to); ok {
		return nil
	}
	var names []string
	for _, x := range a.cfg.Agents() {
		names = append(names, x.Name)
	}
	return fmt.Errorf("%w: no agent %q in %s (agents: %s)", ErrUnknownAgent, to, a.cfg.File(), strings.Join(names, ", "))
}
