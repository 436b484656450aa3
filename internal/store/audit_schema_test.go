package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// auditIndexes lists the indexes SQLite keeps on the audit table (an
// automatic one included).
func auditIndexes(t *testing.T, s *DB) []string {
	t.Helper()
	rows, err := s.db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// auditRows is every row of the audit table as stored, seq's type
// included, in seq order.
func auditRows(t *testing.T, s *DB) string {
	t.Helper()
	rows, err := s.db.Query(`SELECT seq, typeof(seq), at, typeof(at), kind, actor, agent, tool, body, prev, hash FROM audit ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var seq, at sql.NullInt64
		var st, atT, kind, actor, agent, tool, body, prev, hash string
		if err := rows.Scan(&seq, &st, &at, &atT, &kind, &actor, &agent, &tool, &body, &prev, &hash); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%v %s %v %s %s %s %s %s %s %s %s\n", seq, st, at, atT, kind, actor, agent, tool, body, prev, hash)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// toOldAuditSchema puts store s back at the schema before migration 10:
// the audit table as migration 2 made it (seq BIGINT PRIMARY KEY, with
// its automatic unique index), and version 9.
func toOldAuditSchema(t *testing.T, s *DB) {
	t.Helper()
	var create string
	for _, stmt := range strings.Split(migrations[2], ";") {
		if strings.HasPrefix(strings.TrimSpace(stmt), "CREATE TABLE audit (") {
			create = stmt
		}
	}
	if !strings.Contains(create, "seq    BIGINT PRIMARY KEY") {
		t.Fatalf("migration 2's audit table not found: %q", create)
	}
	for _, q := range []string{`DROP TABLE audit`, create, `DELETE FROM schema_migrations WHERE version >= 10`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if got := auditIndexes(t, s); len(got) != 1 || got[0] != "sqlite_autoindex_audit_1" {
		t.Fatalf("the old audit table's indexes: %v; want its automatic one", got)
	}
}

// TestAuditSeqIsRowid: a new SQLite store's audit table keys its rows by
// seq itself (INTEGER PRIMARY KEY, the rowid): no second B-tree to write
// per record.
func TestAuditSeqIsRowid(t *testing.T) {
	s := open(t, backends[0].target(t), nil)
	if got := auditIndexes(t, s); len(got) != 0 {
		t.Fatalf("indexes on audit: %v; want none", got)
	}
	// The plan of the head's read and of a tail: the rowid, no index.
	for _, q := range []string{auditHeadSQL, `SELECT ` + auditColumns + ` FROM audit WHERE seq > 3 ORDER BY seq`} {
		var plan strings.Builder
		rows, err := s.db.Query(`EXPLAIN QUERY PLAN ` + q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(detail + "; ")
		}
		rows.Close()
		if p := plan.String(); strings.Contains(p, "INDEX") || strings.Contains(p, "TEMP B-TREE") {
			t.Fatalf("plan of %s: %s; want the rowid's order", q, p)
		}
	}
}

// TestAuditRowidMigration: a SQLite store whose audit table has the old
// schema (seq BIGINT PRIMARY KEY and its automatic index), with records
// appended one at a time and through the journal's multi-row INSERTs,
// is migrated on Open: every row the same, bytes and types, the chain
// verifies with the same head, the index is gone, and appends go on.
func TestAuditRowidMigration(t *testing.T) {
	ctx := context.Background()
	path := backends[0].target(t)
	s := open(t, path, nil)
	toOldAuditSchema(t, s)
	appendN(t, s, 5, "one-by-one")
	for i := range 3000 { // more than a statement's 64 rows and a journal window's worth of batches
		r := AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "journal", Body: auditBody(map[string]int{"i": i})}
		if err := s.Journal().Append(r); err != nil {
			t.Fatal(err)
		}
	}
	head := verifyOK(t, s, 3005)
	before := auditRows(t, s)
	s.Close()

	s = open(t, path, nil)
	var v int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d, %v; want %d", v, err, SchemaVersion())
	}
	if got := auditIndexes(t, s); len(got) != 0 {
		t.Fatalf("indexes on audit after the migration: %v; want none", got)
	}
	var schema string
	if err := s.db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'audit'`).Scan(&schema); err != nil || !strings.Contains(schema, "seq    INTEGER PRIMARY KEY") {
		t.Fatalf("the audit table after the migration: %q, %v", schema, err)
	}
	if after := auditRows(t, s); after != before {
		t.Fatalf("the rows changed in the migration:\nbefore %.500s\nafter  %.500s", before, after)
	}
	if got := verifyOK(t, s, 3005); got != head {
		t.Fatalf("head %s after the migration, %s before", got, head)
	}
	appendN(t, s, 2, "after")
	if err := s.Journal().Append(AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "after", Body: auditBody(map[string]int{"i": 1})}); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, s, 3008)
	if _, err := s.db.ExecContext(ctx, `INSERT INTO audit (seq, at, kind, actor, agent, tool, body, prev, hash) SELECT seq, at, kind, actor, agent, tool, body, prev, hash FROM audit WHERE seq = 7`); err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Fatalf("a second record 7: %v; want the key's refusal", err)
	}
}

// TestAuditRowidMigrationKeepsOddSeq: an old audit table edited outside
// maiden so that a record's seq is NULL (BIGINT PRIMARY KEY accepts it; a
// rowid cannot hold it) is left as it is: the store opens, its version
// is recorded, the rows keep their seq, and VerifyAudit reports the break
// (a copy into a rowid table would have numbered that record anew, or
// failed and made the store impossible to open).
func TestAuditRowidMigrationKeepsOddSeq(t *testing.T) {
	path := backends[0].target(t)
	s := open(t, path, nil)
	toOldAuditSchema(t, s)
	appendN(t, s, 4, "t")
	verifyOK(t, s, 4)
	if _, err := s.db.Exec(`UPDATE audit SET seq = NULL WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	before := auditRows(t, s)
	s.Close()

	s = open(t, path, nil)
	var v int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d, %v; want %d", v, err, SchemaVersion())
	}
	if got := auditIndexes(t, s); len(got) != 1 {
		t.Fatalf("indexes on the kept audit table: %v; want its automatic one", got)
	}
	if after := auditRows(t, s); after != before {
		t.Fatalf("the rows changed:\nbefore %s\nafter  %s", before, after)
	}
	if _, _, err := s.VerifyAudit(context.Background()); !errors.Is(err, ErrAuditBroken) {
		t.Fatalf("VerifyAudit of a chain with a NULL seq: %v; want it broken", err)
	}
}
