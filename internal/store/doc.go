// Package store is maiden's durable state: agents, bearer-token hashes,
// permission cards with their lineage, and revocations, behind the Store
// interface, with one implementation in a single SQLite file (SQLite, via
// Open). Later issues add approvals, rate-limit counters, the audit trail
// and sessions to the same interface and migrations; a PostgreSQL
// implementation (pgx) for several instances runs the same migrations.
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
//     returned is on disk. Tested with two *SQLite on one file plus a child
//     process, and with kill -9 of a child in a burst of grants.
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
