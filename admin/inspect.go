package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" (internal/store registers it too)
	"golang.org/x/sys/unix"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the operator's view of the state store itself (maiden state
// check and migrate): where it is, whether this maiden can use it, its
// schema version, for a SQLite file or a PostgreSQL database shared by
// several instances.

// Migrate brings the schema of the store at loc up to this maiden's
// version. Several instances may migrate at once: each step runs once
// (under an advisory lock on PostgreSQL, the write lock on SQLite), the
// others wait for it. Opening a store migrates it too; this only opens and
// closes it. A missing privilege is ErrPrivilege (PrivilegeHint says what
// to grant).
func Migrate(ctx context.Context, loc string) error {
	s, err := store.Open(ctx, loc, nil)
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("closing: %w", err)
	}
	return nil
}

// StoreStatus is what Inspect found about a state store: whether it
// answers, its schema version against this maiden's, and the privileges
// this maiden would lack there. Its JSON is what maiden state check -json
// prints.
type StoreStatus struct {
	Store               string   `json:"store"`
	Backend             string   `json:"backend"` // postgres or sqlite
	Reachable           bool     `json:"reachable"`
	Server              string   `json:"server,omitempty"` // PostgreSQL: server_version
	User                string   `json:"user,omitempty"`
	Schema              string   `json:"schema,omitempty"`
	SchemaVersion       int      `json:"schema_version"`
	BinarySchemaVersion int      `json:"binary_schema_version"`
	SchemaState         string   `json:"schema_state,omitempty"` // empty, behind, current, newer, unknown
	MissingPrivileges   []string `json:"missing_privileges"`
	Problems            []string `json:"problems"`
	OK                  bool     `json:"ok"`
}

func (st *StoreStatus) problem(format string, args ...any) {
	st.Problems = append(st.Problems, fmt.Sprintf(format, args...))
}

// Inspect looks at the store at loc (a SQLite file or a postgres:// URL)
// without changing it: reachable, the schema version against this
// maiden's (SchemaState empty, behind, current, newer, or unknown when it
// may not be read), and the privileges this maiden needs there (PostgreSQL:
// USAGE on the schema, CREATE when a migration is due, and on each table
// what the store uses; SQLite: write access to the file and its
// directory). Every problem is in Problems; OK is reachable with none.
func Inspect(ctx context.Context, loc string) *StoreStatus {
	st := &StoreStatus{Store: RedactLocation(loc), BinarySchemaVersion: SchemaVersion(),
		MissingPrivileges: []string{}, Problems: []string{}}
	if config.IsStateURL(loc) {
		st.Backend = "postgres"
		inspectPostgres(ctx, loc, st)
	} else {
		st.Backend = "sqlite"
		inspectSQLite(ctx, loc, st)
	}
	st.OK = st.Reachable && len(st.Problems) == 0
	return st
}

func (st *StoreStatus) version(v int) {
	st.SchemaVersion = v
	switch b := st.BinarySchemaVersion; {
	case v == 0:
		st.SchemaState = "empty"
	case v < b:
		st.SchemaState = "behind"
	case v == b:
		st.SchemaState = "current"
	default:
		st.SchemaState = "newer"
		st.problem("the schema (version %d) is newer than this maiden's (%d): upgrade maiden, or use another store", v, b)
	}
}

// TablePrivileges are the privileges the PostgreSQL store uses on each of
// its tables (table -> SELECT, INSERT, UPDATE, DELETE), the list its Open
// checks (TestStatePrivilegesMatchTheStore opens the store with exactly
// these, and with each one withheld). The audit trail is only read and
// appended to: UPDATE and DELETE on it may be denied.
func TablePrivileges() map[string][]string { return store.TablePrivileges() }

// SchemaVersion is the schema version of this maiden's store.
func SchemaVersion() int { return store.SchemaVersion() }

// connectTimeout bounds reaching the database.
const connectTimeout = 10 * time.Second

