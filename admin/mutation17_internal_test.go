package admin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the seventeenth mutation pass's (docs/security-tests.md,
// "Seventeenth pass"): what maiden state check says of a store, and the
// operators' and sessions' operations as the operator asks them.

// TestPgAddrAsTheDriverReachesIt: the address a PostgreSQL URL reaches,
// as state check's messages name it: the URL's host and port, else its
// host= and port= parameters, else PGHOST and PGPORT, else localhost:5432;
// a host that is a directory is a unix socket; several hosts as written.
func TestPgAddrAsTheDriverReachesIt(t *testing.T) {
	for _, tc := range []struct {
		url, pghost, pgport, want string
	}{
		{"postgres://db.example.com:6543/maiden", "", "", "db.example.com:6543"},
		{"postgres://db.example.com/maiden", "", "", "db.example.com:5432"},
		{"postgres://[::1]:6543/maiden", "", "", "[::1]:6543"},
		{"postgres:///maiden?host=db2&port=7000", "", "", "db2:7000"},
		{"postgres:///maiden?host=/run/postgresql", "", "", "/run/postgresql (unix socket, port 5432)"},
		{"postgres:///maiden", "db3", "7001", "db3:7001"},
		{"postgres:///maiden", "/tmp/pg", "", "/tmp/pg (unix socket, port 5432)"},
		{"postgres://db.example.com/maiden", "db3", "7001", "db.example.com:7001"},
		{"postgres:///maiden", "", "", "localhost:5432"},
		{"postgres://h1:5432,h2:5433/maiden", "", "", "h1:5432,h2:5433"},
		{"postgres://%zz/maiden", "", "", "?"},
	} {
		t.Setenv("PGHOST", tc.pghost)
		t.Setenv("PGPORT", tc.pgport)
		if got := pgAddr(tc.url); got != tc.want {
			t.Errorf("pgAddr(%q) with PGHOST=%q PGPORT=%q = %q; want %q", tc.url, tc.pghost, tc.pgport, got, tc.want)
		}
	}
}

// TestPgConnectProblemSaysWhy: a failed connection is said as the
// server's refusal (a login refused, with where the password comes from;
// an unknown database; CONNECT not granted; any other with its SQLSTATE),
// no answer within the bound, or the innermost cause of a dial that
// failed, never the driver's wrapping around it.
func TestPgConnectProblemSaysWhy(t *testing.T) {
	const addr = "db.example.com:5432"
	pg := func(code, msg string) error {
		return fmt.Errorf("failed to connect to `user=maiden database=maiden`: %w", &pgconn.PgError{Code: code, Message: msg})
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{pg("28P01", `password authentication failed for user "maiden"`),
			`PostgreSQL at db.example.com:5432 refused the login: password authentication failed for user "maiden" (the password comes from PGPASSWORD or ~/.pgpass)`},
		{pg("28000", `role "nosuch" does not exist`),
			`PostgreSQL at db.example.com:5432 refused the login: role "nosuch" does not exist (the password comes from PGPASSWORD or ~/.pgpass)`},
		{pg("3D000", `database "nosuch" does not exist`), `PostgreSQL at db.example.com:5432: database "nosuch" does not exist`},
		{pg("42501", "permission denied for database maiden"),
			"PostgreSQL at db.example.com:5432: permission denied for database maiden (grant CONNECT on the database)"},
		{pg("53300", "sorry, too many clients already"), "PostgreSQL at db.example.com:5432: sorry, too many clients already (SQLSTATE 53300)"},
		{fmt.Errorf("connecting: %w", context.DeadlineExceeded), "cannot reach PostgreSQL at db.example.com:5432: no answer within 10s"},
		{fmt.Errorf("failed to connect to `user=maiden database=maiden`: %w", fmt.Errorf("dial error: %w", errors.New("connection refused"))),
			"cannot reach PostgreSQL at db.example.com:5432: connection refused"},
	} {
		if got := pgConnectProblem(addr, tc.err); got != tc.want {
			t.Errorf("pgConnectProblem(%v):\n got %s\nwant %s", tc.err, got, tc.want)
		}
	}
}

// TestPrivilegeHintOnlyForAMissingPrivilege: a migration that failed for
// want of a privilege (SQLSTATE 42501) gets the hint of what to grant;
// any other failure none.
func TestPrivilegeHintOnlyForAMissingPrivilege(t *testing.T) {
	denied := fmt.Errorf("migrating: %w", &pgconn.PgError{Code: "42501", Message: "permission denied for schema public"})
	if h := PrivilegeHint(denied); !strings.Contains(h, "migrating needs CREATE on the schema") {
		t.Errorf("PrivilegeHint(permission denied) = %q; want the hint to grant CREATE", h)
	}
	for _, err := range []error{fmt.Errorf("migrating: %w", &pgconn.PgError{Code: "42P07", Message: `relation "cards" already exists`}), errors.New("disk full")} {
		if h := PrivilegeHint(err); h != "" {
			t.Errorf("PrivilegeHint(%v) = %q; want none", err, h)
		}
	}
}

