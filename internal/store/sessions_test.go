package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
)

// workBoundary is an agent's initial boundary: read /srv/work, never
// /srv/work/secrets, never write under .git.
func workBoundary() boundary.Boundary {
	return boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted,
		Entries:   []boundary.Entry{{Path: "/srv/work", Access: boundary.Read, Match: boundary.Subtree}},
		Deny:      []string{"/srv/work/secrets"},
		Protected: []string{".git"}}
}

// expansion is the JSON of one filesystem entry.
func expansion(path, access, scope string) []byte {
	return fmt.Appendf(nil, `{"filesystem":{"entries":[{"path":%q,"access":%q,"scope":%q}]}}`, path, access, scope)
}

func openSession(t *testing.T, s *SQLite, id, agent string) Session {
	t.Helper()
	ss, created, err := s.OpenSession(context.Background(), id, agent, workBoundary())
	if err != nil || !created {
		t.Fatalf("OpenSession(%q, %q) = %+v, %v, %v", id, agent, ss, created, err)
	}
	return ss
}

func request(t *testing.T, s *SQLite, session, id string, x []byte) BoundaryRequest {
	t.Helper()
	r, created, err := s.RequestBoundary(context.Background(), session, id, x, "the build writes there", time.Time{}, 0)
	if err != nil || !created {
		t.Fatalf("RequestBoundary(%s, %s) = %+v, %v, %v", session, id, r, created, err)
	}
	return r
}

func settle(t *testing.T, s *SQLite, handle string, d boundary.Answer) (BoundaryRequest, Session) {
	t.Helper()
	r, ss, err := s.SettleBoundaryRequest(context.Background(), handle, d, "operator:ann")
	if err != nil {
		t.Fatalf("SettleBoundaryRequest(%s) = %v", handle, err)
	}
	return r, ss
}

