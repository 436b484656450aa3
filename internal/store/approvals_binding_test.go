package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestApprovalOfOneInputNeverReleasesAnother: a human approved the call
// with input A; the call with input B (same agent, tool and rule) finds
// nothing approved, its own request stays pending, and consuming B's
// request fails; A's approval is untouched by all of it.
func TestApprovalOfOneInputNeverReleasesAnother(t *testing.T) {
	t.Parallel()
	eachBackend(t, testApprovalOfOneInputNeverReleasesAnother)
}

func testApprovalOfOneInputNeverReleasesAnother(t *testing.T, be backend) {
	ctx := context.Background()
	c := newClock()
	s := open(t, be.target(t), c)
	a := newApproval(t, s, "digest-of-A", time.Hour)
	b := newApproval(t, s, "digest-of-B", time.Hour)
	if _, err := s.Decide(ctx, a.ID, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	if got, found, err := s.FindApproved(ctx, "a", "pay", "digest-of-B", c.now()); err != nil || found {
		t.Fatalf("FindApproved(B) = %+v, %v, %v: A's approval released B", got, found, err)
	}
	got, found, err := s.LatestApproval(ctx, "a", "pay", "digest-of-B", "approve#1", Binding{})
	if err != nil || !found || got.ID != b.ID || got.State != ApprovalPending {
		t.Fatalf("LatestApproval(B) = %+v, %v, %v; want B's own request %s, pending", got, found, err, b.ID)
	}
	if _, err := s.ConsumeAndStart(ctx, b.ID, Binding{}); !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("consume B: %v", err)
	}
	wantState(t, s, b.ID, ApprovalPending)
	wantState(t, s, a.ID, ApprovalApproved)
	if got, found, _ := s.FindApproved(ctx, "a", "pay", "digest-of-A", c.now()); !found || got.ID != a.ID {
		t.Fatalf("FindApproved(A) = %+v, %v", got, found)
	}
}

// TestApprovalBinding: an approval holds the tool's code identity and the
// policy shown to the human; ConsumeAndStart under another tool digest or
// another policy is refused (naming which) and leaves it approved; under
// the same binding it is consumed once.
func TestApprovalBinding(t *testing.T) {
	t.Parallel()
	eachBackend(t, testApprovalBinding)
}

func testApprovalBinding(t *testing.T, be backend) {
	ctx := context.Background()
	c := newClock()
	s := open(t, be.target(t), c)
	bound := Binding{ToolDigest: "sha256:0123", Policy: `{"network":false,"hosts":[]}`}
	a, err := s.CreateApproval(ctx, Approval{Agent: "a", Tool: "t", Digest: "d", Middleware: "m", Binding: bound, Expires: c.now().Add(time.Hour)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Approval(ctx, a.ID); err != nil || got.Binding != bound {
		t.Fatalf("stored binding %+v, %v; want %+v", got.Binding, err, bound)
	}
	if p, err := s.PendingApprovals(ctx, c.now()); err != nil || len(p) != 1 || p[0].Binding != bound {
		t.Fatalf("pending %+v, %v", p, err)
	}
	if _, err := s.Decide(ctx, a.ID, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		b    Binding
		want string
	}{
		{Binding{ToolDigest: "sha256:4567", Policy: bound.Policy}, "another version of the tool (sha256:0123, not sha256:4567)"},
		{Binding{ToolDigest: bound.ToolDigest, Policy: `{"network":true,"hosts":["api.example.com"],"secrets":["TOKEN"]}`}, "another policy"},
		{Binding{}, "another version"},
	} {
		if _, err := s.ConsumeAndStart(ctx, a.ID, tc.b); !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("consume under %+v: %v; want %q", tc.b, err, tc.want)
		}
		wantState(t, s, a.ID, ApprovalApproved)
	}
	if _, err := s.ConsumeAndStart(ctx, a.ID, bound); err != nil {
		t.Fatal(err)
	}
	wantState(t, s, a.ID, ApprovalStarted)
}

// TestApprovalBindingMigration: a store made before migration 7 (no
// binding columns) is migrated; its approvals have an empty binding, so
// an approval made then releases no call of a tool that has one (and,
// from step 12, it may not be approved always).
func TestApprovalBindingMigration(t *testing.T) {
	t.Parallel()
	eachBackend(t, testApprovalBindingMigration)
}

func testApprovalBindingMigration(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	// Back to version 6: the columns and the version row of step 7 gone,
	// and every later step's.
	for _, q := range []string{
		`ALTER TABLE approvals DROP COLUMN tool_digest`,
		`ALTER TABLE approvals DROP COLUMN policy`,
		`DROP TABLE card_spend`,                          // step 8
		`DROP TABLE credential_tokens`,                   // step 9
		`DROP TABLE feed_leases`,                         // step 10
		`ALTER TABLE sessions DROP COLUMN credential`,    // step 11
		`ALTER TABLE approvals DROP COLUMN allow_always`, // step 12
		`DELETE FROM schema_migrations WHERE version >= 7`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO approvals (id, agent, session, tool, rendered, digest, middleware, reason, card_generation,
		created_at, expires_at, state, decided_by, decision_reason, runner) VALUES ('apr_old', 'a', '', 't', '', 'd', 'm', '', 0, ?, ?, ?, 'operator:ann', '', '')`,
		time.Now().UnixNano(), time.Now().Add(time.Hour).UnixNano(), ApprovalApproved); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, path, nil)
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || v != SchemaVersion() || v < 7 {
		t.Fatalf("version %d, %v; want %d", v, err, SchemaVersion())
	}
	old, err := s.Approval(ctx, "apr_old")
	if err != nil || old.Binding != (Binding{}) || old.State != ApprovalApproved || old.AllowAlways {
		t.Fatalf("the old approval after migration: %+v, %v", old, err)
	}
	if _, err := s.ConsumeAndStart(ctx, "apr_old", Binding{ToolDigest: "sha256:0123", Policy: "{}"}); !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), "none recorded") {
		t.Fatalf("consume of a pre-binding approval: %v", err)
	}
	wantState(t, s, "apr_old", ApprovalApproved)
}

// TestIdenticalPendingShared: CreateApproval for a call already pending
// (same agent, tool, digest, rule, card revision and binding) returns that
// request and stores nothing, so identical calls that each found no
// request before creating one put one question before the human (each
// approval of another would run the call once more); one decided, or
// made under another binding, is not shared.
func TestIdenticalPendingShared(t *testing.T) {
	t.Parallel()
	eachBackend(t, testIdenticalPendingShared)
}

func testIdenticalPendingShared(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), newClock())
	a := newApproval(t, s, "digest-of-A", time.Hour)
	if again := newApproval(t, s, "digest-of-A", time.Hour); again.ID != a.ID || again.State != ApprovalPending {
		t.Fatalf("the same call pending: a second request %s (%s), want %s shared", again.ID, again.State, a.ID)
	}
	other, err := s.CreateApproval(ctx, Approval{Agent: "a", Session: "s1", Tool: "pay", Rendered: "pay --amount=250", Digest: "digest-of-A",
		Middleware: "approve#1", Reason: "args.amount > 100", CardGeneration: 7, Expires: s.now().Add(time.Hour), Binding: Binding{ToolDigest: "sha256:other"}}, 0)
	if err != nil || other.ID == a.ID {
		t.Fatalf("another binding: %+v %v, want a request of its own", other, err)
	}
	if _, err := s.Decide(ctx, a.ID, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	if next := newApproval(t, s, "digest-of-A", time.Hour); next.ID == a.ID {
		t.Fatalf("a decided request was shared: %s", next.ID)
	}
}
