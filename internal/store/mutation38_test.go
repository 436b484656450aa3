package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
)

// Tests of the thirty-eighth mutation pass (docs/security-tests.md): the
// promises of sessions.go, approvals.go and sqlite.go that no earlier test
// held. SQLite only, where a promise is SQLite's own (the file's settings)
// or the same SQL on both backends.

func clockAt() *clock { return &clock{t: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)} }

// TestMutation38SQLiteSettings: a SQLite file is opened in WAL mode, with
// foreign keys enforced, a 10 s busy timeout by default, synchronous FULL
// (NORMAL when asked, nothing weaker), and every transaction takes the
// write lock when it begins.
func TestMutation38SQLiteSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "state.db"), nil)
	var mode string
	var fk, busy, sync int
	if err := s.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := s.db.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v; want 1", fk, err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO session_revisions (session, revision, boundary, created_at, why) VALUES ('no-such-session', 0, '{}', 0, 'x')`); err == nil {
		t.Fatal("a revision of a session that does not exist was stored; want the foreign key to refuse it")
	}
	if err := s.db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil || busy != 10000 {
		t.Fatalf("busy_timeout = %d, %v; want 10000 (10 s, the default)", busy, err)
	}
	if err := s.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d, %v; want 2 (FULL)", sync, err)
	}
	normal, err := Open(ctx, filepath.Join(dir, "normal.db"), &Options{Synchronous: "normal"})
	if err != nil {
		t.Fatal(err)
	}
	defer normal.Close()
	if err := normal.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil || sync != 1 {
		t.Fatalf("synchronous with Options.Synchronous NORMAL = %d, %v; want 1 (NORMAL)", sync, err)
	}
	for _, weak := range []string{"OFF", "off", "0", "EXTRA "} {
		if o, err := Open(ctx, filepath.Join(dir, "weak.db"), &Options{Synchronous: weak}); !errors.Is(err, ErrBadInput) {
			if err == nil {
				o.Close()
			}
			t.Fatalf("Open with synchronous %q = %v; want ErrBadInput", weak, err)
		}
	}
	// BEGIN IMMEDIATE: a second transaction waits for the first's write
	// lock from its start, and fails once the busy timeout is over.
	short, err := Open(ctx, filepath.Join(dir, "short.db"), &Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	tx1, err := short.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback()
	tx2, err := short.db.BeginTx(ctx, nil)
	if err == nil {
		tx2.Rollback()
		t.Fatal("a second transaction began while another held the file: want SQLITE_BUSY at BEGIN (transactions take the write lock when they begin)")
	}
	if !isBusy(err) {
		t.Fatalf("a second transaction's BEGIN = %v; want SQLITE_BUSY", err)
	}
}

// TestMutation38OpenRefusesHash: a path holding '#' (which the driver
// would read as the start of a fragment) is refused.
func TestMutation38OpenRefusesHash(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "a#b.db")
	if s, err := Open(context.Background(), p, nil); !errors.Is(err, ErrBadInput) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open(%q) = %v; want ErrBadInput", p, err)
	}
}

// TestMutation38TouchSession: an ended session's touch is ErrSessionEnded
// (callers use it as their liveness check), and a session used more than
// a minute after its last recorded use has its use recorded.
func TestMutation38TouchSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := clockAt()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), c)
	openSession(t, s, "a", "coder")
	c.add(2 * time.Minute)
	if err := s.TouchSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if ss, _ := s.Session(ctx, "a"); !ss.LastUsed.Equal(c.now()) {
		t.Fatalf("a session used 2 minutes after it was opened: last used %s; want %s", ss.LastUsed, c.now())
	}
	if err := s.EndSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c.add(2 * time.Minute)
	if err := s.TouchSession(ctx, "a"); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("TouchSession of an ended session = %v; want ErrSessionEnded", err)
	}
}

