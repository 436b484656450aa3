package multiinstance

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// TestThreeInstancesOneState: three `maiden serve -http` processes on one
// PostgreSQL database, driven by the TypeScript MCP client, behave as one:
//   - a card revoked with the CLI is refused on every instance at its next
//     call (no wait between the revocation and the calls);
//   - a call waiting for approval on B, approved with `maiden approve` on the
//     same database, runs exactly once on B (counted by a loopback HTTPS
//     server the tool fetches); the same call repeated on C asks again;
//   - a call waiting on C, approved by an operator signed in to A's inbox
//     page, runs exactly once on C;
//   - a rate limit of 5 per minute holds across all three under 30
//     concurrent calls: exactly 5 run;
//   - a card budget of 5 calls (cards grant -budget) holds across all three
//     under 30 concurrent calls: exactly 5 run, the others are denied
//     naming the card and the budget, and cards show says 5 spent, 0 left;
//   - a bearer token revoked with the CLI is refused by every instance at
//     its next request;
//   - `maiden audit whatif` over the trail the three wrote replays it exactly
//     with no change (exit 0), and flips the budget card's calls when it is
//     revoked and the asked fetcher calls when an always-card is granted;
//   - `maiden audit verify` passes after the mixed run, and fails after one
//     record is edited with psql.
//
// budgetCalls is the calls budget of the card the budget subtest grants.
const budgetCalls = 5

