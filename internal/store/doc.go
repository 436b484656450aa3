// Package store is maiden's durable state: agents, bearer-token hashes,
// permission cards with their lineage, and revocations, behind the Store
// interface, with one implementation in a single SQLite file (SQLite, via
// Open); and, from migration 2, the hash-chained audit trail, rate-limit
// buckets and quota windows, and durable approvals. Sessions come later; a
// PostgreSQL implementation (pgx) for several instances runs the same
// migrations.
//
//	s, err := store.Open(ctx, "state.db", nil)
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
//     *SQLite on one file plus a child process, and with kill -9 of a
//     child in a burst of grants.
//   - Migrations are numbered steps run on Open, each in its own
//     transaction with its row in schema_migrations; a file at a version this
//     binary does not know is ErrSchemaTooNew and is left untouched.
//   - Portable SQL: TEXT, BIGINT and INTEGER columns, times as Unix
//     nanoseconds, '?' placeholders (a PostgreSQL store rebinds them to $n),
//     ON CONFLICT DO NOTHING, NOT EXISTS, no AUTOINCREMENT and no SQLite
//     function in a query. What is SQLite's own (the DSN pragmas, the card
//     sequence taken as MAX+1 under the write lock) lives in sqlite.go and
//     ops.go's insertCard, behind the interface.
//   - Tokens are "mdn_<id>_<secret>": the ID finds the row, and only
//     SHA-256 of the 256-bit random secret is stored, compared with
//     crypto/subtle (a slow password hash adds nothing to a random secret).
//   - A card's grants are stored as their canonical text (grant.Grant's
//     MarshalText) in a JSON column: a grant is read back by the same parser
//     that accepted it. Lineage is also a table (card_parents) so that the
//     revocation cascade is a query per level.
//   - Generation changes with every committed change, so that a caller may
//     keep a pinned wallet while nothing changed, and no longer. It is on
//     every call's path, so SQLite's own change counter is read from the
//     WAL index in shared memory (~20 ns, against ~10 µs for a query; see
//     shm_unix.go for why its file is opened once and never closed), with
//     the counters table as the fallback (and the PostgreSQL answer).
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
//     commit each under FULL, no faster for a single caller. Within the
//     budget, a durable acknowledgment is out of reach for SQLite; an
//     append-only file written with one write(2) per record (no fsync:
//     survives kill -9, not power loss) would be the next thing to measure.
//
// Rate limits and quotas (limits.go): Take is a token bucket keyed by
// (agent, tool, rule), stored as its theoretical arrival time (GCRA: one
// BIGINT, the same encoding as internal/limits); Spend is a fixed cost
// window keyed by (agent, rule), epoch-aligned. Each is a read and an
// upsert (INSERT ... ON CONFLICT DO UPDATE) in one IMMEDIATE transaction:
// no lost update across processes (tested: four processes and four
// goroutines on one bucket allow exactly its capacity), and a restart
// resets nothing. A clock that goes back gives nothing back. A PostgreSQL
// store needs SELECT ... FOR UPDATE (or the upsert alone) for the same.
//
// Approvals (approvals.go, A16): a request is persisted pending (agent,
// session, tool, rendered arguments, input digest, the middleware and its
// reason, card generation, expiry) before anything runs. Decide is
// pending → approved | denied (an unknown ID is ErrUnknownApproval, one
// decided or expired ErrApprovalState). ConsumeAndStart is one
// conditional UPDATE (approved and unexpired → started, with the runner
// "HOST/PID/NONCE"): exactly one of any number of concurrent consumers
// wins (tested across goroutines, two *SQLite and four processes).
// MarkDone: started → done. MarkInterruptedOnStartup: started → interrupted
// for runners of this host whose PID is gone (so a second maiden starting
// beside a live one does not interrupt its calls; a reused PID or another
// host's runner is left started, never re-run). RecentDenial remembers a
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
// with principal "operator".
//
// Writes of these three parts do not advance the counters table's
// generation (writeKeep), but every commit changes SQLite's WAL-index
// change counter that Generation reads: an audit record per call would
// therefore invalidate a pinned wallet on every call. Open question for
// the call path: keep the audit in a second file (atomicity with card
// changes then needs another design), or key the wallet cache on the
// counters table's generation (a read, ~10 µs) instead.
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
