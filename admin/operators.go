package admin

import (
	"context"
	"time"

	"github.com/maiden-run/maiden/internal/store"
)

// This file is operators: the humans of agent.toml's [operators.NAME]
// tables, who sign in to the inbox page with their own bearer tokens
// (mdo_...). Operator tokens are another principal kind than agent tokens:
// no agent token ever authenticates as an operator, nor an operator token
// as an agent.

// The roles of an operator token.
const (
	// RoleOperator: a human's token, for the inbox (and /metrics).
	RoleOperator = store.RoleOperator
	// RoleMetrics: a scraper's token, for /metrics only; it signs in to no
	// inbox and decides nothing.
	RoleMetrics = store.RoleMetrics
)

// OperatorInfo is an operator as the store holds it (one removed from
// agent.toml stays, but its tokens sign in nobody).
type OperatorInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// OperatorTokenInfo describes an operator's bearer token without its
// secret.
type OperatorTokenInfo struct {
	ID       string    `json:"id"`
	Operator string    `json:"operator"`
	Role     string    `json:"role"` // RoleOperator or RoleMetrics
	Created  time.Time `json:"created"`
	Revoked  time.Time `json:"revoked,omitzero"`
}

// MintOperatorToken makes a bearer token of role (RoleOperator or
// RoleMetrics) for operator name, adding the operator to the store if it
// is not there; returned once, only a hash of its secret is kept. The
// caller checks that agent.toml declares name.
func (s *State) MintOperatorToken(ctx context.Context, name, role string) (token string, info OperatorTokenInfo, err error) {
	token, t, err := s.st.MintOperatorTokenRole(ctx, name, role)
	return token, OperatorTokenInfo(t), err
}

// Operators lists the operators the store holds.
func (s *State) Operators(ctx context.Context) ([]OperatorInfo, error) {
	list, err := s.st.Operators(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]OperatorInfo, len(list))
	for i, o := range list {
		out[i] = OperatorInfo(o)
	}
	return out, nil
}

// OperatorTokens lists operator name's tokens ("" for every operator's).
func (s *State) OperatorTokens(ctx context.Context, name string) ([]OperatorTokenInfo, error) {
	list, err := s.st.OperatorTokens(ctx, name)
	if err != nil {
		return nil, err
	}
	out := make([]OperatorTokenInfo, len(list))
	for i, t := range list {
		out[i] = OperatorTokenInfo(t)
	}
	return out, nil
}

// RevokeOperatorToken revokes an operator token by its ID.
func (s *State) RevokeOperatorToken(ctx context.Context, id string) error {
	return s.st.RevokeOperatorToken(ctx, id)
}