func TestThreeInstancesOneState(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	var card struct{ ID string }
	if err := json.Unmarshal([]byte(e.maiden(t, "cards", "grant", "-agent", "alice", "tool:invoke echo --...", "-json")), &card); err != nil || card.ID == "" {
		t.Fatalf("cards grant: %v", err)
	}
	ins := []*instance{e.serve(t, "A"), e.serve(t, "B"), e.serve(t, "C")}
	d := newDriver(t)
	names := []string{"A", "B", "C"}
	for i, in := range ins {
		d.connect(t, names[i], in, e.token)
	}
	var budgetCard string // the budget subtest's card

	t.Run("revoke on one, denied on all", func(t *testing.T) {
		for _, c := range names {
			if r := d.call(t, c, "echo", map[string]any{"message": "before"}); !r.ok() || !strings.Contains(r.Text, "before") {
				t.Fatalf("echo on %s before the revocation: %s", c, r)
			}
		}
		e.maiden(t, "cards", "revoke", card.ID)
		for _, c := range []string{"B", "C", "A"} {
			r := d.call(t, c, "echo", map[string]any{"message": "after"})
			if r.ok() || !strings.HasPrefix(r.Text, "denied:") || !strings.Contains(r.Text, `no card of agent "alice" allows tool:invoke echo`) {
				t.Errorf("echo on %s right after the revocation: %s (want denied)", c, r)
			}
		}
	})

	t.Run("approved through the CLI, runs once on B", func(t *testing.T) {
		call := d.start(t, "B", "fetcher", e.ctr.url("/approve-once"))
		id, msg := call.approvalID(t)
		if n := e.ctr.count("/approve-once"); n != 0 {
			t.Fatalf("the tool ran %d times before the approval", n)
		}
		if out := e.maiden(t, "pending"); !strings.Contains(out, id) {
			t.Fatalf("maiden pending does not list %s (progress: %q):\n%s", id, msg, out)
		}
		e.maiden(t, "approve", id)
		r := call.wait(t)
		if !r.ok() || !strings.Contains(r.Text, "hit 1") {
			t.Fatalf("the approved call on B: %s", r)
		}
		// The same call on C: the approval was consumed, so it asks again;
		// denied, it does not run.
		again := d.start(t, "C", "fetcher", e.ctr.url("/approve-once"))
		id2, _ := again.approvalID(t)
		if id2 == id {
			t.Fatalf("the repeated call reuses the consumed approval %s", id)
		}
		e.maiden(t, "deny", id2, "-reason", "once was enough")
		if r := again.wait(t); r.ok() || !strings.Contains(r.Text, "once was enough") {
			t.Fatalf("the denied repeat on C: %s", r)
		}
		if n := e.ctr.count("/approve-once"); n != 1 {
			t.Fatalf("the approved call ran %d times, want exactly 1", n)
		}
	})

	t.Run("approved in A's inbox, runs once on C", func(t *testing.T) {
		call := d.start(t, "C", "fetcher", e.ctr.url("/inbox-once"))
		id, _ := call.approvalID(t)
		e.inboxApprove(t, ins[0], id)
		if r := call.wait(t); !r.ok() || !strings.Contains(r.Text, "hit 1") {
			t.Fatalf("the call on C approved in A's inbox: %s", r)
		}
		if n := e.ctr.count("/inbox-once"); n != 1 {
			t.Fatalf("the approved call ran %d times, want exactly 1", n)
		}
	})

	t.Run("one rate limit across three instances", func(t *testing.T) {
		const perInstance = 10
		var calls []*call
		for range perInstance {
			for _, c := range names {
				calls = append(calls, d.start(t, c, "limited", map[string]any{"message": "x"}))
			}
		}
		ok, limited := 0, 0
		for _, c := range calls {
			r := c.wait(t)
			switch {
			case r.ok():
				ok++
			case r.IsError && strings.Contains(r.Text, "rate limit"):
				limited++
			default:
				t.Errorf("a limited call: %s", r)
			}
		}
		if ok != rateLimit || limited != len(calls)-rateLimit {
			t.Fatalf("%d of %d concurrent calls ran, %d were refused by the rate limit; want exactly %d to run", ok, len(calls), limited, rateLimit)
		}
	})

	t.Run("one card budget across three instances", func(t *testing.T) {
		var c struct{ ID string }
		if err := json.Unmarshal([]byte(e.maiden(t, "cards", "grant", "-agent", "alice", "-budget", fmt.Sprintf("calls=%d", budgetCalls), "tool:invoke echo --...", "-json")), &c); err != nil || c.ID == "" {
			t.Fatalf("cards grant -budget: %v", err)
		}
		budgetCard = c.ID
		var calls []*call
		for range 10 {
			for _, n := range names {
				calls = append(calls, d.start(t, n, "echo", map[string]any{"message": "budgeted"}))
			}
		}
		ok, exhausted := 0, 0
		for _, cl := range calls {
			r := cl.wait(t)
			switch {
			case r.ok():
				ok++
			case r.IsError && strings.Contains(r.Text, "budget-exhausted: card "+c.ID+" has 0 of its calls budget of 5 left"):
				exhausted++
			default:
				t.Errorf("a budgeted call: %s", r)
			}
		}
		if ok != budgetCalls || exhausted != len(calls)-budgetCalls {
			t.Fatalf("%d of %d concurrent calls ran, %d were denied by the budget; want exactly %d to run", ok, len(calls), exhausted, budgetCalls)
		}
		if out := e.maiden(t, "cards", "show", c.ID); !strings.Contains(out, "calls     0 left of 5 (5 spent)") {
			t.Fatalf("cards show after the run:\n%s", out)
		}
	})

	t.Run("token revoked on one, refused on all", func(t *testing.T) {
		id := strings.SplitN(strings.TrimPrefix(e.token, "mdn_"), "_", 2)[0]
		e.maiden(t, "agents", "revoke-token", id)
		for _, c := range []string{"C", "A", "B"} {
			r := d.call(t, c, "limited", map[string]any{"message": "after the token"})
			if r.ok() || !strings.Contains(r.Error, "is not a valid agent token (unknown, or revoked") {
				t.Errorf("a call on %s with the revoked token: %s (want the request refused)", c, r)
			}
		}
	})

	t.Run("audit verify after the mixed run, and after an edit", func(t *testing.T) {
		for _, in := range ins {
			in.stop(t) // each flushes its audit journal into the chain
		}
		out := e.maiden(t, "audit", "verify")
		if !strings.HasPrefix(out, "ok: ") {
			t.Fatalf("audit verify: %s", out)
		}
		recs := e.auditExport(t)
		admitted := map[string]int{}
		for _, r := range recs {
			if r.Kind == "call-admitted" {
				admitted[r.Tool]++
			}
		}
		// 3 echo calls before the revocation and 5 on the budget, 2
		// approved fetcher calls, 5 limited calls: each admitted once, on
		// whichever instance ran it.
		if admitted["echo"] != 3+budgetCalls || admitted["fetcher"] != 2 || admitted["limited"] != rateLimit {
			t.Errorf("call-admitted records per tool: %v", admitted)
		}
		// What-if over the trail three instances wrote: with no change
		// every decision made on today's cards replays exactly (exit 0);
		// revoking the budget card flips its echo calls to denied, and
		// an always-card for fetcher would have let the asked calls
		// through (exit 1).
		whatif := func(args ...string) (rep struct {
			Replayed, Verified, Asked, Flips int
			Inexact                          []any
			Groups                           []struct {
				Agent, Tool string
				A2D         int `json:"allowed_to_denied"`
				D2A         int `json:"denied_to_allowed"`
			}
		}, code int) {
			t.Helper()
			out, errOut, err := e.try(append([]string{"audit", "whatif", "-json"}, args...)...)
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("audit whatif %v: %v", args, err)
			}
			if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
				t.Fatalf("audit whatif %v: exit %d, %v\n%s%s", args, code, jerr, out, errOut)
			}
			return rep, code
		}
		rep, code := whatif()
		if code != 0 || rep.Flips != 0 || len(rep.Inexact) != 0 || rep.Verified < budgetCalls || rep.Asked < 3 {
			t.Errorf("audit whatif, no change: exit %d, %+v; want exit 0, nothing inexact, the budgeted calls verified, the 3 approval requests asked", code, rep)
		}
		for _, tc := range []struct {
			args          []string
			tool          string
			a2d, d2a, min int
		}{
			{[]string{"-revoke", budgetCard}, "echo", 1, 0, budgetCalls},
			{[]string{"-agent", "alice", "-grant", "approve:always fetcher --..."}, "fetcher", 0, 1, 3},
		} {
			rep, code := whatif(tc.args...)
			ok := code == 1 && len(rep.Groups) == 1 && rep.Groups[0].Tool == tc.tool
			if ok {
				g := rep.Groups[0]
				ok = (tc.a2d == 0) == (g.A2D == 0) && (tc.d2a == 0) == (g.D2A == 0) && g.A2D+g.D2A >= tc.min
			}
			if !ok {
				t.Errorf("audit whatif %v: exit %d, %+v; want exit 1 and %s's calls flipped (at least %d)", tc.args, code, rep, tc.tool, tc.min)
			}
		}

		victim := recs[len(recs)/2].Seq
		e.psql(t, fmt.Sprintf("UPDATE audit SET actor = 'agent:mallory' WHERE seq = %d", victim))
		o, errOut, err := e.try("audit", "verify")
		if err == nil || !strings.Contains(errOut, fmt.Sprint(victim)) {
			t.Fatalf("audit verify after an edit of record %d: err %v\n%s%s", victim, err, o, errOut)
		}
	})
}

