package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// The PostgreSQL store (see doc.go, "PostgreSQL"): the same DB, the same
// SQL and the same code paths as SQLite, through pgx's database/sql driver
// wrapped so that every query's '?' placeholders become $n (rebind), with
// the write lock, the migration lock, the generation counter and the
// change feed done the PostgreSQL way.

// Advisory lock keys ("maide" + a number) and the notification channel.
const (
	pgLockWrite   int64 = 0x6d61696465_01
	pgLockMigrate int64 = 0x6d61696465_02
	pgChannel           = "maiden_store"
)

// pgWriteLockSQL is the first statement of every write transaction, one
// round trip that
//   - takes the one write lock of all instances on the database, held
//     until the transaction ends (commit, rollback, or the connection's
//     death), waiting for it up to busy (Options.BusyTimeout, as SQLite's
//     busy timeout; the select list of l runs left to right, so the
//     timeout is set first);
//   - then advances the generation counter and notifies the other
//     instances' waiters: NOTIFY is delivered on commit only (not at all
//     on rollback), and the counter's new value is seen only once the
//     transaction commits, so doing both first is the same as doing them
//     last. The UPDATE's condition reads l, so the lock is taken before
//     the row is updated (in READ COMMITTED an UPDATE that waited updates
//     the latest committed row); every later statement of the transaction
//     takes its snapshot after the lock, so it sees every earlier writer's
//     commit.
func pgWriteLockSQL(busy time.Duration, kind string) string {
	return fmt.Sprintf(`WITH l AS (SELECT set_config('lock_timeout', '%dms', true), pg_advisory_xact_lock(%d)),
g AS (UPDATE counters SET value = value + 1 WHERE name = 'generation' AND EXISTS (SELECT 1 FROM l) RETURNING value),
n AS (SELECT pg_notify('%s', '%s:' || value::text) FROM g)
SELECT value FROM g, n`, busy.Milliseconds(), pgLockWrite, pgChannel, kind)
}

// The kinds of change a notification names (its payload is KIND:VALUE,
// VALUE the generation counter after the change). Only kindCards
// invalidates the wallets and tokens an instance keeps (CardsGeneration),
// only kindSessions the sessions it keeps (SessionsGeneration); the others
// (a session's creation, approvals, a session's last use) wake WaitChange
// and move Generation, and leave both alone.
//
// kindAudit, the audit trail's own appends (the journal's ingestion,
// AppendAudit and its group), takes the write lock only (pgAuditLockSQL):
// nothing any instance keeps or waits for depends on them, and under load
// they are the most frequent writes of all (a batch every JournalInterval
// from every instance), each of which woke every other instance's feed.
const (
	kindCards    = "cards"    // agents, tokens, cards and revocations, operators (DB.write)
	kindSessions = "sessions" // sessions and their boundary requests (DB.writeSessions)
	kindOther    = "other"    // everything written with DB.writeKeep
	kindAudit    = "audit"    // the audit trail's own appends (DB.writeAudit): no counter, no notification
	// kindSessionNew is a session created (DB.writeSessionNew): no
	// instance can keep a session that did not exist, so it moves no
	// epoch and its writer waits for no acknowledgement.
	kindSessionNew = "session-new"
)

// pgAuditLockSQL takes the write lock as pgWriteLockSQL does, and does
// nothing else: a write of kindAudit.
func pgAuditLockSQL(busy time.Duration) string {
	return fmt.Sprintf(`SELECT set_config('lock_timeout', '%dms', true), pg_advisory_xact_lock(%d)`, busy.Milliseconds(), pgLockWrite)
}

// pgState is what a PostgreSQL store holds beyond DB's fields.
type pgState struct {
	cfg   *pgx.ConnConfig
	where string // host:port, for messages (never the password)
	feed  *changeFeed
	lock  string            // pgWriteLockSQL of kindOther
	locks map[string]string // pgWriteLockSQL of each kind
	busy  time.Duration     // its timeout
	// genReads counts the generation reads that went to the database
	// (tests: a declared agent's call makes none while nothing changed).
	genReads atomic.Int64
}

// lockError says what a failure to take the write lock means.
func (p *pgState) lockError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" {
		return fmt.Errorf("take the write lock: the store is locked: another writer held it for more than %s: %w", p.busy, err)
	}
	return fmt.Errorf("take the write lock: %w", err)
}

// maxFeedPIDs bounds changeFeed.pids: a feed that reconnects for days
// must not grow it, nor the deletes at close.
const maxFeedPIDs = 64

