// Package store is maiden's durable state: agents, bearer-token hashes,
// permission cards with their lineage, and revocations, behind the Store
// interface, in a single SQLite file or in a PostgreSQL database that
// several maiden instances share (DB, via Open: a path or a postgres://
// URL; the same SQL and code for both); and, from migration 2, the
// hash-chained audit trail, rate-limit buckets and quota windows, and
// durable approvals; from migration 4, the audit journal's ingestion
// positions; from migration 5, sessions and their boundary requests.
//
//	s, err := store.Open(ctx, "state.db", nil) // or "postgres://maiden@db.internal/maiden"
//	c, err := s.Grant(ctx, "research", spec)      // operator
//	n, err := s.Revoke(ctx, store.Operator(), c.ID) // the card and its descendants
//	w, err := s.Wallet(ctx, "research", time.Now()) // pinned for one call
//
// Design notes:
//   - Every method is one transaction; a refused operation (unknown agent,
//     expired or revoked card, a derivation that broadens, a transfer to an
//     unknown agent, ...) returns a wrapped, named error and writes nothing.
//     The card rules themselves are internal/cards' (CheckDerive,
//     CheckInstall, Cascade, and Decide for an agent acting on cards), run
//     inside the transaction so that the check and the write see one state.
//   - Several processes on one file: WAL; a busy timeout (10 s); and every
//     transaction begins IMMEDIATE (takes the write lock at BEGIN), because a
//     deferred transaction that reads and then writes fails at once with
//     SQLITE_BUSY when another process committed in between (the busy
//     handler does not cover that upgrade). synchronous=FULL: a grant that
//     returned is on disk (Options.Synchronous may choose NORMAL: safe
//     against a process crash, not against power loss). Tested with two
//     *DB on one file plus a child process, and with kill -9 of a
//     child in a burst of grants.
//   - Migrations are numbered steps run on Open, each in its own
//     transaction with its row in schema_migrations; a file at a version this
//     binary does not know is ErrSchemaTooNew and is left untouched. Open
//     reads the version first without the write lock, so that opening a
//     store another process is writing does not wait for that writer;
//     every statement of the open retries on SQLITE_BUSY (the busy handler
//     does not cover a connection's first PRAGMA journal_mode=WAL on a file
//     being created) up to the busy timeout, then fails with ErrLocked
//     (TestOpenWhileAnotherWrites, TestOpenMigrationWaitsForLock).
//   - Portable SQL: TEXT, BIGINT and INTEGER columns, times as Unix
//     nanoseconds, '?' placeholders (a PostgreSQL store rebinds them to $n),
//     ON CONFLICT DO NOTHING, NOT EXISTS, no AUTOINCREMENT and no SQLite
//     function in a query; types in capitals (TEXT, BIGINT, INTEGER, BLOB,
//     REAL), names in lower case. What is SQLite's own (the DSN pragmas)
//     lives in sqlite.go, what is PostgreSQL's in postgres.go (below).
//   - Tokens are "mdn_<id>_<secret>": the ID finds the row, and only
//     SHA-256 of the 256-bit random secret is stored, compared with
//     crypto/subtle (a slow password hash adds nothing to a random secret).
//   - A card's grants are stored as their canonical text (grant.Grant's
//     MarshalText) in a JSON column: a grant is read back by the same parser
//     that accepted it. Lineage is also a table (card_parents) so that the
//     revocation cascade is a query per level.
//   - Generation changes with every committed change (on PostgreSQL, but
//     the audit trail's own appends: below), so that a caller may keep a
//     pinned wallet while nothing changed, and no longer. It is on
//     every call's path, so SQLite's own change counter is read from the
//     WAL index in shared memory (~20 ns, against ~10 µs for a query; see
//     shm_unix.go for why its file is opened once and never closed), with
//     the counters table as the fallback (and the PostgreSQL answer).
//     WaitChange(ctx, gen) returns once it moved (a waiter's change feed:
//     polling the WAL index every 50 ms on SQLite; below for PostgreSQL).
//
// PostgreSQL (postgres.go, issue 15): Open with a postgres:// or
// postgresql:// URL. Several instances on one database behave as one.
//   - The password is never in the URL: one there (user part or a
//     password parameter) is refused without being repeated; pgx reads
//     PGPASSWORD or ~/.pgpass. Errors name host:port, never the password:
//     ErrUnavailable (unreachable, restarting, stopped: the pool's
//     connections are wrapped so that a lost server says so wherever it
//     shows), ErrSchemaTooNew, ErrPrivilege (CREATE on the schema for a
//     migration; otherwise each table privilege the role lacks, checked on
//     Open; the audit table needs only SELECT and INSERT, so an operator
//     may deny UPDATE and DELETE on it).
//   - One SQL text: pgx's database/sql driver (pgx/v5/stdlib) is wrapped
//     (pgConnector, pgConn) so that every query, prepared or not, has its
//     '?' placeholders rewritten to $1, $2, ... outside string literals,
//     quoted identifiers, dollar-quoted strings and comments (rebind;
//     table-tested, fuzzed, and checked against the server's own lexer
//     with literals full of '?'); migrations get TEXT COLLATE "C" (bytewise
//     order and equality, as SQLite's, whatever the database's
//     collation), BYTEA for BLOB, DOUBLE PRECISION for REAL (pgDDL). So
//     the sessions code of migration 5 runs unchanged on both.
//   - Writers: every write transaction takes one transaction-scoped
//     advisory lock first (pg_advisory_xact_lock, waited for up to
//     Options.BusyTimeout as lock_timeout), the equivalent of SQLite's
//     BEGIN IMMEDIATE: writers of all instances run one at a time, so
//     what holds on SQLite holds unchanged (a read then an upsert for
//     rate limits and quotas: no lost update; ConsumeAndStart's
//     conditional UPDATE: one winner; the audit head read then seq+1: one
//     chain; MAX+1 for card seq). Tested across two stores, goroutines and
//     child processes on one database (every store test, plus
//     TestPostgres*). Its cost: BenchmarkAuditAppend/postgres and
//     BenchmarkTake/postgres against the SQLite rows of the same run.
//   - Migrations run holding a session advisory lock on one connection:
//     an instance that finds another migrating waits, then finds nothing
//     to do (TestPostgresConcurrentMigrations: six goroutines and two
//     processes opening one new database).
//   - Generation is the counters table, which every write transaction
//     (writeKeep's too: there is no other change counter) advances in
//     its first statement, the one that takes the lock, with
//     pg_notify('maiden_store', 'KIND:VALUE') (both take effect on commit
//     only: one round trip for the three). KIND is cards (write: agents,
//     tokens, cards, operators), sessions (writeSessions) or other
//     (writeKeep). The audit trail's own appends (writeAudit: the
//     journal's batches, AppendAudit, AppendAuditGroup) take the lock and
//     do neither: nothing any instance keeps or waits for depends on them
//     (TestPostgresAuditWakesNoOne). CardsGeneration, what the call path keys wallets and
//     token owners on, is the change feed's cards epoch, moved only by
//     cards notifications, and SessionsGeneration, what it keys a call's
//     session on, its sessions epoch, moved only by sessions
//     notifications, each with no round trip while the feed is trusted
//     (a lease of feedLease from before its last counter read, renewed
//     every feedSync however many notifications come meanwhile:
//     TestPostgresFeedRenewsUnderNotifications); a write
//     of cards or sessions returns only once every listening feed acknowledged it or
//     that lease ran out (changeFeed.barrier), and once the lease a feed
//     no longer listening recorded in feed_leases ran out (its backend
//     ended, its instance may not know: TestPostgresRevokeWhileFeedVanishes),
//     so a revocation on one instance holds from every instance's next call
//     (TestPostgresRevokeThenCallElsewhere). WaitChange waits
//     on a LISTEN connection of its own (a notification is delivered on
//     commit only), polls every second as a safety net, and every 100 ms
//     while that connection is down (it reconnects with a pause growing
//     to 2 s): another instance's approval or revocation is seen within
//     milliseconds, and within 1 s without notifications
//     (TestPostgresFeedFallback).
//   - The audit journal is local: Options.JournalDir, by default
//     $XDG_STATE_HOME (or ~/.local/state)/maiden/audit-journal/
//     HOST_PORT_DATABASE_HASH, shared by this machine's processes on one
//     database (a dead one's files are swept by the next Open there). It
//     must survive the instance's restart (a persistent volume in a
//     container): a journal lost with its machine loses the acknowledged
//     records not yet ingested (at most about one JournalInterval's worth,
//     or what piled up while the database was down). Ingestion takes the
//     write lock, so all instances' records form the one chain. A sweep
//     keeps the positions of files it cannot see (other instances').
//   - A restart of the database: calls fail with ErrUnavailable meanwhile
//     (the root refuses them: nothing runs unaudited), journal appends are
//     still acknowledged up to JournalBacklog, and everything works again
//     once it is back, nothing lost or ingested twice
//     (TestPostgresRestart).
//   - Not portable: strings holding NUL bytes (PostgreSQL's text refuses
//     them; a write that carries one fails, and what it records is
//     refused rather than stored).
//
// The audit trail (audit.go, X3):
//   - Table audit: seq, at, kind, actor, agent, tool, body (JSON), prev,
//     hash. hash is SHA-256 over a length-prefixed encoding of every other
//     field, prev included ("maiden-audit-v1", then each field as
//     LEN:BYTES\n; times as Unix ns); the first record's prev is 64 zeros.
//     An append reads the head and inserts seq+1 inside one IMMEDIATE
//     transaction, so appenders in any number of processes form one chain
//     (tested with three child processes and two goroutines).
//   - Grant, SyncSystemCards, Derive, Transfer, Revoke, MintToken and
//     RevokeToken append their card-change or token-change record inside
//     their own transaction; Decide appends the approval or denial. A
//     refused operation appends nothing.
//   - VerifyAudit names the first bad record and why: a gap in seq is
//     "deleted"; a prev that is the hash of a later record is "reordered";
//     a record whose hash fails while its successor links past it is
//     "inserted"; otherwise a hash that fails is "edited" (tested by
//     editing the file with the sqlite3 shell). The chain has no key:
//     whoever can write the file can rewrite everything after a point and
//     recompute the hashes. ExportAudit (JSON lines and a head line) and
//     VerifyExport(r, noted head) catch that against a head kept
//     elsewhere; an HMAC key or an external anchor is future work.
//   - Cost (BenchmarkAuditAppend, 2-core development VM under load): one
//     record is one commit, 0.24-0.34 ms with synchronous=FULL (fsync) and
//     0.08-0.11 ms with NORMAL (Options.Synchronous), that is 10-15x and
//     3.3-4.6x the tiny WAT tool's whole in-process call (23 µs p50 in the
//     same session), far beyond a 15 % budget. AppendAuditGroup shares one
//     commit among concurrent callers (each still returns only once its
//     record is committed): with 8 callers 3-4x the throughput of one
//     commit each under FULL, no faster for a single caller. Hence the
//     journal, for the per-call records.
//
// The audit journal (journal.go): the call path's records go through
// Journal().Append, which writes them to a per-process append-only file
// beside the store, <state>.audit/HOST_PID_NONCE_N.jl, and returns; a
// background ingester moves them into the chain.
//   - Durability: Append returns once the record is in the file's page
//     cache, which survives the process's death (kill -9 included) exactly
//     as a commit with synchronous=NORMAL does; power loss or an OS crash
//     can lose the last records. Options.JournalSync makes Append return
//     only after an fsync covering its record (concurrent appenders share
//     one); that costs an fsync per caller again. An Append that fails
//     (bad record, journal directory or file that cannot be made, a full
//     disk, a backlog beyond Options.JournalBacklog because the store
//     cannot keep up or cannot be written) writes nothing: the call it
//     records must be refused. A record written after what it records
//     (a request's, once sent) takes its room first (Reserve: an atomic
//     add, refused past the bound with the room already reserved counted
//     as written); AppendReserved spends it and is not refused for the
//     backlog, so the request is refused before it is sent instead.
//   - Writing: on Linux the file's blocks are reserved (fallocate, 8 MiB,
//     then the next file) and mapped shared; a record is encoded (its body
//     checked and compacted in one pass, scanJSON, held to encoding/json by
//     FuzzScanJSON) and copied in under a mutex, its final '\n' stored
//     last, so that a copy cut short by the process's death is a partial
//     line followed by zeros, never a line that looks whole. Elsewhere, or
//     where fallocate is not supported, one write(2) per record (O_APPEND;
//     a failed write's partial line is truncated away).
//   - A line is one JSON object: {"n":LINE,"at":UNIX_NS,"kind":..,
//     "actor":..,"agent":..,"tool":..,"body":..,"crc":"XXXXXXXX"}, n
//     numbering the file's lines, crc a CRC-32C of everything before it
//     seeded with the file's name. Ingestion refuses a line whose checksum
//     fails (edited, damaged, copied from another journal), that does not
//     decode, whose number repeats an earlier one, or that follows missing
//     numbers: each becomes an AuditJournalDamaged record in the chain
//     (file, line, offset, reason, the raw line up to 4 KiB), is logged
//     (Options.Logger) and counted (Journal.Stats), and the rest of the
//     file is ingested. A partial last line of a file nobody writes any
//     more (its writer died mid-copy: never acknowledged) is dropped,
//     logged and counted as torn. Zeros where a sealed file's lines end are
//     its unwritten room unless something follows them (a page lost at
//     power loss, or zeroed): ingestion then goes on at the first line
//     after them, the lines they held recorded missing and a line they cut
//     into damaged. This process's own file cut shorter than it wrote is
//     read to its real end, and the lines it lacks recorded missing. A dead
//     process's file owned by another user (but root), or writable by its
//     group or others, is refused (ErrJournalFileUnsafe: Open fails until
//     it is removed), as the directory is (ErrJournalDirUnsafe). The
//     checksum is not a signature: whoever can write the journal can
//     recompute it, as they can the chain's hashes; and lines deleted from
//     the end of a dead writer's file before ingestion are not detected (a
//     killed process writes no trailer).
//   - Ingestion: woken by an append, the ingester waits out
//     Options.JournalInterval (20 ms) or a Flush, then takes up to 4096
//     lines per transaction: it reads the file's position from table
//     audit_journal (migration 4) under the write lock, chains the records
//     (the chain order is the ingestion order; each record keeps its own
//     At), inserts them in statements of a power of two of rows each (up
//     to 64 on SQLite, 1024 on PostgreSQL) and records the new position in
//     the same transaction, so that a line is in the chain exactly once
//     whatever crashes, and whichever of several processes ingest one file.
//     A file nobody writes any more is removed once ingested, then its row
//     (the removal made durable first): a crash in between leaves a row
//     without a file, never a file without its row. A position row is
//     missing either before a file's first batch or after its removal; the
//     file's existence, checked under the write lock, tells them apart.
//   - Size: a line holds at most 16 MiB (maxJournalLine). A batch reads
//     1 MiB at first; a line that starts there and is longer, or that the
//     read ends inside, is the next batch's first, read whole up to that
//     bound, so a sealed file with records of any admissible size is
//     ingested to its end (TestJournalLargeRecords: lines of 1-2.5
//     windows, own and swept files, the window lowered to 64 KiB). A
//     record that would not fit is refused by Append with ErrBadInput
//     ("the record is N bytes, more than M") and nothing is written:
//     nothing enters the journal that its ingester cannot take, and the
//     root refuses the call with ErrState, as for any record it
//     cannot write. Refused rather than cut: a record with its rendering
//     cut (kept only as a digest and a length) would admit a call whose
//     input the trail no longer shows; the default max_input_bytes (1 MiB)
//     keeps a call's records far below the bound.
//   - Open ingests completely the journals of processes that are gone
//     (unless another process holds the write lock beyond the busy
//     timeout: then the ingester sweeps at its first run, and the next
//     Open), and a busy ingester looks again every 30 s. A writer holds an
//     exclusive flock on its file (taken on a descriptor of its own
//     before the file gets its name, so no sweeper ever sees it unlocked,
//     and kept until the file is removed); the kernel drops it when the
//     process dies, so a file a sweeper can lock has no writer left,
//     whatever PID namespace or host it ran in (TestJournalLockMeansAlive:
//     a dead PID with the lock held is not swept). Where flock is not
//     available, a writer of this host whose PID no longer exists is gone
//     (runnerGone, as for approvals; elsewhere than on Unix, never: a
//     dead process's journal then waits for an operator). Close ingests
//     what is left and removes this process's files; what it cannot
//     ingest stays, unlocked, for the next Open.
//   - Flush waits until everything appended before it is in the chain;
//     VerifyAudit and ExportAudit flush this store's journal first.
//     AuditTail does not: it sees journal records once ingested (within
//     the interval), and another process's only once that process's
//     ingester committed them.
//   - Priority: on Linux the ingester's thread runs at nice 10, and it
//     gives its P back every 500 µs of work (runtime.Gosched between
//     INSERT statements and every 64 lines): SQLite here is Go code, and a
//     batch would otherwise hold one of the process's Ps for tens of
//     milliseconds, queueing the collector's workers and the rest behind
//     the calls. A Flush, or a backlog past a quarter of its bound when an
//     attempt begins (or past half between two batches of an attempt at
//     low priority), has the ingestion run at normal priority instead,
//     without yielding, so that it does not lag until Append refuses.
//   - Cost (BenchmarkAuditJournalAppend against BenchmarkAuditAppend,
//     -count 6 in one run, two runs on the 2-core VM): an Append is
//     0.9-1.8 µs, 1/75-1/70 of AppendAudit with NORMAL (66-126 µs), 4-8 %
//     of the tiny WAT call; the ingester's work per record (read, check,
//     hash, insert, commit) is 7.7-14 µs on the other core, so appends
//     faster than that fill the backlog until Append refuses. Since issue
//     23 (ingestBufs: no allocation per batch and few per record; inserts
//     in powers of two of rows), 4.7 µs of CPU for the benchmark's record
//     and 8.6 µs for a call-sized one (0.89x and 0.77x in the same
//     rounds), against 3.7 and 6.5 µs for SQLite's own INSERT of the same
//     rows (BenchmarkAuditJournalAppend/insert-floor): the rest of the
//     ingester's cost is SQLite's. Without MADV_POPULATE_WRITE ahead of the writer, a page's
//     first write fault cost 15-30 µs in the call path.
//   - Generation: an Append commits nothing, so it leaves Generation (and
//     the call path's pinned wallets) alone; every ingestion batch is a
//     commit and changes it, at most once per interval (about 50 times a
//     second under steady load), not once per call.
//
// Rate limits and quotas (limits.go): Take is a token bucket keyed by
// (agent, tool, rule), stored as its theoretical arrival time (GCRA: one
// BIGINT, the same encoding as internal/limits); Spend is a fixed cost
// window keyed by (agent, rule), epoch-aligned. Each is a read and an
// upsert (INSERT ... ON CONFLICT DO UPDATE) in one IMMEDIATE transaction:
// no lost update across processes (tested: four processes and four
// goroutines on one bucket allow exactly its capacity), and a restart
// resets nothing. A clock that goes back gives nothing back. On
// PostgreSQL the same transaction holds the advisory write lock, which
// gives the same guarantee.
//
// Approvals (approvals.go, A16): a request is persisted pending (agent,
// session, tool, rendered arguments, input digest, the middleware and its
// reason, card generation, expiry) before anything runs. Decide is
// pending → approved | denied (an unknown ID is ErrUnknownApproval, one
// decided or expired ErrApprovalState). ConsumeAndStart is one
// conditional UPDATE (approved and unexpired → started, with the runner
// "HOST/PID/NONCE"): exactly one of any number of concurrent consumers
// wins (tested across goroutines, two *DB and four processes).
// MarkDone: started → done. MarkInterruptedOnStartup: started → interrupted
// for runners of this host whose PID is gone, or is another process's now
// (the nonce's start mark, boot and start time, differs: runnerGone), so
// a second maiden starting beside a live one does not interrupt its
// calls; a reused PID without /proc to tell, or another host's runner,
// is left started, never re-run. RecentDenial remembers a
// denial until the request's expiry; Expire turns pending and unconsumed
// approved requests past their expiry into expired. Tested with kill -9
// of a child between approval and start (the approval survives and is
// consumed once) and while the call runs (interrupted, not consumable).
//
// Operators (operators.go, migration 3): the humans who decide approvals
// have bearer tokens of their own kind, "mdo_<id>_<secret>" in table
// operator_tokens, hashed as agents' tokens are. The kinds are kept apart
// twice: by prefix (checked before any read) and by table (Authenticate
// reads only tokens, AuthenticateOperator only operator_tokens), so an
// agent token can never authenticate as an operator, nor the reverse, even
// relabelled (tested). Mints and revocations append token-change records
// with principal "operator". From migration 6 a token has a role:
// "operator" (signs in to the inbox, reads /metrics) or "metrics" (reads
// /metrics only: a scraper's, AuthenticateOperator refuses it).
//
// Writes of these three parts do not advance the counters table's
// generation (writeKeep), but every commit changes SQLite's WAL-index
// change counter that Generation reads: an audit record committed per
// call would invalidate a pinned wallet on every call, which is one more
// reason the call path's records go through the journal (above).
//
// Sessions (sessions.go, migration 5; issue 14, ../shared/BOUNDARIES.md):
// a session belongs to one agent for its whole life (OpenSession is
// idempotent on the ID; another agent's open is ErrNotAllowed), and from
// migration 11 may be bound, once, to one credential besides (BindSession:
// a token's ID, for a 2026-07-28 handle only that token may name), and runs
// inside an ExecutionBoundary (internal/boundary). OpenSessionWithin, which
// session_open uses, refuses a new session (ErrTooManySessions) while the
// agent holds DefaultMaxSessions not ended and opened or used within
// SessionCountedFor, counted in the inserting transaction; no session row
// is deleted (an ended session is never reopened). Every revision of the
// boundary is a row of session_revisions (its canonical JSON, its number,
// when and why: "initial", "approved request ID (bnd_...) by BY", "reset by
// BY"); sessions.revision points at the current one. A boundary request
// has a global handle ("bnd_" + random, what maiden approve and deny
// take) and the client's ID, unique per session: boundary.Create with the
// stored prior makes the same ID the same request whatever else is sent.
// SettleBoundaryRequest reads the request and the session's current
// boundary, runs boundary.Settle, and writes the settled request, the new
// revision (when applied) and the audit record in one transaction; a
// request that is not pending is ErrApprovalState and nothing changes
// (tested with goroutines on two handles: exactly one of them settles).
// The store denies on its own with a reason: expired (the request's
// expiry, default 24 h, seen by Settle, RequestBoundary or
// ExpireBoundaryRequests), session_ended (EndSession), and the caller's
// reason, host_restarted on start, for the pending requests of processes
// that are gone (DenyPendingBoundaryRequests; the request's runner judged
// as MarkInterruptedOnStartup judges a started call, so a second maiden
// starting beside a live one leaves its requests alone). Every
// transition appends its record (session-opened, boundary-requested,
// boundary-settled, session-reset, session-ended) in its transaction,
// with boundaries, expansions and reasons, never secret material; and
// every one goes through write, so Generation and the counters table
// change, while a no-op (an idempotent open, a second decision, a refused
// request) commits nothing. TouchSession writes the last use at most once
// a minute.
//
// Why modernc.org/sqlite (v1.62.0): of the SQLite drivers the module proxy
// serves, it is a database/sql driver (the seam a pgx-backed store shares)
// in pure Go, so it adds no C compilation to a build that already links
// wasmtime through cgo. mattn/go-sqlite3 would compile SQLite's C on every
// clean build; ncruces/go-sqlite3 runs SQLite compiled to WebAssembly on
// wazero, a second wasm runtime in a binary built around wasmtime, with its
// own compile step at start; zombiezen.com/go/sqlite wraps modernc with a
// non-database/sql API; glebarez/go-sqlite builds on modernc's SQLite, one
// step removed from its releases.
package store