// TestDatabaseRestartUnderLoad: three instances under a bounded load of
// calls of a tool that fetches a counting server (each call its own path);
// the database is stopped for 2 s in the middle and started again. Calls
// made meanwhile are refused with an error that says the state store is
// unavailable (never run unaudited); afterwards calls work again; and
// nothing is lost or duplicated: every call that succeeded ran exactly once,
// every refused call did not run, and the audit trail holds exactly one
// call-admitted record and one fetch record per execution, and verifies.
func TestDatabaseRestartUnderLoad(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	ins := []*instance{e.serve(t, "A"), e.serve(t, "B"), e.serve(t, "C")}
	d := newDriver(t)
	names := []string{"A", "B", "C"}
	for i, in := range ins {
		d.connect(t, names[i], in, e.token)
	}
	type outcome struct {
		path string
		r    result
		at   time.Time
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
		started  = make(chan struct{}, 1<<16)
		stop     atomic.Bool
	)
	// Each instance gets one call after another (25 ms apart) until the
	// load ends, 3 s after the database is back.
	for _, c := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load() && i < 10000; i++ {
				path := fmt.Sprintf("/load-%s-%d", c, i)
				r := d.call(t, c, "counted", e.ctr.url(path))
				mu.Lock()
				outcomes = append(outcomes, outcome{path, r, time.Now()})
				mu.Unlock()
				started <- struct{}{}
				time.Sleep(25 * time.Millisecond)
			}
		}()
	}
	for range 30 { // some load first
		<-started
	}
	down := time.Now()
	pgtest.RestartAfter(t, 2*time.Second)
	up := time.Now()
	time.Sleep(3 * time.Second)
	stop.Store(true)
	wg.Wait()

	var okN, refused int
	var sample string
	for _, o := range outcomes {
		n := e.ctr.count(o.path)
		// A refusal comes as the HTTP answer to the request (the bearer
		// token cannot be checked) or as the call's error result.
		msg := o.r.Error
		if o.r.IsError {
			msg = o.r.Text
		}
		switch {
		case o.r.ok():
			okN++
			if n != 1 || !strings.Contains(o.r.Text, "hit 1") {
				t.Errorf("%s succeeded (%s) but ran %d times", o.path, o.r, n)
			}
		default:
			refused++
			if sample == "" {
				sample = msg
			}
			if n != 0 {
				t.Errorf("%s was refused (%s) but ran %d times", o.path, msg, n)
			}
			if !strings.Contains(msg, "state store") {
				t.Errorf("%s refused without naming the state store: %s", o.path, msg)
			}
		}
	}
	t.Logf("%d calls: %d ran, %d refused while the database was down (%s .. %s); a refusal: %q",
		len(outcomes), okN, refused, down.Format("15:04:05.000"), up.Format("15:04:05.000"), sample)
	if refused == 0 {
		t.Errorf("no call was refused while the database was down for 2 s: the outage was not exercised")
	}
	// A second after the database is back, every call works again.
	var after, afterOK int
	for _, o := range outcomes {
		if o.at.After(up.Add(time.Second)) {
			after++
			if o.r.ok() {
				afterOK++
			}
		}
	}
	if after == 0 || afterOK != after {
		t.Errorf("from 1 s after the restart on: %d of %d calls ran, want all", afterOK, after)
	}
	for _, in := range ins {
		in.stop(t)
	}
	if out := e.maiden(t, "audit", "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("audit verify: %s", out)
	}
	admitted, fetched := map[string]int{}, map[string]int{}
	for _, r := range e.auditExport(t) {
		if r.Tool != "counted" {
			continue
		}
		var body struct {
			Rendered string `json:"rendered"`
			Path     string `json:"path"`
		}
		json.Unmarshal(r.Body, &body)
		switch r.Kind {
		case "call-admitted":
			admitted[pathOf(body.Rendered)]++
		case "fetch":
			fetched[pathOf(body.Path)]++
		}
	}
	for _, o := range outcomes {
		want := e.ctr.count(o.path)
		if admitted[o.path] != want || fetched[o.path] != want {
			t.Errorf("%s ran %d times; the audit trail has %d call-admitted and %d fetch records", o.path, want, admitted[o.path], fetched[o.path])
		}
	}
}