// close stops the change feed, then deletes its lease rows through db.
// The feed deletes its row itself as its connection ends, on that
// connection and within 500 ms; but the connection's context is the one
// close cancelled, and on a loaded server the delete was seen to miss
// (full run 193: another instance's next write of cards then waited out
// the row's lease, ~2.4 s, for a feed already gone). The rows are this
// process's feed backends', which have ended by now: a backend PID is the
// server's process ID, not reused while the server's pid counter has not
// wrapped, so no other instance's row is named.
func (p *pgState) close(db *sql.DB) {
	if p.feed == nil {
		return
	}
	p.feed.close()
	if len(p.feed.pids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, pid := range p.feed.pids {
		_, _ = db.ExecContext(ctx, `DELETE FROM feed_leases WHERE pid = ?`, int64(pid))
	}
}

// checkPostgresURL refuses a URL that carries a password, in its user
// information or as a parameter: the password comes from PGPASSWORD or
// ~/.pgpass (which pgx reads), so that it is never in agent.toml, on a
// command line or in a message. Its errors never repeat the URL.
func checkPostgresURL(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("%w: the PostgreSQL URL does not parse (not repeated here: it may hold a secret)", ErrBadInput)
	}
	if _, has := u.User.Password(); has {
		return fmt.Errorf("%w: the PostgreSQL URL %s holds a password: remove it and set PGPASSWORD (or a ~/.pgpass entry) instead", ErrBadInput, u.Redacted())
	}
	for k := range u.Query() {
		if strings.EqualFold(k, "password") {
			return fmt.Errorf("%w: the PostgreSQL URL holds a password parameter: remove it and set PGPASSWORD (or a ~/.pgpass entry) instead", ErrBadInput)
		}
	}
	return nil
}

// pgConnectTimeout bounds each connection's connect and startup when the
// URL sets no connect_timeout: a server that accepts and never answers
// (or an address that drops the packets) must not hold Open, a call's
// query or the change feed's reconnect, whose contexts may have no
// deadline. A variable for a test to shorten.
var pgConnectTimeout = 10 * time.Second

// openPostgres opens the store in the PostgreSQL database target names.
func openPostgres(ctx context.Context, target string, opts *Options) (*DB, error) {
	if err := checkPostgresURL(target); err != nil {
		return nil, fmt.Errorf("open state store: %w", err)
	}
	cfg, err := pgx.ParseConfig(target)
	if err != nil {
		return nil, fmt.Errorf("open state store %s: %w: %v", target, ErrBadInput, err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = pgConnectTimeout
	}
	where := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	db := sql.OpenDB(&pgConnector{inner: stdlib.GetConnector(*cfg), where: where})
	maxConns := opts.MaxConns
	if maxConns <= 0 {
		maxConns = 16
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := newDB(db, target, opts)
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	s.pg = &pgState{cfg: cfg, where: where, lock: pgWriteLockSQL(busy, kindOther), busy: busy, locks: map[string]string{}}
	for _, k := range []string{kindCards, kindSessions, kindSessionNew, kindOther} {
		s.pg.locks[k] = pgWriteLockSQL(busy, k)
	}
	s.pg.locks[kindAudit] = pgAuditLockSQL(busy)
	fail := func(err error) (*DB, error) {
		s.Close()
		return nil, fmt.Errorf("open state store %s: %w", target, err)
	}
	if err := db.PingContext(ctx); err != nil {
		return fail(err)
	}
	if err := s.migratePostgres(ctx); err != nil {
		return fail(err)
	}
	if err := s.checkPrivileges(ctx); err != nil {
		return fail(err)
	}
	if err := s.prepare(ctx); err != nil {
		return fail(err)
	}
	s.pg.feed = newChangeFeed(cfg, opts.Logger)
	// Listening before Open returns: a write of cards waits for the
	// acknowledgements, which reach this store through its own feed (one
	// not yet listening would make the write wait out feedBarrier).
	select {
	case <-s.pg.feed.ready:
	case <-time.After(feedBarrier):
	case <-ctx.Done():
	}
	dir := opts.JournalDir
	if dir == "" {
		if dir, err = defaultJournalDir(cfg); err != nil {
			return fail(err)
		}
	}
	if err := s.startJournal(ctx, dir, opts); err != nil {
		return fail(err)
	}
	return s, nil
}

// migratePostgres runs the migrations holding a session-level advisory
// lock on one connection: an instance that finds another migrating waits
// for it, then finds the schema up to date and runs nothing.
func (s *DB) migratePostgres(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, pgLockMigrate); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?)`, pgLockMigrate)
	// CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when the
	// table is there: a role that may only use the tables must not need it.
	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return err
	}
	m := migrator(conn)
	if exists {
		m = skipCreate{conn}
	}
	if err := s.migrate(ctx, m); err != nil {
		return s.privilegeHint(ctx, err)
	}
	return nil
}

// skipCreate is a migrator whose schema_migrations is known to exist.
type skipCreate struct{ *sql.Conn }

func (c skipCreate) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if strings.HasPrefix(query, "CREATE TABLE IF NOT EXISTS schema_migrations") {
		return driver.RowsAffected(0), nil
	}
	return c.Conn.ExecContext(ctx, query, args...)
}

// privilegeHint says which privilege is missing when PostgreSQL refused
// a migration for want of one (SQLSTATE 42501).
func (s *DB) privilegeHint(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		return err
	}
	var user, schema sql.NullString
	s.db.QueryRowContext(ctx, `SELECT current_user, current_schema()`).Scan(&user, &schema)
	return fmt.Errorf("%w: role %q may not create maiden's tables in schema %q: it needs CREATE on the schema (GRANT CREATE ON SCHEMA %s TO %s), or the schema must be migrated once by a role that has it: %w",
		ErrPrivilege, user.String, schema.String, schema.String, user.String, err)
}

// pgTablePrivileges are the privileges the store uses on each of its
// tables (the audit trail is only ever read and appended to, so an
// operator may deny UPDATE and DELETE on it).
var pgTablePrivileges = map[string][]string{
	"agents":            {"SELECT", "INSERT"},
	"tokens":            {"SELECT", "INSERT", "UPDATE"},
	"cards":             {"SELECT", "INSERT", "UPDATE"},
	"card_parents":      {"SELECT", "INSERT"},
	"revocations":       {"SELECT", "INSERT"},
	"counters":          {"SELECT", "UPDATE"},
	"schema_migrations": {"SELECT"},
	"audit":             {"SELECT", "INSERT"},
	"rate_buckets":      {"SELECT", "INSERT", "UPDATE"},
	"quota_windows":     {"SELECT", "INSERT", "UPDATE"},
	"card_spend":        {"SELECT", "INSERT", "UPDATE"},
	"approvals":         {"SELECT", "INSERT", "UPDATE"},
	"operators":         {"SELECT", "INSERT"},
	"operator_tokens":   {"SELECT", "INSERT", "UPDATE"},
	"audit_journal":     {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"sessions":          {"SELECT", "INSERT", "UPDATE"},
	"session_revisions": {"SELECT", "INSERT"},
	"boundary_requests": {"SELECT", "INSERT", "UPDATE"},
	"credential_tokens": {"SELECT", "INSERT", "UPDATE"},
	"feed_leases":       {"SELECT", "INSERT", "UPDATE", "DELETE"},
}

// TablePrivileges returns (a copy of) the privileges the PostgreSQL store
// uses on each of its tables, for `maiden state check`.
func TablePrivileges() map[string][]string {
	out := make(map[string][]string, len(pgTablePrivileges))
	for t, ps := range pgTablePrivileges {
		out[t] = slices.Clone(ps)
	}
	return out
}

// checkPrivileges names the first privilege the connecting role lacks on
// the store's tables (ErrPrivilege), so that Open fails with what to
// grant instead of a call failing later.
func (s *DB) checkPrivileges(ctx context.Context) error {
	var tables, privs []string
	for t, ps := range pgTablePrivileges {
		for _, p := range ps {
			tables, privs = append(tables, t), append(privs, p)
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT current_user, x.t, x.p FROM unnest(?::text[], ?::text[]) AS x(t, p)
WHERE to_regclass(x.t) IS NOT NULL AND NOT has_table_privilege(to_regclass(x.t), x.p) ORDER BY x.t, x.p`, tables, privs)
	if err != nil {
		return fmt.Errorf("check privileges: %w", err)
	}
	defer rows.Close()
	var missing []string
	var user string
	for rows.Next() {
		var t, p string
		if err := rows.Scan(&user, &t, &p); err != nil {
			return fmt.Errorf("check privileges: %w", err)
		}
		missing = append(missing, p+" on table "+t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check privileges: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: role %q lacks %s", ErrPrivilege, user, strings.Join(missing, ", "))
	}
	return nil
}

