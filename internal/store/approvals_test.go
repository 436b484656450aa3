package store

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newApproval(t *testing.T, s *DB, digest string, ttl time.Duration) Approval {
	t.Helper()
	a, err := s.CreateApproval(context.Background(), Approval{
		Agent: "a", Session: "s1", Tool: "pay", Rendered: "pay --amount=250", Digest: digest,
		Middleware: "approve#1", Reason: "args.amount > 100", CardGeneration: 7, Expires: s.now().Add(ttl),
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantState(t *testing.T, s *DB, id, state string) {
	t.Helper()
	a, err := s.Approval(context.Background(), id)
	if err != nil || a.State != state {
		t.Fatalf("approval %s: state %q, %v; want %q", id, a.State, err, state)
	}
}

// TestApprovalLifecycle: create, list, decide (audited), find, consume
// once, done; the errors for unknown and already decided IDs; denial
// memory; expiry.
func TestApprovalLifecycle(t *testing.T) {
	t.Parallel()
	eachBackend(t, testApprovalLifecycle)
}

func testApprovalLifecycle(t *testing.T, be backend) {
	ctx := context.Background()
	c := newClock()
	s := open(t, be.target(t), c)
	a := newApproval(t, s, "d1", time.Hour)
	c.add(time.Second)
	b := newApproval(t, s, "d2", time.Hour)
	p, err := s.PendingApprovals(ctx, c.now())
	if err != nil || len(p) != 2 || p[0].ID != a.ID || p[0].Rendered != "pay --amount=250" || p[0].CardGeneration != 7 || p[0].Reason != "args.amount > 100" {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	if _, found, _ := s.FindApproved(ctx, "a", "pay", "d1", c.now()); found {
		t.Fatal("a pending request was found approved")
	}
	if _, err := s.ConsumeAndStart(ctx, a.ID, Binding{}); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("consume of a pending request: %v", err)
	}
	if _, err := s.Decide(ctx, "apr_nope", true, "operator:ann", ""); !errors.Is(err, ErrUnknownApproval) || !strings.Contains(err.Error(), "apr_nope") {
		t.Fatalf("decide unknown: %v", err)
	}
	for _, by := range []string{"agent:a", "agent:other", AgentActor("a").String()} {
		if _, err := s.Decide(ctx, a.ID, true, by, "self"); !errors.Is(err, ErrNotAllowed) {
			t.Fatalf("decide by %s: %v", by, err)
		}
	}
	wantState(t, s, a.ID, ApprovalPending)
	if _, err := s.Decide(ctx, a.ID, true, "operator:ann", "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, a.ID, false, "operator:bob", "no"); !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), "approved") {
		t.Fatalf("decide twice: %v", err)
	}
	if _, err := s.Decide(ctx, b.ID, false, "operator:bob", "too much"); err != nil {
		t.Fatal(err)
	}
	// The decisions are in the audit trail, by whom.
	recs, _ := s.AuditTail(ctx, 0, 0)
	if len(recs) != 2 || recs[0].Kind != AuditApproval || recs[0].Actor != "operator:ann" || recs[1].Kind != AuditDenial || !strings.Contains(string(recs[1].Body), "too much") {
		t.Fatalf("audit: %+v", recs)
	}
	// Only the same agent, tool and digest find the approval.
	for _, q := range [][3]string{{"b", "pay", "d1"}, {"a", "other", "d1"}, {"a", "pay", "d9"}} {
		if _, found, _ := s.FindApproved(ctx, q[0], q[1], q[2], c.now()); found {
			t.Fatalf("FindApproved%v found one", q)
		}
	}
	got, found, err := s.FindApproved(ctx, "a", "pay", "d1", c.now())
	if err != nil || !found || got.ID != a.ID {
		t.Fatalf("FindApproved = %+v, %v, %v", got, found, err)
	}
	if _, err := s.ConsumeAndStart(ctx, a.ID, Binding{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeAndStart(ctx, a.ID, Binding{}); !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), "started") {
		t.Fatalf("second consume: %v", err)
	}
	if _, found, _ := s.FindApproved(ctx, "a", "pay", "d1", c.now()); found {
		t.Fatal("a consumed approval was found again")
	}
	if err := s.MarkDone(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDone(ctx, a.ID); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("MarkDone twice: %v", err)
	}
	wantState(t, s, a.ID, ApprovalDone)
	// A denial is remembered until the request expires.
	if d, found, _ := s.RecentDenial(ctx, "a", "pay", "d2", c.now()); !found || d.DecisionReason != "too much" || d.DecidedBy != "operator:bob" {
		t.Fatalf("RecentDenial = %+v, %v", d, found)
	}
	c.add(time.Hour)
	if _, found, _ := s.RecentDenial(ctx, "a", "pay", "d2", c.now()); found {
		t.Fatal("a denial outlived its request")
	}
	// Expiry: pending and approved-unconsumed requests expire; deciding an
	// expired one is refused and marks it.
	e1 := newApproval(t, s, "d3", time.Minute)
	e2 := newApproval(t, s, "d4", time.Minute)
	e3 := newApproval(t, s, "d5", time.Minute)
	if _, err := s.Decide(ctx, e2.ID, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute)
	if _, err := s.Decide(ctx, e3.ID, true, "operator:ann", ""); !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("decide expired: %v", err)
	}
	wantState(t, s, e3.ID, ApprovalExpired)
	if _, err := s.ConsumeAndStart(ctx, e2.ID, Binding{}); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("consume of an expired approval: %v", err)
	}
	if n, err := s.Expire(ctx, c.now()); err != nil || n != 2 {
		t.Fatalf("Expire = %d, %v; want 2", n, err)
	}
	wantState(t, s, e1.ID, ApprovalExpired)
	wantState(t, s, e2.ID, ApprovalExpired)
	if p, _ := s.PendingApprovals(ctx, c.now()); len(p) != 0 {
		t.Fatalf("pending after expiry: %+v", p)
	}
	// Bad input.
	if _, err := s.CreateApproval(ctx, Approval{Agent: "a", Tool: "t", Digest: "d", Middleware: "m", Expires: c.now()}, 0); !errors.Is(err, ErrBadInput) {
		t.Fatalf("an already expired request: %v", err)
	}
	if _, err := s.CreateApproval(ctx, Approval{Tool: "t", Digest: "d", Middleware: "m", Expires: c.now().Add(time.Hour)}, 0); !errors.Is(err, ErrBadInput) {
		t.Fatalf("no agent: %v", err)
	}
}

func childCmd(path, mode, arg string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAIDEN_STORE_TEST_CHILD="+mode, "MAIDEN_STORE_TEST_PATH="+path, "MAIDEN_STORE_TEST_WRITER="+arg)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestConsumeExactlyOnce: eight goroutines on two *DB and four child
// processes race to consume one approval; exactly one wins, in each of
// several rounds.
func TestConsumeExactlyOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, testConsumeExactlyOnce)
}

