package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/maiden-run/maiden/internal/store"
)

// ErrBadOperatorToken is returned by AuthenticateOperator for a token that
// is malformed, unknown, revoked, an agent's, or whose operator agent.toml
// no longer declares (one error for all: a caller learns nothing from
// which).
var ErrBadOperatorToken = errors.New("invalid or revoked operator token")

// AuthenticateOperator returns the operator (an [operators.NAME] of
// agent.toml) a bearer token minted by `maiden operators token NAME`
// belongs to. Operator tokens are another principal kind than agent
// tokens, in the store as here: an agent's token is never an operator's
// (so no agent can decide an approval request, its own included), and
// Authenticate never accepts an operator's. It asks the state store every
// time, so a revocation by any process holds from the next request. A
// configuration without [operators] has no operator tokens: every token is
// ErrBadOperatorToken. A store that cannot answer is ErrState.
func (h *Host) AuthenticateOperator(ctx context.Context, token string) (name string, err error) {
	cfg := h.cfg.Load()
	if len(cfg.Operators()) == 0 {
		return "", fmt.Errorf("%w: %s declares no [operators], so there are no operator tokens", ErrBadOperatorToken, cfg.File())
	}
	st, err := h.state(ctx, cfg)
	if err != nil {
		return "", err
	}
	name, err = st.AuthenticateOperator(ctx, token)
	switch {
	case errors.Is(err, store.ErrBadToken):
		return "", ErrBadOperatorToken
	case err != nil:
		return "", fmt.Errorf("%w: %v", ErrState, err)
	}
	if _, ok := cfg.Operator(name); !ok {
		// The store keeps operators removed from agent.toml; their
		// tokens authenticate nobody now.
		return "", ErrBadOperatorToken
	}
	return name, nil
}

// ErrBadMetricsToken is returned by AuthenticateMetrics for a token that is
// neither a live operator token nor a live metrics token of an operator
// agent.toml declares: an agent's token included, always.
var ErrBadMetricsToken = errors.New("not an operator's or a metrics token")

// AuthenticateMetrics returns the operator a bearer token presented at
// /metrics belongs to: an operator's own token, or a scraper's metrics
// token (maiden operators token -role metrics NAME), whose operator
// agent.toml declares. An agent's token never reads /metrics: the metrics
// name every tool of every agent. A store that cannot answer is ErrState.
func (h *Host) AuthenticateMetrics(ctx context.Context, token string) (name string, err error) {
	cfg := h.cfg.Load()
	if len(cfg.Operators()) == 0 {
		return "", fmt.Errorf("%w: %s declares no [operators], so there are no operator or metrics tokens", ErrBadMetricsToken, cfg.File())
	}
	st, err := h.state(ctx, cfg)
	if err != nil {
		return "", err
	}
	name, role, err := st.AuthenticateOperatorRole(ctx, token)
	switch {
	case errors.Is(err, store.ErrBadToken):
		return "", ErrBadMetricsToken
	case err != nil:
		return "", fmt.Errorf("%w: %v", ErrState, err)
	}
	if role != store.RoleOperator && role != store.RoleMetrics {
		return "", ErrBadMetricsToken
	}
	if _, ok := cfg.Operator(name); !ok {
		return "", ErrBadMetricsToken
	}
	return name, nil
}
