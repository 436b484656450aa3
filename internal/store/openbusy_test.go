package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// holdWriteLock takes path's write lock on a connection of its own (as
// another maiden process's transaction would) and returns its release.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Conn(ctx)
	if err == nil {
		_, err = c.ExecContext(ctx, "BEGIN IMMEDIATE")
	}
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			c.ExecContext(ctx, "ROLLBACK")
			c.Close()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// TestOpenWhileAnotherWrites: another process holds the write lock for
// longer than the busy timeout (ingesting a large journal, as in the
// flake of TestJournalConcurrentSweepers under load) while a store up to
// date is opened. Open needs only to read: it succeeds without waiting
// for the lock, and leaves a gone process's journal, which it could not
// ingest, for later; nothing of it is lost or damaged.
func TestOpenWhileAnotherWrites(t *testing.T) {
	t.Parallel()
	const n = 50
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	heldJournal(t, path, "t", n)
	release := holdWriteLock(t, path)
	s, err = Open(context.Background(), path, &Options{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open while another connection holds the write lock: %v", err)
	}
	if st := s.Journal().Stats(); st.Swept != 0 || st.Damaged != 0 {
		t.Fatalf("journal stats while locked %+v, want nothing swept or damaged", st)
	}
	release()
	s.Close()
	s = openOpts(t, path, nil) // the lock is free: this one sweeps it
	got, damaged := chainByTool(t, s)
	wantSeq(t, "t", got["t"], n)
	if len(damaged) != 0 {
		t.Fatalf("damaged %v", damaged)
	}
}

// TestOpenMigrationWaitsForLock: a file that needs migrating while another
// connection holds its write lock. Open waits for the lock (it is
// released once Open has met it busy, an event, not a sleep) and then
// migrates; held beyond the busy timeout, Open gives up within a bound
// with ErrLocked, naming the wait.
func TestOpenMigrationWaitsForLock(t *testing.T) {
	for _, released := range []bool{true, false} {
		name := map[bool]string{true: "released", false: "held"}[released]
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			// A SQLite file of another program's making, or an empty one
			// being created by another maiden: version 0.
			raw, err := sql.Open("sqlite", path)
			if err == nil {
				_, err = raw.Exec("CREATE TABLE other (a TEXT)")
			}
			raw.Close()
			if err != nil {
				t.Fatal(err)
			}
			release := holdWriteLock(t, path)
			busy := 200 * time.Millisecond
			opts := &Options{BusyTimeout: busy}
			if released {
				busy = 30 * time.Second
				opts = &Options{BusyTimeout: busy, openBusy: release}
			}
			start := time.Now()
			s, err := Open(context.Background(), path, opts)
			took := time.Since(start)
			if released {
				if err != nil {
					t.Fatalf("Open once the lock was released: %v", err)
				}
				defer s.Close()
				if v := schemaVersionOf(t, s); v != SchemaVersion() {
					t.Fatalf("schema version %d, want %d", v, SchemaVersion())
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("Open migrated while another connection held the write lock")
			}
			if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), busy.String()) {
				t.Fatalf("Open = %v; want ErrLocked naming the %s waited", err, busy)
			}
			if took > 10*busy {
				t.Fatalf("Open gave up after %s; want about %s", took, busy)
			}
			t.Logf("gave up after %s: %v", took, err)
		})
	}
}

func schemaVersionOf(t *testing.T, s *DB) int {
	t.Helper()
	var v int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
