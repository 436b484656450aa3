package admin

import (
	"context"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/store"
)

// AgentState is the state store as one agent acting on its own wallet
// sees it, as the cards_* built-ins do: the agent's card operations and
// nothing else. It is a type of its own, not a State, so that a value
// handed to code acting for an agent cannot do an operator's work
// (grant, mint a token, decide an approval, reset a session): those
// methods do not exist on it (TestAgentStateHasOnlyCardOperations).
type AgentState struct {
	c cardActor
}

// As is s acting as agent through the agent's own wallet: Cards lists only
// the agent's own cards that a card:inspect grant lets it see; Card,
// Derive and Transfer act only on a card the agent holds (one it does not
// is answered exactly like one that does not exist, ErrNotAllowed);
// Derive, Transfer and Revoke need a card allowing card:derive,
// card:transfer or card:revoke on the card acted on; a card goes only to
// an agent the configuration declares (ErrUnknownAgent). Closing s ends
// it too.
func (s *State) As(agent string) *AgentState {
	return &AgentState{c: cardActor{st: s.st, cfg: s.cfg, actor: store.AgentActor(agent), agent: agent}}
}

// Agent is the agent a acts as.
func (a *AgentState) Agent() string { return a.c.agent }

// Cards lists the agent's own cards ("" or its own name; another agent's
// is ErrNotAllowed) that a card:inspect grant lets it see, revoked and
// expired ones included.
func (a *AgentState) Cards(ctx context.Context, agent string) ([]api.Card, error) {
	return a.c.cards(ctx, agent)
}

// Card returns one card the agent holds.
func (a *AgentState) Card(ctx context.Context, id string) (api.Card, error) {
	return a.c.card(ctx, id)
}

// Derive makes a child of card parentID, which the agent holds and may
// derive from, in agent to's wallet (State.Derive's rules besides,
// budgets included).
func (a *AgentState) Derive(ctx context.Context, parentID, to string, grants []string, expires time.Time, budget string) (api.Card, error) {
	return a.c.derive(ctx, parentID, to, grants, expires, budget)
}

// Transfer moves card id, which the agent holds and may transfer, to
// agent to's wallet.
func (a *AgentState) Transfer(ctx context.Context, id, to string) error {
	return a.c.transfer(ctx, id, to)
}

// Revoke revokes card id and every card derived from it, when the agent
// may revoke it, and returns how many cards that was.
func (a *AgentState) Revoke(ctx context.Context, id string) (int, error) {
	return a.c.revoke(ctx, id)
}
