package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/internal/pgtest"
)

// These tests run maiden state check and migrate against a real PostgreSQL
// server (internal/pgtest's throwaway cluster) and a real SQLite file.

func stateCheckJSON(t *testing.T, args ...string) (admin.StoreStatus, cliResult) {
	t.Helper()
	r := cli(t, "", append([]string{"state", "check", "-json"}, args...)...)
	var st admin.StoreStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("state check -json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return st, r
}

// withUser is dbURL with another role.
func withUser(t *testing.T, dbURL, user string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

func TestStateMigrateAndCheckPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	want := admin.SchemaVersion()

	st, r := stateCheckJSON(t, "-state", db)
	if r.code != exitOK || !st.OK || !st.Reachable || st.Backend != "postgres" || st.SchemaState != "empty" || st.SchemaVersion != 0 || st.BinarySchemaVersion != want {
		t.Fatalf("check of an empty database: code %d %+v\nstderr: %s", r.code, st, r.stderr)
	}
	if st.User != pgtest.Superuser || st.Schema != "public" || st.Server == "" {
		t.Errorf("server facts: %+v", st)
	}

	r = cli(t, "", "state", "migrate", "-state", db)
	if r.code != exitOK || !strings.Contains(r.stdout, fmt.Sprintf("schema version 0 → %d", want)) {
		t.Fatalf("migrate: code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "", "state", "migrate", "-state", db, "-json")
	var m struct {
		Store    string
		From, To int
	}
	if err := json.Unmarshal([]byte(r.stdout), &m); r.code != exitOK || err != nil || m.From != want || m.To != want {
		t.Fatalf("second migrate: code %d %+v (%v)\n%s%s", r.code, m, err, r.stdout, r.stderr)
	}
	if got := pgtest.Exec(t, db, "SELECT count(*) FROM schema_migrations"); got != strconv.Itoa(want) {
		t.Errorf("schema_migrations rows %s, want %d (each step once)", got, want)
	}

	r = cli(t, "", "state", "check", "-state", db)
	if r.code != exitOK || !strings.Contains(r.stdout, fmt.Sprintf("schema: version %d, this maiden's %d: current", want, want)) ||
		!strings.Contains(r.stdout, "privileges: ok") || r.stderr != "" {
		t.Fatalf("check after migrate: code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// The same through agent.toml's [state] url.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(cfg, []byte("version = 1\n[state]\nurl = \""+db+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, r = stateCheckJSON(t, "-config", cfg)
	if r.code != exitOK || st.SchemaState != "current" || st.Store != db {
		t.Fatalf("check through [state] url: code %d %+v %s", r.code, st, r.stderr)
	}
}

// A server that does not answer is named by its address; nothing hangs.
func TestStateCheckUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	db := "postgres://maiden@" + addr + "/maiden?sslmode=disable"
	for _, cmd := range []string{"check", "migrate"} {
		r := cli(t, "", "state", cmd, "-state", db)
		if r.code != exitState || !strings.Contains(r.stderr, "cannot reach PostgreSQL at "+addr+":") {
			t.Errorf("state %s: code %d\nstdout: %s\nstderr: %s", cmd, r.code, r.stdout, r.stderr)
		}
	}
	st, r := stateCheckJSON(t, "-state", db)
	if r.code != exitState || st.OK || st.Reachable || len(st.Problems) != 1 {
		t.Errorf("-json: code %d %+v", r.code, st)
	}
}

// A role that does not exist, and a database that does not exist: the
// server's word, with the address.
func TestStateCheckLoginRefused(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	r := cli(t, "", "state", "check", "-state", withUser(t, db, "nosuchrole"))
	if r.code != exitState || !strings.Contains(r.stderr, "PostgreSQL at "+pgtest.Addr(t)+" refused the login") || !strings.Contains(r.stderr, `"nosuchrole"`) {
		t.Errorf("unknown role: code %d\n%s", r.code, r.stderr)
	}
	u, _ := url.Parse(db)
	u.Path = "/nosuchdb"
	r = cli(t, "", "state", "check", "-state", u.String())
	if r.code != exitState || !strings.Contains(r.stderr, `database "nosuchdb" does not exist`) {
		t.Errorf("unknown database: code %d\n%s", r.code, r.stderr)
	}
}

// A schema newer than the binary: check says so and fails; migrate refuses
// and changes nothing.
func TestStateSchemaNewer(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	if r := cli(t, "", "state", "migrate", "-state", db); r.code != exitOK {
		t.Fatalf("migrate: %d %s", r.code, r.stderr)
	}
	newer := admin.SchemaVersion() + 3
	pgtest.Exec(t, db, fmt.Sprintf("INSERT INTO schema_migrations (version, applied_at) VALUES (%d, 0)", newer))
	st, r := stateCheckJSON(t, "-state", db)
	if r.code != exitState || st.OK || st.SchemaState != "newer" || st.SchemaVersion != newer {
		t.Fatalf("check: code %d %+v", r.code, st)
	}
	r = cli(t, "", "state", "check", "-state", db)
	want := fmt.Sprintf("the schema (version %d) is newer than this maiden's (%d): upgrade maiden", newer, admin.SchemaVersion())
	if r.code != exitState || !strings.Contains(r.stderr, want) {
		t.Fatalf("check text: code %d\n%s", r.code, r.stderr)
	}
	r = cli(t, "", "state", "migrate", "-state", db)
	if r.code != exitState || !strings.Contains(r.stderr, want) {
		t.Fatalf("migrate: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := pgtest.Exec(t, db, "SELECT max(version) FROM schema_migrations"); got != strconv.Itoa(newer) {
		t.Fatalf("version now %s", got)
	}
}

// A role without the privileges maiden needs: check names each missing one;
// once granted, check passes and the role can use the store.
func TestStatePrivileges(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	role := fmt.Sprintf("limited_%d", os.Getpid())
	pgtest.Exec(t, db, fmt.Sprintf("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN; END IF; END$$", role, role))
	limited := withUser(t, db, role)

	// An empty database: the role cannot create maiden's tables.
	st, r := stateCheckJSON(t, "-state", limited)
	if r.code != exitState || st.OK || len(st.MissingPrivileges) != 1 ||
		!strings.HasPrefix(st.MissingPrivileges[0], fmt.Sprintf("CREATE on schema public (to migrate from version 0 to %d)", admin.SchemaVersion())) {
		t.Fatalf("empty database, limited role: code %d %+v", r.code, st)
	}
	r = cli(t, "", "state", "migrate", "-state", limited)
	if r.code != exitState || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("migrate as the limited role: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Migrated by the owner; the role has no rights on the tables yet.
	if r := cli(t, "", "state", "migrate", "-state", db); r.code != exitOK {
		t.Fatalf("migrate: %d %s", r.code, r.stderr)
	}
	st, r = stateCheckJSON(t, "-state", limited)
	if r.code != exitState || st.OK || len(st.MissingPrivileges) == 0 {
		t.Fatalf("tables without grants: code %d %+v", r.code, st)
	}
	var cardsLine string
	for _, m := range st.MissingPrivileges {
		if strings.HasSuffix(m, " on table public.cards") {
			cardsLine = m
		}
	}
	if cardsLine != "SELECT, INSERT, UPDATE on table public.cards" {
		t.Fatalf("missing on cards: %q (all: %q)", cardsLine, st.MissingPrivileges)
	}
	// One line per table, each privilege once.
	for i, m := range st.MissingPrivileges {
		if slices.Contains(st.MissingPrivileges[:i], m) {
			t.Fatalf("missing privileges name %q twice: %q", m, st.MissingPrivileges)
		}
	}
	r = cli(t, "", "state", "check", "-state", limited)
	if !strings.Contains(r.stderr, "maiden state check: user "+role+" lacks SELECT, INSERT, UPDATE on table public.cards") {
		t.Fatalf("text: %s", r.stderr)
	}

	// Everything but UPDATE on cards: exactly that is named. UPDATE and
	// DELETE on the audit trail are not needed (an operator may deny them).
	pgtest.Exec(t, db, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %s; REVOKE UPDATE ON cards FROM %s; REVOKE UPDATE, DELETE ON audit FROM %s", role, role, role))
	st, r = stateCheckJSON(t, "-state", limited)
	if r.code != exitState || len(st.MissingPrivileges) != 1 || st.MissingPrivileges[0] != "UPDATE on table public.cards" {
		t.Fatalf("UPDATE withheld: code %d %q", r.code, st.MissingPrivileges)
	}

	pgtest.Exec(t, db, fmt.Sprintf("GRANT UPDATE ON cards TO %s", role))
	st, r = stateCheckJSON(t, "-state", limited)
	if r.code != exitOK || !st.OK || len(st.MissingPrivileges) != 0 || st.SchemaState != "current" {
		t.Fatalf("all granted: code %d %+v", r.code, st)
	}
	// What check promises holds: the role without CREATE opens the current
	// store (migrate has nothing to do).
	r = cli(t, "", "state", "migrate", "-state", limited)
	if r.code != exitOK || !strings.Contains(r.stdout, "already current") {
		t.Fatalf("the limited role opening a current store: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestStateURLWithPasswordRefused(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-s3cret"
	for _, cmd := range []string{"check", "migrate"} {
		r := cli(t, "", "state", cmd, "-state", "postgres://maiden:"+secret+"@127.0.0.1:1/maiden")
		if r.code != exitUsage || !strings.Contains(r.stderr, "-state") || !strings.Contains(r.stderr, "PGPASSWORD") {
			t.Errorf("state %s: code %d\n%s", cmd, r.code, r.stderr)
		}
		if strings.Contains(r.stderr+r.stdout, secret) {
			t.Errorf("state %s repeats the password: %s", cmd, r.stderr)
		}
	}
}

func TestStateSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	want := admin.SchemaVersion()
	st, r := stateCheckJSON(t, "-state", path)
	if r.code != exitOK || st.Backend != "sqlite" || st.SchemaState != "empty" {
		t.Fatalf("absent file: code %d %+v", r.code, st)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("check created the file (%v)", err)
	}
	r = cli(t, "", "state", "migrate", "-state", path)
	if r.code != exitOK || !strings.Contains(r.stdout, fmt.Sprintf("schema version 0 → %d", want)) {
		t.Fatalf("migrate: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, r = stateCheckJSON(t, "-state", path)
	if r.code != exitOK || st.SchemaState != "current" || st.SchemaVersion != want {
		t.Fatalf("after migrate: code %d %+v", r.code, st)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "state", "check", "-state", filepath.Join(dir, "sub"))
	if r.code != exitState || !strings.Contains(r.stderr, "is not a regular file") {
		t.Fatalf("a directory: code %d %s", r.code, r.stderr)
	}
}

// audit verify on a database without maiden's schema is an error, never an
// empty trail; once the schema exists, the (empty) trail verifies.
func TestAuditVerifyPostgresStore(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	r := cli(t, "", "audit", "verify", "-state", db)
	if r.code != exitState || !strings.Contains(r.stderr, "no state store in "+db) {
		t.Fatalf("empty database: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := pgtest.Exec(t, db, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"); got != "0" {
		t.Fatalf("audit verify created %s tables", got)
	}
	cli(t, "", "state", "migrate", "-state", db)
	r = cli(t, "", "audit", "verify", "-state", db)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "ok: 0 records") {
		t.Fatalf("migrated database: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestStatePrivilegesMatchTheStore: state check's list of table privileges
// is the store's. A role holding exactly that list opens the store and
// check passes; with any one of them withheld, the store's Open refuses
// (ErrPrivilege) and check names it.
func TestStatePrivilegesMatchTheStore(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	if r := cli(t, "", "state", "migrate", "-state", db); r.code != exitOK {
		t.Fatalf("migrate: %d %s", r.code, r.stderr)
	}
	role := fmt.Sprintf("exact_%d", os.Getpid())
	pgtest.Exec(t, db, fmt.Sprintf("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN; END IF; END$$", role, role))
	var grants []string
	for table, privs := range admin.TablePrivileges() {
		for _, p := range privs {
			grants = append(grants, fmt.Sprintf("GRANT %s ON %s TO %s", p, table, role))
		}
	}
	pgtest.Exec(t, db, strings.Join(grants, "; "))
	// Every table of the migrated schema is in the list.
	if extra := pgtest.Exec(t, db, "SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'public' AND NOT has_table_privilege('"+role+"', format('%I.%I', schemaname, tablename), 'SELECT')"); extra != "" {
		t.Fatalf("tables state check knows nothing of: %s", extra)
	}
	limited := withUser(t, db, role)
	ctx := t.Context()
	open := func() error {
		s, err := admin.OpenStore(ctx, limited, nil)
		if err == nil {
			s.Close()
		}
		return err
	}
	if err := open(); err != nil {
		t.Fatalf("the store refuses a role holding exactly state check's privileges: %v", err)
	}
	if st, r := stateCheckJSON(t, "-state", limited); r.code != exitOK || !st.OK {
		t.Fatalf("check with exactly the privileges: code %d %+v", r.code, st)
	}
	for table, privs := range admin.TablePrivileges() {
		for _, p := range privs {
			pgtest.Exec(t, db, fmt.Sprintf("REVOKE %s ON %s FROM %s", p, table, role))
			if err := open(); !errors.Is(err, admin.ErrPrivilege) {
				t.Errorf("%s on %s withheld: the store's Open = %v, want ErrPrivilege (state check needs it, the store does not)", p, table, err)
			}
			st, _ := stateCheckJSON(t, "-state", limited)
			if want := p + " on table public." + table; len(st.MissingPrivileges) != 1 || st.MissingPrivileges[0] != want {
				t.Errorf("%s on %s withheld: check says %q", p, table, st.MissingPrivileges)
			}
			pgtest.Exec(t, db, fmt.Sprintf("GRANT %s ON %s TO %s", p, table, role))
		}
	}
}

// -state with a URL reaches the same database from any command that takes
// it: a token minted through one command is listed by another.
func TestStateFlagURLOnOperatorCommands(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(cfg, []byte("version = 1\n[agents.alice]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "agents", "token", "alice", "-config", cfg, "-state", db, "-json")
	var tok struct{ Agent, Token string }
	if err := json.Unmarshal([]byte(r.stdout), &tok); r.code != exitOK || err != nil || tok.Token == "" {
		t.Fatalf("agents token: code %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	id := strings.SplitN(strings.TrimPrefix(tok.Token, "mdn_"), "_", 2)[0]
	r = cli(t, "", "agents", "ls", "-config", cfg, "-state", db)
	if r.code != exitOK || !strings.Contains(r.stdout, id) {
		t.Fatalf("agents ls through -state URL does not list token %s: code %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	if got := pgtest.Exec(t, db, "SELECT count(*) FROM tokens"); got != "1" {
		t.Fatalf("tokens in the database: %s", got)
	}
}

// TestServeCreatesPostgresSchema (issue 27, rough edge 10): maiden serve
// on a PostgreSQL store creates its schema as it starts, not at the first
// call: maiden state check sees it current before any call.
func TestServeCreatesPostgresSchema(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	cfg := agentTOML(t, map[string]string{"echo": ""})
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n[agents.a]\ntools = [\"echo\"]\n")
	f.Close()
	if st, r := stateCheckJSON(t, "-state", db); st.SchemaState != "empty" {
		t.Fatalf("before serve: %+v %s", st, r.stderr)
	}
	startHTTP(t, "-config", cfg, "-state", db)
	if st, r := stateCheckJSON(t, "-state", db); r.code != exitOK || st.SchemaState != "current" || st.SchemaVersion != admin.SchemaVersion() {
		t.Fatalf("after serve started, before any call: code %d %+v\n%s", r.code, st, r.stderr)
	}
}
