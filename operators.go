package maiden

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