// pathOf finds the /load-... path in a rendered input or a URL.
func pathOf(s string) string {
	i := strings.Index(s, "/load-")
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.IndexAny(s, " \"?"); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestKilledWhileHoldingAnApproval: an approved call runs on B and B is
// killed with -9 while the tool runs. The call is never re-run by itself:
// once a maiden opens the store again (B's replacement starting), the
// approval is marked interrupted; the same call repeated on C says so and
// asks again; approved, it runs once more, on C.
func TestKilledWhileHoldingAnApproval(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	e.ctr.mu.Lock()
	e.ctr.hold = "/slow"
	e.ctr.mu.Unlock()
	a, b, c := e.serve(t, "A"), e.serve(t, "B"), e.serve(t, "C")
	d := newDriver(t)
	d.connect(t, "B", b, e.token)
	d.connect(t, "C", c, e.token)

	call := d.start(t, "B", "fetcher", e.ctr.url("/slow"))
	id, _ := call.approvalID(t)
	e.maiden(t, "approve", id)
	select {
	case <-e.ctr.held:
	case <-time.After(60 * time.Second):
		t.Fatal("the approved call never reached the server")
	}
	b.kill(t)
	// The client of the killed instance gets no result (the SDK would try
	// to resume the stream until its timeout): it is closed instead.
	d.send(t, map[string]any{"op": "close", "c": "B"})
	select {
	case <-call.done:
		if call.res.ok() {
			t.Fatalf("the call on the killed instance succeeded: %s", call.res)
		}
	default:
	}
	if got := e.psql(t, "SELECT state FROM approvals WHERE id = '"+id+"'"); got != "started" {
		t.Fatalf("approval %s after the kill: %q, want started (its runner is gone but no maiden has opened the store since)", id, got)
	}
	// B's replacement opens the store (at the first request it
	// authenticates, at the latest) and marks the dead runner's call.
	b2 := e.serve(t, "B2")
	d.connect(t, "B2", b2, e.token)
	d.call(t, "B2", "echo", map[string]any{"message": "hello"})
	if got := e.psql(t, "SELECT state FROM approvals WHERE id = '"+id+"'"); got != "interrupted" {
		t.Fatalf("approval %s after a maiden opened the store again: %q, want interrupted", id, got)
	}

	again := d.start(t, "C", "fetcher", e.ctr.url("/slow"))
	id2, msg := again.approvalID(t)
	if id2 == id || !strings.Contains(msg, "interrupted") {
		t.Fatalf("the repeated call on C: approval %s, progress %q; want a new request saying the last run was interrupted", id2, msg)
	}
	if n := e.ctr.count("/slow"); n != 1 {
		t.Fatalf("the tool ran %d times before the new approval, want 1 (the killed run)", n)
	}
	e.maiden(t, "approve", id2)
	if r := again.wait(t); !r.ok() || !strings.Contains(r.Text, "hit 2") {
		t.Fatalf("approved again on C: %s", r)
	}
	if n := e.ctr.count("/slow"); n != 2 {
		t.Fatalf("the tool ran %d times, want 2 (the killed run and the one approved again)", n)
	}
	a.stop(t)
	c.stop(t)
	b2.stop(t)
}
