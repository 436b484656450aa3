package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
)

// BenchmarkWallet measures pinning an agent's wallet from a real SQLite
// file (one SELECT, JSON decoding, grant parsing, indexing), and reading
// the generation counter that lets a caller skip it when nothing changed.
func BenchmarkWallet(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) { benchWallet(b, be) })
	}
}

func benchWallet(b *testing.B, be backend) {
	ctx := context.Background()
	for _, n := range []int{10, 1000} {
		s, err := Open(ctx, be.target(b), nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.EnsureAgent(ctx, "research"); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			g, _ := grant.Parse(fmt.Sprintf("tool:invoke tool%d --city=* --units=metric --...", i))
			if _, err := s.Grant(ctx, "research", cards.Spec{LowerPos: cards.Any(g)}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w, err := s.Wallet(ctx, "research", time.Now())
				if err != nil || len(w.Cards()) != n {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("cards=%d/generation", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Generation(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		s.Close()
	}
}

// tinyCallNS is the tiny WAT tool's in-process call as measured by
// ./bench's BenchmarkCall rows in the README (about 23 µs p50); the
// x-tiny-call metric is the audit write's cost as a fraction of it (the
// budget is 0.15). The report gives the ratio against a baseline measured
// in the same session.
const tinyCallNS = 23000

// BenchmarkAuditAppend: one record per AppendAudit (its own IMMEDIATE
// transaction, synchronous=FULL commit), serially; and with 8 concurrent
// callers, one transaction each (serialised on the write lock) or group
// committed (AppendAuditGroup: callers that arrive while a commit is in
// flight share the next one).
func BenchmarkAuditAppend(b *testing.B) {
	rec := AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:research", Agent: "research", Tool: "weather",
		Body: auditBody(map[string]any{"rendered": "weather --city=Paris --units=metric", "cards": []string{"card_0123456789abcdef01234567"}})}
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sqlite/sync="+sync, func(b *testing.B) { benchAudit(b, backends[0], &Options{Synchronous: sync}, rec) })
	}
	// The test cluster runs with fsync off and synchronous_commit off
	// (internal/pgtest): compare it with sync=NORMAL, and read it as the
	// cost of the round trips and the global write lock, not of durability.
	b.Run("postgres", func(b *testing.B) { benchAudit(b, backends[1], nil, rec) })
}

func benchAudit(b *testing.B, be backend, opts *Options, rec AuditRecord) {
	ctx := context.Background()
	s, err := Open(ctx, be.target(b), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	report := func(b *testing.B) {
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(ns/tinyCallNS, "x-tiny-call")
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.AppendAudit(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	for _, mode := range []string{"parallel8/own-tx", "parallel8/group"} {
		b.Run(mode, func(b *testing.B) {
			b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					if mode == "parallel8/group" {
						_, err = s.AppendAuditGroup(ctx, rec)
					} else {
						_, err = s.AppendAudit(ctx, rec)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			report(b)
		})
	}
	if _, _, err := s.VerifyAudit(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAuditJournalAppend: the call path's audit write through the
// journal (Journal.Append: check, encode, copy into the mapped journal
// file), serially and with 8 concurrent callers, while the ingester moves
// the records into the chain on the other core (as fast as it can: these
// rows append faster than it ingests); then with Options.JournalSync (an
// fsync per append, shared by concurrent appenders). The ingest row is
// the ingester's cost per record: appends with ingestion held off (not
// timed), then the Flush that moves them all into the chain (timed).
// Compare with BenchmarkAuditAppend/sync=NORMAL (one commit per record)
// in the same run.
func BenchmarkAuditJournalAppend(b *testing.B) {
	rec := AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:research", Agent: "research", Tool: "weather",
		Body: auditBody(map[string]any{"rendered": "weather --city=Paris --units=metric", "cards": []string{"card_0123456789abcdef01234567"}})}
	ctx := context.Background()
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/tinyCallNS, "x-tiny-call")
	}
	for _, fsync := range []bool{false, true} {
		// A backlog bound the serial rows do not reach: they measure the
		// append, not the refusal that protects a store that cannot keep
		// up.
		s, err := Open(ctx, filepath.Join(b.TempDir(), "state.db"), &Options{Synchronous: "NORMAL", JournalSync: fsync, JournalBacklog: 4 << 30})
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("fsync=%v", fsync)
		b.Run(name+"/serial", func(b *testing.B) {
			for b.Loop() {
				if err := s.Journal().Append(rec); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
			if err := s.Journal().Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
		b.Run(name+"/parallel8", func(b *testing.B) {
			b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Journal().Append(rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
			report(b)
			b.StopTimer()
			if err := s.Journal().Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
		if _, _, err := s.VerifyAudit(ctx); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
	// The ingester's cost per record, on each backend, with this
	// benchmark's record and with one the size of a call's (a call writes
	// a call-admitted record like callRec and an outcome record), and the
	// floor under it: the same records, chained in advance, inserted by
	// the same multi-row statement with nothing else (no journal to read,
	// no decoding, no hashing): what SQLite itself costs per row.
	callRec := AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:research", Agent: "research", Tool: "weather",
		Body: json.RawMessage(`{"rendered":"--city=Paris --units=metric","card":"card_dcffc78166f23c1fc3e3067c","component":"sha256:069e2817e2ff91f28f3edf72e92feabde3f7f5bb3ebfd3caced2b88fa613b957","component_local":true,"schema":"sha256:1d885826779f505d00a97ed363a7c057f773d618fd021f7e7a3991c3a2b691f6","decision":{"allow":true,"card":"card_dcffc78166f23c1fc3e3067c","bound":"lower-positive","grant":"tool:invoke weather --city=* --units=metric","wallet":"27bafb5e14cfdb64","component":"sha256:069e2817e2ff91f28f3edf72e92feabde3f7f5bb3ebfd3caced2b88fa613b957"}}`)}
	for _, be := range backends {
		for _, r := range []struct {
			name string
			rec  AuditRecord
		}{{"", rec}, {"-call", callRec}} {
			name := "ingest" + r.name
			if be.pg {
				name += "/postgres"
			}
			b.Run(name, func(b *testing.B) { benchIngest(b, be, r.rec) })
			if !be.pg {
				b.Run("insert-floor"+r.name, func(b *testing.B) { benchInsertFloor(b, be, r.rec) })
			}
		}
	}
}

// benchIngest: appends with ingestion held off (not timed), then the
// Flush that moves them all into the chain (timed).
func benchIngest(b *testing.B, be backend, rec AuditRecord) {
	ctx := context.Background()
	opts := &Options{JournalInterval: time.Hour, JournalBacklog: 4 << 30}
	if be.pg {
		opts.JournalDir = b.TempDir()
	} else {
		opts.Synchronous = "NORMAL"
	}
	s, err := Open(ctx, be.target(b), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.StopTimer()
	for range b.N {
		if err := s.Journal().Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0 := cpuclock.Now()
	b.StartTimer()
	if err := s.Journal().Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// The process's CPU time per record (the ingester's, and the
	// garbage collector's on its behalf): what limits the ingestion
	// rate on a machine whose cores are shared, where the wall time
	// above also counts the time other processes ran. (PostgreSQL's
	// server is another process: not counted.)
	cpuclock.Report(b, cpu0)
	if n, _, err := s.VerifyAudit(ctx); err != nil || n != int64(b.N) {
		b.Fatalf("VerifyAudit = %d, %v; want %d", n, err, b.N)
	}
}

// benchInsertFloor inserts b.N records, chained beforehand (not timed),
// in transactions of 3000 (about what a 1 MiB window of the journal
// holds), 64 to a statement, as ingestion does.
func benchInsertFloor(b *testing.B, be backend, rec AuditRecord) {
	ctx := context.Background()
	s, err := Open(ctx, be.target(b), &Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.StopTimer()
	rows := make([]AuditRecord, b.N)
	prev := genesis
	for i := range rows {
		r, err := s.normalAudit(rec)
		if err != nil {
			b.Fatal(err)
		}
		r.Seq, r.Prev = int64(i+1), prev
		r.Hash = auditHash(r)
		prev = r.Hash
		rows[i] = r
	}
	st, err := s.db.PrepareContext(ctx, auditInsertRowsSQL(64))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.ReportAllocs()
	cpu0 := cpuclock.Now()
	b.StartTimer()
	args := make([]any, 0, 9*64)
	for len(rows) > 0 {
		batch := rows[:min(len(rows), 3000)]
		rows = rows[len(batch):]
		if err := s.writeKeep(ctx, func(tx *sql.Tx) error {
			for len(batch) > 0 {
				n := min(len(batch), 64)
				q := tx.StmtContext(ctx, st)
				if n < 64 {
					q, err = tx.PrepareContext(ctx, auditInsertRowsSQL(n))
					if err != nil {
						return err
					}
				}
				args = args[:0]
				for _, r := range batch[:n] {
					args = append(args, r.Seq, r.At.UnixNano(), r.Kind, r.Actor, r.Agent, r.Tool, string(r.Body), r.Prev, r.Hash)
				}
				if _, err := q.ExecContext(ctx, args...); err != nil {
					return err
				}
				batch = batch[n:]
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpuclock.Report(b, cpu0)
	if n, _, err := s.VerifyAudit(ctx); err != nil || n != int64(b.N) {
		b.Fatalf("VerifyAudit = %d, %v; want %d", n, err, b.N)
	}
}

// BenchmarkTake: one rate-limit take (a read and an upsert in one write
// transaction under the write lock) on one bucket, serially and with 8
// concurrent callers, on each backend.
func BenchmarkTake(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			opts := &Options{}
			if !be.pg {
				opts.Synchronous = "NORMAL" // the test cluster does not fsync either
			}
			s, err := Open(ctx, be.target(b), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			// A token a nanosecond, 2^40 of them at one fixed now: every
			// take is allowed, and each is a read and a write.
			rate := Rate{Capacity: 1 << 40, Refill: 1, Interval: time.Nanosecond}
			key := BucketKey{"research", "weather", "r"}
			now := time.Now()
			b.Run("serial", func(b *testing.B) {
				for b.Loop() {
					if ok, _, err := s.Take(ctx, key, rate, 1, now); err != nil || !ok {
						b.Fatal(ok, err)
					}
				}
			})
			b.Run("parallel8", func(b *testing.B) {
				b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if ok, _, err := s.Take(ctx, key, rate, 1, now); err != nil || !ok {
							b.Error(ok, err)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkPgWriteLock: what the one advisory write lock costs on
// PostgreSQL. The same write transaction (an upsert of one of 64 rows, so
// that writers rarely touch the same row) with its first statement (the
// lock and the generation counter, whose one row is a serialisation point
// of its own), and with a SELECT 1 in its place (the same round trips, no
// lock and no counter: unsafe, a baseline only), serially and with 8
// concurrent writers.
func BenchmarkPgWriteLock(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, backends[1].target(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	locked := s.pg.lock
	var n atomic.Int64
	write := func() error {
		k := n.Add(1) % 64
		return s.writeKeep(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO rate_buckets (bucket, tat) VALUES (?, ?)
				ON CONFLICT (bucket) DO UPDATE SET tat = excluded.tat`, fmt.Sprint("b", k), k)
			return err
		})
	}
	// Interleaved, so that a machine whose load drifts during the run
	// weighs on both alike: compare each round's pair.
	modes := []struct{ name, lock string }{}
	for r := range 3 {
		modes = append(modes, struct{ name, lock string }{fmt.Sprint("round", r, "/lock"), locked}, struct{ name, lock string }{fmt.Sprint("round", r, "/nolock"), "SELECT 1"})
	}
	for _, mode := range modes {
		s.pg.lock = mode.lock
		b.Run(mode.name+"/serial", func(b *testing.B) {
			for b.Loop() {
				if err := write(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/parallel8", func(b *testing.B) {
			b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := write(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	s.pg.lock = locked
}

// BenchmarkSessionsGeneration is what a call in a session pays to know
// whether the session it kept is still the session: SessionsGeneration
// (on PostgreSQL the change feed's sessions epoch, no round trip while the
// feed is trusted; on SQLite the counters table, read again only when
// SQLite's change counter moved) against Generation, what the session
// gate read before (on PostgreSQL a query).
//
//	go test ./internal/store -run '^$' -bench SessionsGeneration -benchtime 2000x -count 3
func BenchmarkSessionsGeneration(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, be.target(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			if be.pg {
				deadline := time.Now().Add(10 * time.Second)
				for {
					if _, ok := s.pg.feed.sessionsEpoch(); ok {
						break
					}
					if time.Now().After(deadline) {
						b.Fatal("the change feed did not connect within 10 s")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			for _, r := range []struct {
				name string
				read func(context.Context) (int64, error)
			}{{"sessions-generation", s.SessionsGeneration}, {"generation", s.Generation}} {
				b.Run(r.name, func(b *testing.B) {
					for b.Loop() {
						if _, err := r.read(ctx); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
