package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Options configure a store. nil means the defaults.
type Options struct {
	// BusyTimeout is how long a writer waits for another one (in this or
	// another process or instance) before failing; zero means 10 s.
	BusyTimeout time.Duration
	// Now is the clock; nil means time.Now (tests move it).
	Now func() time.Time
	// Synchronous is SQLite's synchronous setting: "" or "FULL" (a commit
	// that returned is on disk), or "NORMAL" (in WAL mode a commit
	// survives the process's crash, kill -9 included, but the last
	// commits may be lost on power loss or an OS crash; commits are then
	// several times cheaper: see BenchmarkAuditAppend). A PostgreSQL
	// store ignores it: the server's synchronous_commit decides.
	Synchronous string

	// JournalSync makes the audit journal's Append return only after an
	// fsync covering its record (concurrent appenders share one), so that
	// an acknowledged record also survives power loss and an OS crash.
	// false (the default): Append returns once the record is in the
	// file's page cache (copied into a shared mapping of it, or written
	// with write(2)), which survives the process's crash, kill -9
	// included, as synchronous=NORMAL does.
	JournalSync bool
	// JournalInterval is how long the journal's ingester lets records
	// gather before it moves them into the chain in one transaction; zero
	// means 20 ms. Every batch is a commit, so it is also the fastest
	// rate at which journal ingestion changes Generation.
	JournalInterval time.Duration
	// JournalBacklog bounds the bytes written to the journal and not yet
	// ingested (the store cannot keep up, or cannot be written), with the
	// room reserved for records to come (Journal.Reserve): Append and
	// Reserve refuse beyond it (ErrJournalFull). Zero means 64 MiB.
	JournalBacklog int64
	// Logger receives what the store reports on its own (journal lines
	// refused or torn, ingestion failures); nil discards it.
	Logger *slog.Logger

	// JournalDir (PostgreSQL only) is the directory of this process's
	// audit journal files. It must be local and survive a restart of
	// this process (what a process killed before ingesting leaves there
	// is ingested by the next one to open the store with the same
	// directory). Empty means $XDG_STATE_HOME (or ~/.local/state)
	// /maiden/audit-journal/HOST_PORT_DATABASE_HASH, one directory per
	// database for every process of the machine. A SQLite store's journal
	// is always beside its file (PATH.audit).
	JournalDir string
	// MaxConns (PostgreSQL only) bounds the pool's connections to the
	// database; zero means 16. (The change feed holds one more.)
	MaxConns int

	journalRotate int64  // journal file size that starts a new one (tests); zero means 8 MiB
	journalWindow int64  // how much of a file one batch reads at first (tests); zero means 1 MiB
	journalNoMap  bool   // write the journal with write(2) even where it can be mapped (tests)
	openBusy      func() // called when Open first finds a SQLite file busy (tests)
}

// DB is the store: in one SQLite file, or in a PostgreSQL database shared
// by several maiden instances (see the package documentation). Both run
// the same code and the same SQL; what differs is in Open, write and
// writeKeep (how the write lock is taken), migrate (how concurrent
// migrations are kept apart) and Generation.
type DB struct {
	db    *sql.DB
	path  string // the file, or the PostgreSQL URL (which never holds a password)
	now   func() time.Time
	specs specCache
	gen   *sql.Stmt // the generation read, prepared once: it is on every call's path
	pin   *sql.Conn // SQLite: held open so that the WAL index (shm) stays valid
	shm   *shmWatch // nil when the WAL index cannot be mapped (or PostgreSQL): Generation asks the database
	pg    *pgState  // PostgreSQL only (postgres.go); nil for SQLite
	// runner names this process in the approved calls it starts (see
	// MarkInterruptedOnStartup).
	runner string
	auditQ auditGroup // AppendAuditGroup's queue
	// auditHead and auditInsert are appendAudit's statements, prepared once.
	auditHead, auditInsert *sql.Stmt
	auditInsertRows        []*sql.Stmt // [i] inserts 1<<i records (journal ingestion: prepareAuditRows)
	journal                *Journal    // the audit journal (journal.go)
	ingestBufs             ingestBufs  // ingestBatch's buffers, kept between batches (journal.go)
	cardsGen               atomic.Pointer[cardsGenAt]
	tokens                 tokenCache // Authenticate's (ops.go)
	// testHookChainRead, when set (tests only), is called by lockedChain
	// once it has read what a chain's cards spent, its budget locks held.
	testHookChainRead func()
}

