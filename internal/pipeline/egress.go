package pipeline

import (
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// The seam between the egress gate and a call is internal/callegress: the
// rules of a tool, compiled once per configuration (Host.pols), the
// calling agent's cards in front of each request, the gate adapted to the
// sandbox's http-fetch.

// Resolver looks up host names for http-fetch (api.Resolver).
type Resolver = api.Resolver

// Rules of the card checks at http-fetch time, as audit events and the
// Observer name them.
const (
	// RuleNetworkCard: no card of the calling agent allows network:connect
	// to the request's host and port.
	RuleNetworkCard = callegress.RuleNetworkCard
	// RuleSecretCard: no card of the calling agent allows secret:use of the
	// credential the request attaches.
	RuleSecretCard = callegress.RuleSecretCard
)

// walletAuthorizer is the authority of a declared agent's pinned wallet
// over each http-fetch of a call (callegress.Authorizer); nil for the
// implicit agent.
func walletAuthorizer(w *cards.Wallet) egress.Authorizer { return callegress.Authorizer(w) }

// fetchFunc adapts the gate to the sandbox's http-fetch, the agent's
// pinned wallet w asked on each request (callegress.Fetch).
func fetchFunc(g *egress.Gate, p *egress.Policy, obs Observer, tool, agent string, w *cards.Wallet) sandbox.FetchFunc {
	return callegress.Fetch(g, p, obs, tool, agent, w)
}