func testConsumeExactlyOnce(t *testing.T, be backend) {
	path := be.target(t)
	s := open(t, path, nil)
	s2 := open(t, path, nil)
	for round := range 3 {
		a := newApproval(t, s, "race", time.Hour)
		if _, err := s.Decide(context.Background(), a.ID, true, "operator:ann", ""); err != nil {
			t.Fatal(err)
		}
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for range 4 {
			cmd := childCmd(path, "consume", a.ID)
			var out strings.Builder
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, &out)
		}
		var wins atomic.Int64
		var wg sync.WaitGroup
		for i := range 8 {
			st := s
			if i%2 == 1 {
				st = s2
			}
			wg.Go(func() {
				_, err := st.ConsumeAndStart(context.Background(), a.ID, Binding{})
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, ErrApprovalState):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v", err)
			}
			if strings.TrimSpace(outs[i].String()) == "ok" {
				wins.Add(1)
			}
		}
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d consumers won; want exactly 1", round, wins.Load())
		}
		wantState(t, s, a.ID, ApprovalStarted)
	}
}

// holdChild starts a child in mode on approval id, waits for its line,
// kills it with SIGKILL and reaps it.
func holdChild(t *testing.T, path, mode, id, line string) {
	t.Helper()
	cmd := childCmd(path, mode, id)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != line {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child %s: got %q, want %q", mode, sc.Text(), line)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
}

// TestApprovalKill9 (A16): a real child approves and is killed before
// the call starts: after a restart the approval is there and consumable
// exactly once. Another child starts the call and is killed while it
// "runs": on restart it is interrupted, never consumable again. A call
// started by a live process is left alone.
func TestApprovalKill9(t *testing.T) {
	t.Parallel()
	eachBackend(t, testApprovalKill9)
}

func testApprovalKill9(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	a := newApproval(t, s, "k1", time.Hour)
	b := newApproval(t, s, "k2", time.Hour)
	s.Close()

	// Killed between approval and start.
	holdChild(t, path, "approve-hold", a.ID, "approved")
	s = open(t, path, nil)
	if n, err := s.MarkInterruptedOnStartup(ctx); err != nil || n != 0 {
		t.Fatalf("MarkInterruptedOnStartup = %d, %v; nothing was started", n, err)
	}
	got, found, err := s.FindApproved(ctx, "a", "pay", "k1", time.Now())
	if err != nil || !found || got.ID != a.ID {
		t.Fatalf("after restart the approval is gone: %+v, %v, %v", got, found, err)
	}
	if _, err := s.ConsumeAndStart(ctx, a.ID, Binding{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeAndStart(ctx, a.ID, Binding{}); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("consumed twice: %v", err)
	}
	// This process's own started call is not interrupted by a restart of
	// another store in it.
	if n, _ := s.MarkInterruptedOnStartup(ctx); n != 0 {
		t.Fatalf("a live process's call was marked interrupted")
	}
	if err := s.MarkDone(ctx, a.ID); err != nil {
		t.Fatal(err)
	}

	// Killed while the call runs.
	if _, err := s.Decide(ctx, b.ID, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	// A live child holding a started call is not interrupted by our
	// startup; once it is killed, it is.
	cmd := childCmd(path, "start-hold", b.ID)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "started" {
		cmd.Process.Kill()
		t.Fatalf("child: %q", sc.Text())
	}
	if n, _ := s.MarkInterruptedOnStartup(ctx); n != 0 {
		cmd.Process.Kill()
		t.Fatal("a call of a live process was marked interrupted")
	}
	wantState(t, s, b.ID, ApprovalStarted)
	cmd.Process.Kill()
	cmd.Wait()
	s.Close()
	s = open(t, path, nil)
	if n, err := s.MarkInterruptedOnStartup(ctx); err != nil || n != 1 {
		t.Fatalf("MarkInterruptedOnStartup = %d, %v; want 1", n, err)
	}
	wantState(t, s, b.ID, ApprovalInterrupted)
	if _, found, _ := s.FindApproved(ctx, "a", "pay", "k2", time.Now()); found {
		t.Fatal("an interrupted call is found approved")
	}
	if _, err := s.ConsumeAndStart(ctx, b.ID, Binding{}); !errors.Is(err, ErrApprovalState) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("consume of an interrupted call: %v", err)
	}
	wantState(t, s, a.ID, ApprovalDone)
	integrityCheck(t, s)
	if _, _, err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPendingApprovalsBoundedPerAgent: an agent has at most
// DefaultMaxPending requests pending and not expired (or the bound the
// caller gives: its max_pending, lower or higher); the next is
// ErrTooManyPending and stores nothing; another agent is not held by it;
// a decided or an expired request frees a place. On PostgreSQL two
// instances filling the same agent's places at once store exactly the
// bound between them (the count and the insert in one locked write).
func TestPendingApprovalsBoundedPerAgent(t *testing.T) {
	t.Parallel()
	eachBackend(t, testPendingApprovalsBoundedPerAgent)
}

func testPendingApprovalsBoundedPerAgent(t *testing.T, be backend) {
	ctx := context.Background()
	c := newClock()
	target := be.target(t)
	s := open(t, target, c)
	ask := func(s *DB, agent, digest string, ttl time.Duration) (Approval, error) {
		return s.CreateApproval(ctx, Approval{Agent: agent, Tool: "pay", Digest: digest, Middleware: "approve#1", Expires: c.now().Add(ttl)}, 0)
	}
	var short Approval
	for i := range DefaultMaxPending {
		ttl := time.Hour
		if i == 1 {
			ttl = time.Minute
		}
		a, err := ask(s, "a", "d"+strconv.Itoa(i), ttl)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if i == 1 {
			short = a
		}
	}
	if _, err := ask(s, "a", "over", time.Hour); !errors.Is(err, ErrTooManyPending) || !strings.Contains(err.Error(), `agent "a"`) {
		t.Fatalf("request %d: %v, want ErrTooManyPending naming the agent", DefaultMaxPending+1, err)
	}
	if p, err := s.PendingApprovals(ctx, c.now()); err != nil || len(p) != DefaultMaxPending {
		t.Fatalf("%d pending (%v), want %d", len(p), err, DefaultMaxPending)
	}
	if _, err := ask(s, "b", "d0", time.Hour); err != nil {
		t.Fatalf("another agent's request: %v", err)
	}
	first, err := s.PendingApprovals(ctx, c.now())
	if err != nil {
		t.Fatal(err)
	}
	// One of a's, and not short, whose expiry frees a place below: the
	// requests share one created_at (the test clock stands still), so the
	// oldest first is in ID order, random (short, decided here, made the
	// expiry free nothing once in a full run).
	decided := slices.IndexFunc(first, func(p Approval) bool { return p.Agent == "a" && p.ID != short.ID })
	if _, err := s.Decide(ctx, first[decided].ID, false, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(s, "a", "after-decide", time.Hour); err != nil {
		t.Fatalf("after a decision: %v", err)
	}
	c.add(2 * time.Minute) // short expires, not yet marked expired
	if _, err := ask(s, "a", "after-expiry", time.Hour); err != nil {
		t.Fatalf("after request %s expired: %v", short.ID, err)
	}
	if _, err := ask(s, "a", "over", time.Hour); !errors.Is(err, ErrTooManyPending) {
		t.Fatalf("full again: %v", err)
	}
	// A bound given by the caller, below and above the default.
	for agent, bound := range map[string]int{"low": 3, "high": DefaultMaxPending + 5} {
		for i := range bound + 1 {
			_, err := s.CreateApproval(ctx, Approval{Agent: agent, Tool: "pay", Digest: "d" + strconv.Itoa(i), Middleware: "approve#1", Expires: c.now().Add(time.Hour)}, bound)
			if i < bound && err != nil {
				t.Fatalf("agent %s, bound %d: request %d: %v", agent, bound, i+1, err)
			}
			if i == bound && !errors.Is(err, ErrTooManyPending) {
				t.Fatalf("agent %s, bound %d: request %d: %v, want ErrTooManyPending", agent, bound, i+1, err)
			}
		}
	}
	if !be.pg {
		return
	}
	// Two instances, one new agent, each asking more than the bound.
	other := open(t, target, c)
	var stored atomic.Int32
	var wg sync.WaitGroup
	for n, inst := range []*DB{s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range DefaultMaxPending {
				_, err := ask(inst, "racer", "i"+strconv.Itoa(n)+"-"+strconv.Itoa(i), time.Hour)
				switch {
				case err == nil:
					stored.Add(1)
				case !errors.Is(err, ErrTooManyPending):
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := stored.Load(); n != DefaultMaxPending {
		t.Errorf("two instances stored %d requests of one agent, want %d", n, DefaultMaxPending)
	}
}