// SQLite is DB's former name, kept for code written against it.
type SQLite = DB

var _ Store = (*DB)(nil)

// IsPostgres reports whether target names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// Open opens the store at target and brings its schema up to date: a
// SQLite file path (created if needed), or a PostgreSQL URL
// (postgres://... or postgresql://..., see openPostgres; the password
// never in the URL). A schema newer than this binary is ErrSchemaTooNew;
// the store is then left as it is.
func Open(ctx context.Context, target string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	if IsPostgres(target) {
		return openPostgres(ctx, target, opts)
	}
	return openSQLite(ctx, target, opts)
}

func openSQLite(ctx context.Context, path string, opts *Options) (*DB, error) {
	if path == "" || strings.ContainsAny(path, "?#\x00") {
		return nil, fmt.Errorf("open state store %q: %w: the path must be non-empty and hold no '?', '#' or NUL", path, ErrBadInput)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// FULL: a commit is on disk before Grant returns (WAL's NORMAL could lose
	// the last commits on power loss; a kill -9 loses nothing either way).
	sync := "FULL"
	switch strings.ToUpper(opts.Synchronous) {
	case "", "FULL":
	case "NORMAL":
		sync = "NORMAL"
	default:
		return nil, fmt.Errorf("open state store %s: %w: synchronous %q is neither FULL nor NORMAL", path, ErrBadInput, opts.Synchronous)
	}
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "foreign_keys(1)")
	// Every transaction takes the write lock when it begins: a deferred
	// transaction that reads and then writes fails at once with
	// SQLITE_BUSY when another process wrote in between (the busy timeout
	// does not apply to that upgrade), which is the classic multi-process
	// failure of WAL databases.
	q.Set("_txlock", "immediate")
	// Checked and, when new, created private before SQLite opens it
	// (statefile_unix.go).
	if err := prepareStateFile(path); err != nil {
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	s := newDB(db, path, opts)
	// Every statement of the open retries while the file is busy, up to
	// busy: SQLite's busy handler does not cover all of them (see
	// busyRetrier), and a store being created or migrated by another
	// process is no reason to fail.
	retry := busyRetrier{patience: busy, onBusy: opts.openBusy}
	if err := retry.do(ctx, func() error { return s.migrateSQLite(ctx) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	if err := retry.do(ctx, func() error { return s.prepare(ctx) }); err != nil {
		s.Close()
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	// One connection stays open (and has read through the WAL) for the
	// store's life, so the WAL index exists and is not rebuilt under us.
	err = retry.do(ctx, func() error {
		var err error
		if s.pin == nil {
			if s.pin, err = db.Conn(ctx); err != nil {
				return err
			}
		}
		var g int64
		return s.pin.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'generation'`).Scan(&g)
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	if w, err := openShm(path); err == nil {
		s.shm = w
	}
	if err := s.startJournal(ctx, path+".audit", opts); err != nil {
		s.Close()
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	return s, nil
}

func newDB(db *sql.DB, path string, opts *Options) *DB {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &DB{db: db, path: path, now: now, runner: runnerID()}
}

// prepare prepares the statements on every call's path once.
func (s *DB) prepare(ctx context.Context) (err error) {
	if s.gen, err = s.db.PrepareContext(ctx, `SELECT value FROM counters WHERE name = 'generation'`); err == nil {
		if s.auditHead, err = s.db.PrepareContext(ctx, auditHeadSQL); err == nil {
			if s.auditInsert, err = s.db.PrepareContext(ctx, auditInsertSQL); err == nil {
				err = s.prepareAuditRows(ctx)
			}
		}
	}
	return err
}

// startJournal makes the audit journal in dir and ingests completely the
// journals of processes that died, before anything reads the chain.
func (s *DB) startJournal(ctx context.Context, dir string, opts *Options) error {
	s.journal = newJournal(s, dir, opts)
	err := s.sweepJournals(ctx)
	if err != nil && isBusy(err) {
		// Another process held the write lock for longer than the busy
		// timeout (it may be ingesting a large journal of its own). What
		// was not ingested stays in its file, ingested in whole batches
		// or not at all: the ingester sweeps again at its first run, the
		// next Open too. No reason to refuse the store.
		s.journal.sweepSoon.Store(true)
		s.journal.log.Warn("audit journal: the store is busy; journals of gone processes left for later", "dir", dir, "err", err)
		return nil
	}
	return err
}

// Close closes the database, after ingesting what the audit journal holds
// (what it cannot ingest stays in the journal's files, for the next Open
// after this process is gone).
func (s *DB) Close() error {
	var jerr error
	if s.journal != nil {
		jerr = s.journal.close()
	}
	if s.pg != nil {
		s.pg.close(s.db)
	}
	s.shm.close()
	if s.pin != nil {
		s.pin.Close()
	}
	for _, st := range append([]*sql.Stmt{s.gen, s.auditHead, s.auditInsert}, s.auditInsertRows...) {
		if st != nil {
			st.Close()
		}
	}
	return errors.Join(jerr, s.db.Close())
}

// Path is the store's file, or its PostgreSQL URL.
func (s *DB) Path() string { return s.path }

// migrations are the schema, one step per version, in portable SQL (the
// PostgreSQL store runs the same text, through pgDDL): TEXT, BIGINT and
// INTEGER columns only, times as Unix nanoseconds, no AUTOINCREMENT, no
// SQLite functions. Never edit a released step; add one.
var migrations = []string{
	1: `
CREATE TABLE agents (
	name       TEXT PRIMARY KEY,
	created_at BIGINT NOT NULL
);
CREATE TABLE tokens (
	id         TEXT PRIMARY KEY,
	agent      TEXT NOT NULL REFERENCES agents(name),
	hash       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT
);
CREATE INDEX tokens_agent ON tokens(agent);
CREATE TABLE cards (
	id         TEXT PRIMARY KEY,
	seq        BIGINT NOT NULL UNIQUE,
	holder     TEXT NOT NULL REFERENCES agents(name),
	spec       TEXT NOT NULL,
	parents    TEXT NOT NULL,
	system     INTEGER NOT NULL,
	manager    TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT
);
CREATE INDEX cards_holder ON cards(holder);
CREATE TABLE card_parents (
	child  TEXT NOT NULL REFERENCES cards(id),
	parent TEXT NOT NULL REFERENCES cards(id),
	PRIMARY KEY (child, parent)
);
CREATE INDEX card_parents_parent ON card_parents(parent);
CREATE TABLE revocations (
	card_id    TEXT PRIMARY KEY REFERENCES cards(id),
	revoked_at BIGINT NOT NULL,
	actor      TEXT NOT NULL,
	cause      TEXT NOT NULL
);
CREATE TABLE counters (
	name  TEXT PRIMARY KEY,
	value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('generation', 0);
`,
	// 2: the audit trail (hash-chained, append-only), rate-limit buckets,
	// quota windows, and durable approvals (audit.go, limits.go,
	// approvals.go). On SQLite, audit's seq BIGINT PRIMARY KEY is a unique
	// index beside the rowid (sqlite_autoindex_audit_1), not the rowid
	// itself: measured at 2-4 % of an INSERT (entries of ~11 bytes against
	// rows of ~700), too little for a migration that copies the whole
	// trail under the write lock (README, the row of Journal().Append).
	2: `
CREATE TABLE audit (
	seq    BIGINT PRIMARY KEY,
	at     BIGINT NOT NULL,
	kind   TEXT NOT NULL,
	actor  TEXT NOT NULL,
	agent  TEXT NOT NULL,
	tool   TEXT NOT NULL,
	body   TEXT NOT NULL,
	prev   TEXT NOT NULL,
	hash   TEXT NOT NULL
);
CREATE TABLE rate_buckets (
	bucket TEXT PRIMARY KEY,
	tat    BIGINT NOT NULL
);
CREATE TABLE quota_windows (
	quota  TEXT PRIMARY KEY,
	start  BIGINT NOT NULL,
	used   BIGINT NOT NULL
);
CREATE TABLE approvals (
	id              TEXT PRIMARY KEY,
	agent           TEXT NOT NULL,
	session         TEXT NOT NULL,
	tool            TEXT NOT NULL,
	rendered        TEXT NOT NULL,
	digest          TEXT NOT NULL,
	middleware      TEXT NOT NULL,
	reason          TEXT NOT NULL,
	card_generation BIGINT NOT NULL,
	created_at      BIGINT NOT NULL,
	expires_at      BIGINT NOT NULL,
	state           TEXT NOT NULL,
	decided_by      TEXT NOT NULL,
	decided_at      BIGINT,
	decision_reason TEXT NOT NULL,
	runner          TEXT NOT NULL,
	started_at      BIGINT,
	done_at         BIGINT
);
CREATE INDEX approvals_call ON approvals(agent, tool, digest);
CREATE INDEX approvals_state ON approvals(state);
`,
	// 3: operators and their bearer tokens (operators.go), a principal
	// kind of their own: no agent token is ever read from this table.
	3: `
CREATE TABLE operators (
	name       TEXT PRIMARY KEY,
	created_at BIGINT NOT NULL
);
CREATE TABLE operator_tokens (
	id         TEXT PRIMARY KEY,
	operator   TEXT NOT NULL REFERENCES operators(name),
	hash       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT
);
CREATE INDEX operator_tokens_operator ON operator_tokens(operator);
`,
	// 4: how far the audit journals' ingestion got in each journal file
	// (journal.go), updated in the transaction that appends the file's
	// records to the chain.
	4: `
CREATE TABLE audit_journal (
	file       TEXT PRIMARY KEY,
	bytes      BIGINT NOT NULL,
	next_line  BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
`,
	5: sessionsMigration, // sessions, their boundary revisions, boundary requests (sessions.go)
	// 6: an operator token's role (operators.go): "operator" (the inbox, and
	// /metrics) or "metrics" (/metrics only: a scraper's).
	6: `ALTER TABLE operator_tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'operator'`,
	// 7: what an approval is bound to besides the call (approvals.go): the
	// tool's code identity and the effective policy the human was shown.
	// Requests made before this step have both empty, which matches no
	// tool: such an approval never releases a call (it asks again).
	7: `
ALTER TABLE approvals ADD COLUMN tool_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN policy TEXT NOT NULL DEFAULT ''
`,
	8:  budgetMigration,          // what each card has spent of its budgets (budgets.go)
	9:  credentialTokenMigration, // OAuth 2.0 tokens shared by instances, sealed (credtokens.go)
	10: feedLeaseMigration,       // how long each PostgreSQL change feed trusts what it keeps (postgres.go)
	// 11: the credential a session is bound to besides its agent
	// (sessions.go, BindSession): a 2026-07-28 handle is usable only with
	// the token that opened it. Sessions from before this step have none,
	// so no token can name them as a handle.
	11: `ALTER TABLE sessions ADD COLUMN credential TEXT NOT NULL DEFAULT ''`,
	// 12: whether the rule that asked for an approval let it be approved
	// "always" (approvals.go, Approval.AllowAlways), kept with the request
	// because the rule's name is its position in agent.toml. Requests from
	// before this step have 0: they can be approved once, not always.
	12: `ALTER TABLE approvals ADD COLUMN allow_always BIGINT NOT NULL DEFAULT 0`,
}

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int { return len(migrations) - 1 }

// busyRetrier runs the statements of an open again while the SQLite file
// is busy, for up to patience in all. SQLite does not always call the
// busy handler: a connection's first PRAGMA journal_mode=WAL on a file not
// yet in WAL mode (being created by another process) upgrades a read to a
// write, and a file whose WAL index another process is setting up can
// answer SQLITE_BUSY at once; either way a statement fails at once with
// SQLITE_BUSY, which here only means "another maiden is creating,
// migrating or writing this file: wait".
type busyRetrier struct {
	patience time.Duration
	onBusy   func() // called once, at the first busy answer (tests)
	start    time.Time
}

func (r *busyRetrier) do(ctx context.Context, f func() error) error {
	if r.start.IsZero() {
		r.start = time.Now()
	}
	deadline := r.start.Add(r.patience)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := f()
		if err == nil || !isBusy(err) {
			return err
		}
		if r.onBusy != nil {
			r.onBusy()
			r.onBusy = nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: gave up after waiting %s for another process's write (Options.BusyTimeout): %w",
				ErrLocked, r.patience, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (or an extended code
// of it).
func isBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 5
}

// migrateSQLite brings a SQLite file's schema up to date. A file already
// at this binary's version needs no write: the version is read first,
// without the write lock, so that opening a store another process is
// writing (a large journal being ingested, a burst of grants) does not
// wait for it. Only a file to create or migrate takes the write lock.
func (s *DB) migrateSQLite(ctx context.Context) error {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if n == 1 {
		var v sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		switch cur := int(v.Int64); {
		case cur > SchemaVersion():
			return schemaTooNew(cur)
		case cur == SchemaVersion():
			return nil
		}
	}
	return s.migrate(ctx, s.db)
}

func schemaTooNew(cur int) error {
	return fmt.Errorf("%w: the store is at version %d, this maiden knows up to %d (upgrade maiden, or use another -state store)",
		ErrSchemaTooNew, cur, SchemaVersion())
}

// migrate applies the missing steps, each in its own transaction with its
// version row, so that several processes opening one new file at once
// serialise on the write lock and each step runs once.
// migrator is what migrate runs on: the pool (SQLite), or the one
// connection that holds the migration lock (PostgreSQL).
type migrator interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

func (s *DB) migrate(ctx context.Context, m migrator) error {
	if _, err := m.ExecContext(ctx, s.ddl(`CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`)); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for {
		done, err := s.migrateOne(ctx, m)
		if err != nil || done {
			return err
		}
	}
}

func (s *DB) migrateOne(ctx context.Context, m migrator) (done bool, err error) {
	tx, err := m.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var v sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	cur := int(v.Int64)
	switch {
	case cur > SchemaVersion():
		return false, schemaTooNew(cur)
	case cur == SchemaVersion():
		return true, nil
	}
	next := cur + 1
	for _, stmt := range strings.Split(migrations[next], ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, s.ddl(stmt)); err != nil {
			return false, fmt.Errorf("migration %d: %w", next, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, next, s.now().UnixNano()); err != nil {
		return false, fmt.Errorf("migration %d: %w", next, err)
	}
	return false, tx.Commit()
}

// ddl is a migration statement in the store's dialect: as written for
// SQLite; for PostgreSQL, with pgDDL's type mapping.
func (s *DB) ddl(stmt string) string {
	if s.pg != nil {
		return pgDDL(stmt)
	}
	return stmt
}

// write runs fn in one write transaction and advances the generation
// counter with it; fn's error rolls everything back. It is for changes of
// agents, tokens, cards and operators (kindCards): on PostgreSQL it
// returns only once every instance listening on the database has taken
// the change in (or can no longer trust what it keeps: see
// changeFeed.barrier), so that a call anywhere after a revocation returned
// sees it.
func (s *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeTx(ctx, kindCards, fn)
}

// writeSessions is write for sessions and their boundary requests
// (kindSessions): on PostgreSQL they do not invalidate the wallets other
// instances keep.
func (s *DB) writeSessions(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeTx(ctx, kindSessions, fn)
}

// writeSessionNew is writeSessions for a transaction that creates a
// session and changes no other (kindSessionNew): no process or instance
// can keep a session that did not exist, so it moves neither
// SessionsGeneration nor CardsGeneration (on SQLite the counters table is
// left alone; on PostgreSQL no epoch moves and no acknowledgement is
// waited for), and the first call of a new session is not made to wait
// for every instance.
func (s *DB) writeSessionNew(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeTx(ctx, kindSessionNew, fn)
}

// writeKeep runs fn in one write transaction without advancing the
// generation counter: for writes that change no card, token or agent
// (approvals, a session's last use; the audit trail's: writeAudit), so that they do not invalidate a
// pinned wallet on the fallback path. (SQLite's own change counter, which
// Generation reads, changes with them anyway; on PostgreSQL, where the
// counter is all there is, every commit advances it, and its notification
// says what kind of change it was: see writeTx and CardsGeneration.)
func (s *DB) writeKeep(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeTx(ctx, kindOther, fn)
}

// writeAudit is writeKeep for the audit trail's own appends (kindAudit):
// on PostgreSQL it takes the write lock (the chain's head, then seq+1,
// needs one order) but neither advances the counter nor notifies, so
// ingesting audit records wakes no other instance and moves no
// Generation. (On SQLite every commit still changes the WAL index's
// counter that Generation reads.)
func (s *DB) writeAudit(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeTx(ctx, kindAudit, fn)
}

// writeRows runs fn in one write transaction that on PostgreSQL takes no
// write lock, advances no counter and sends no notification: for writes
// whose correctness rests on row locks alone (fn locks the rows it reads
// then writes: FOR UPDATE, or an atomic ON CONFLICT DO UPDATE), so that
// writers of different rows run side by side across instances (rate
// limits, quotas, budget charges). On SQLite it is writeKeep (the file
// has one writer anyway).
func (s *DB) writeRows(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if s.pg == nil {
		return s.writeKeep(ctx, fn)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT set_config('lock_timeout', ?, true)`, fmt.Sprintf("%dms", s.pg.busy.Milliseconds())); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// forUpdate is the clause that locks the rows a SELECT reads until the
// transaction ends (PostgreSQL); on SQLite the transaction holds the
// file's write lock already.
func (s *DB) forUpdate() string {
	if s.pg != nil {
		return " FOR UPDATE"
	}
	return ""
}

// writeTx is write, writeSessions and writeKeep. Every write transaction
// holds the one write lock from its start: SQLite's (BEGIN IMMEDIATE, from
// the DSN), or on PostgreSQL a transaction-scoped advisory lock taken
// first thing (pgWriteLockSQL, which also advances the generation and
// notifies the kind of change), so that writers of every instance run one
// at a time exactly as SQLite's do, and everything built on that (a read
// then a write, MAX+1, the audit head) holds unchanged.
func (s *DB) writeTx(ctx context.Context, kind string, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var gen int64
	switch {
	case s.pg != nil && kind == kindAudit:
		if _, err := tx.ExecContext(ctx, s.pg.locks[kind]); err != nil {
			return s.pg.lockError(err)
		}
	case s.pg != nil:
		lock := s.pg.lock
		if kind != kindOther {
			lock = s.pg.locks[kind]
		}
		if err := tx.QueryRowContext(ctx, lock).Scan(&gen); err != nil {
			return s.pg.lockError(err)
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	// On PostgreSQL the lock statement advanced the counter and sent the
	// notification (both take effect on commit only).
	if kind != kindOther && kind != kindAudit && kind != kindSessionNew && s.pg == nil {
		if _, err := tx.ExecContext(ctx, `UPDATE counters SET value = value + 1 WHERE name = 'generation'`); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if (kind == kindCards || kind == kindSessions) && s.pg != nil && s.pg.feed != nil {
		s.pg.feed.barrier(ctx, s.db, gen)
	}
	return nil
}

// Generation returns a value that changes with every committed change by
// any process. On SQLite it reads SQLite's own change counter in the WAL
// index (shared memory, a few nanoseconds: see shmWatch), tagged with bit
// 63 so that it can never equal a value of the counters table, which is
// read instead when the WAL index cannot be read. On PostgreSQL it is the
// counters table, which every write transaction of every instance
// advances: one indexed read per call.
func (s *DB) Generation(ctx context.Context) (int64, error) {
	if s.shm != nil {
		for range 3 { // a writer may be between the header's two copies
			if v, ok := s.shm.version(); ok {
				// Negative, so it never equals the table's counter that
				// the fallback below returns.
				return int64(v | 1<<63), nil
			}
		}
	}
	var g int64
	err := s.gen.QueryRowContext(ctx).Scan(&g)
	if err != nil {
		return 0, fmt.Errorf("read the store's generation: %w", err)
	}
	return g, nil
}

// CardsGeneration is a value that changes whenever agents, tokens, cards
// or operators change (kindCards: what a wallet and a token depend on),
// by any process; sessions, rate limits, budgets, approvals and the audit
// trail do not move it (on SQLite sessions do). Compare it for equality
// only. A caller may keep a wallet or a token's owner while it is
// unchanged.
//
// On PostgreSQL it is the change feed's cards epoch while the feed is
// trusted, with no round trip (see changeFeed for why a revocation still
// holds from the next call on every instance), and the counter otherwise.
// On SQLite it is the counters table (which only write moves), read
// again only when SQLite's own change counter in shared memory moved.
func (s *DB) CardsGeneration(ctx context.Context) (int64, error) {
	if s.pg != nil {
		if s.pg.feed != nil {
			if e, ok := s.pg.feed.cardsEpoch(); ok {
				return e, nil
			}
		}
		s.pg.genReads.Add(1)
		return s.Generation(ctx)
	}
	if s.shm == nil {
		return s.Generation(ctx) // the counters table
	}
	for range 3 {
		v, ok := s.shm.version()
		if !ok {
			continue
		}
		if c := s.cardsGen.Load(); c != nil && c.shm == v {
			return c.gen, nil
		}
		var g int64
		if err := s.gen.QueryRowContext(ctx).Scan(&g); err != nil {
			return 0, fmt.Errorf("read the store's generation: %w", err)
		}
		// Read after v: g holds at least every change up to v.
		s.cardsGen.Store(&cardsGenAt{shm: v, gen: g})
		return g, nil
	}
	var g int64
	if err := s.gen.QueryRowContext(ctx).Scan(&g); err != nil {
		return 0, fmt.Errorf("read the store's generation: %w", err)
	}
	return g, nil
}

// SessionsGeneration returns a value that changes with every committed
// change to a session or a boundary request by any process or instance:
// what a session a call read may be kept on (internal/session's cache).
// On PostgreSQL it is the change feed's sessions epoch while the feed is
// trusted, with no round trip (a writer of sessions returns only once
// every instance's feed has moved it: changeFeed), and the counter
// otherwise. On SQLite it is CardsGeneration, the counters table, which
// changes of cards and of sessions move (and no other write: an audit
// batch, a rate-limit take or a session's last use does not).
func (s *DB) SessionsGeneration(ctx context.Context) (int64, error) {
	if s.pg == nil {
		return s.CardsGeneration(ctx)
	}
	if s.pg.feed != nil {
		if e, ok := s.pg.feed.sessionsEpoch(); ok {
			return e, nil
		}
	}
	s.pg.genReads.Add(1)
	return s.Generation(ctx)
}

// cardsGenAt is the counters table's generation as read when SQLite's
// change counter was shm.
type cardsGenAt struct {
	shm uint64
	gen int64
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
