package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// This file is the seventeenth mutation pass's (docs/security-tests.md,
// "Seventeenth pass"): what maiden state check says of a PostgreSQL
// database it cannot use as it is.

// TestStateCheckNoSchemaToWorkIn: a role whose search_path names no
// schema it may use (one that does not exist, or one it has no USAGE on,
// which PostgreSQL passes over the same) has no schema to work in, and
// state check says so, and nothing else.
func TestStateCheckNoSchemaToWorkIn(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	pgtest.Exec(t, db, "CREATE SCHEMA locked")
	for _, tc := range []struct{ name, searchPath string }{{"a schema that does not exist", "nosuch"}, {"a schema without USAGE", "locked"}} {
		role := fmt.Sprintf("noschema_%s_%d", tc.searchPath, os.Getpid())
		pgtest.Exec(t, db, fmt.Sprintf("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN; END IF; END$$; ALTER ROLE %s SET search_path = %s",
			role, role, role, tc.searchPath))
		st, r := stateCheckJSON(t, "-state", withUser(t, db, role))
		want := "user " + role + " has no schema to work in (search_path names no existing schema it may use)"
		if r.code != exitState || st.OK || !st.Reachable || len(st.Problems) != 1 || st.Problems[0] != want {
			t.Errorf("%s: code %d %+v; want exit %d and only the problem %q", tc.name, r.code, st, exitState, want)
		}
	}
}

// TestStateCheckForeignSchemaMigrations: a schema_migrations table that
// is not maiden's (another program's, without a version column) is a
// problem reading the schema version, never a version unknown and a
// store usable.
func TestStateCheckForeignSchemaMigrations(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	pgtest.Exec(t, db, "CREATE TABLE schema_migrations (id integer)")
	st, r := stateCheckJSON(t, "-state", db)
	if r.code != exitState || st.OK || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "reading the schema version: column \"version\" does not exist") {
		t.Errorf("code %d %+v; want exit %d, the problem reading the schema version", r.code, st, exitState)
	}
}
