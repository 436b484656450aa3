package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// TestRebind: '?' outside literals, quoted identifiers and comments
// becomes $1, $2, ... in order; inside them it stays.
func TestRebind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT ?`, `SELECT $1`},
		{`INSERT INTO t (a, b) VALUES (?, ?)`, `INSERT INTO t (a, b) VALUES ($1, $2)`},
		{`WHERE a = ? OR ? = ''`, `WHERE a = $1 OR $2 = ''`},
		{`SELECT '?', ?`, `SELECT '?', $1`},
		{`SELECT 'it''s ?', ?`, `SELECT 'it''s ?', $1`},
		{`SELECT E'\'?', ?`, `SELECT E'\'?', $1`},
		{`SELECT e'\\', ?`, `SELECT e'\\', $1`},
		{`SELECT 'a\', ?`, `SELECT 'a\', $1`}, // standard strings: a backslash is itself
		{`SELECT "col?" FROM t WHERE x = ?`, `SELECT "col?" FROM t WHERE x = $1`},
		{`SELECT "a""?" , ?`, `SELECT "a""?" , $1`},
		{"SELECT ? -- why?\n, ?", "SELECT $1 -- why?\n, $2"},
		{`SELECT ? /* a /* nested ? */ still ? */ , ?`, `SELECT $1 /* a /* nested ? */ still ? */ , $2`},
		{`SELECT $$?$$, ?`, `SELECT $$?$$, $1`},
		{`SELECT $tag$ '? $$ ? $tag$, ?`, `SELECT $tag$ '? $$ ? $tag$, $1`},
		{`SELECT a$b, ?`, `SELECT a$b, $1`},
		{`SELECT $1, ?`, `SELECT $1, $1`}, // a query mixing both is the caller's mistake; $1 is not a dollar quote
		{`SELECT 'open ?`, `SELECT 'open ?`},
		{`SELECT ?, /* open ?`, `SELECT $1, /* open ?`},
	} {
		if got := rebind(tc.in); got != tc.want {
			t.Errorf("rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRebind: rebind changes nothing but the placeholders it finds, which
// it numbers in order; a literal holding any text, quoted as PostgreSQL
// quotes it, is never touched.
func FuzzRebind(f *testing.F) {
	f.Add(`SELECT ?, '?', "?" -- ?`, "it's a ?")
	f.Add("$$?$$ /* ? */ E'\\'?' ?", `"?"`)
	f.Fuzz(func(t *testing.T, q, lit string) {
		got := rebind(q)
		// Only '?' → $n, in order, and nothing else changed.
		n, j := 0, 0
		for i := 0; i < len(q); i++ {
			if j >= len(got) {
				t.Fatalf("rebind(%q) = %q: output ends early", q, got)
			}
			if q[i] == got[j] {
				j++
				continue
			}
			if q[i] != '?' {
				t.Fatalf("rebind(%q) = %q: byte %d changed", q, got, i)
			}
			n++
			want := "$" + strconv.Itoa(n)
			if !strings.HasPrefix(got[j:], want) {
				t.Fatalf("rebind(%q) = %q: placeholder %d is not %s", q, got, n, want)
			}
			j += len(want)
		}
		if j != len(got) {
			t.Fatalf("rebind(%q) = %q: trailing output", q, got)
		}
		// A quoted literal and identifier around a placeholder: only the
		// placeholder changes.
		quoted := "'" + strings.ReplaceAll(lit, "'", "''") + "'"
		ident := `"` + strings.ReplaceAll(lit, `"`, `""`) + `"`
		in := "SELECT " + quoted + ", ?, " + ident + " /* " + strings.ReplaceAll(lit, "*/", "") + " */"
		want := "SELECT " + quoted + ", $1, " + ident + " /* " + strings.ReplaceAll(lit, "*/", "") + " */"
		if !strings.Contains(lit, "/*") { // a nested opener would swallow the rest, as PostgreSQL's lexer does
			if got := rebind(in); got != want {
				t.Fatalf("rebind(%q) = %q, want %q", in, got, want)
			}
		}
	})
}

// TestRebindAgainstServer: PostgreSQL itself reads literals full of '?'
// back exactly, beside a placeholder: the rewriting and the server's lexer
// agree on where literals end.
func TestRebindAgainstServer(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t), nil)
	for _, lit := range []string{"?", "it's ?", `\?`, "''?''", "$$?$$", "/* ? */", "-- ?", `"?"`, "?\n?", "E'?'"} {
		quoted := "'" + strings.ReplaceAll(lit, "'", "''") + "'"
		var a, b string
		var n int64
		err := s.db.QueryRow(`SELECT `+quoted+`, ?::text, ?::bigint /* ? */ -- ?`+"\n", "param?", int64(42)).Scan(&a, &b, &n)
		if err != nil || a != lit || b != "param?" || n != 42 {
			t.Errorf("literal %q: got %q %q %d, %v", lit, a, b, n, err)
		}
		var e string
		escaped := "E'" + strings.ReplaceAll(strings.ReplaceAll(lit, `\`, `\\`), "'", `\'`) + "'"
		if err := s.db.QueryRow(`SELECT `+escaped+` || ?`, "!").Scan(&e); err != nil || e != lit+"!" {
			t.Errorf("E-literal %q: got %q, %v", lit, e, err)
		}
	}
}

// TestPgDDL: the portable migrations' types become PostgreSQL's, and
// nothing else changes.
func TestPgDDL(t *testing.T) {
	t.Parallel()
	in := `CREATE TABLE t (name TEXT PRIMARY KEY, data BLOB, x REAL, n BIGINT, note TEXT DEFAULT 'TEXT', "TEXT" INTEGER) -- TEXT`
	want := `CREATE TABLE t (name TEXT COLLATE "C" PRIMARY KEY, data BYTEA, x DOUBLE PRECISION, n BIGINT, note TEXT COLLATE "C" DEFAULT 'TEXT', "TEXT" INTEGER) -- TEXT`
	if got := pgDDL(in); got != want {
		t.Fatalf("pgDDL:\n got %s\nwant %s", got, want)
	}
	// Every migration is accepted by the server (Open ran them) and TEXT
	// sorts bytewise there, as in SQLite.
	s := open(t, pgtest.URL(t), nil)
	mustAgents(t, s, "b", "B", "a", "_", "é")
	as, err := s.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range as {
		names = append(names, a.Name)
	}
	if got := strings.Join(names, " "); got != "B _ a b é" {
		t.Fatalf("agents in order %q, want bytewise %q", got, "B _ a b é")
	}
}

// TestPostgresURLRefused: a password in the URL is refused without being
// repeated; a malformed URL is refused without being repeated either.
func TestPostgresURLRefused(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://maiden:hunter2secret@127.0.0.1:1/db",
		"postgresql://maiden@127.0.0.1:1/db?sslmode=disable&password=hunter2secret",
		"postgres://maiden@127.0.0.1:1/db?PASSWORD=hunter2secret",
		"postgres://maiden:hunter2secret@[::1/db",
	} {
		s, err := Open(context.Background(), u, nil)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%s) succeeded", u)
		}
		if !errors.Is(err, ErrBadInput) || strings.Contains(err.Error(), "hunter2secret") {
			t.Fatalf("Open(%s) = %v; want ErrBadInput without the password", u, err)
		}
		t.Log(err)
	}
}