func inspectPostgres(ctx context.Context, loc string, st *StoreStatus) {
	if err := config.CheckStateURL(loc); err != nil {
		st.problem("%v", err)
		return
	}
	addr := pgAddr(loc)
	db, err := sql.Open("pgx", loc)
	if err != nil {
		st.problem("%s: %v", st.Store, err)
		return
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		st.problem("%s", pgConnectProblem(addr, err))
		return
	}
	defer conn.Close()
	st.Reachable = true
	var schema sql.NullString
	if err := conn.QueryRowContext(ctx, `SELECT current_setting('server_version'), current_user, current_schema()`).Scan(&st.Server, &st.User, &schema); err != nil {
		st.problem("%s: %v", addr, err)
		return
	}
	if !schema.Valid {
		st.problem("user %s has no schema to work in (search_path names no existing schema it may use)", st.User)
		return
	}
	st.Schema = schema.String
	var usage, create bool
	if err := conn.QueryRowContext(ctx, `SELECT has_schema_privilege(current_schema(), 'USAGE'), has_schema_privilege(current_schema(), 'CREATE')`).Scan(&usage, &create); err != nil {
		st.problem("%s: reading privileges: %v", addr, err)
		return
	}
	if !usage {
		st.MissingPrivileges = append(st.MissingPrivileges, "USAGE on schema "+st.Schema)
	}
	// The schema version: no schema_migrations table yet means an empty
	// store (version 0).
	var owner sql.NullString
	if err := conn.QueryRowContext(ctx, `SELECT pg_get_userbyid(c.relowner) FROM pg_class c
		WHERE c.relname = 'schema_migrations' AND c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`).Scan(&owner); err != nil && !errors.Is(err, sql.ErrNoRows) {
		st.problem("%s: %v", addr, err)
		return
	}
	if owner.Valid {
		var v sql.NullInt64
		if err := conn.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
			if pgCode(err) != "42501" {
				st.problem("%s: reading the schema version: %v", addr, pgErrText(err))
				return
			}
			// Not allowed to read it: the version is unknown, and the
			// table loop below names the privilege with the others.
			st.SchemaState = "unknown"
		} else {
			st.version(int(v.Int64))
		}
	} else {
		st.version(0)
	}
	if !create && st.SchemaState != "unknown" && st.SchemaVersion < st.BinarySchemaVersion {
		st.MissingPrivileges = append(st.MissingPrivileges, fmt.Sprintf("CREATE on schema %s (to migrate from version %d to %d)", st.Schema, st.SchemaVersion, st.BinarySchemaVersion))
	}
	if owner.Valid {
		// The privileges the store uses on each of its tables that exist.
		var tables, privs []string
		for t, ps := range TablePrivileges() {
			for _, p := range ps {
				tables, privs = append(tables, t), append(privs, p)
			}
		}
		rows, err := conn.QueryContext(ctx, `SELECT x.t, x.p FROM unnest($1::text[], $2::text[]) AS x(t, p)
			WHERE to_regclass(quote_ident(current_schema()) || '.' || quote_ident(x.t)) IS NOT NULL
				AND NOT has_table_privilege(to_regclass(quote_ident(current_schema()) || '.' || quote_ident(x.t)), x.p)
			ORDER BY x.t, array_position(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'], x.p)`, tables, privs)
		if err != nil {
			st.problem("%s: reading privileges: %v", addr, err)
			return
		}
		defer rows.Close()
		missing := map[string][]string{}
		var order []string
		for rows.Next() {
			var t, p string
			if err := rows.Scan(&t, &p); err != nil {
				st.problem("%s: reading privileges: %v", addr, err)
				return
			}
			if missing[t] == nil {
				order = append(order, t)
			}
			missing[t] = append(missing[t], p)
		}
		if err := rows.Err(); err != nil {
			st.problem("%s: reading privileges: %v", addr, err)
			return
		}
		for _, t := range order {
			st.MissingPrivileges = append(st.MissingPrivileges, strings.Join(missing[t], ", ")+" on table "+st.Schema+"."+t)
		}
	}
	for _, m := range st.MissingPrivileges {
		st.problem("user %s lacks %s", st.User, m)
	}
}

func inspectSQLite(ctx context.Context, path string, st *StoreStatus) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Not an error: the first maiden to open it creates it, if the
		// directory lets it.
		st.Reachable = true
		st.version(0)
		if err := unix.Access(filepath.Dir(path), unix.W_OK|unix.X_OK); err != nil {
			st.MissingPrivileges = append(st.MissingPrivileges, "write access to "+filepath.Dir(path)+" (to create the store)")
		}
	case err != nil:
		st.problem("state store %s: %v", path, err)
		return
	case !fi.Mode().IsRegular():
		st.problem("state store %s is not a regular file", path)
		return
	case strings.ContainsAny(path, "?#\x00"):
		// The store refuses such a path too (internal/store).
		st.problem("state store %q: the path must hold no '?', '#' or NUL", path)
		return
	default:
		// Writing needs the file and its directory (the WAL, the shared
		// memory index and the audit journal live next to it).
		var missing []string
		for _, p := range []string{path, filepath.Dir(path)} {
			if err := unix.Access(p, unix.W_OK); err != nil {
				missing = append(missing, "write access to "+p)
			}
		}
		db, err := sql.Open("sqlite", sqliteCheckURI(path, missing == nil))
		if err != nil {
			st.problem("state store %s: %v", path, err)
			return
		}
		defer db.Close()
		var v sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
			if strings.Contains(err.Error(), "no such table") {
				st.Reachable = true
				st.version(0)
				st.MissingPrivileges = append(st.MissingPrivileges, missing...)
				break
			}
			st.problem("state store %s: reading the schema version: %v", path, err)
			return
		}
		st.Reachable = true
		st.version(int(v.Int64))
		st.MissingPrivileges = append(st.MissingPrivileges, missing...)
	}
	for _, m := range st.MissingPrivileges {
		st.problem("this user lacks %s", m)
	}
}