// defaultJournalDir is where a PostgreSQL store's audit journal lives when
// Options.JournalDir is not set: $XDG_STATE_HOME (or ~/.local/state)
// /maiden/audit-journal/HOST_PORT_DATABASE_HASH, HASH from host, port and
// database (never the user or a password), so that every process of this
// machine on one database shares one directory (and sweeps what a dead
// one left) and two databases never share one.
func defaultJournalDir(cfg *pgx.ConnConfig) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			return "", fmt.Errorf("audit journal: no home directory for its default place (%v): set the journal directory (Options.JournalDir)", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	key := fmt.Sprintf("%s\x00%d\x00%s", cfg.Host, cfg.Port, cfg.Database)
	sum := sha256.Sum256([]byte(key))
	clean := func(s string) string {
		return strings.Trim(regexp.MustCompile(`[^A-Za-z0-9.-]+`).ReplaceAllString(s, "-"), "-")
	}
	name := fmt.Sprintf("%s_%d_%s_%s", clean(cfg.Host), cfg.Port, clean(cfg.Database), hex.EncodeToString(sum[:6]))
	return filepath.Join(base, "maiden", "audit-journal", name), nil
}

// --- the driver wrapper -------------------------------------------------

// pgConnector makes pgx's database/sql connections, wrapped in pgConn.
type pgConnector struct {
	inner driver.Connector
	where string
}

func (c *pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot reach PostgreSQL at %s: %w", ErrUnavailable, c.where, err)
	}
	return &pgConn{Conn: conn.(*stdlib.Conn), where: c.where}, nil
}

func (c *pgConnector) Driver() driver.Driver { return c.inner.Driver() }

// pgConn is pgx's connection with every query rebound ('?' → $n) and the
// errors that mean the server went away marked ErrUnavailable.
type pgConn struct {
	*stdlib.Conn
	where string
}

