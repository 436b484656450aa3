// Package sqlitefloor measures the floor under the audit journal's
// ingestion (issue 23, target 3) with SQLite's C itself: the same
// call-sized rows, 64 to an INSERT and 3,000 to a transaction, in WAL mode
// with synchronous=NORMAL, through modernc.org/sqlite (maiden's driver:
// SQLite's C transpiled to Go) and through mattn/go-sqlite3 (the same C
// compiled by cgo). It is a module of its own so that maiden never
// depends on a second SQLite; bench/README.md ("The audited call and the
// journal's ingestion") has the numbers.
//
//	cd bench/sqlitefloor && go test -c -o /tmp/sqlitefloor.test . &&
//	/tmp/sqlitefloor.test -test.run '^$' -test.bench InsertFloor -test.benchtime 100000x
package sqlitefloor

import (
	"database/sql"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	_ "modernc.org/sqlite"
)

// schema is the audit table of maiden's SQLite store (internal/store,
// migration 2).
const schema = `CREATE TABLE IF NOT EXISTS audit (seq BIGINT PRIMARY KEY, at BIGINT NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL, agent TEXT NOT NULL, tool TEXT NOT NULL, body TEXT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL)`

// body is internal/store's BenchmarkAuditJournalAppend call-sized record.
const body = `{"rendered":"--city=Paris --units=metric","card":"card_dcffc78166f23c1fc3e3067c","component":"sha256:069e2817e2ff91f28f3edf72e92feabde3f7f5bb3ebfd3caced2b88fa613b957","component_local":true,"schema":"sha256:1d885826779f505d00a97ed363a7c057f773d618fd021f7e7a3991c3a2b691f6","decision":{"allow":true,"card":"card_dcffc78166f23c1fc3e3067c","bound":"lower-positive","grant":"tool:invoke weather --city=* --units=metric","wallet":"27bafb5e14cfdb64","component":"sha256:069e2817e2ff91f28f3edf72e92feabde3f7f5bb3ebfd3caced2b88fa613b957"}}`

// insertSQL is an INSERT of n rows, as the journal's ingester writes them.
func insertSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO audit (seq, at, kind, actor, agent, tool, body, prev, hash) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// cpu is the process's CPU time so far, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bench inserts b.N call-sized rows into a fresh file; cpu-ns/op is the
// process's CPU (user and system) per row.
func bench(b *testing.B, driver, dsn string) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, p := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", schema} {
		if _, err := db.Exec(p); err != nil {
			b.Fatal(err)
		}
	}
	st, err := db.Prepare(insertSQL(64))
	if err != nil {
		b.Fatal(err)
	}
	hash := strings.Repeat("ab", 32)
	args := make([]any, 0, 9*64)
	b.ResetTimer()
	c0 := cpu()
	seq := 0
	left := b.N
	for left > 0 {
		batch := min(left, 3000)
		left -= batch
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for batch > 0 {
			n := min(batch, 64)
			q := tx.Stmt(st)
			if n < 64 {
				q, err = tx.Prepare(insertSQL(n))
				if err != nil {
					b.Fatal(err)
				}
			}
			args = args[:0]
			for range n {
				seq++
				args = append(args, seq, time.Now().UnixNano(), "call-admitted", "agent:research", "research", "weather", body, hash, hash)
			}
			if _, err := q.Exec(args...); err != nil {
				b.Fatal(err)
			}
			batch -= n
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu()-c0)/float64(b.N), "cpu-ns/op")
}

func BenchmarkInsertFloor(b *testing.B) {
	for _, d := range []string{"modernc", "mattn"} {
		b.Run(d, func(b *testing.B) {
			p := filepath.Join(b.TempDir(), "s.db")
			if d == "modernc" {
				bench(b, "sqlite", p)
			} else {
				bench(b, "sqlite3", p)
			}
		})
	}
}
