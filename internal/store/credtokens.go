package store

import (
	"context"
	"encoding/base64"
	"fmt"
)

// Credential tokens (issue 26): the instances of one PostgreSQL store
// share one OAuth 2.0 access token per credential, so that they make one
// token request when it expires, not one each. The egress gate
// (internal/egress, tokenshare.go) names each row by a digest and seals
// its content under a key derived from the credential's own secret: this
// table holds no name, no value and nothing usable without the secret.
// The store only keeps the rows and the lease.

// credentialTokenMigration is migration 9: the sealed token rows.
const credentialTokenMigration = `
CREATE TABLE credential_tokens (
	key        TEXT PRIMARY KEY,
	sealed     TEXT NOT NULL,
	updated_at BIGINT NOT NULL
)`

// SharesTokens reports whether instances of this store share credential
// tokens through it (LeaseToken): on PostgreSQL. A SQLite store serves
// one host process, whose gate keeps its tokens in memory.
func (s *DB) SharesTokens() bool { return s.pg != nil }

// LeaseToken runs update holding the lease of credential row key, which
// one instance holds at a time, with the row's content (nil if none); a
// non-nil result replaces it. The lease is the row's lock (SELECT ... FOR
// UPDATE) in a transaction of its own, not the store's write lock: update
// may wait on a token endpoint, and other writers must not wait with it.
// Waiters queue on the row; the next one in reads what the holder stored.
// On SQLite (one process), the transaction's write lock serves.
func (s *DB) LeaseToken(ctx context.Context, key string, update func(stored []byte) ([]byte, error)) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("lease credential token: %w", err)
	}
	defer tx.Rollback()
	// Make the row exist, so that there is something to lock: a second
	// instance's insert waits for the first's transaction, then does
	// nothing.
	if _, err := tx.ExecContext(ctx, `INSERT INTO credential_tokens (key, sealed, updated_at) VALUES (?, '', 0) ON CONFLICT (key) DO NOTHING`, key); err != nil {
		return fmt.Errorf("lease credential token: %w", err)
	}
	q := `SELECT sealed FROM credential_tokens WHERE key = ?`
	if s.pg != nil {
		q += ` FOR UPDATE`
	}
	var text string
	if err := tx.QueryRowContext(ctx, q, key).Scan(&text); err != nil {
		return fmt.Errorf("lease credential token: %w", err)
	}
	var stored []byte
	if text != "" {
		if stored, err = base64.StdEncoding.DecodeString(text); err != nil {
			stored = nil // not ours: the gate replaces it
		}
	}
	next, err := update(stored)
	if err != nil {
		return err
	}
	if next != nil {
		if _, err := tx.ExecContext(ctx, `UPDATE credential_tokens SET sealed = ?, updated_at = ? WHERE key = ?`,
			base64.StdEncoding.EncodeToString(next), s.now().UnixNano(), key); err != nil {
			return fmt.Errorf("lease credential token: %w", err)
		}
	}
	// Every error of the commit is one: sql.ErrTxDone is what Commit
	// returns once database/sql rolled the transaction back for a context
	// that ended after the UPDATE, and the row then holds what it held
	// (the gate keeps a token it could not store, tokenshare.go).
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("lease credential token: %w", err)
	}
	return nil
}