// TestRedactLocationHidesThePassword: a store's URL is named without its
// password; a file's path as it is.
func TestRedactLocationHidesThePassword(t *testing.T) {
	for loc, want := range map[string]string{
		"postgres://maiden:hunter2@db.example.com/maiden": "postgres://maiden:xxxxx@db.example.com/maiden",
		"postgres://%zz:hunter2@db.example.com/maiden":    "postgres://(unparseable URL)",
		"/var/lib/maiden/state.db":                        "/var/lib/maiden/state.db",
	} {
		if got := RedactLocation(loc); got != want {
			t.Errorf("RedactLocation(%q) = %q; want %q", loc, got, want)
		}
	}
}

// TestInspectRefusesAPasswordURL: Inspect of a URL carrying a password
// refuses it as config does, without connecting, and never repeats the
// password.
func TestInspectRefusesAPasswordURL(t *testing.T) {
	st := Inspect(context.Background(), "postgres://maiden:hunter2@127.0.0.1:1/maiden?sslmode=disable")
	msg := strings.Join(st.Problems, "; ")
	if st.OK || st.Reachable || len(st.Problems) != 1 || !strings.Contains(msg, "carries a password") || strings.Contains(msg+st.Store, "hunter2") {
		t.Errorf("Inspect of a URL with a password: %+v; want one problem saying it carries a password, never the password", st)
	}
}

// TestInspectSQLiteFiles: state check of a SQLite store that is not there
// yet is fine where this user may create it (and says so where the
// directory does not exist); an empty file is an empty store; a path
// that cannot be looked at is a problem saying why; what is not a
// regular file is refused.
func TestInspectSQLiteFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if st := Inspect(ctx, filepath.Join(dir, "new.db")); !st.OK || st.SchemaState != "empty" || len(st.MissingPrivileges) != 0 {
		t.Errorf("a store not there yet: %+v; want OK and empty", st)
	}
	if st := Inspect(ctx, empty); !st.OK || !st.Reachable || st.SchemaState != "empty" || len(st.Problems) != 0 {
		t.Errorf("an empty file: %+v; want OK, an empty store", st)
	}
	missing := filepath.Join(dir, "nosuch")
	st := Inspect(ctx, filepath.Join(missing, "s.db"))
	if st.OK || !slices.Equal(st.MissingPrivileges, []string{"write access to " + missing + " (to create the store)"}) {
		t.Errorf("a store in a directory that does not exist: %+v; want not OK, lacking write access to %s", st, missing)
	}
	st = Inspect(ctx, filepath.Join(empty, "s.db"))
	if st.OK || st.Reachable || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "not a directory") || len(st.MissingPrivileges) != 0 {
		t.Errorf("a store under a file: %+v; want one problem saying not a directory, not reachable", st)
	}
	if st := Inspect(ctx, dir); st.OK || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "is not a regular file") {
		t.Errorf("a directory: %+v; want refused as not a regular file", st)
	}
}

// TestOperatorTokensAsAsked: a token is minted of the role asked (a
// scraper's signs in as metrics only), its operator added; the tokens of
// one operator are that operator's only; a revoked token signs in nobody;
// a bad name or an unknown token's ID is an error, never a token or a
// revocation that did not happen.
func TestOperatorTokensAsAsked(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	scraper, info, err := s.MintOperatorToken(ctx, "alice", RoleMetrics)
	if err != nil || info.Role != RoleMetrics || info.Operator != "alice" {
		t.Fatalf("MintOperatorToken(alice, metrics) = %+v, %v; want a metrics token of alice", info, err)
	}
	if name, role, err := s.st.AuthenticateOperatorRole(ctx, scraper); err != nil || name != "alice" || role != RoleMetrics {
		t.Fatalf("the scraper's token signs in as %q, role %q (%v); want alice, metrics", name, role, err)
	}
	bob, bobInfo, err := s.MintOperatorToken(ctx, "bob", RoleOperator)
	if err != nil || bobInfo.Role != RoleOperator {
		t.Fatalf("MintOperatorToken(bob, operator) = %+v, %v", bobInfo, err)
	}
	if tok, _, err := s.MintOperatorToken(ctx, "bad\nname", RoleOperator); !errors.Is(err, ErrBadInput) || tok != "" {
		t.Errorf("MintOperatorToken of a bad name = %q, %v; want no token, ErrBadInput", tok, err)
	}
	ops, err := s.Operators(ctx)
	if err != nil || len(ops) != 2 || ops[0].Name != "alice" || ops[1].Name != "bob" {
		t.Errorf("Operators = %+v, %v; want alice and bob", ops, err)
	}
	toks, err := s.OperatorTokens(ctx, "alice")
	if err != nil || len(toks) != 1 || toks[0].ID != info.ID {
		t.Errorf("OperatorTokens(alice) = %+v, %v; want alice's one token %s", toks, err, info.ID)
	}
	if all, err := s.OperatorTokens(ctx, ""); err != nil || len(all) != 2 {
		t.Errorf("OperatorTokens(\"\") = %+v, %v; want both tokens", all, err)
	}
	if err := s.RevokeOperatorToken(ctx, bobInfo.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.st.AuthenticateOperator(ctx, bob); !errors.Is(err, store.ErrBadToken) {
		t.Errorf("bob's revoked token: %v; want it refused", err)
	}
	if toks, _ := s.OperatorTokens(ctx, "bob"); len(toks) != 1 || toks[0].Revoked.IsZero() {
		t.Errorf("OperatorTokens(bob) after the revocation = %+v; want it revoked", toks)
	}
	if err := s.RevokeOperatorToken(ctx, "0123456789abcdef"); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("RevokeOperatorToken of an unknown ID: %v; want ErrUnknownToken", err)
	}
}

