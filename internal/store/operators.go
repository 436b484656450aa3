package store

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// Operators are the humans who decide approval requests (the inbox page,
// maiden's command line). Their bearer tokens are another kind of
// principal than agents' tokens, kept apart twice so that neither can ever
// stand for the other: a different prefix ("mdo_", agents' "mdn_"), checked
// before anything is read, and a different table (operator_tokens), so
// that even a token rewritten with the other prefix finds no row.
// Authenticate (agents) never reads operator_tokens and
// AuthenticateOperator never reads tokens.

// operatorTokenPrefix starts every operator token: "mdo_" + ID (16 hex
// digits) + "_" + secret (32 random bytes, base64url), as agent tokens.
const operatorTokenPrefix = "mdo_"

// OperatorInfo is a human who may decide approval requests, as the store
// holds it.
type OperatorInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// The roles of an operator token.
const (
	// RoleOperator: a human's token, for the inbox (and /metrics).
	RoleOperator = "operator"
	// RoleMetrics: a scraper's token, for /metrics only; it signs in to
	// no inbox and decides nothing.
	RoleMetrics = "metrics"
)

// OperatorTokenInfo describes an operator's bearer token without its
// secret.
type OperatorTokenInfo struct {
	ID       string    `json:"id"`
	Operator string    `json:"operator"`
	Role     string    `json:"role"` // RoleOperator or RoleMetrics`
	Created  time.Time `json:"created"`
	Revoked  time.Time `json:"revoked,omitzero"`
}

// MintOperatorToken makes a bearer token for operator name, adding the
// operator to the store if it is not there (operators come from
// agent.toml's [operators.NAME] tables; the caller checks the name is
// declared). The token is returned once; only a hash of its secret is
// kept. The mint is audited (token-change, principal operator) in the same
// transaction.
func (s *DB) MintOperatorToken(ctx context.Context, name string) (string, OperatorTokenInfo, error) {
	return s.MintOperatorTokenRole(ctx, name, RoleOperator)
}

// MintOperatorTokenRole is MintOperatorToken with a role: RoleOperator, or
// RoleMetrics for a scraper's token that reads /metrics and nothing else.
func (s *DB) MintOperatorTokenRole(ctx context.Context, name, role string) (string, OperatorTokenInfo, error) {
	if role != RoleOperator && role != RoleMetrics {
		return "", OperatorTokenInfo{}, fmt.Errorf("mint token for operator %q: role %q is neither %q nor %q", name, role, RoleOperator, RoleMetrics)
	}
	if err := checkName("operator name", name); err != nil {
		return "", OperatorTokenInfo{}, fmt.Errorf("mint token for operator %q: %w", name, err)
	}
	id := randomHex(8)
	b := make([]byte, 32)
	rand.Read(b)
	secret := base64.RawURLEncoding.EncodeToString(b)
	info := OperatorTokenInfo{ID: id, Operator: name, Role: role, Created: s.now().UTC()}
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO operators (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
			name, info.Created.UnixNano()); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO operator_tokens (id, operator, hash, created_at, role) VALUES (?, ?, ?, ?, ?)`,
			id, name, secretHash(secret), info.Created.UnixNano(), role); err != nil {
			return err
		}
		_, err := s.appendAudit(ctx, tx, AuditRecord{Kind: AuditTokenChange, Actor: "operator",
			Body: auditBody(map[string]string{"op": "mint", "principal": "operator", "operator": name, "token": id, "role": role})})
		return err
	})
	if err != nil {
		return "", OperatorTokenInfo{}, fmt.Errorf("mint token for operator %q: %w", name, err)
	}
	return operatorTokenPrefix + id + "_" + secret, info, nil
}

// AuthenticateOperator returns the operator an operator token belongs to,
// or ErrBadToken (malformed, unknown, wrong, revoked, a metrics token, or
// an agent's token). The secret is compared in constant time.
func (s *DB) AuthenticateOperator(ctx context.Context, token string) (string, error) {
	name, role, err := s.AuthenticateOperatorRole(ctx, token)
	if err != nil {
		return "", err
	}
	if role != RoleOperator {
		return "", ErrBadToken
	}
	return name, nil
}

// AuthenticateOperatorRole returns the operator an operator token belongs
// to and the token's role (RoleOperator or RoleMetrics), or ErrBadToken
// (malformed, unknown, wrong, revoked, or an agent's token). The caller
// decides what the role allows: /metrics takes either, the inbox only
// RoleOperator (AuthenticateOperator).
func (s *DB) AuthenticateOperatorRole(ctx context.Context, token string) (name, role string, err error) {
	rest, ok := strings.CutPrefix(token, operatorTokenPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 16 || secret == "" {
		return "", "", ErrBadToken
	}
	var hash string
	var revoked sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT operator, hash, revoked_at, role FROM operator_tokens WHERE id = ?`, id).Scan(&name, &hash, &revoked, &role)
	if isNoRows(err) {
		// Spend the same work as a known ID before saying no.
		subtle.ConstantTimeCompare([]byte(secretHash(secret)), []byte(secretHash("")))
		return "", "", ErrBadToken
	}
	if err != nil {
		return "", "", fmt.Errorf("authenticate operator: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(secretHash(secret)), []byte(hash)) != 1 || revoked.Valid {
		return "", "", ErrBadToken
	}
	return name, role, nil
}

