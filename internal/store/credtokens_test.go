package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// TestLeaseTokenOneHolder: three instances on one PostgreSQL database find
// a stale row at once; the first in replaces it while the other two wait
// on the lease (seen in pg_stat_activity as lock waits, not guessed with a
// sleep), and they read its row: one replacement, not three.
func TestLeaseTokenOneHolder(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	dbs := []*DB{open(t, url, nil), open(t, url, nil), open(t, url, nil)}
	if !dbs[0].SharesTokens() {
		t.Fatal("a PostgreSQL store does not share tokens")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := dbs[0].LeaseToken(ctx, "k", func(stored []byte) ([]byte, error) { return []byte("old"), nil }); err != nil {
		t.Fatal(err)
	}
	var replaced atomic.Int64
	var wg sync.WaitGroup
	got := make([]string, len(dbs))
	for i, db := range dbs {
		wg.Go(func() {
			err := db.LeaseToken(ctx, "k", func(stored []byte) ([]byte, error) {
				got[i] = string(stored)
				if string(stored) != "old" {
					return nil, nil
				}
				replaced.Add(1)
				// Hold the lease until both others wait on it.
				waitLockWaiters(ctx, t, db, 2)
				return []byte("new"), nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := replaced.Load(); n != 1 {
		t.Fatalf("%d instances replaced the row, want 1 (saw %q)", n, got)
	}
	for i, g := range got {
		if g != "old" && g != "new" {
			t.Errorf("instance %d saw %q", i, g)
		}
	}
	// An update's error leaves the row as it was.
	boom := errors.New("refused")
	if err := dbs[1].LeaseToken(ctx, "k", func([]byte) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	dbs[2].LeaseToken(ctx, "k", func(stored []byte) ([]byte, error) {
		if string(stored) != "new" {
			t.Errorf("after a refused update the row is %q", stored)
		}
		return nil, nil
	})
}

// waitLockWaiters returns once n sessions of the database wait on a lock.
func waitLockWaiters(ctx context.Context, t *testing.T, db *DB, n int) {
	for {
		var waiting int
		err := db.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Error(err)
			return
		}
		if waiting >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("only %d sessions wait on the lease", waiting)
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestLeaseTokenSQLite: a SQLite store keeps the rows too (one process,
// the transaction's lock), and says it does not share them.
func TestLeaseTokenSQLite(t *testing.T) {
	t.Parallel()
	db := open(t, backends[0].target(t), nil)
	if db.SharesTokens() {
		t.Fatal("a SQLite store claims to share tokens")
	}
	ctx := t.Context()
	db.LeaseToken(ctx, "k", func([]byte) ([]byte, error) { return []byte("a"), nil })
	var seen string
	if err := db.LeaseToken(ctx, "k", func(b []byte) ([]byte, error) { seen = string(b); return nil, nil }); err != nil || seen != "a" {
		t.Fatalf("%q %v", seen, err)
	}
}