func (c *pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.Conn.PrepareContext(ctx, rebind(query))
	if err != nil {
		return nil, c.check(err)
	}
	return &pgStmt{Stmt: st.(*stdlib.Stmt), c: c}, nil
}

// pgStmt is a prepared statement whose errors are checked as pgConn's.
type pgStmt struct {
	*stdlib.Stmt
	c *pgConn
}

func (s *pgStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.Stmt.ExecContext(ctx, args)
	return r, s.c.check(err)
}

func (s *pgStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.Stmt.QueryContext(ctx, args)
	return r, s.c.check(err)
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.Conn.ExecContext(ctx, rebind(query), args)
	return r, c.check(err)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.Conn.QueryContext(ctx, rebind(query), args)
	return r, c.check(err)
}

func (c *pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.BeginTx(ctx, opts)
	return tx, c.check(err)
}

// check marks ErrUnavailable the errors that mean the server or the
// connection is gone (the database restarted, stopped, or unreachable),
// naming where; it keeps driver.ErrBadConn reachable with errors.Is, so
// that database/sql still retries on a fresh connection.
func (c *pgConn) check(err error) error {
	if err == nil || !connectionLost(err) {
		return err
	}
	return fmt.Errorf("%w: PostgreSQL at %s: %w", ErrUnavailable, c.where, err)
}