// TestMutation38ResetSession: a reset needs a name for who made it, is
// refused on an ended session with ErrSessionEnded, and becomes exactly
// the next revision whatever revision the caller's boundary says.
func TestMutation38ResetSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	openSession(t, s, "a", "coder")
	if _, err := s.ResetSession(ctx, "a", workBoundary(), ""); !errors.Is(err, ErrBadInput) {
		t.Fatalf("ResetSession by nobody = %v; want ErrBadInput", err)
	}
	b := workBoundary()
	b.Revision = 7
	ss, err := s.ResetSession(ctx, "a", b, "cli:root")
	if err != nil {
		t.Fatal(err)
	}
	if got := revisionNumbers(t, s, "a"); ss.Boundary.Revision != 1 || len(got) != 2 || got[1] != 1 {
		t.Fatalf("a reset of revision 0 with a boundary saying 7: session at %d, revisions %v; want exactly the next, 1", ss.Boundary.Revision, got)
	}
	if err := s.EndSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResetSession(ctx, "a", workBoundary(), "cli:root"); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("ResetSession of an ended session = %v; want ErrSessionEnded", err)
	}
	if got := revisionNumbers(t, s, "a"); len(got) != 2 {
		t.Fatalf("revisions after a refused reset: %v; want [0 1]", got)
	}
}

// TestMutation38EndSessionDeniesEveryPending: ending a session denies
// every one of its pending requests (session_ended), and the end is
// recorded as by whom EndSessionAs names.
func TestMutation38EndSessionDeniesEveryPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	openSession(t, s, "a", "coder")
	var hs []string
	for _, id := range []string{"r1", "r2", "r3"} {
		hs = append(hs, request(t, s, "a", id, expansion("/srv/"+id, "read", "exact")).Handle)
	}
	if ended, err := s.EndSessionAs(ctx, "a", "cli:ann"); err != nil || !ended {
		t.Fatalf("EndSessionAs = %v, %v", ended, err)
	}
	for _, h := range hs {
		r, _ := s.BoundaryRequest(ctx, h)
		if r.Request.Status != boundary.Denied || r.Request.Reason != BoundaryReasonSessionEnded {
			t.Fatalf("request %s after its session ended: %s (%s); want denied session_ended", r.Request.ID, r.Request.Status, r.Request.Reason)
		}
	}
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.Kind != AuditSessionEnded || last.Actor != "cli:ann" || !strings.Contains(string(last.Body), `"denied_requests":3`) {
		t.Fatalf("last record %s by %s: %s; want session-ended by cli:ann with 3 denied requests", last.Kind, last.Actor, last.Body)
	}
}

