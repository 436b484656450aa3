package store

import (
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// backend is one kind of store every store test runs against: a SQLite
// file in a fresh temporary directory, or a fresh database on the test
// binary's throwaway PostgreSQL cluster (internal/pgtest).
type backend struct {
	name string
	pg   bool
}

var backends = []backend{{name: "sqlite"}, {name: "postgres", pg: true}}

// target is a new, empty store of b's kind: a file path or a URL.
func (b backend) target(t testing.TB) string {
	t.Helper()
	if b.pg {
		return pgtest.URL(t)
	}
	return filepath.Join(t.TempDir(), "state.db")
}

// eachBackend runs test once per backend, as subtests named after them.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// integrityCheck checks SQLite's file (PRAGMA integrity_check); a
// PostgreSQL server checks its own pages, and a killed client cannot
// damage them, so there the check is that the database answers.
func integrityCheck(t *testing.T, s *DB) {
	t.Helper()
	if s.pg != nil {
		if err := s.db.Ping(); err != nil {
			t.Fatal(err)
		}
		return
	}
	var check string
	if err := s.db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
}

// journalDirOf is the audit journal directory of the store at target when
// Options.JournalDir is not set.
func journalDirOf(t testing.TB, target string) string {
	t.Helper()
	if !IsPostgres(target) {
		return target + ".audit"
	}
	cfg, err := pgx.ParseConfig(target)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := defaultJournalDir(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
