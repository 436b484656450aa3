package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestLeaseTokenCanceledCommitIsAnError (found by the thirty-first pass): a
// lease whose context ends after its UPDATE and before its commit was
// reported stored while database/sql had rolled it back (Commit's
// sql.ErrTxDone taken as success), so the egress gate took a token it had
// not stored for a stored one, and its next lease sent the row's older
// refresh token. LeaseToken returns nil only when the row holds what
// update gave. The cancel must fall in that window, so each try cancels at
// a random point of a lease's measured span; on the code before, the first
// lost write came within the first ~60 tries on PostgreSQL (2026-12-07).
func TestLeaseTokenCanceledCommitIsAnError(t *testing.T) {
	t.Parallel()
	db := open(t, backends[1].target(t), nil) // PostgreSQL: a lease there is a round trip or more
	leaseWrite(t, db, "k", "v0")
	start := time.Now()
	leaseWrite(t, db, "k", "v0")
	span := time.Since(start)
	for i := 1; i <= 1000; i++ {
		v := fmt.Sprintf("v%d", i)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Duration(rand.Int64N(int64(span)+1)), cancel)
		err := db.LeaseToken(ctx, "k", func([]byte) ([]byte, error) { return []byte(v), nil })
		cancel()
		if got := string(leaseRead(t, db, "k")); err == nil && got != v {
			t.Fatalf("try %d: LeaseToken returned <nil> for %q; the row is %q", i, v, got)
		}
	}
}
