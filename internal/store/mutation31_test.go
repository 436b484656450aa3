package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Mutation testing, thirty-first pass (internal/store's credtokens.go):
// the shared credential token rows.

// leaseRead is the row LeaseToken hands key's update, leaving it as is.
func leaseRead(t *testing.T, db *DB, key string) []byte {
	t.Helper()
	var got []byte
	called := false
	if err := db.LeaseToken(t.Context(), key, func(stored []byte) ([]byte, error) {
		got, called = stored, true
		return nil, nil
	}); err != nil || !called {
		t.Fatalf("LeaseToken(%q) read: update called %v, %v", key, called, err)
	}
	return got
}

// leaseWrite replaces key's row with v.
func leaseWrite(t *testing.T, db *DB, key, v string) {
	t.Helper()
	if err := db.LeaseToken(t.Context(), key, func([]byte) ([]byte, error) { return []byte(v), nil }); err != nil {
		t.Fatalf("LeaseToken(%q) write %q: %v", key, v, err)
	}
}

// TestMutation31LeaseRowPerKey: each key has its own row. A lease reads
// its key's row and no other, a new key's row is nil (not empty), and a
// write replaces its key's row and no other.
func TestMutation31LeaseRowPerKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		db := open(t, b.target(t), nil)
		leaseWrite(t, db, "a", "A")
		leaseWrite(t, db, "b", "B")
		if got := leaseRead(t, db, "c"); got != nil {
			t.Fatalf("a new key's row: %q (nil %v); want nil", got, got == nil)
		}
		if got := leaseRead(t, db, "b"); string(got) != "B" {
			t.Fatalf("row b: %q; want \"B\"", got)
		}
		if got := leaseRead(t, db, "a"); string(got) != "A" {
			t.Fatalf("row a: %q; want \"A\"", got)
		}
		leaseWrite(t, db, "a", "A2")
		if got := leaseRead(t, db, "b"); string(got) != "B" {
			t.Fatalf("row b after writing a: %q; want \"B\"", got)
		}
		if got := leaseRead(t, db, "a"); string(got) != "A2" {
			t.Fatalf("row a after writing it: %q; want \"A2\"", got)
		}
	})
}

// TestMutation31UpdateErrorLeavesRow: an update's error leaves the row as
// it was even with a result, is returned, and gives the lease up: another
// instance leases the row at once.
func TestMutation31UpdateErrorLeavesRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		target := b.target(t)
		db := open(t, target, nil)
		leaseWrite(t, db, "k", "old")
		boom := errors.New("refused")
		if err := db.LeaseToken(t.Context(), "k", func([]byte) ([]byte, error) { return []byte("new"), boom }); !errors.Is(err, boom) {
			t.Fatalf("update refused: %v; want %v", err, boom)
		}
		other := db
		if b.pg {
			other = open(t, target, nil)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var got []byte
		called := false
		err := other.LeaseToken(ctx, "k", func(stored []byte) ([]byte, error) {
			got, called = stored, true
			return nil, nil
		})
		if err != nil || !called || string(got) != "old" {
			t.Fatalf("after a refused update: update called %v, row %q, %v; want \"old\", the lease given up", called, got, err)
		}
	})
}

// TestMutation31CorruptRowIsNil: a row that is not base64 (whoever can
// write a row) is handed to update as nil, not as its text or the bytes
// decoded before the fault, and update's result replaces it.
func TestMutation31CorruptRowIsNil(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		db := open(t, b.target(t), nil)
		for _, sealed := range []string{"not base64!", "QUJD!!!!"} {
			leaseWrite(t, db, "k", "old")
			if _, err := db.db.ExecContext(t.Context(), `UPDATE credential_tokens SET sealed = '`+sealed+`' WHERE key = 'k'`); err != nil {
				t.Fatal(err)
			}
			var got []byte
			called := false
			if err := db.LeaseToken(t.Context(), "k", func(stored []byte) ([]byte, error) {
				got, called = stored, true
				return []byte("fresh"), nil
			}); err != nil || !called || got != nil {
				t.Fatalf("row %q: update called %v with %q (nil %v), %v; want nil", sealed, called, got, got == nil, err)
			}
			if got := leaseRead(t, db, "k"); string(got) != "fresh" {
				t.Fatalf("row %q replaced: %q; want \"fresh\"", sealed, got)
			}
		}
	})
}

// TestMutation31FailingStore: a store that cannot begin a transaction
// returns an error and never runs update.
func TestMutation31FailingStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		db, err := Open(context.Background(), b.target(t), &Options{})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		called := false
		err = db.LeaseToken(t.Context(), "k", func([]byte) ([]byte, error) { called = true; return []byte("x"), nil })
		if err == nil || called {
			t.Fatalf("a closed store: update called %v, %v; want an error, update not run", called, err)
		}
	})
}

// TestMutation31CommitFailureReturned: on PostgreSQL, a commit that fails
// (a deferred trigger refusing it, as a failing database would) is
// returned, and the row keeps what it held: a result not stored is never
// reported stored.
func TestMutation31CommitFailureReturned(t *testing.T) {
	db := open(t, backends[1].target(t), nil)
	leaseWrite(t, db, "k", "old")
	for _, q := range []string{
		`CREATE FUNCTION mutation31_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'mutation31: commit refused'; END $$`,
		`CREATE CONSTRAINT TRIGGER mutation31_refuse AFTER UPDATE ON credential_tokens DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mutation31_refuse()`,
	} {
		if _, err := db.db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	err := db.LeaseToken(t.Context(), "k", func([]byte) ([]byte, error) { return []byte("new"), nil })
	if err == nil {
		t.Fatal("a refused commit: LeaseToken returned <nil>; want the commit's error")
	}
	if got := leaseRead(t, db, "k"); string(got) != "old" {
		t.Fatalf("after a refused commit the row is %q; want \"old\"", got)
	}
}