// Operators lists the operators the store holds (those a token was ever
// minted for), by name.
func (s *DB) Operators(ctx context.Context) ([]OperatorInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, created_at FROM operators ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list operators: %w", err)
	}
	defer rows.Close()
	var out []OperatorInfo
	for rows.Next() {
		var o OperatorInfo
		var created int64
		if err := rows.Scan(&o.Name, &created); err != nil {
			return nil, fmt.Errorf("list operators: %w", err)
		}
		o.Created = time.Unix(0, created).UTC()
		out = append(out, o)
	}
	return out, rows.Err()
}

// OperatorTokens lists the tokens of operator name ("" for every
// operator), revoked ones included, oldest first.
func (s *DB) OperatorTokens(ctx context.Context, name string) ([]OperatorTokenInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, operator, created_at, revoked_at, role FROM operator_tokens WHERE operator = ? OR ? = '' ORDER BY created_at, id`, name, name)
	if err != nil {
		return nil, fmt.Errorf("list operator tokens: %w", err)
	}
	defer rows.Close()
	var out []OperatorTokenInfo
	for rows.Next() {
		var t OperatorTokenInfo
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&t.ID, &t.Operator, &created, &revoked, &t.Role); err != nil {
			return nil, fmt.Errorf("list operator tokens: %w", err)
		}
		t.Created = time.Unix(0, created).UTC()
		if revoked.Valid {
			t.Revoked = time.Unix(0, revoked.Int64).UTC()
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeOperatorToken revokes an operator token by its ID (audited in the
// same transaction); an ID that is not an operator token's (an agent
// token's included) is ErrUnknownToken; revoking a revoked token is not
// an error and audits nothing.
func (s *DB) RevokeOperatorToken(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var revoked sql.NullInt64
		var name string
		err := tx.QueryRowContext(ctx, `SELECT revoked_at, operator FROM operator_tokens WHERE id = ?`, id).Scan(&revoked, &name)
		if isNoRows(err) {
			return fmt.Errorf("revoke operator token: %w %q", ErrUnknownToken, id)
		}
		if err != nil || revoked.Valid {
			return err
		}
		if _, err = tx.ExecContext(ctx, `UPDATE operator_tokens SET revoked_at = ? WHERE id = ?`, s.now().UnixNano(), id); err != nil {
			return err
		}
		_, err = s.appendAudit(ctx, tx, AuditRecord{Kind: AuditTokenChange, Actor: "operator",
			Body: auditBody(map[string]string{"op": "revoke", "principal": "operator", "operator": name, "token": id})})
		return err
	})
}