func connectionLost(err error) bool {
	if errors.Is(err, ErrUnavailable) {
		return false // marked already
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-57P03: the server shuts
		// down or is starting.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ne) || strings.Contains(err.Error(), "conn closed")
}

// --- the dialect ----------------------------------------------------------

// sqlSegment is a piece of SQL text: code, or something whose content is
// not SQL (a string literal, a quoted identifier, a comment), which no
// rewriting may touch.
type sqlSegment struct {
	text string
	code bool
}

// splitSQL cuts q into code and non-code segments as PostgreSQL reads it:
// '...' strings (” inside is a quote; E'...' also takes backslash
// escapes), "..." identifiers, $tag$...$tag$ strings, -- comments to the
// end of the line and /* */ comments (which nest). Something left open
// runs to the end of q.
func splitSQL(q string) []sqlSegment {
	var out []sqlSegment
	start := 0
	emit := func(end int, code bool) {
		if end > start {
			out = append(out, sqlSegment{q[start:end], code})
		}
		start = end
	}
	for i := 0; i < len(q); {
		c := q[i]
		var end int
		switch {
		case c == '\'':
			escapes := i > 0 && (q[i-1] == 'E' || q[i-1] == 'e') && (i < 2 || !identChar(q[i-2]))
			end = endQuoted(q, i, '\'', escapes)
		case c == '"':
			end = endQuoted(q, i, '"', false)
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			end = strings.IndexByte(q[i:], '\n')
			if end < 0 {
				end = len(q)
			} else {
				end += i + 1
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			end = endComment(q, i)
		case c == '$' && (i == 0 || !identChar(q[i-1])):
			tag, ok := dollarTag(q[i:])
			if !ok {
				i++
				continue
			}
			if k := strings.Index(q[i+len(tag):], tag); k >= 0 {
				end = i + len(tag) + k + len(tag)
			} else {
				end = len(q)
			}
		default:
			i++
			continue
		}
		emit(i, true)
		emit(end, false)
		i = end
	}
	emit(len(q), true)
	return out
}

func identChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// endQuoted is the end of the quoted text starting at q[i] == quote (a
// doubled quote continues it; with escapes, so does a backslash's
// next byte).
func endQuoted(q string, i int, quote byte, escapes bool) int {
	for j := i + 1; j < len(q); j++ {
		switch {
		case escapes && q[j] == '\\':
			j++
		case q[j] == quote:
			if j+1 < len(q) && q[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(q)
}

// endComment is the end of the /* comment at q[i], nesting as PostgreSQL
// does.
func endComment(q string, i int) int {
	depth := 0
	for j := i; j+1 < len(q); j++ {
		switch {
		case q[j] == '/' && q[j+1] == '*':
			depth++
			j++
		case q[j] == '*' && q[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(q)
}

// dollarTag returns the opening tag ($$ or $name$) s starts with, if it
// is one (a $1 parameter is not).
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1], true
		case c >= '0' && c <= '9':
			if j == 1 {
				return "", false
			}
		case !identChar(c):
			return "", false
		}
	}
	return "", false
}

// rebind rewrites the '?' placeholders of query as PostgreSQL's $1, $2,
// ... in order; a '?' inside a string literal, a quoted identifier or a
// comment is left alone. (PostgreSQL's own ? operators, of jsonb, are
// therefore not usable in the store's SQL; nothing uses them.)
func rebind(query string) string {
	if strings.IndexByte(query, '?') < 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for _, seg := range splitSQL(query) {
		if !seg.code {
			b.WriteString(seg.text)
			continue
		}
		t := seg.text
		for {
			k := strings.IndexByte(t, '?')
			if k < 0 {
				b.WriteString(t)
				break
			}
			n++
			b.WriteString(t[:k])
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			t = t[k+1:]
		}
	}
	return b.String()
}

// pgTypeWords maps the column types of the portable migrations to
// PostgreSQL's: TEXT compares and sorts bytewise (COLLATE "C"), as in
// SQLite, whatever the database's collation; BLOB is BYTEA; REAL is
// SQLite's 8-byte float. Types are written in capitals in the migrations
// (names in lower case), which is how they are told apart.
var pgTypeWords = regexp.MustCompile(`\b(TEXT|BLOB|REAL)\b`)

// pgDDL is a migration statement for PostgreSQL.
func pgDDL(stmt string) string {
	var b strings.Builder
	for _, seg := range splitSQL(stmt) {
		if !seg.code {
			b.WriteString(seg.text)
			continue
		}
		b.WriteString(pgTypeWords.ReplaceAllStringFunc(seg.text, func(w string) string {
			switch w {
			case "TEXT":
				return `TEXT COLLATE "C"`
			case "BLOB":
				return "BYTEA"
			default:
				return "DOUBLE PRECISION"
			}
		}))
	}
	return b.String()
}

// --- the change feed ------------------------------------------------------

// The change feed's own names and timings.
const (
	// pgAckChannel carries the feeds' acknowledgements (PID:VALUE: the
	// feed on backend PID has taken in every change of kindCards up to
	// generation VALUE), which a writer of kindCards waits for.
	pgAckChannel = "maiden_store_ack"
	// pgFeedApp is the feeds' application_name: a writer finds the feeds
	// it must wait for in pg_stat_activity by it.
	pgFeedApp = "maiden-feed"
	// pgFeedsSQL lists the feeds' backends. PostgreSQL shows a session's
	// pid and application_name to every role (only the rest of the row is
	// for its own role or pg_read_all_stats), so instances that log in as
	// different unprivileged roles still find each other's feeds
	// (TestFeedsVisibleToAnotherRole).
	pgFeedsSQL = `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = ?`
	// feedLease is how long a feed trusts what it keeps after it last read
	// the generation counter (from before it sent the read): a feed that
	// is cut off, hung or slow stops trusting within it and reads the
	// counter on every call again.
	feedLease = 2 * time.Second
	// feedSync is how often a listening feed reads the counter (renewing
	// its lease) when no notification came.
	feedSync = feedLease / 4
	// feedBarrier bounds a writer's wait for the feeds' acknowledgements:
	// past the lease (and a margin for the counter read's own time), a feed
	// that did not acknowledge no longer trusts what it keeps.
	feedBarrier = feedLease + feedLease/4
	// pgFeedSyncSQL is a feed's counter read, which also records in
	// feed_leases, by the database's clock, until when the feed may trust
	// what it keeps after it ($1: feedBarrier in milliseconds, the lease
	// and a margin; the statement runs after the feed took the time its
	// lease counts from). The row is committed before the feed trusts
	// anything on it. A writer that no longer finds the feed's backend in
	// pg_stat_activity (it ended, and the instance may not know yet) waits
	// out the row instead of an acknowledgement (pgVanishedSQL).
	pgFeedSyncSQL = `WITH l AS (INSERT INTO feed_leases (pid, until_ms)
VALUES (pg_backend_pid(), (extract(epoch FROM clock_timestamp()) * 1000)::bigint + $1)
ON CONFLICT (pid) DO UPDATE SET until_ms = excluded.until_ms RETURNING 1)
SELECT value FROM counters, l WHERE name = 'generation'`
	// pgVanishedSQL is how many milliseconds from now the longest lease
	// of a feed that is no longer listening runs (0 if none): its backend
	// is gone from pg_stat_activity, and its instance may trust its epoch
	// until then (a partition: the server's goodbye lost on the way).
	pgVanishedSQL = `WITH t AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)
SELECT COALESCE(MAX(l.until_ms - t.ms), 0) FROM feed_leases l, t
WHERE l.until_ms > t.ms AND l.pid NOT IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = ?)`
)

// feedLeaseMigration is migration 10: until when each PostgreSQL change
// feed (by its backend's PID) trusts what its instance keeps, by the
// database's clock (unused on SQLite).
const feedLeaseMigration = `
CREATE TABLE feed_leases (
	pid      BIGINT PRIMARY KEY,
	until_ms BIGINT NOT NULL
)`

// changeFeed listens on its own connection for the notification every
// write transaction sends on commit (pgWriteLockSQL: KIND:VALUE), wakes
// WaitChange's waiters, and keeps the instance's cards epoch and sessions
// epoch: numbers that move with every change of kindCards, or of
// kindSessions, committed by any instance, read with no round trip while
// the feed is trusted (cardsEpoch, sessionsEpoch). When the connection
// drops it reconnects with a growing pause; meanwhile (and as a safety
// net always) waiters poll and the call path reads the counter.
//
// Why a revocation holds from the next call anywhere (the promise the
// counter read on every call used to keep), and a session's boundary
// narrowed or its end: a writer of kindCards or kindSessions returns
// only once every feed listening on the database (pg_stat_activity,
// application_name pgFeedApp) acknowledged the change, which each sends
// after moving its epoch; or, if one does not, after feedBarrier, by which
// time that feed's lease (counted from before its last counter read) has
// run out, so its instance reads the counter on every call. A feed that
// connects after the commit reads the counter before it trusts anything.
// A feed the writer does not find in pg_stat_activity (its backend ended
// at the server, which its instance may not have heard yet) is waited for
// by the lease it recorded at its last counter read (pgFeedSyncSQL,
// pgVanishedSQL).
type changeFeed struct {
	mu   sync.Mutex
	ch   chan struct{} // closed and replaced on every notification
	up   atomic.Bool   // listening now
	hold atomic.Bool   // tests: do not reconnect while set
	// leaseExtra (tests) lengthens the lease of this feed only, for a test
	// of what moves the epoch that must not see the lease lapse on a
	// loaded machine (a lapse is the safe fallback, not what it checks).
	leaseExtra atomic.Int64
	// syncExtra (tests) puts this feed's counter reads further apart: a
	// test of which kinds of change move which epoch through their
	// notifications, which a counter read that finds a change whose
	// notification is still on the way (it moves both) must not race.
	syncExtra atomic.Int64
	// pollUp (tests), if set, replaces pollFeedUp for this feed: a test
	// that a notification wakes a waiter sets it far beyond its own wait,
	// so only the notification can.
	pollUp atomic.Int64
	// syncs counts the counter reads (tests: the lease is renewed under a
	// stream of notifications).
	syncs atomic.Int64
	// notes counts the change notifications received (tests: which
	// writes wake the other instances).
	notes atomic.Int64
	// ackDelay (tests) holds this feed's acknowledgements back that long,
	// so that a writer's barrier has looked once and waits for them.
	ackDelay atomic.Int64
	// waitedOut counts the barriers this feed's writes ended without
	// every acknowledgement: at their deadline, or after waiting out a
	// vanished feed's lease (tests: while every feed listens, none does).
	waitedOut atomic.Int64
	// syncReading (tests), if set, is called in each counter read after
	// the lease's start was taken and before the read: the lease must run
	// from before the read, however long the read takes.
	syncReading atomic.Pointer[func()]
	// epochLoading (tests), if set, is called between trustedEpoch's
	// first look at the lease and its load of the epoch: where a reader
	// descheduled for longer than the lease's rest would load an epoch
	// the lease no longer vouches for.
	epochLoading func()
	cancel       context.CancelFunc
	done         chan struct{}
	log          *slog.Logger
	// pids are the server PIDs of the feed's last few connections (its
	// goroutine's until done is closed): their lease rows, which the feed
	// deletes as each connection ends, are deleted again at close through
	// the store's pool (pgState.close). Older ones' leases have run out:
	// reconnects are at least the 50 ms backoff apart, so maxFeedPIDs of
	// them span over 3 s, more than a lease (2.5 s); the feed's own sweep
	// deletes long-expired rows.
	pids []uint32

	start   time.Time    // the lease's clock: monotonic time since start
	trusted atomic.Int64 // the lease: until this much after start
	epoch   atomic.Int64 // moves with every change of kindCards seen
	sepoch  atomic.Int64 // moves with every change of kindSessions seen
	lastGen int64        // the counter as far as the feed knows (its goroutine's)

	ready     chan struct{} // closed once the feed first listens
	readyOnce sync.Once

	ackMu sync.Mutex
	acks  map[uint32]int64 // each feed's (by backend PID) highest acknowledged generation
	ackCh chan struct{}    // closed and replaced on every acknowledgement
}

func newChangeFeed(cfg *pgx.ConnConfig, logger *slog.Logger) *changeFeed {
	ctx, cancel := context.WithCancel(context.Background())
	f := &changeFeed{ch: make(chan struct{}), cancel: cancel, done: make(chan struct{}), log: logger,
		start: time.Now(), acks: map[uint32]int64{}, ackCh: make(chan struct{}), ready: make(chan struct{})}
	go f.run(ctx, cfg)
	return f
}

func (f *changeFeed) wake() {
	f.mu.Lock()
	close(f.ch)
	f.ch = make(chan struct{})
	f.mu.Unlock()
}

func (f *changeFeed) changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ch
}

func (f *changeFeed) close() {
	f.cancel()
	<-f.done
}

// cardsEpoch is the cards epoch, tagged (bit 62) so that it never equals
// a value of the counter, if the feed is trusted now.
func (f *changeFeed) cardsEpoch() (int64, bool) { return f.trustedEpoch(&f.epoch) }

// sessionsEpoch is the sessions epoch, as cardsEpoch.
func (f *changeFeed) sessionsEpoch() (int64, bool) { return f.trustedEpoch(&f.sepoch) }

func (f *changeFeed) trustedEpoch(epoch *atomic.Int64) (int64, bool) {
	if !f.up.Load() || time.Since(f.start) >= time.Duration(f.trusted.Load()) {
		return 0, false
	}
	if f.epochLoading != nil {
		f.epochLoading()
	}
	e := epoch.Load()
	if time.Since(f.start) >= time.Duration(f.trusted.Load()) {
		return 0, false
	}
	return e | 1<<62, true
}

// moveEpochs moves both epochs: a notification unread or of a kind this
// version does not know, or changes missed.
func (f *changeFeed) moveEpochs() {
	f.epoch.Add(1)
	f.sepoch.Add(1)
}

func (f *changeFeed) run(ctx context.Context, cfg *pgx.ConnConfig) {
	defer close(f.done)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		if f.hold.Load() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		c := cfg.Copy()
		c.RuntimeParams["application_name"] = pgFeedApp
		// The feed's one write is its lease (pgFeedSyncSQL), renewed
		// every feedSync: it need not wait for the WAL's flush (a crash
		// ends every feed's backend anyway, and the row's visibility to
		// writers does not depend on the flush), so two fsyncs a second
		// per instance are not added to the server's.
		c.RuntimeParams["synchronous_commit"] = "off"
		conn, err := pgx.ConnectConfig(ctx, c)
		if err == nil {
			err = f.listen(ctx, conn, func() { backoff = 50 * time.Millisecond })
			f.up.Store(false)
			f.trusted.Store(0)
			f.moveEpochs() // whatever it misses until it is back
			// Trusting nothing now, its lease row is a writer's wait for
			// nothing (a closed store's, above all): gone, if the
			// connection still answers.
			dctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			conn.Exec(dctx, `DELETE FROM feed_leases WHERE pid = pg_backend_pid()`)
			cancel()
			conn.Close(context.Background())
		}
		if ctx.Err() != nil {
			return
		}
		if f.log != nil {
			f.log.Warn("state store: change notifications lost; polling until they are back", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// listen runs one connection of the feed until it fails.
func (f *changeFeed) listen(ctx context.Context, conn *pgx.Conn, connected func()) error {
	if _, err := conn.Exec(ctx, "LISTEN "+pgChannel+"; LISTEN "+pgAckChannel); err != nil {
		return err
	}
	pid := conn.PgConn().PID()
	if len(f.pids) == maxFeedPIDs {
		f.pids = append(f.pids[:0], f.pids[1:]...)
	}
	f.pids = append(f.pids, pid)
	ack := func(gen int64) error {
		if d := f.ackDelay.Load(); d > 0 {
			time.Sleep(time.Duration(d)) // tests only
		}
		_, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", pgAckChannel, fmt.Sprintf("%d:%d", pid, gen))
		return err
	}
	// sync reads the counter: everything committed before it is taken in,
	// and the lease runs from before the read.
	f.lastGen = -1
	// Rows of feeds long gone (killed instances; a reused PID overwrites
	// its own): none can be trusted by anyone now.
	if _, err := conn.Exec(ctx, `DELETE FROM feed_leases WHERE until_ms < (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 60000`); err != nil {
		return err
	}
	// next is when the lease is renewed again: every feedSync, whether
	// or not notifications come meanwhile (a steady stream of them, such
	// as another instance's writes under load, must not let it lapse:
	// every call would then read the counter).
	var next time.Time
	sync := func() error {
		sent := time.Since(f.start)
		next = time.Now().Add(feedSync + time.Duration(f.syncExtra.Load()))
		if h := f.syncReading.Load(); h != nil {
			(*h)()
		}
		var g int64
		if err := conn.QueryRow(ctx, pgFeedSyncSQL, feedBarrier.Milliseconds()).Scan(&g); err != nil {
			return err
		}
		f.syncs.Add(1)
		if g != f.lastGen {
			f.moveEpochs()
			f.lastGen = g
			if err := ack(g); err != nil {
				return err
			}
		}
		f.trusted.Store(int64(sent + feedLease + time.Duration(f.leaseExtra.Load())))
		return nil
	}
	if err := sync(); err != nil {
		return err
	}
	f.up.Store(true)
	f.readyOnce.Do(func() { close(f.ready) })
	connected()
	f.wake() // whatever was committed while no one listened
	for {
		wait := time.Until(next)
		if wait <= 0 {
			if err := sync(); err != nil { // renew the lease
				return err
			}
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && wctx.Err() != nil && n == nil:
			continue // time to renew
		case err != nil:
			return err
		}
		switch n.Channel {
		case pgChannel:
			f.notes.Add(1)
			kind, v, ok := parseFeedPayload(n.Payload)
			moved := true
			switch {
			case ok && kind == kindCards:
				f.epoch.Add(1)
			case ok && kind == kindSessions:
				f.sepoch.Add(1)
			case ok && (kind == kindOther || kind == kindSessionNew):
				moved = false
			default:
				// One it cannot read, or of a kind it does not know (a
				// newer maiden's on the same database): whatever it
				// changed, nothing kept is trusted past it.
				f.moveEpochs()
			}
			if moved { // the epoch before the acknowledgement
				if err := ack(v); err != nil {
					return err
				}
			}
			f.lastGen = max(f.lastGen, v)
			f.wake()
		case pgAckChannel:
			if p, v, ok := parseAck(n.Payload); ok {
				f.ackMu.Lock()
				if v > f.acks[p] {
					f.acks[p] = v
				}
				close(f.ackCh)
				f.ackCh = make(chan struct{})
				f.ackMu.Unlock()
			}
		}
	}
}

// parseFeedPayload reads a notification's KIND:VALUE.
func parseFeedPayload(p string) (kind string, v int64, ok bool) {
	kind, num, found := strings.Cut(p, ":")
	v, err := strconv.ParseInt(num, 10, 64)
	return kind, v, found && err == nil
}

// parseAck reads an acknowledgement's PID:VALUE.
func parseAck(p string) (pid uint32, v int64, ok bool) {
	a, b, found := strings.Cut(p, ":")
	n, err1 := strconv.ParseUint(a, 10, 32)
	v, err2 := strconv.ParseInt(b, 10, 64)
	return uint32(n), v, found && err1 == nil && err2 == nil
}

// barrier returns once every feed listening on the database has
// acknowledged generation gen (a change of kindCards or kindSessions this
// store just committed) and the lease of every feed no longer listening has run out
// (feed_leases), or after feedBarrier, by when a feed that did not can no
// longer trust what it keeps (see changeFeed). A feed's acknowledgement
// reaches this store through its own feed; if that is down, the wait is
// the whole bound.
func (f *changeFeed) barrier(ctx context.Context, db *sql.DB, gen int64) {
	start := time.Now()
	deadline := time.NewTimer(feedBarrier)
	defer deadline.Stop()
	var pids []uint32
	rows, err := db.QueryContext(context.WithoutCancel(ctx), pgFeedsSQL, pgFeedApp)
	if err == nil {
		for rows.Next() {
			var p int64
			if rows.Scan(&p) == nil {
				pids = append(pids, uint32(p))
			}
		}
		err = rows.Err()
		rows.Close()
	}
	// A feed no longer listed has ended at the server, but its instance
	// may not know (the server's goodbye lost in a partition) and trust
	// its epoch until its lease runs out: wait for that instead of an
	// acknowledgement that cannot come (pgVanishedSQL; read after the
	// listing, so a feed that ended in between is one or the other).
	var vanishedMS int64
	if err == nil {
		err = db.QueryRowContext(context.WithoutCancel(ctx), pgVanishedSQL, pgFeedApp).Scan(&vanishedMS)
	}
	// From now: the database's clock read the remaining time before the
	// answer reached here. (The lease a row records is the feed's own and
	// a margin, feedBarrier from its counter read, so the bound below
	// still covers it: that read was before the feed ended.)
	vanished := time.Now().Add(min(time.Duration(vanishedMS)*time.Millisecond, feedBarrier-time.Since(start)))
	lapsed := false
	for {
		f.ackMu.Lock()
		ch := f.ackCh
		missing := 0
		for _, p := range pids {
			if f.acks[p] < gen {
				missing++
			}
		}
		f.ackMu.Unlock()
		wait := time.Until(vanished)
		if err == nil && missing == 0 && wait <= 0 {
			if lapsed {
				f.waitedOut.Add(1)
			}
			return
		}
		var lapse <-chan time.Time
		if err == nil && missing == 0 {
			lapse = time.After(wait)
		}
		select {
		case <-ch:
		case <-lapse:
			lapsed = true
		case <-deadline.C:
			f.waitedOut.Add(1)
			if f.log != nil {
				f.log.Warn("state store: not every instance acknowledged a change of cards or tokens; waited until their leases ran out", "missing", missing, "err", err)
			}
			return
		}
	}
}

// Polling intervals of WaitChange: while the change feed listens (a
// safety net against a connection that died silently), without it, and
// on SQLite (Generation is a read of shared memory there).
const (
	pollFeedUp   = time.Second
	pollFeedDown = 100 * time.Millisecond
	pollSQLite   = 50 * time.Millisecond
)

// WaitChange returns once Generation differs from gen, with its new
// value: a change committed by any process or instance. On PostgreSQL a
// notification sent on commit wakes it at once, with a poll every
// second as a safety net, every 100 ms while the notification connection
// is down; on SQLite it polls the WAL index every 50 ms. It returns ctx's
// error when ctx ends first, and the store's error when Generation
// cannot be read (the store is unavailable: the caller decides whether
// to wait on).
func (s *DB) WaitChange(ctx context.Context, gen int64) (int64, error) {
	for {
		var ch <-chan struct{}
		poll := pollSQLite
		if s.pg != nil && s.pg.feed != nil {
			ch = s.pg.feed.changed() // before the read: a change after it wakes us
			poll = pollFeedDown
			if s.pg.feed.up.Load() {
				poll = pollFeedUp
				if d := s.pg.feed.pollUp.Load(); d > 0 {
					poll = time.Duration(d)
				}
			}
		}
		g, err := s.Generation(ctx)
		if err != nil {
			return 0, err
		}
		if g != gen {
			return g, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}
