package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/maiden-run/maiden/internal/store"
)

// ErrBadToken is returned by Authenticate for a bearer token that is
// malformed, unknown, revoked, or whose agent agent.toml no longer
// declares (one error for all: a caller learns nothing from which).
var ErrBadToken = errors.New("invalid or revoked agent token")

// Authenticate returns the agent a bearer token (from maiden agents token)
// belongs to. It asks the state store every time, so a token revoked by any
// process stops working at the next request. A configuration without
// [agents] has no agent tokens: every token is ErrBadToken. A store that
// cannot answer is ErrState.
func (h *Host) Authenticate(ctx context.Context, token string) (agent string, err error) {
	cfg := h.cfg.Load()
	if cfg.Implicit() {
		return "", fmt.Errorf("%w: %s declares no [agents], so there are no agent tokens", ErrBadToken, cfg.File())
	}
	st, err := h.state(ctx, cfg)
	if err != nil {
		return "", err
	}
	agent, err = st.Authenticate(ctx, token)
	switch {
	case errors.Is(err, store.ErrBadToken):
		return "", ErrBadToken
	case err != nil:
		return "", fmt.Errorf("%w: %v", ErrState, err)
	}
	if _, ok := cfg.Agent(agent); !ok {
		// The store keeps agents that were removed from agent.toml; their
		// tokens authenticate nobody now.
		return "", ErrBadToken
	}
	return agent, nil
}

// TokenCredential is the credential of an agent token Authenticate
// accepted, as Call.Credential names it: "token:" and the token's ID (what
// maiden agents tokens lists; never its secret). "" for a string that is
// not an agent token.
func TokenCredential(token string) string {
	if id := store.TokenID(token); id != "" {
		return "token:" + id
	}
	return ""
}