// sqliteCheckURI is how state check opens the SQLite store at path so that
// it leaves nothing behind ("nothing is changed"). A store no process has
// open has no -wal file, and SQLite opening a WAL database makes its -wal
// and -shm files; its last connection checkpoints and removes them only if
// it may write, so a read-only open (mode=ro) would leave both, owned by
// whoever ran the check, and the store's own Open refuses side files of
// another user. So: a -wal file there (a process has the store open, or one
// died with it open) is read as it is, read-only, making nothing; none, and
// this user may write the store, it is opened read-write (SQLite removes
// what it made when the check closes it; a read changes no page); none, and
// it may not, it is read as immutable, with nothing made (no WAL to miss).
func sqliteCheckURI(path string, writable bool) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	q := "mode=ro&_pragma=busy_timeout(5000)"
	if _, err := os.Lstat(abs + "-wal"); errors.Is(err, os.ErrNotExist) {
		if writable {
			q = "mode=rw&_pragma=busy_timeout(5000)"
		} else {
			q = "mode=ro&immutable=1"
		}
	}
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: q}).String()
}

// pgAddr is the HOST:PORT (or socket directory and port) a PostgreSQL URL
// reaches, with the driver's defaults (PGHOST, PGPORT, localhost:5432), for
// messages.
func pgAddr(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	host, port := u.Hostname(), u.Port()
	q := u.Query()
	if host == "" {
		host = q.Get("host")
	}
	if port == "" {
		port = q.Get("port")
	}
	if host == "" {
		host = os.Getenv("PGHOST")
	}
	if port == "" {
		port = os.Getenv("PGPORT")
	}
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "5432"
	}
	if strings.HasPrefix(host, "/") {
		return host + " (unix socket, port " + port + ")"
	}
	if h := strings.Split(u.Host, ","); len(h) > 1 {
		return u.Host // several hosts: as written
	}
	return net.JoinHostPort(host, port)
}

// pgConnectProblem says why a connection failed: the server does not
// answer (at addr), or it refused this user or database.
func pgConnectProblem(addr string, err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "28P01" || pe.Code == "28000":
			return fmt.Sprintf("PostgreSQL at %s refused the login: %s (the password comes from PGPASSWORD or ~/.pgpass)", addr, pe.Message)
		case pe.Code == "3D000":
			return fmt.Sprintf("PostgreSQL at %s: %s", addr, pe.Message)
		case pe.Code == "42501":
			return fmt.Sprintf("PostgreSQL at %s: %s (grant CONNECT on the database)", addr, pe.Message)
		}
		return fmt.Sprintf("PostgreSQL at %s: %s (SQLSTATE %s)", addr, pe.Message, pe.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("cannot reach PostgreSQL at %s: no answer within %s", addr, connectTimeout)
	}
	return fmt.Sprintf("cannot reach PostgreSQL at %s: %s", addr, rootCause(err))
}

// rootCause is the innermost message of a connection error (pgconn's own
// wrapping repeats the user and database, which addr already locates).
func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func pgErrText(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// PrivilegeHint adds, to a failed migration caused by a missing privilege,
// what to grant.
func PrivilegeHint(err error) string {
	if pgCode(err) == "42501" {
		return "the database user lacks a privilege: migrating needs CREATE on the schema (maiden state check lists what is missing)"
	}
	return ""
}

// RedactLocation is a store location fit for messages: a URL is printed
// without a password (which config refuses anyway) and unchanged otherwise.
func RedactLocation(loc string) string {
	if !config.IsStateURL(loc) {
		return loc
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "postgres://(unparseable URL)"
	}
	return u.Redacted()
}
