package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/inbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// inboxAuditEnv is a Host with one declared agent and its store, and the
// audit page's backend over it on a clock the test moves.
type inboxAuditEnv struct {
	t     *testing.T
	h     *maiden.Host
	b     hostInbox
	state string
	clock time.Time
}

func newInboxAuditEnv(t *testing.T) *inboxAuditEnv {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.toml")
	toml := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n[agents.bot]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --message=*\"]\n", testkit.Component(t, "echo"))
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := &inboxAuditEnv{t: t, state: filepath.Join(dir, "state.db"), clock: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	e.h, err = maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t), StatePath: e.state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.h.Close(context.Background()) })
	e.b = newHostInbox(e.h)
	e.b.audit.now = func() time.Time { return e.clock }
	return e
}

// calls makes n calls, each adding its records to the trail.
func (e *inboxAuditEnv) calls(n int) {
	e.t.Helper()
	for i := range n {
		if res, err := e.h.Call(context.Background(), maiden.Call{Agent: "bot", Tool: "echo", Input: fmt.Sprintf(`{"message":"m%d"}`, i)}); err != nil || !res.OK {
			e.t.Fatalf("call: %+v, %v", res, err)
		}
	}
}

// records is the trail's length, as a check of every record finds it.
func (e *inboxAuditEnv) records() int64 {
	e.t.Helper()
	n, _, err := e.h.VerifyAudit(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// edit changes the store's file as someone who can write it would.
func (e *inboxAuditEnv) edit(sql string) {
	e.t.Helper()
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		e.t.Fatal("the sqlite3 command-line shell is needed (Debian package sqlite3; make test installs it, see scripts/deps)")
	}
	// The host holds the store open and writes to it (the journal's
	// ingestion, sessions): the shell waits for its write lock, as
	// maiden's own connections do, rather than fail at once with "database
	// is locked" (its default; seen in a loaded full run).
	if out, err := exec.Command(sqlite, "-cmd", ".timeout 10000", e.state, sql).CombinedOutput(); err != nil {
		e.t.Fatalf("sqlite3: %v: %s", err, out)
	}
}

// TestInboxAuditCheckFromItsMark: the audit page checks the records added
// since its last view (its cost is those, not the trail's length), and
// every record again once auditWholeEvery has passed; a problem found is
// found again at the next view, not cleared by a check from the start.
func TestInboxAuditCheckFromItsMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("edited before the mark", func(t *testing.T) {
		t.Parallel()
		e := newInboxAuditEnv(t)
		e.calls(3)
		n1 := e.records()
		first := e.clock
		if c, err := e.b.VerifyAudit(ctx); err != nil || c != (inbox.AuditCheck{Records: n1}) {
			t.Fatalf("first view: %+v, %v; want every one of %d records checked now", c, err, n1)
		}
		e.calls(2)
		n2 := e.records()
		e.clock = e.clock.Add(time.Minute)
		if c, err := e.b.VerifyAudit(ctx); err != nil || c != (inbox.AuditCheck{Records: n2, Whole: first, Read: n2 - n1}) {
			t.Fatalf("second view: %+v, %v; want %d records, the %d added read, every record checked at the first view", c, err, n2, n2-n1)
		}
		// A record before the mark edited: not a view's to find until
		// the next check of every record.
		e.edit(`UPDATE audit SET tool = 'evil' WHERE seq = 1`)
		e.clock = e.clock.Add(time.Minute)
		if c, err := e.b.VerifyAudit(ctx); err != nil || c != (inbox.AuditCheck{Records: n2, Whole: first}) {
			t.Fatalf("a view with nothing added: %+v, %v; want the %d records, none read", c, err, n2)
		}
		e.clock = first.Add(auditWholeEvery)
		for view := range 2 {
			if _, err := e.b.VerifyAudit(ctx); !errors.Is(err, inbox.ErrAuditBroken) || !strings.Contains(err.Error(), "record 1 edited") {
				t.Fatalf("view %d %s after the first: %v; want the edit of record 1 found", view, auditWholeEvery, err)
			}
		}
	})
	t.Run("cut after the mark", func(t *testing.T) {
		t.Parallel()
		e := newInboxAuditEnv(t)
		e.calls(3)
		n := e.records()
		if c, err := e.b.VerifyAudit(ctx); err != nil || c.Records != n {
			t.Fatalf("first view: %+v, %v", c, err)
		}
		// The trail cut short verifies from its start (the chain has no
		// key); the page, which saw its last record, says what happened,
		// at every view, the checks of every record included.
		e.edit(fmt.Sprintf(`DELETE FROM audit WHERE seq > %d`, n-2))
		if got := e.records(); got != n-2 {
			t.Fatalf("VerifyAudit of the cut trail: %d records, want %d", got, n-2)
		}
		for view, after := range []time.Duration{time.Minute, auditWholeEvery, 2 * auditWholeEvery} {
			e.clock = e.clock.Add(after)
			want := fmt.Sprintf("record %d deleted: the trail ends at record %d", n-1, n-2)
			if _, err := e.b.VerifyAudit(ctx); !errors.Is(err, inbox.ErrAuditBroken) || !strings.Contains(err.Error(), want) {
				t.Fatalf("view %d after the cut: %v; want %q", view, err, want)
			}
		}
	})
}