// TestMutation38BoundaryRequestExpiryInstant: a boundary request's expiry
// is exclusive: at its exact instant it is expired for every path (not
// listed pending, not settled, denied expired when asked again, expired
// by ExpireBoundaryRequests), and a request may not be made expiring now.
func TestMutation38BoundaryRequestExpiryInstant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := clockAt()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), c)
	openSession(t, s, "a", "coder")
	if _, _, err := s.RequestBoundary(ctx, "a", "now", expansion("/srv/now", "read", "exact"), "j", c.now(), 0); !errors.Is(err, ErrBadInput) {
		t.Fatalf("RequestBoundary expiring at now = %v; want ErrBadInput", err)
	}
	exp := c.now().Add(time.Hour)
	mk := func(id string) BoundaryRequest {
		r, _, err := s.RequestBoundary(ctx, "a", id, expansion("/srv/"+id, "read", "exact"), "j", exp, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	settleMe, again, sweep := mk("settle"), mk("again"), mk("sweep")
	c.add(time.Hour) // exactly at the expiry
	if p, err := s.PendingBoundaryRequests(ctx, c.now()); err != nil || len(p) != 0 {
		t.Fatalf("PendingBoundaryRequests at the requests' expiry = %d, %v; want none", len(p), err)
	}
	r, _, err := s.SettleBoundaryRequest(ctx, settleMe.Handle, boundary.Allow(), "operator:ann")
	if !errors.Is(err, ErrApprovalState) || r.Request.Status != boundary.Denied || r.Request.Reason != BoundaryReasonExpired {
		t.Fatalf("SettleBoundaryRequest at the request's expiry = %s (%s), %v; want denied expired, ErrApprovalState", r.Request.Status, r.Request.Reason, err)
	}
	if ss, _ := s.Session(ctx, "a"); ss.Boundary.Revision != 0 {
		t.Fatalf("an approval at the expiry moved the session to revision %d", ss.Boundary.Revision)
	}
	r, created, err := s.RequestBoundary(ctx, "a", "again", expansion("/srv/again", "read", "exact"), "j", time.Time{}, 0)
	if err != nil || created || r.Handle != again.Handle || r.Request.Status != boundary.Denied || r.Request.Reason != BoundaryReasonExpired {
		t.Fatalf("the same request asked again at its expiry = %s (%s), created %v, %v; want the stored one denied expired", r.Request.Status, r.Request.Reason, created, err)
	}
	if n, err := s.ExpireBoundaryRequests(ctx, c.now()); err != nil || n != 1 {
		t.Fatalf("ExpireBoundaryRequests at the expiry = %d, %v; want 1 (%s)", n, err, sweep.Handle)
	}
}

// TestMutation38SettleNeedsAName: a settlement by nobody is refused,
// nothing changed.
func TestMutation38SettleNeedsAName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	openSession(t, s, "a", "coder")
	r := request(t, s, "a", "r", expansion("/srv/r", "read", "exact"))
	if _, _, err := s.SettleBoundaryRequest(ctx, r.Handle, boundary.Allow(), ""); !errors.Is(err, ErrBadInput) {
		t.Fatalf("SettleBoundaryRequest by nobody = %v; want ErrBadInput", err)
	}
	if got, _ := s.BoundaryRequest(ctx, r.Handle); got.Request.Status != boundary.Pending {
		t.Fatalf("request after a refused settlement: %s", got.Request.Status)
	}
}

// TestMutation38SessionsOfOneAgent: one agent's listing holds its own
// sessions only.
func TestMutation38SessionsOfOneAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	openSession(t, s, "mine", "coder")
	openSession(t, s, "theirs", "other")
	got, err := s.Sessions(ctx, "coder")
	if err != nil || len(got) != 1 || got[0].ID != "mine" {
		var ids []string
		for _, ss := range got {
			ids = append(ids, ss.ID+" of "+ss.Agent)
		}
		t.Fatalf("Sessions(coder) = %v, %v; want [mine]", ids, err)
	}
}

// TestMutation38PendingBoundOwnAgent: one agent's pending boundary
// requests never count against another's bound.
func TestMutation38PendingBoundOwnAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	openSession(t, s, "theirs", "other")
	openSession(t, s, "mine", "coder")
	for _, id := range []string{"x1", "x2"} {
		if _, _, err := s.RequestBoundary(ctx, "theirs", id, expansion("/srv/"+id, "read", "exact"), "j", time.Time{}, 2); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.RequestBoundary(ctx, "mine", "m1", expansion("/srv/m1", "read", "exact"), "j", time.Time{}, 2); err != nil {
		t.Fatalf("coder's first request while other has 2 pending (bound 2) = %v; want it stored", err)
	}
}

// approvalFor is the call newApproval makes, with agent, rule, card
// revision and binding as given.
func approvalFor(c *clock, agent, tool, digest, rule string, gen int64, b Binding) Approval {
	return Approval{Agent: agent, Session: "s1", Tool: tool, Rendered: tool + " --amount=250", Digest: digest, Middleware: rule,
		Reason: "args.amount > 100", CardGeneration: gen, Expires: c.now().Add(time.Hour), Binding: b}
}