func revisionNumbers(t *testing.T, s *SQLite, id string) []int64 {
	t.Helper()
	revs, err := s.Revisions(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, r := range revs {
		out = append(out, r.Revision)
	}
	return out
}

// counters reads the counters table's generation (the fallback answer of
// Generation, and PostgreSQL's only one) and the number of audit records.
func counters(t *testing.T, s *SQLite) (gen, audit int64) {
	t.Helper()
	if err := s.db.QueryRow(`SELECT value FROM counters WHERE name = 'generation'`).Scan(&gen); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM audit`).Scan(&audit); err != nil {
		t.Fatal(err)
	}
	return gen, audit
}

// TestOpenSession: a new session has its initial boundary as revision 0;
// opening it again is idempotent (the stored boundary wins, nothing is
// written); another agent is refused; IDs are checked; a generated ID is
// ses_ and 32 hex digits.
func TestOpenSession(t *testing.T) {
	t.Parallel()
	eachBackend(t, testOpenSession)
}

func testOpenSession(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	a := openSession(t, s, "mcp-3f2a", "coder")
	if a.Agent != "coder" || a.Boundary.Revision != 0 || !reflect.DeepEqual(a.Boundary, workBoundary().Normalize()) || !a.Live() || a.Created.IsZero() {
		t.Fatalf("opened %+v", a)
	}
	g0, _ := s.Generation(ctx)
	c0, n0 := counters(t, s)
	other := workBoundary()
	other.Network = true
	again, created, err := s.OpenSession(ctx, "mcp-3f2a", "coder", other)
	if err != nil || created || !reflect.DeepEqual(again, a) {
		t.Fatalf("reopen = %+v, %v, %v; want %+v", again, created, err, a)
	}
	if g1, _ := s.Generation(ctx); g1 != g0 {
		t.Fatal("an idempotent open changed Generation")
	}
	if c1, n1 := counters(t, s); c1 != c0 || n1 != n0 {
		t.Fatal("an idempotent open wrote")
	}
	// A session ID never moves between agents.
	if _, _, err := s.OpenSession(ctx, "mcp-3f2a", "intruder", workBoundary()); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "mcp-3f2a") {
		t.Fatalf("open as another agent: %v", err)
	}
	if got, _ := s.Session(ctx, "mcp-3f2a"); got.Agent != "coder" {
		t.Fatalf("after the refusal the session is %+v", got)
	}
	gen, created, err := s.OpenSession(ctx, "", "coder", workBoundary())
	if err != nil || !created || !regexp.MustCompile(`^ses_[0-9a-f]{32}$`).MatchString(gen.ID) {
		t.Fatalf("generated session %+v, %v, %v", gen, created, err)
	}
	for _, id := range []string{strings.Repeat("x", 129), "has space", "tab\there", "nul\x00", "é", "\x7f"} {
		if _, _, err := s.OpenSession(ctx, id, "coder", workBoundary()); !errors.Is(err, ErrBadInput) {
			t.Fatalf("session ID %q: %v", id, err)
		}
	}
	if _, _, err := s.OpenSession(ctx, strings.Repeat("x", 128), "coder", workBoundary()); err != nil {
		t.Fatalf("a 128-character ID: %v", err)
	}
	if _, _, err := s.OpenSession(ctx, "x2", "", workBoundary()); !errors.Is(err, ErrBadInput) {
		t.Fatalf("no agent: %v", err)
	}
	bad := workBoundary()
	bad.Entries[0].Path = "relative"
	if _, _, err := s.OpenSession(ctx, "x3", "coder", bad); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "relative") {
		t.Fatalf("an invalid initial boundary: %v", err)
	}
	if _, err := s.Session(ctx, "x3"); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("a refused open stored a session: %v", err)
	}
	openSession(t, s, "r1", "reviewer")
	for agent, want := range map[string]int{"coder": 3, "reviewer": 1, "": 4, "nobody": 0} {
		if got, err := s.Sessions(ctx, agent); err != nil || len(got) != want {
			t.Fatalf("Sessions(%q) = %d, %v; want %d", agent, len(got), err, want)
		}
	}
	// Durable: another handle, after this one closed, sees the same.
	s.Close()
	s2 := open(t, path, nil)
	if got, err := s2.Session(ctx, "mcp-3f2a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("after reopening the store: %+v, %v; want %+v", got, err, a)
	}
}

// TestApproveAppliesRevision (B13, B11): an approval is the session's new
// revision, stored with why; a second session of the same agent keeps its
// own boundary; a later approval is assessed against the current
// revision, not the one the request was made against.
func TestApproveAppliesRevision(t *testing.T) {
	t.Parallel()
	eachBackend(t, testApproveAppliesRevision)
}

func testApproveAppliesRevision(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	a := openSession(t, s, "a", "coder")
	b := openSession(t, s, "b", "coder")
	r1 := request(t, s, "a", "req-1", expansion("/srv/out", "write", "subtree"))
	r2 := request(t, s, "a", "req-2", []byte(`{"network":{"enabled":true}}`))
	if !strings.HasPrefix(r1.Handle, "bnd_") || r1.Request.Status != boundary.Pending || r1.Request.BaseRevision != 0 || r1.Agent != "coder" {
		t.Fatalf("request %+v", r1)
	}
	got, ss := settle(t, s, r1.Handle, boundary.Allow())
	if got.Request.Status != boundary.Approved || got.Request.Reason != boundary.ReasonApplied || got.Request.Revision != 1 ||
		got.DecidedBy != "operator:ann" || got.Decided.IsZero() {
		t.Fatalf("settled %+v", got)
	}
	ok, _ := boundary.Check(ss.Boundary, boundary.Need{Path: "/srv/out/x", Access: boundary.Write})
	if ss.Boundary.Revision != 1 || !ok {
		t.Fatalf("session after approval: %+v", ss.Boundary)
	}
	if cur, _ := s.Session(ctx, "a"); !reflect.DeepEqual(cur, ss) {
		t.Fatalf("stored session %+v; settle returned %+v", cur, ss)
	}
	// The other session of the same agent is untouched.
	if cur, _ := s.Session(ctx, "b"); !reflect.DeepEqual(cur, b) {
		t.Fatalf("session b changed: %+v", cur)
	}
	if ok, _ := boundary.Check(b.Boundary, boundary.Need{Path: "/srv/out/x", Access: boundary.Write}); ok {
		t.Fatal("session b can write /srv/out")
	}
	// r2 was made against revision 0 and applies on top of revision 1.
	got, ss = settle(t, s, r2.Handle, boundary.Allow())
	if got.Request.BaseRevision != 0 || got.Request.Revision != 2 || !ss.Boundary.Network || ss.Boundary.Revision != 2 {
		t.Fatalf("second approval: %+v, %+v", got, ss.Boundary)
	}
	if ok, _ := boundary.Check(ss.Boundary, boundary.Need{Path: "/srv/out/x", Access: boundary.Write}); !ok {
		t.Fatal("revision 2 lost revision 1's entry")
	}
	revs, err := s.Revisions(ctx, "a")
	if err != nil || len(revs) != 3 {
		t.Fatalf("revisions %+v, %v", revs, err)
	}
	whys := []string{"initial", "approved request req-1 (" + r1.Handle + ") by operator:ann", "approved request req-2 (" + r2.Handle + ") by operator:ann"}
	for i, r := range revs {
		if r.Revision != int64(i) || r.Why != whys[i] || r.Boundary.Revision != int64(i) || r.At.IsZero() {
			t.Fatalf("revision %d: %+v", i, r)
		}
	}
	if !reflect.DeepEqual(revs[0].Boundary, a.Boundary) || !reflect.DeepEqual(revs[2].Boundary, ss.Boundary) {
		t.Fatal("stored revisions differ from the boundaries they recorded")
	}
	if got := revisionNumbers(t, s, "b"); !reflect.DeepEqual(got, []int64{0}) {
		t.Fatalf("session b revisions %v", got)
	}
	if _, err := s.Revisions(ctx, "nope"); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("revisions of an unknown session: %v", err)
	}
}

// TestRequestIdempotent: the same client ID in the same session is the
// same request, even with another body (BOUNDARIES.md, Request); in
// another session it is another request; refusals are the
// *boundary.ValidationError itself and store nothing (B1-B5).
func TestRequestIdempotent(t *testing.T) {
	t.Parallel()
	eachBackend(t, testRequestIdempotent)
}

func testRequestIdempotent(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	openSession(t, s, "a", "coder")
	openSession(t, s, "b", "coder")
	first := request(t, s, "a", "req-1", expansion("/srv/out", "write", "subtree"))
	for _, body := range [][]byte{expansion("/etc", "write", "subtree"), []byte(`{}`), []byte(`not json`)} {
		again, created, err := s.RequestBoundary(ctx, "a", "req-1", body, "something else", time.Time{}, 0)
		if err != nil || created || !reflect.DeepEqual(again, first) {
			t.Fatalf("same ID, body %s: %+v, %v, %v; want %+v", body, again, created, err, first)
		}
	}
	// Still the same after it was settled.
	settled, _ := settle(t, s, first.Handle, boundary.Deny("no"))
	if again, created, err := s.RequestBoundary(ctx, "a", "req-1", expansion("/srv/out", "write", "subtree"), "please", time.Time{}, 0); err != nil || created ||
		!reflect.DeepEqual(again, settled) {
		t.Fatalf("same ID after settling: %+v, %v, %v", again, created, err)
	}
	other := request(t, s, "b", "req-1", expansion("/srv/out", "write", "subtree"))
	if other.Handle == first.Handle || other.Session != "b" {
		t.Fatalf("the same ID in another session: %+v", other)
	}
	// Refusals: exactly boundary's errors, nothing stored, nothing audited.
	g0, n0 := counters(t, s)
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf(`{"path":"/p/%d","access":"read","scope":"exact"}`, i)
	}
	for _, c := range []struct {
		name, id, why string
		x             []byte
		reason        string
	}{
		{"B1", "v1", "j", []byte(`{}`), boundary.ReasonEmptyExpansion},
		{"B2", "v2", "j", []byte(`{"filesystem":{"entries":[` + strings.Join(many, ",") + `]}}`), boundary.ReasonTooManyEntries},
		{"B3", "v3", "j", expansion("srv/out", "read", "exact"), boundary.ReasonInvalidPath},
		{"B3..", "v4", "j", expansion("/srv/../etc", "read", "exact"), boundary.ReasonInvalidPath},
		{"B4", "v5", "j", expansion("/"+strings.Repeat("a", 4096), "read", "exact"), boundary.ReasonPathTooLong},
		{"B5", "v6", "j", expansion("/srv/out", "deny", "exact"), boundary.ReasonInvalidEntry},
		{"unknown key", "v7", "j", []byte(`{"network":{"enabled":true},"x":1}`), boundary.ReasonInvalidExpansion},
		{"bad id", "no spaces", "j", expansion("/srv/out", "read", "exact"), boundary.ReasonInvalidID},
		{"empty justification", "v8", "   ", expansion("/srv/out", "read", "exact"), boundary.ReasonInvalidJustification},
	} {
		r, created, err := s.RequestBoundary(ctx, "a", c.id, c.x, c.why, time.Time{}, 0)
		ve, ok := err.(*boundary.ValidationError)
		if !ok || ve.Reason != c.reason || created || r.Handle != "" {
			t.Fatalf("%s: %+v, %v, %v (%T); want *boundary.ValidationError %s", c.name, r, created, err, err, c.reason)
		}
	}
	if g1, n1 := counters(t, s); g1 != g0 || n1 != n0 {
		t.Fatal("a refused request wrote")
	}
	if rs, err := s.BoundaryRequestsOf(ctx, "a"); err != nil || len(rs) != 1 {
		t.Fatalf("requests of a: %d, %v; want only req-1", len(rs), err)
	}
	// A refused ID is not taken: the next valid request with it is new.
	request(t, s, "a", "v1", []byte(`{"network":{"enabled":true}}`))
	if _, _, err := s.RequestBoundary(ctx, "nope", "v1", expansion("/x", "read", "exact"), "j", time.Time{}, 0); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("unknown session: %v", err)
	}
	if _, _, err := s.RequestBoundary(ctx, "a", "v9", expansion("/x", "read", "exact"), "j", time.Now().Add(-time.Second), 0); !errors.Is(err, ErrBadInput) {
		t.Fatalf("an expiry in the past: %v", err)
	}
	// A session whose boundary is not managed cannot ask.
	ext := workBoundary()
	ext.Kind = boundary.External
	if _, _, err := s.OpenSession(ctx, "ext", "coder", ext); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RequestBoundary(ctx, "ext", "e1", expansion("/x", "read", "exact"), "j", time.Time{}, 0); err == nil ||
		err.(*boundary.ValidationError).Reason != boundary.ReasonBoundaryNotManaged {
		t.Fatalf("a request of an external boundary: %v", err)
	}
}

// TestConcurrentSameRequest: goroutines on two handles of one file send
// the same client ID at once: one request is made, every caller gets it.
func TestConcurrentSameRequest(t *testing.T) {
	t.Parallel()
	eachBackend(t, testConcurrentSameRequest)
}

func testConcurrentSameRequest(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s1, s2 := open(t, path, nil), open(t, path, nil)
	openSession(t, s1, "a", "coder")
	var made atomic.Int64
	handles := make([]string, 8)
	var wg sync.WaitGroup
	for i := range handles {
		st := []*SQLite{s1, s2}[i%2]
		wg.Go(func() {
			r, created, err := st.RequestBoundary(ctx, "a", "same", expansion(fmt.Sprintf("/srv/%d", i), "read", "exact"), "j", time.Time{}, 0)
			if err != nil {
				t.Error(err)
				return
			}
			if created {
				made.Add(1)
			}
			handles[i] = r.Handle
		})
	}
	wg.Wait()
	if made.Load() != 1 {
		t.Fatalf("%d requests made; want 1", made.Load())
	}
	for _, h := range handles {
		if h != handles[0] {
			t.Fatalf("handles %v", handles)
		}
	}
}

// TestSettleOnce (B14): a settled request is settled for good: a second
// decision is ErrApprovalState and changes nothing; only operators decide.
func TestSettleOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, testSettleOnce)
}

func testSettleOnce(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	openSession(t, s, "a", "coder")
	r := request(t, s, "a", "req-1", expansion("/srv/out", "write", "subtree"))
	for _, by := range []string{"agent:coder", AgentActor("x").String(), "", "bad\nname"} {
		if _, _, err := s.SettleBoundaryRequest(ctx, r.Handle, boundary.Allow(), by); !errors.Is(err, ErrNotAllowed) && !errors.Is(err, ErrBadInput) {
			t.Fatalf("settle by %q: %v", by, err)
		}
	}
	if cur, _ := s.BoundaryRequest(ctx, r.Handle); cur.Request.Status != boundary.Pending {
		t.Fatalf("a refused settler changed the request: %+v", cur)
	}
	first, ss := settle(t, s, r.Handle, boundary.Allow())
	g0, n0 := counters(t, s)
	for _, d := range []boundary.Answer{boundary.Deny("changed my mind"), boundary.Allow()} {
		again, ss2, err := s.SettleBoundaryRequest(ctx, r.Handle, d, "operator:bob")
		if !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), "approved") || !strings.Contains(err.Error(), r.Handle) {
			t.Fatalf("settle again: %v", err)
		}
		if !reflect.DeepEqual(again, first) || !reflect.DeepEqual(ss2, ss) {
			t.Fatalf("settle again returned %+v, %+v; want as stored", again, ss2)
		}
	}
	if g1, n1 := counters(t, s); g1 != g0 || n1 != n0 {
		t.Fatal("a second decision wrote")
	}
	if cur, _ := s.BoundaryRequest(ctx, r.Handle); !reflect.DeepEqual(cur, first) {
		t.Fatalf("stored %+v; want %+v", cur, first)
	}
	if got := revisionNumbers(t, s, "a"); !reflect.DeepEqual(got, []int64{0, 1}) {
		t.Fatalf("revisions %v", got)
	}
	if _, _, err := s.SettleBoundaryRequest(ctx, "bnd_nope", boundary.Allow(), "operator:ann"); !errors.Is(err, ErrUnknownBoundaryRequest) || !strings.Contains(err.Error(), "bnd_nope") {
		t.Fatalf("unknown handle: %v", err)
	}
	if _, err := s.BoundaryRequest(ctx, "bnd_nope"); !errors.Is(err, ErrUnknownBoundaryRequest) {
		t.Fatalf("unknown handle: %v", err)
	}
}

// TestDenyAndConflict: a denial keeps the operator's reason (an empty one
// is "denied"); conflicts with an explicit deny (B8) or a protected name
// (B10), and a change of the boundary's kind (B15), leave the boundary as
// it was; an expansion already covered is approved without a revision
// (B12).
func TestDenyAndConflict(t *testing.T) {
	t.Parallel()
	eachBackend(t, testDenyAndConflict)
}

func testDenyAndConflict(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	a := openSession(t, s, "a", "coder")
	for _, c := range []struct {
		id     string
		x      []byte
		d      boundary.Answer
		status boundary.Status
		reason string
		rev    int64
	}{
		{"deny", expansion("/srv/out", "write", "subtree"), boundary.Deny("  not on a Friday  "), boundary.Denied, "not on a Friday", 0},
		{"deny-empty", expansion("/srv/out", "write", "subtree"), boundary.Deny(""), boundary.Denied, boundary.ReasonDenied, 0},
		{"B8", expansion("/srv/work", "write", "subtree"), boundary.Allow(), boundary.Conflict, boundary.ReasonExplicitDeny, 0},
		{"B8-inside", expansion("/srv/work/secrets/key", "read", "exact"), boundary.Allow(), boundary.Conflict, boundary.ReasonExplicitDeny, 0},
		{"B10", expansion("/srv/work/repo/.git/config", "write", "exact"), boundary.Allow(), boundary.Conflict, boundary.ReasonExplicitDeny, 0},
		{"B12", expansion("/srv/work/src/main.go", "read", "exact"), boundary.Allow(), boundary.Approved, boundary.ReasonAlreadyApplied, 0},
	} {
		r := request(t, s, "a", c.id, c.x)
		if c.status == boundary.Conflict {
			// Issue 27, rough edge 9: a request that can only conflict is
			// answered at once, never pending before a human.
			if r.Request.Status != boundary.Conflict || r.Request.Reason != c.reason || r.DecidedBy != byHost {
				t.Fatalf("%s: created %+v by %q; want conflict %s by the host at once", c.id, r.Request, r.DecidedBy, c.reason)
			}
			if pend, err := s.PendingBoundaryRequests(ctx, time.Now()); err != nil || len(pend) != 0 {
				t.Fatalf("%s: pending %+v, %v; want none", c.id, pend, err)
			}
			if _, _, err := s.SettleBoundaryRequest(ctx, r.Handle, c.d, "operator:ann"); !errors.Is(err, ErrApprovalState) {
				t.Fatalf("%s: a human could still decide it: %v", c.id, err)
			}
			if cur, _ := s.BoundaryRequest(ctx, r.Handle); cur.Request.Status != boundary.Conflict {
				t.Fatalf("%s: stored %+v", c.id, cur.Request)
			}
			continue
		}
		got, ss := settle(t, s, r.Handle, c.d)
		if got.Request.Status != c.status || got.Request.Reason != c.reason || got.Request.Revision != c.rev {
			t.Fatalf("%s: %+v; want %s %s revision %d", c.id, got.Request, c.status, c.reason, c.rev)
		}
		if !reflect.DeepEqual(ss, a) {
			t.Fatalf("%s changed the session: %+v", c.id, ss.Boundary)
		}
		if cur, _ := s.BoundaryRequest(ctx, r.Handle); !reflect.DeepEqual(cur, got) {
			t.Fatalf("%s: stored %+v; returned %+v", c.id, cur, got)
		}
	}
	if got := revisionNumbers(t, s, "a"); !reflect.DeepEqual(got, []int64{0}) {
		t.Fatalf("revisions %v; want only the initial one", got)
	}
	// B15: the kind changed (an operator's reset) between request and
	// approval.
	r := request(t, s, "a", "B15", expansion("/srv/out", "write", "subtree"))
	ext := workBoundary()
	ext.Kind = boundary.External
	reset, err := s.ResetSession(ctx, "a", ext, "cli:root")
	if err != nil || reset.Boundary.Revision != 1 || reset.Boundary.Kind != boundary.External {
		t.Fatalf("reset: %+v, %v", reset, err)
	}
	got, ss := settle(t, s, r.Handle, boundary.Allow())
	if got.Request.Status != boundary.Conflict || got.Request.Reason != boundary.ReasonBoundaryKindChanged || !reflect.DeepEqual(ss, reset) {
		t.Fatalf("B15: %+v, %+v", got.Request, ss.Boundary)
	}
	revs, _ := s.Revisions(ctx, "a")
	if len(revs) != 2 || revs[1].Why != "reset by cli:root" {
		t.Fatalf("revisions after reset %+v", revs)
	}
	if _, err := s.ResetSession(ctx, "a", boundary.Boundary{Kind: "odd"}, "cli:root"); !errors.Is(err, ErrBadInput) {
		t.Fatalf("reset to an invalid boundary: %v", err)
	}
}

// deadRunner names a process of this host that has exited.
func deadRunner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(cmd.ProcessState.Pid()) + "/dead"
}

// TestHostRestarted (B16): on start, the pending requests of processes
// that are gone are denied with host_restarted; settled ones, and those of
// a live process (this one) or another host, are left as they are.
func TestHostRestarted(t *testing.T) {
	t.Parallel()
	eachBackend(t, testHostRestarted)
}

func testHostRestarted(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	live := open(t, path, nil)
	gone := open(t, path, nil)
	gone.runner = deadRunner(t) // the handle of a process that died
	far := open(t, path, nil)
	far.runner = "elsewhere.example/1/x" // a process of another host
	// An earlier process of this host that had this process's PID (maiden
	// restarted as PID 1 of a container with a stable hostname): its PID
	// exists, yet it is gone.
	host, _ := os.Hostname()
	earlier := open(t, path, nil)
	earlier.runner = host + "/" + strconv.Itoa(os.Getpid()) + "/earlier"
	openSession(t, live, "a", "coder")
	pendingGone := request(t, gone, "a", "p-gone", expansion("/srv/1", "read", "exact"))
	pendingEarlier := request(t, earlier, "a", "p-earlier", expansion("/srv/5", "read", "exact"))
	settledGone := request(t, gone, "a", "s-gone", expansion("/srv/2", "read", "exact"))
	approved, _ := settle(t, live, settledGone.Handle, boundary.Allow())
	pendingLive := request(t, live, "a", "p-live", expansion("/srv/3", "read", "exact"))
	pendingFar := request(t, far, "a", "p-far", expansion("/srv/4", "read", "exact"))
	n, err := live.DenyPendingBoundaryRequests(ctx, boundary.ReasonHostRestarted)
	if err != nil || n != 2 {
		t.Fatalf("DenyPendingBoundaryRequests = %d, %v; want 2 (the dead process's and the earlier process's of the same PID)", n, err)
	}
	got, _ := live.BoundaryRequest(ctx, pendingGone.Handle)
	if got.Request.Status != boundary.Denied || got.Request.Reason != boundary.ReasonHostRestarted || got.DecidedBy != "host" {
		t.Fatalf("the dead process's request: %+v", got)
	}
	got, _ = live.BoundaryRequest(ctx, pendingEarlier.Handle)
	if got.Request.Status != boundary.Denied || got.Request.Reason != boundary.ReasonHostRestarted || got.DecidedBy != "host" {
		t.Fatalf("the request of an earlier process with this PID (B16): %+v, want denied host_restarted", got)
	}
	if cur, _ := live.BoundaryRequest(ctx, settledGone.Handle); !reflect.DeepEqual(cur, approved) {
		t.Fatalf("a settled request changed: %+v", cur)
	}
	for _, r := range []BoundaryRequest{pendingLive, pendingFar} {
		if cur, _ := live.BoundaryRequest(ctx, r.Handle); !reflect.DeepEqual(cur, r) {
			t.Fatalf("request %s changed: %+v", r.Request.ID, cur)
		}
	}
	if p, _ := live.PendingBoundaryRequests(ctx, time.Now()); len(p) != 2 || p[0].Handle != pendingLive.Handle || p[1].Handle != pendingFar.Handle {
		t.Fatalf("pending %+v", p)
	}
	// Nothing left to deny: no write.
	g0, n0 := counters(t, live)
	if n, err := live.DenyPendingBoundaryRequests(ctx, boundary.ReasonHostRestarted); err != nil || n != 0 {
		t.Fatalf("again: %d, %v", n, err)
	}
	if g1, n1 := counters(t, live); g1 != g0 || n1 != n0 {
		t.Fatal("a DenyPendingBoundaryRequests that denied nothing wrote")
	}
}

// TestEndSessionAndExpiry: ending a session denies its pending requests
// and refuses what follows; a request nobody decided in time is denied
// with reason expired, by whichever path sees it first.
func TestEndSessionAndExpiry(t *testing.T) {
	t.Parallel()
	eachBackend(t, testEndSessionAndExpiry)
}

func testEndSessionAndExpiry(t *testing.T, be backend) {
	ctx := context.Background()
	c := newClock()
	s := open(t, be.target(t), c)
	openSession(t, s, "a", "coder")
	openSession(t, s, "b", "coder")
	short, _, err := s.RequestBoundary(ctx, "b", "short", expansion("/srv/1", "read", "exact"), "j", c.now().Add(time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	short2, _, _ := s.RequestBoundary(ctx, "b", "short2", expansion("/srv/2", "read", "exact"), "j", c.now().Add(time.Minute), 0)
	short3, _, _ := s.RequestBoundary(ctx, "b", "short3", expansion("/srv/3", "read", "exact"), "j", c.now().Add(time.Minute), 0)
	long := request(t, s, "b", "long", expansion("/srv/4", "read", "exact"))
	if !long.Expires.Equal(c.now().Add(DefaultBoundaryRequestExpiry)) {
		t.Fatalf("default expiry %s", long.Expires)
	}
	c.add(time.Minute)
	if p, _ := s.PendingBoundaryRequests(ctx, c.now()); len(p) != 1 || p[0].Handle != long.Handle {
		t.Fatalf("pending after a minute: %+v", p)
	}
	got, _, err := s.SettleBoundaryRequest(ctx, short.Handle, boundary.Allow(), "operator:ann")
	if !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), "expired") || got.Request.Status != boundary.Denied || got.Request.Reason != BoundaryReasonExpired {
		t.Fatalf("settle an expired request: %+v, %v", got, err)
	}
	if cur, _ := s.BoundaryRequest(ctx, short.Handle); cur.Request.Reason != BoundaryReasonExpired || cur.DecidedBy != "expiry" {
		t.Fatalf("the expiry was not stored: %+v", cur)
	}
	again, created, err := s.RequestBoundary(ctx, "b", "short2", expansion("/srv/2", "read", "exact"), "j", time.Time{}, 0)
	if err != nil || created || again.Handle != short2.Handle || again.Request.Reason != BoundaryReasonExpired {
		t.Fatalf("the same ID after its expiry: %+v, %v, %v", again, created, err)
	}
	if n, err := s.ExpireBoundaryRequests(ctx, c.now()); err != nil || n != 1 {
		t.Fatalf("ExpireBoundaryRequests = %d, %v; want 1 (short3)", n, err)
	}
	if cur, _ := s.BoundaryRequest(ctx, short3.Handle); cur.Request.Reason != BoundaryReasonExpired {
		t.Fatalf("short3: %+v", cur)
	}
	// Ending b denies long, its one pending request.
	if err := s.EndSession(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := s.BoundaryRequest(ctx, long.Handle); cur.Request.Status != boundary.Denied || cur.Request.Reason != BoundaryReasonSessionEnded || cur.DecidedBy != "host" {
		t.Fatalf("a pending request of an ended session: %+v", cur)
	}
	if _, _, err := s.SettleBoundaryRequest(ctx, long.Handle, boundary.Allow(), "operator:ann"); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("approve after the session ended: %v", err)
	}
	ended, _ := s.Session(ctx, "b")
	if ended.Live() || ended.Ended.IsZero() {
		t.Fatalf("ended session %+v", ended)
	}
	if _, _, err := s.RequestBoundary(ctx, "b", "new", expansion("/srv/5", "read", "exact"), "j", time.Time{}, 0); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("a request in an ended session: %v", err)
	}
	if _, _, err := s.OpenSession(ctx, "b", "coder", workBoundary()); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("reopen an ended session: %v", err)
	}
	if err := s.TouchSession(ctx, "b"); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("touch an ended session: %v", err)
	}
	if _, err := s.ResetSession(ctx, "b", workBoundary(), "cli:root"); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("reset an ended session: %v", err)
	}
	g0, n0 := counters(t, s)
	if err := s.EndSession(ctx, "b"); err != nil {
		t.Fatalf("end twice: %v", err)
	}
	if g1, n1 := counters(t, s); g1 != g0 || n1 != n0 {
		t.Fatal("ending an ended session wrote")
	}
	if err := s.EndSession(ctx, "nope"); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("end an unknown session: %v", err)
	}
	// Last use: written when a minute old, not before.
	if err := s.TouchSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	a0, _ := s.Session(ctx, "a")
	if !a0.LastUsed.Equal(c.now()) {
		t.Fatalf("last used %s; want %s", a0.LastUsed, c.now())
	}
	c.add(30 * time.Second)
	if err := s.TouchSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if a1, _ := s.Session(ctx, "a"); !a1.LastUsed.Equal(a0.LastUsed) {
		t.Fatal("a touch within the minute wrote")
	}
	c.add(31 * time.Second)
	if err := s.TouchSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if a1, _ := s.Session(ctx, "a"); !a1.LastUsed.Equal(c.now()) {
		t.Fatalf("last used %s; want %s", a1.LastUsed, c.now())
	}
	if err := s.TouchSession(ctx, "nope"); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("touch unknown: %v", err)
	}
}

// TestSettleRace: goroutines on two handles of one file, half approving
// and half denying, settle the same request: exactly one wins, the others
// get ErrApprovalState, and the session holds at most one new revision.
func TestSettleRace(t *testing.T) {
	t.Parallel()
	eachBackend(t, testSettleRace)
}

func testSettleRace(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s1, s2 := open(t, path, nil), open(t, path, nil)
	openSession(t, s1, "a", "coder")
	for round := range 4 {
		r := request(t, s1, "a", fmt.Sprintf("race-%d", round), expansion(fmt.Sprintf("/srv/race/%d", round), "write", "subtree"))
		var wins atomic.Int64
		var winner atomic.Value
		var wg sync.WaitGroup
		for i := range 8 {
			st := []*SQLite{s1, s2}[i%2]
			d := boundary.Allow()
			if i%4 >= 2 {
				d = boundary.Deny(fmt.Sprintf("denier %d", i))
			}
			wg.Go(func() {
				got, _, err := st.SettleBoundaryRequest(ctx, r.Handle, d, fmt.Sprintf("operator:%d", i))
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(got)
				case !errors.Is(err, ErrApprovalState):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners", round, wins.Load())
		}
		w := winner.Load().(BoundaryRequest)
		if cur, _ := s2.BoundaryRequest(ctx, r.Handle); !reflect.DeepEqual(cur, w) {
			t.Fatalf("round %d: stored %+v; the winner got %+v", round, cur, w)
		}
	}
	// Revisions are consecutive: one per approval that won.
	revs := revisionNumbers(t, s1, "a")
	for i, r := range revs {
		if r != int64(i) {
			t.Fatalf("revisions %v", revs)
		}
	}
	ss, _ := s2.Session(ctx, "a")
	if ss.Boundary.Revision != revs[len(revs)-1] {
		t.Fatalf("current revision %d; revisions %v", ss.Boundary.Revision, revs)
	}
}

// TestSessionAudit: every transition is in the audit trail, in its order,
// by whom, and the chain verifies; each commit changes Generation and,
// but a session's creation on SQLite (which no process can have kept a
// session of: writeSessionNew), the counters table.
func TestSessionAudit(t *testing.T) {
	t.Parallel()
	eachBackend(t, testSessionAudit)
}

func testSessionAudit(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	gens := map[int64]bool{}
	step := func(what string) {
		t.Helper()
		g, _ := s.Generation(ctx)
		c, _ := counters(t, s)
		if gens[g] || gens[c] {
			t.Fatalf("%s left Generation (%d) or the counter (%d) as before", what, g, c)
		}
		gens[g], gens[c] = true, true
	}
	step("start")
	c0, _ := counters(t, s)
	openSession(t, s, "a", "coder")
	if c, _ := counters(t, s); !be.pg && c != c0 {
		t.Fatalf("a session's creation moved SQLite's counter %d -> %d (CardsGeneration and SessionsGeneration: every kept wallet and session read again)", c0, c)
	}
	if g, _ := s.Generation(ctx); gens[g] {
		t.Fatalf("open left Generation (%d) as before", g)
	}
	if be.pg {
		step("open")
	}
	r1 := request(t, s, "a", "req-1", expansion("/srv/out", "write", "subtree"))
	step("request")
	settle(t, s, r1.Handle, boundary.Allow())
	step("approve")
	r2 := request(t, s, "a", "req-2", []byte(`{"network":{"enabled":true}}`))
	step("request 2")
	if _, _, err := s.SettleBoundaryRequest(ctx, r2.Handle, boundary.Deny("no network today"), "cli:root"); err != nil {
		t.Fatal(err)
	}
	step("deny")
	request(t, s, "a", "req-3", expansion("/srv/3", "read", "exact"))
	step("request 3")
	if _, err := s.ResetSession(ctx, "a", workBoundary(), "cli:root"); err != nil {
		t.Fatal(err)
	}
	step("reset")
	if err := s.EndSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	step("end")
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ kind, actor, has string }{
		{AuditSessionOpened, "agent:coder", `"boundary":{"kind":"managed","revision":0`},
		{AuditBoundaryRequested, "agent:coder", `"expansion":{"filesystem":{"entries":[{"path":"/srv/out","access":"write","scope":"subtree"}]}}`},
		{AuditBoundarySettled, "operator:ann", `"revision":1`},
		{AuditBoundaryRequested, "agent:coder", `"id":"req-2"`},
		{AuditBoundarySettled, "cli:root", `"reason":"no network today"`},
		{AuditBoundaryRequested, "agent:coder", `"id":"req-3"`},
		{AuditSessionReset, "cli:root", `"revision":2`},
		{AuditBoundarySettled, "host", `"reason":"session_ended"`},
		{AuditSessionEnded, "host", `"denied_requests":1`},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d audit records; want %d: %+v", len(recs), len(want), recs)
	}
	for i, w := range want {
		r := recs[i]
		if r.Kind != w.kind || r.Actor != w.actor || r.Agent != "coder" || !strings.Contains(string(r.Body), w.has) || !strings.Contains(string(r.Body), `"session":"a"`) {
			t.Fatalf("record %d: %s by %s for %s: %s; want %s by %s with %s", i, r.Kind, r.Actor, r.Agent, r.Body, w.kind, w.actor, w.has)
		}
		if !json.Valid(r.Body) {
			t.Fatalf("record %d: body is not JSON", i)
		}
	}
	if !strings.Contains(string(recs[2].Body), `"status":"approved"`) || !strings.Contains(string(recs[2].Body), r1.Handle) {
		t.Fatalf("approval record %s", recs[2].Body)
	}
	if n, _, err := s.VerifyAudit(ctx); err != nil || n != int64(len(want)) {
		t.Fatalf("VerifyAudit = %d, %v", n, err)
	}
}

// BenchmarkOpenSession: opening a session that exists (what a call of a
// known session does) against Session, the plain read it needs at least,
// and against the same read under the write lock; TouchSession within its
// minute.
func BenchmarkOpenSession(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "state.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.OpenSession(ctx, "a", "coder", workBoundary()); err != nil {
		b.Fatal(err)
	}
	b.Run("open-existing", func(b *testing.B) {
		for b.Loop() {
			if _, created, err := s.OpenSession(ctx, "a", "coder", workBoundary()); err != nil || created {
				b.Fatal(created, err)
			}
		}
	})
	b.Run("session-read", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Session(ctx, "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What an idempotent open cost when it ran in a write transaction
	// (BEGIN IMMEDIATE, the read, a rollback): the baseline of
	// open-existing.
	b.Run("read-under-write-lock", func(b *testing.B) {
		for b.Loop() {
			err := s.write(ctx, func(tx *sql.Tx) error {
				if _, err := loadSession(ctx, tx, "a"); err != nil {
					return err
				}
				return errUnchanged
			})
			if !errors.Is(err, errUnchanged) {
				b.Fatal(err)
			}
		}
	})
	b.Run("touch", func(b *testing.B) {
		for b.Loop() {
			if err := s.TouchSession(ctx, "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestBoundaryRequestsBoundedPerAgent: an agent has at most
// DefaultMaxPending boundary requests pending (over all its sessions):
// the next is ErrTooManyPending and stores nothing; the same ID again
// still finds its request; one that can only conflict (never pending) is
// still answered; another agent is not held; a settled request frees a
// place.
func TestBoundaryRequestsBoundedPerAgent(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBoundaryRequestsBoundedPerAgent)
}

func testBoundaryRequestsBoundedPerAgent(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	openSession(t, s, "a", "coder")
	openSession(t, s, "a2", "coder")
	openSession(t, s, "b", "other")
	var first BoundaryRequest
	for i := range DefaultMaxPending {
		sess := []string{"a", "a2"}[i%2]
		r := request(t, s, sess, fmt.Sprintf("r%d", i), expansion(fmt.Sprintf("/srv/%d", i), "read", "exact"))
		if i == 0 {
			first = r
		}
	}
	if _, _, err := s.RequestBoundary(ctx, "a", "over", expansion("/srv/over", "read", "exact"), "j", time.Time{}, 0); !errors.Is(err, ErrTooManyPending) ||
		!strings.Contains(err.Error(), `agent "coder"`) {
		t.Fatalf("request %d: %v, want ErrTooManyPending naming the agent", DefaultMaxPending+1, err)
	}
	if again, created, err := s.RequestBoundary(ctx, "a", "r0", expansion("/srv/0", "read", "exact"), "j", time.Time{}, 0); err != nil || created || again.Handle != first.Handle {
		t.Fatalf("the same ID again: %+v, %v, %v", again, created, err)
	}
	if r, created, err := s.RequestBoundary(ctx, "a", "deny", expansion("/srv/work/secrets/k", "read", "exact"), "j", time.Time{}, 0); err != nil || !created || r.Request.Status != boundary.Conflict {
		t.Fatalf("a request that can only conflict: %+v, %v, %v", r, created, err)
	}
	request(t, s, "b", "b1", expansion("/srv/b", "read", "exact"))
	settle(t, s, first.Handle, boundary.Deny("not now"))
	request(t, s, "a", "after", expansion("/srv/after", "read", "exact"))
	if _, _, err := s.RequestBoundary(ctx, "a2", "over2", expansion("/srv/over2", "read", "exact"), "j", time.Time{}, 0); !errors.Is(err, ErrTooManyPending) {
		t.Fatalf("full again: %v", err)
	}
	// The bound the caller gives (the agent's max_pending) instead: agent
	// "other" has b1 pending, so with 3, g0 and g1 fit and g2 does not.
	for i := range 3 {
		_, _, err := s.RequestBoundary(ctx, "b", fmt.Sprintf("g%d", i), expansion(fmt.Sprintf("/srv/g%d", i), "read", "exact"), "j", time.Time{}, 3)
		if want := i == 2; errors.Is(err, ErrTooManyPending) != want || !want && err != nil {
			t.Fatalf("request g%d with a bound of 3 (b1 pending): %v, want refused: %v", i, err, want)
		}
	}
}

// TestBindSession: a session is bound to one credential, once (a
// 2026-07-28 handle is usable only with the token that opened it); binding
// it again to the same is nothing, to another ErrNotAllowed, and an empty
// credential or an ended session is refused. Sessions read back with it.
func TestBindSession(t *testing.T) {
	t.Parallel()
	eachBackend(t, testBindSession)
}

func testBindSession(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	a := openSession(t, s, "", "coder")
	if a.Credential != "" {
		t.Fatalf("a new session is bound: %q", a.Credential)
	}
	if err := s.BindSession(ctx, a.ID, ""); !errors.Is(err, ErrBadInput) {
		t.Errorf("binding to no credential: %v", err)
	}
	for range 2 {
		if err := s.BindSession(ctx, a.ID, "token:0123456789abcdef"); err != nil {
			t.Fatalf("bind: %v", err)
		}
	}
	if err := s.BindSession(ctx, a.ID, "token:fedcba9876543210"); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("binding to another credential: %v", err)
	}
	if got, err := s.Session(ctx, a.ID); err != nil || got.Credential != "token:0123456789abcdef" {
		t.Errorf("read back: %q %v", got.Credential, err)
	}
	if list, err := s.Sessions(ctx, "coder"); err != nil || len(list) != 1 || list[0].Credential != "token:0123456789abcdef" {
		t.Errorf("listed: %+v %v", list, err)
	}
	if err := s.EndSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	b := openSession(t, s, "", "coder")
	s.EndSession(ctx, b.ID)
	if err := s.BindSession(ctx, b.ID, "token:0123456789abcdef"); !errors.Is(err, ErrSessionEnded) {
		t.Errorf("binding an ended session: %v", err)
	}
}

// TestOpenSessionWithinBinds: OpenSessionWithin with a credential creates
// the session bound to it, in the write that creates it (the session_open
// built-in: no one learns the ID before it is bound); opening it again with
// the same credential changes nothing, with another is ErrNotAllowed and
// leaves the binding; an unbound live session of the agent is bound by it,
// as BindSession would.
func TestOpenSessionWithinBinds(t *testing.T) {
	t.Parallel()
	eachBackend(t, testOpenSessionWithinBinds)
}

func testOpenSessionWithinBinds(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	const tok, other = "token:0123456789abcdef", "token:fedcba9876543210"
	ss, created, err := s.OpenSessionWithin(ctx, "", "coder", tok, workBoundary(), 0)
	if err != nil || !created || ss.Credential != tok {
		t.Fatalf("OpenSessionWithin with a credential: %+v, created %v, %v; want a new session bound to %s", ss, created, err, tok)
	}
	if got, err := s.Session(ctx, ss.ID); err != nil || got.Credential != tok {
		t.Fatalf("read back: %q %v, want bound to %s", got.Credential, err, tok)
	}
	if again, created, err := s.OpenSessionWithin(ctx, ss.ID, "coder", tok, workBoundary(), 0); err != nil || created || again.Credential != tok {
		t.Errorf("opened again with its credential: %+v, created %v, %v", again, created, err)
	}
	if _, _, err := s.OpenSessionWithin(ctx, ss.ID, "coder", other, workBoundary(), 0); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("opened again with another credential: %v, want ErrNotAllowed", err)
	}
	if got, err := s.Session(ctx, ss.ID); err != nil || got.Credential != tok {
		t.Errorf("after another credential's open: %q %v, want still %s", got.Credential, err, tok)
	}
	plain := openSession(t, s, "", "coder")
	if got, created, err := s.OpenSessionWithin(ctx, plain.ID, "coder", other, workBoundary(), 0); err != nil || created || got.Credential != other {
		t.Errorf("an unbound session opened with a credential: %+v, created %v, %v; want it bound to %s", got, created, err, other)
	}
	if got, err := s.Session(ctx, plain.ID); err != nil || got.Credential != other {
		t.Errorf("read back: %q %v, want bound to %s", got.Credential, err, other)
	}
}

// TestSessionsBoundedPerAgent: OpenSessionWithin refuses a new session,
// ErrTooManySessions naming the agent and the bound and storing nothing,
// while the agent holds max live sessions opened or used within
// SessionCountedFor; a session of its own that exists comes back, another
// agent is not held, OpenSession (a call's own session) is never refused;
// ending one frees a place, and so does a day without use, while a use
// (TouchSession) makes an old one count again.
func TestSessionsBoundedPerAgent(t *testing.T) {
	t.Parallel()
	eachBackend(t, testSessionsBoundedPerAgent)
}

func testSessionsBoundedPerAgent(t *testing.T, be backend) {
	ctx := context.Background()
	c := newClock()
	s := open(t, be.target(t), c)
	const max = 3
	within := func(agent string) (Session, error) {
		t.Helper()
		ss, created, err := s.OpenSessionWithin(ctx, "", agent, "", workBoundary(), max)
		if err == nil && !created {
			t.Fatalf("OpenSessionWithin(%q) made no session: %+v", agent, ss)
		}
		return ss, err
	}
	refused := func(why string) {
		t.Helper()
		_, err := within("coder")
		if !errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), `agent "coder" holds 3 live sessions`) {
			t.Fatalf("%s: %v, want ErrTooManySessions naming agent coder and the bound of %d", why, err, max)
		}
	}
	var held []Session
	for i := range max {
		ss, err := within("coder")
		if err != nil {
			t.Fatalf("session %d of %d: %v", i+1, max, err)
		}
		held = append(held, ss)
	}
	refused("session 4 of a bound of 3")
	if list, err := s.Sessions(ctx, "coder"); err != nil || len(list) != max {
		t.Fatalf("after a refusal: %d sessions (%v), want %d: nothing stored", len(list), err, max)
	}
	if ss, created, err := s.OpenSessionWithin(ctx, held[0].ID, "coder", "", workBoundary(), max); err != nil || created || ss.ID != held[0].ID {
		t.Errorf("a held session opened again at the bound: %+v, %v, %v", ss, created, err)
	}
	if _, err := within("other"); err != nil {
		t.Errorf("another agent held by coder's bound: %v", err)
	}
	if err := s.EndSession(ctx, held[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := within("coder"); err != nil {
		t.Fatalf("after ending one: %v", err)
	}
	refused("full again")
	// A call's own session (a default, an MCP session's) is not refused.
	openSession(t, s, "call-session", "coder")

	// A day later none counts; one used again counts again.
	c.add(SessionCountedFor + time.Minute)
	if err := s.TouchSession(ctx, held[1].ID); err != nil {
		t.Fatal(err)
	}
	for range max - 1 {
		if _, err := within("coder"); err != nil {
			t.Fatalf("a day later, with one old session used again: %v", err)
		}
	}
	refused("a day later, two new sessions and an old one used again")
}