// TestOperatorsAndSessionsSayTheStoreFailed: a store that fails (here
// closed) is an error of every list and lookup, never an empty answer.
func TestOperatorsAndSessionsSayTheStoreFailed(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	s.Close()
	if ops, err := s.Operators(ctx); err == nil {
		t.Errorf("Operators of a closed store = %+v, nil; want the error", ops)
	}
	if toks, err := s.OperatorTokens(ctx, ""); err == nil {
		t.Errorf("OperatorTokens of a closed store = %+v, nil; want the error", toks)
	}
	if list, err := s.Sessions(ctx, ""); err == nil {
		t.Errorf("Sessions of a closed store = %+v, nil; want the error", list)
	}
}

// TestSessionsAsAsked: an agent's sessions are its own; a session is
// shown with every revision of its boundary and every request; a reset
// is a new revision saying who reset it, and an end is recorded as by
// whom it was asked; an unknown ID is ErrUnknownSession naming it, for
// show, reset and end alike.
func TestSessionsAsAsked(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	b := api.Boundary{Kind: api.BoundaryManaged, Filesystem: api.FSRestricted, Entries: []api.BoundaryEntry{}}
	for _, o := range []struct{ id, agent string }{{"s1", "research"}, {"s2", "ops"}} {
		if _, _, err := s.st.OpenSession(ctx, o.id, o.agent, adminlink.FromBoundary(b)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.st.RequestBoundary(ctx, "s1", "r1", []byte(`{"network":{"enabled":true}}`), "the task needs it", time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if list, err := s.Sessions(ctx, "research"); err != nil || len(list) != 1 || list[0].ID != "s1" {
		t.Errorf("Sessions(research) = %+v, %v; want s1 only", list, err)
	}
	if list, err := s.Sessions(ctx, ""); err != nil || len(list) != 2 {
		t.Errorf("Sessions(\"\") = %+v, %v; want both", list, err)
	}
	if _, err := s.ResetSession(ctx, "s1", b, "cli:alice"); err != nil {
		t.Fatal(err)
	}
	info, err := s.Session(ctx, "s1")
	if err != nil || len(info.Revisions) != 2 || info.Revisions[1].Revision != 1 || info.Revisions[1].Why != "reset by cli:alice" || len(info.Requests) != 1 {
		t.Errorf("Session(s1) after a reset = %+v, %v; want revisions 0 and 1 (reset by cli:alice) and the one request", info, err)
	}
	if ended, err := s.EndSession(ctx, "s2", "cli:alice"); err != nil || !ended {
		t.Errorf("EndSession(s2) = %v, %v; want ended", ended, err)
	}
	recs, err := s.AuditTail(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var actors []string
	for _, r := range recs {
		if r.Kind == "session-reset" || r.Kind == "session-ended" {
			actors = append(actors, r.Kind+" by "+r.Actor)
		}
	}
	if !slices.Equal(actors, []string{"session-reset by cli:alice", "session-ended by cli:alice"}) {
		t.Errorf("the sessions' records: %q; want the reset and the end by cli:alice", actors)
	}
	for name, err := range map[string]error{
		"Session":      second(s.Session(ctx, "nope")),
		"ResetSession": second(s.ResetSession(ctx, "nope", b, "cli:alice")),
		"EndSession":   second(s.EndSession(ctx, "nope", "cli:alice")),
	} {
		if !errors.Is(err, ErrUnknownSession) || !strings.Contains(fmt.Sprint(err), `"nope"`) {
			t.Errorf("%s of an unknown session: %v; want ErrUnknownSession naming \"nope\"", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