// TestPostgresUnreachable: a server that is not there is ErrUnavailable,
// naming host and port, never the password (from PGPASSWORD).
func TestPostgresUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	t.Setenv("PGPASSWORD", "hunter2secret")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, "postgres://maiden@"+addr+"/db?sslmode=disable", nil)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "hunter2secret") {
		t.Fatalf("Open = %v; want ErrUnavailable naming %s", err, addr)
	}
	t.Log(err)
}

// withUser is dbURL connecting as role user.
func withUser(t *testing.T, dbURL, user string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

// TestPostgresPrivileges: a role that may not create tables in the schema
// gets ErrPrivilege naming CREATE on the schema; once the schema is
// migrated, a role lacking a table privilege the store uses gets one
// naming it; with them all, Open works, even with UPDATE and DELETE on
// the audit trail denied.
func TestPostgresPrivileges(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	role := "maiden_r" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	pgtest.Exec(t, dbURL, "CREATE ROLE "+role+" LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC")
	t.Cleanup(func() { pgtest.TryExec(t, dbURL, "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	as := withUser(t, dbURL, role)
	_, err := Open(context.Background(), as, nil)
	if !errors.Is(err, ErrPrivilege) || !strings.Contains(err.Error(), "CREATE ON SCHEMA public TO "+role) {
		t.Fatalf("Open without CREATE: %v", err)
	}
	t.Log(err)

	open(t, dbURL, nil).Close() // migrated by the owner
	pgtest.Exec(t, dbURL, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO "+role)
	_, err = Open(context.Background(), as, nil)
	if !errors.Is(err, ErrPrivilege) || !strings.Contains(err.Error(), "UPDATE on table counters") || !strings.Contains(err.Error(), "INSERT on table audit") {
		t.Fatalf("Open with SELECT only: %v", err)
	}
	t.Log(err)

	pgtest.Exec(t, dbURL, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "+role+"; REVOKE UPDATE, DELETE ON audit FROM "+role)
	s := open(t, as, nil)
	mustAgents(t, s, "a")
	if _, err := s.AppendAudit(context.Background(), journalRec("t", 1)); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, s, 1)
	if _, err := s.db.Exec(`UPDATE audit SET tool = 'evil'`); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("an UPDATE of the audit trail as the role: %v", err)
	}
}

// TestPostgresConcurrentMigrations: several Opens of one new database at
// once (goroutines and child processes) all succeed; each migration ran
// once (a second run would fail on its CREATE TABLE).
func TestPostgresConcurrentMigrations(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	const gs, kids = 6, 2
	var wg sync.WaitGroup
	errs := make(chan error, gs+kids)
	for range kids {
		wg.Go(func() {
			cmd := journalChild(dbURL, "open", "", 0) // opens, then adds an agent
			errs <- cmd.Run()
		})
	}
	for range gs {
		wg.Go(func() {
			s, err := Open(context.Background(), dbURL, nil)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := strings.TrimSpace(pgtest.Exec(t, dbURL, `SELECT count(*), min(version), max(version) FROM schema_migrations`))
	if want := fmt.Sprintf("%d|1|%d", SchemaVersion(), SchemaVersion()); got != want {
		t.Fatalf("schema_migrations: %s, want %s", got, want)
	}
}

// TestPostgresTwoInstances: two stores on one database, as two maiden
// instances: a revocation on A is in B's next wallet, B's Generation moved
// and B's WaitChange woke (by notification: well within a second); an
// approval decided on A is seen by B, and consumed once under a race
// between both.
func TestPostgresTwoInstances(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	c, err := a.Grant(ctx, "x", spec(t, "tool:invoke t"))
	if err != nil {
		t.Fatal(err)
	}
	if w, err := b.Wallet(ctx, "x", time.Now()); err != nil || len(w.Cards()) != 1 {
		t.Fatalf("B's wallet: %v, %v", w, err)
	}
	g0, err := b.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan time.Time, 1)
	go func() {
		if _, err := b.WaitChange(ctx, g0); err != nil {
			t.Error(err)
		}
		woke <- time.Now()
	}()
	time.Sleep(50 * time.Millisecond)
	revoked := time.Now()
	if _, err := a.Revoke(ctx, Operator(), c.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-woke:
		t.Logf("B woke %v after A's revocation", at.Sub(revoked))
		if at.Sub(revoked) > 500*time.Millisecond {
			t.Fatalf("B woke %v after the revocation: not by the notification", at.Sub(revoked))
		}
	case <-time.After(2 * time.Second):
		t.Fatal("B's WaitChange did not wake")
	}
	if g1, _ := b.Generation(ctx); g1 == g0 {
		t.Fatal("B's generation did not move")
	}
	if w, err := b.Wallet(ctx, "x", time.Now()); err != nil || len(w.Cards()) != 0 {
		t.Fatalf("B's wallet after A's revocation: %v, %v", w.Cards(), err)
	}

	ap, err := b.CreateApproval(ctx, Approval{Agent: "x", Tool: "t", Digest: "d", Middleware: "m", Expires: time.Now().Add(time.Hour)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Decide(ctx, ap.ID, true, "operator:ann", "ok"); err != nil {
		t.Fatal(err)
	}
	if got, found, err := b.FindApproved(ctx, "x", "t", "d", time.Now()); err != nil || !found || got.ID != ap.ID {
		t.Fatalf("B's FindApproved: %v %v %v", got, found, err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			_, err := s.ConsumeAndStart(ctx, ap.ID, Binding{})
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, ErrApprovalState):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d consumers won", wins.Load())
	}
}

// TestPostgresLimitsAcrossInstances: one bucket and one quota, taken
// concurrently through two stores, allow exactly their capacity (no lost
// update across instances).
func TestPostgresLimitsAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	now := time.Now()
	rate := Rate{Capacity: 25, Refill: 1, Interval: time.Hour}
	var took, spent atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		s := []*DB{a, b}[i%2]
		wg.Go(func() {
			for range 10 {
				ok, _, err := s.Take(ctx, BucketKey{"x", "t", "r"}, rate, 1, now)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					took.Add(1)
				}
				ok, _, err = s.Spend(ctx, QuotaKey{"x", "q"}, 30, time.Hour, 1, now)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					spent.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if took.Load() != 25 || spent.Load() != 30 {
		t.Fatalf("took %d (want 25), spent %d (want 30)", took.Load(), spent.Load())
	}
}

// TestPostgresAuditTwoInstances: audit records appended at once through
// two stores (directly and through each one's journal) form one chain
// that verifies from either; an edit through psql breaks it.
func TestPostgresAuditTwoInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := openOpts(t, dbURL, &Options{JournalDir: t.TempDir()})
	b := openOpts(t, dbURL, &Options{JournalDir: t.TempDir()})
	const per = 100
	var wg sync.WaitGroup
	for i, s := range []*DB{a, b} {
		wg.Go(func() {
			for k := range per {
				if _, err := s.AppendAudit(ctx, journalRec("direct"+strconv.Itoa(i), k)); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Go(func() {
			for k := range per {
				if err := s.Journal().Append(journalRec("journal"+strconv.Itoa(i), k)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := a.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, damaged := chainByTool(t, b) // B flushes its own journal
	for _, tool := range []string{"direct0", "direct1", "journal0", "journal1"} {
		wantSeq(t, tool, got[tool], per)
	}
	if len(damaged) != 0 {
		t.Fatalf("damaged: %v", damaged)
	}
	n, headA, err := a.VerifyAudit(ctx)
	if err != nil || n != 4*per {
		t.Fatalf("A's VerifyAudit: %d, %v", n, err)
	}
	pgtest.Exec(t, dbURL, `UPDATE audit SET body = '{"i":-1}' WHERE seq = 150`)
	_, _, err = b.VerifyAudit(ctx)
	var p *AuditProblem
	if !errors.As(err, &p) || p.Seq != 150 || p.Reason != "edited" {
		t.Fatalf("VerifyAudit after an edit: %v (head was %s)", err, headA)
	}
}

// TestPostgresSweepKeepsOthersPositions: an instance's sweep (at Open,
// and every 30 s) does not forget the ingestion position of another
// instance's live journal file, which it cannot see: that file's records
// are in the chain once, not again from its start.
func TestPostgresSweepKeepsOthersPositions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := openOpts(t, dbURL, &Options{JournalDir: t.TempDir()})
	for k := range 10 {
		if err := a.Journal().Append(journalRec("a", k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b := openOpts(t, dbURL, &Options{JournalDir: t.TempDir()}) // its Open sweeps
	if err := b.sweepJournals(ctx); err != nil {
		t.Fatal(err)
	}
	for k := 10; k < 20; k++ {
		if err := a.Journal().Append(journalRec("a", k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := chainByTool(t, b)
	wantSeq(t, "a", got["a"], 20)
}

// TestPostgresRestart: the database restarts under two instances. While
// it is down, calls fail with ErrUnavailable naming the server; journal
// appends are still acknowledged (they wait in the file); once it is
// back, everything works, the change feed listens again, and nothing
// committed or acknowledged is lost or duplicated. (Not parallel: the
// cluster is shared by the test binary.)
func TestPostgresRestart(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := openOpts(t, dbURL, &Options{JournalDir: t.TempDir(), JournalInterval: time.Millisecond})
	b := openOpts(t, dbURL, &Options{JournalDir: t.TempDir()})
	mustAgents(t, a, "x")
	c, err := a.Grant(ctx, "x", spec(t, "tool:invoke t"))
	if err != nil {
		t.Fatal(err)
	}
	for k := range 10 {
		if err := a.Journal().Append(journalRec("j", k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}

	pgtest.Stop(t)
	stopped := true
	defer func() {
		if stopped {
			pgtest.Start(t)
		}
	}()
	_, err = b.Wallet(ctx, "x", time.Now())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), pgtest.Addr(t)) {
		t.Fatalf("Wallet while the database is down: %v; want ErrUnavailable naming %s", err, pgtest.Addr(t))
	}
	t.Log(err)
	if _, err := b.Generation(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Generation while down: %v", err)
	}
	if _, err := a.Revoke(ctx, Operator(), c.ID); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Revoke while down: %v", err)
	}
	for k := 10; k < 20; k++ { // acknowledged: in the journal file
		if err := a.Journal().Append(journalRec("j", k)); err != nil {
			t.Fatal(err)
		}
	}
	pgtest.Start(t)
	stopped = false

	g0, err := b.Generation(ctx)
	if err != nil {
		t.Fatalf("Generation after the restart: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !b.pg.feed.up.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !b.pg.feed.up.Load() {
		t.Fatal("the change feed did not listen again")
	}
	woke := make(chan error, 1)
	go func() { _, err := b.WaitChange(ctx, g0); woke <- err }()
	if n, err := a.Revoke(ctx, Operator(), c.ID); err != nil || n != 1 {
		t.Fatalf("Revoke after the restart: %d, %v", n, err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("B did not see A's revocation after the restart")
	}
	if w, err := b.Wallet(ctx, "x", time.Now()); err != nil || len(w.Cards()) != 0 {
		t.Fatalf("B's wallet: %v, %v", w, err)
	}
	var flushErr error
	for range 100 { // the ingester retries with a growing pause
		if flushErr = a.Journal().Flush(ctx); flushErr == nil {
			break
		}
	}
	if flushErr != nil {
		t.Fatal(flushErr)
	}
	got, _ := chainByTool(t, b)
	wantSeq(t, "j", got["j"], 20)
}

// TestPostgresFeedFallback: with the notification connections killed
// (found by their application_name; B's kept from reconnecting), a waiter still sees another instance's change
// within a second, by polling; let go, the feed listens again and its
// notification wakes waiters (the safety poll set an hour away).
func TestPostgresFeedFallback(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	b.pg.feed.hold.Store(true)
	pgtest.Exec(t, dbURL, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = '`+pgFeedApp+`'`)
	deadline := time.Now().Add(5 * time.Second)
	for b.pg.feed.up.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if b.pg.feed.up.Load() {
		t.Fatal("the feed did not notice its connection was gone")
	}
	waitSees := func(what string, within time.Duration) time.Duration {
		t.Helper()
		g0, err := b.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		woke := make(chan error, 1)
		go func() { _, err := b.WaitChange(ctx, g0); woke <- err }()
		time.Sleep(30 * time.Millisecond)
		changed := time.Now()
		mustAgents(t, a, what)
		select {
		case err := <-woke:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(within):
			t.Fatalf("%s: a change was not seen within %v", what, within)
		}
		return time.Since(changed)
	}
	t.Logf("feed down: seen %v after the change", waitSees("y", time.Second))
	b.pg.feed.hold.Store(false)
	for !b.pg.feed.up.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !b.pg.feed.up.Load() {
		t.Fatal("the feed did not listen again")
	}
	// Listening again, the notification wakes the waiter: with the feed's
	// safety poll put an hour away, nothing else can within the minute
	// this waits (a bound of time on the wake-up itself failed on a
	// loaded machine, seen after 2.5 s).
	b.pg.feed.pollUp.Store(int64(time.Hour))
	t.Logf("feed up: seen %v after the change", waitSees("z", time.Minute))
}

// TestWaitChangeSQLite: on SQLite WaitChange sees another process's (here
// another store's) commit by polling the WAL index.
func TestWaitChangeSQLite(t *testing.T) {
	ctx := context.Background()
	path := backends[0].target(t)
	a := open(t, path, nil)
	b := open(t, path, nil)
	g0, _ := b.Generation(ctx)
	woke := make(chan error, 1)
	go func() { _, err := b.WaitChange(ctx, g0); woke <- err }()
	time.Sleep(20 * time.Millisecond)
	mustAgents(t, a, "x")
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("not seen within 1 s")
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	g1, _ := b.Generation(ctx)
	if _, err := b.WaitChange(wctx, g1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitChange with nothing changing: %v", err)
	}
}

// TestNULStrings: PostgreSQL's text refuses NUL bytes, SQLite stores them.
// A write carrying one fails on PostgreSQL, cleanly (an error, nothing
// written), and the store goes on working; a rendered call with NUL is
// refused rather than stored.
func TestNULStrings(t *testing.T) {
	t.Parallel()
	eachBackend(t, testNULStrings)
}

func testNULStrings(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	_, err := s.CreateApproval(ctx, Approval{Agent: "x", Tool: "t", Digest: "d", Middleware: "m", Rendered: "t --a=\x00", Expires: time.Now().Add(time.Hour)}, 0)
	if be.pg != (err != nil) {
		t.Fatalf("CreateApproval with a NUL: %v", err)
	}
	t.Log(err)
	if p, err := s.PendingApprovals(ctx, time.Now()); err != nil || len(p) != map[bool]int{true: 0, false: 1}[be.pg] {
		t.Fatalf("pending after it: %v, %v", p, err)
	}
	mustAgents(t, s, "x")
}