// TestMutation38ApprovalSharedOnlyByTheSameCall: CreateApproval returns
// an existing request only for the same agent's same call, under the same
// rule, card revision and binding, while it is pending and unexpired.
func TestMutation38ApprovalSharedOnlyByTheSameCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := clockAt()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), c)
	b := Binding{ToolDigest: "sha256:aa", Policy: "p1"}
	base, err := s.CreateApproval(ctx, approvalFor(c, "a", "pay", "d", "approve#1", 7, b), 0)
	if err != nil {
		t.Fatal(err)
	}
	if same, err := s.CreateApproval(ctx, approvalFor(c, "a", "pay", "d", "approve#1", 7, b), 0); err != nil || same.ID != base.ID {
		t.Fatalf("the same call again = %s, %v; want the pending %s", same.ID, err, base.ID)
	}
	for what, a := range map[string]Approval{
		"another agent's":          approvalFor(c, "b", "pay", "d", "approve#1", 7, b),
		"under another rule":       approvalFor(c, "a", "pay", "d", "approve#2", 7, b),
		"of another card revision": approvalFor(c, "a", "pay", "d", "approve#1", 8, b),
		"under another policy":     approvalFor(c, "a", "pay", "d", "approve#1", 7, Binding{ToolDigest: b.ToolDigest, Policy: "p2"}),
	} {
		got, err := s.CreateApproval(ctx, a, 0)
		if err != nil || got.ID == base.ID || got.Agent != a.Agent || got.State != ApprovalPending {
			t.Fatalf("a call %s = %s of %s (%s), %v; want a request of its own, not %s", what, got.ID, got.Agent, got.State, err, base.ID)
		}
	}
	if _, err := s.Decide(ctx, base.ID, true, "operator:ann", "ok"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CreateApproval(ctx, approvalFor(c, "a", "pay", "d", "approve#1", 7, b), 0); err != nil || got.ID == base.ID || got.State != ApprovalPending {
		t.Fatalf("the same call after its request was approved = %s (%s), %v; want a new pending request", got.ID, got.State, err)
	}
	late, err := s.CreateApproval(ctx, approvalFor(c, "a", "pay", "late", "approve#1", 7, b), 0)
	if err != nil {
		t.Fatal(err)
	}
	c.add(time.Hour)
	if got, err := s.CreateApproval(ctx, approvalFor(c, "a", "pay", "late", "approve#1", 7, b), 0); err != nil || got.ID == late.ID {
		t.Fatalf("the same call after its request expired = %s, %v; want a new request, not %s", got.ID, err, late.ID)
	}
}

// TestMutation38ApprovalStored: what Decide and CreateApproval store is
// what they say (who decided, whether always may be chosen), the decision
// is audited, and a decision at the exact expiry is refused.
func TestMutation38ApprovalStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := clockAt()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), c)
	a := newApproval(t, s, "d1", time.Hour)
	if got, _ := s.Approval(ctx, a.ID); got.AllowAlways {
		t.Fatal("a request whose rule does not allow always stored allow_always")
	}
	if _, err := s.Decide(ctx, a.ID, false, "operator:ann", "no"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Approval(ctx, a.ID); got.DecidedBy != "operator:ann" || got.State != ApprovalDenied {
		t.Fatalf("stored after a denial: %s by %q; want denied by operator:ann", got.State, got.DecidedBy)
	}
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Kind != AuditDenial || recs[len(recs)-1].Actor != "operator:ann" {
		t.Fatalf("audit after a denial: %+v, %v; want a denial record by operator:ann last", recs, err)
	}
	b := newApproval(t, s, "d2", time.Hour)
	c.add(time.Hour)
	if _, err := s.Decide(ctx, b.ID, true, "operator:ann", "ok"); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("Decide at the request's exact expiry = %v; want ErrApprovalState", err)
	}
	wantState(t, s, b.ID, ApprovalExpired)
}

// TestMutation38FindersOwnCall: FindApproved, LatestApproval and
// RecentDenial find only the asking agent's request for that tool, input
// and rule, in the state they look for, while it has not expired.
func TestMutation38FindersOwnCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := clockAt()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), c)
	b := Binding{ToolDigest: "sha256:aa", Policy: "p1"}
	ok, _ := s.CreateApproval(ctx, approvalFor(c, "a", "pay", "d", "approve#1", 7, b), 0)
	no, _ := s.CreateApproval(ctx, approvalFor(c, "a", "pay", "n", "approve#1", 7, b), 0)
	if _, err := s.Decide(ctx, ok.ID, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, no.ID, false, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	now := c.now()
	for _, q := range []struct{ what, agent, tool, digest string }{
		{"another tool", "a", "send", "d"}, {"another input", "a", "pay", "x"}, {"a denied input", "a", "pay", "n"},
	} {
		if got, found, err := s.FindApproved(ctx, q.agent, q.tool, q.digest, now); found || err != nil {
			t.Fatalf("FindApproved for %s = %s, %v, %v; want none", q.what, got.ID, found, err)
		}
	}
	if got, found, err := s.LatestApproval(ctx, "b", "pay", "d", "approve#1", b); found || err != nil {
		t.Fatalf("LatestApproval for another agent = %s of %s, %v, %v; want none", got.ID, got.Agent, found, err)
	}
	if got, found, err := s.LatestApproval(ctx, "a", "pay", "d", "approve#2", b); found || err != nil {
		t.Fatalf("LatestApproval under another rule = %s, %v, %v; want none", got.ID, found, err)
	}
	for _, q := range []struct{ what, agent, digest string }{{"another agent", "b", "n"}, {"another input", "a", "d"}} {
		if got, found, err := s.RecentDenial(ctx, q.agent, "pay", q.digest, now); found || err != nil {
			t.Fatalf("RecentDenial for %s = %s of %s, %v, %v; want none", q.what, got.ID, got.Agent, found, err)
		}
	}
	if _, found, _ := s.RecentDenial(ctx, "a", "pay", "n", now); !found {
		t.Fatal("RecentDenial of the denied input: none")
	}
	if got, found, err := s.RecentDenial(ctx, "a", "pay", "n", now.Add(time.Hour)); found || err != nil {
		t.Fatalf("RecentDenial at the denied request's expiry = %s, %v, %v; want none (a denial is remembered until then)", got.ID, found, err)
	}
}

// TestMutation38MarkDoneOnlyStarted: only a started call is marked done;
// an approved one never consumed stays approved.
func TestMutation38MarkDoneOnlyStarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	a := newApproval(t, s, "d", time.Hour)
	if _, err := s.Decide(ctx, a.ID, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDone(ctx, a.ID); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("MarkDone of an approved call never started = %v; want ErrApprovalState", err)
	}
	wantState(t, s, a.ID, ApprovalApproved)
}

// TestMutation38BoundsAtTheirEdges: a boundary request past its expiry
// no longer counts against its agent's pending bound, swept or not, and a
// session last used exactly SessionCountedFor ago no longer counts
// against the session bound.
func TestMutation38BoundsAtTheirEdges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := clockAt()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), c)
	openSession(t, s, "a", "coder")
	if _, _, err := s.RequestBoundary(ctx, "a", "old", expansion("/srv/old", "read", "exact"), "j", c.now().Add(time.Minute), 1); err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute)
	if _, _, err := s.RequestBoundary(ctx, "a", "new", expansion("/srv/new", "read", "exact"), "j", time.Time{}, 1); err != nil {
		t.Fatalf("a request while the agent's only other one has expired (bound 1, not swept) = %v; want it stored", err)
	}
	if _, _, err := s.OpenSessionWithin(ctx, "w1", "worker", "", workBoundary(), 1); err != nil {
		t.Fatal(err)
	}
	c.add(SessionCountedFor)
	if _, created, err := s.OpenSessionWithin(ctx, "w2", "worker", "", workBoundary(), 1); err != nil || !created {
		t.Fatalf("a second session exactly %s after the first was last used (bound 1) = %v, %v; want it opened", SessionCountedFor, created, err)
	}
}
