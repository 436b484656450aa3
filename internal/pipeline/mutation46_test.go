package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// Mutation pass 46 (docs/security-tests.md, "Forty-sixth pass"): tests
// for what the middleware stage, the durable approvals, the human wait and
// the revocation watch promise that no earlier test held.

// TestMutation46RewriteSizeLimitExact: a middleware's rewrite one byte
// past the input limit is refused for its size, before anything reads it;
// one of exactly the limit is not refused for its size.
func TestMutation46RewriteSizeLimitExact(t *testing.T) {
	const limit = 10
	r := rewriteCheck{limit: func(*config.Config) int64 { return limit }}
	m := config.Middleware{Rule: "middleware[0]"}
	for _, c := range []struct {
		input, want string
	}{
		{strings.Repeat("x", limit+1), "a middleware rewrote the input past the size limit"},
		{strings.Repeat("x", limit), "a middleware rewrote the input into something that is not JSON"},
	} {
		inv := &invocation{}
		done, err := r.check(context.Background(), inv, m, c.input)
		if err != nil || !done || inv.res.Error == nil || inv.res.Error.Kind != KindDenied || !strings.Contains(inv.res.Error.Message, c.want) {
			t.Errorf("a rewrite of %d bytes under a limit of %d: done %v, err %v, result %+v; want denied: %s", len(c.input), limit, done, err, inv.res.Error, c.want)
		}
	}
}

// TestMutation46WatchRefusesUnknownToken: the revocation watch's question
// about a running call's token (revocationWatch.refusal) stops a call
// whose token the store no longer lists as its agent's (here: the ID is
// listed as agent b's), as it stops a revoked one; a live token goes on.
func TestMutation46WatchRefusesUnknownToken(t *testing.T) {
	t.Parallel()
	echo := testkit.Component(t, "echo")
	named := testConfig(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+echo+"\"\n[agents.a]\ntools = [\"echo\"]\n")
	watch := func(toks []store.TokenInfo) *revocationWatch {
		var p atomic.Pointer[config.Config]
		p.Store(named)
		return &revocationWatch{log: slog.New(slog.DiscardHandler), principal: principalCheck{cfg: &p,
			state: func(context.Context, *config.Config) (store.Store, error) { return tokensStore{toks: toks}, nil }}}
	}
	inv := &invocation{cfg: named, agent: "a", call: Call{Agent: "a", Credential: "token:0123456789abcdef"}}
	for _, c := range []struct {
		name string
		toks []store.TokenInfo
		want string
	}{
		{"the ID listed as agent b's", []store.TokenInfo{{ID: "0123456789abcdef", Agent: "b"}}, "token unknown: the agent token this call was made with (ID 0123456789abcdef)"},
		{"no token listed", nil, "token unknown: the agent token this call was made with (ID 0123456789abcdef)"},
		{"revoked", []store.TokenInfo{{ID: "0123456789abcdef", Agent: "a", Revoked: time.Unix(1, 0)}}, "token revoked: the agent token this call was made with (ID 0123456789abcdef)"},
		{"live", []store.TokenInfo{{ID: "0123456789abcdef", Agent: "a"}}, ""},
	} {
		why := watch(c.toks).refusal(inv, time.Second)
		if (c.want == "") != (why == "") || !strings.HasPrefix(why, c.want) {
			t.Errorf("a running call whose token is %s: the watch says %q; want %q", c.name, why, c.want)
		}
	}
}

// TestMutation46WaitEndsAtExpiry: a call waiting for a human on a request
// that expires (the rule's expires, 300 ms here) while it waits ends
// denied, the request expired, at the first poll past its expiry: not at
// the end of its own, longer wait (20 s), and never pending.
func TestMutation46WaitEndsAtExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
expires = "300ms"
[agents.a]
tools = ["t"]
grants = ["tool:invoke t --..."]
`, testkit.Component(t, "echo")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: 10 * time.Millisecond})
	defer h.Close(context.Background())
	ctx := context.Background()
	start := time.Now()
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "t", Input: `{"message":"hi"}`, ApprovalWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, "expired without a decision") {
		t.Fatalf("a call whose request expired after 300 ms while it waited (wait 20 s): %+v after %v; want denied: the approval request expired without a decision", res.Error, time.Since(start).Round(time.Millisecond))
	}
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := st.Approval(ctx, res.Error.Approval); err != nil || a.State != store.ApprovalExpired {
		t.Fatalf("the request is %q (%v); want expired", a.State, err)
	}
}

// TestMutation46RedactConditionFailingAfterRewrite: a redact layer whose
// condition held false on the agent's input and cannot be evaluated on
// the input an inner component rewrote (paris → Paris makes the left of
// && true, and the right reads a missing key) refuses the call in the
// after phase: the output it might have had to redact is withheld, not
// handed on unredacted.
func TestMutation46RedactConditionFailingAfterRewrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[middleware.city]
path = %q
[[middleware]]
use = "redact"
when = 'args.city == "Paris" && args.missing == "x"'
patterns = [{ name = "ticket", expr = "TCK-[0-9]+" }]
[[middleware]]
use = "city"
`, testkit.Component(t, "echo"), testkit.Middleware(t, "city")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	res, err := h.Call(context.Background(), Call{Tool: "echo", Input: `{"city":"paris","message":"ticket TCK-1234"}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || strings.Contains(res.Output, "TCK-1234") || res.Error == nil || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, "could not be evaluated") {
		t.Fatalf("a redact layer whose condition failed on the rewritten call: OK %v, output %q, error %+v; want refused (could not be evaluated), no output", res.OK, res.Output, res.Error)
	}
}

// TestMutation46DenialRememberedAcrossRules: a human's denial of a call
// is remembered for that same call (agent, tool, input) until it expires,
// whichever approve rule asks next: after agent.toml is edited so that
// another rule, before the one that asked, now applies to the call, the
// repeated call is refused with the denial, and no new request is put to
// the human.
func TestMutation46DenialRememberedAcrossRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const body = `version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
when = %s
[[middleware]]
use = "approve"
[agents.a]
tools = ["t"]
grants = ["tool:invoke t --..."]
`
	echo := testkit.Component(t, "echo")
	h, _ := testHost(t, dir, fmt.Sprintf(body, echo, `'args.message == "other"'`), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	ctx := context.Background()
	call := Call{Agent: "a", Tool: "t", Input: `{"message":"hi"}`, ApprovalWait: -1}
	res, err := h.Call(ctx, call)
	if err != nil || res.Error == nil || res.Error.Kind != KindPending {
		t.Fatalf("first call: %+v %v; want pending", res.Error, err)
	}
	id := res.Error.Approval
	if _, err := decideRequest(ctx, h, id, admin.Answer{Approve: false, By: "operator:test", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	// The first rule now applies to the call too.
	h.SetConfig(testConfig(t, dir, fmt.Sprintf(body, echo, `'tool == "t"'`)))
	res, err = h.Call(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != KindDenied || res.Error.Approval != id || !strings.Contains(res.Error.Message, "this same call was denied by a human (request "+id+")") {
		t.Fatalf("the denied call repeated once another rule applies to it: %+v; want denied by request %s", res.Error, id)
	}
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := st.PendingApprovals(ctx, time.Now()); err != nil || len(p) != 0 {
		t.Fatalf("the human was asked again about a call denied: %d pending (%v)", len(p), err)
	}
}

// TestMutation46RewriteValidatedAgainstSchema: a middleware's rewrite is
// checked against the tool's input schema as if the agent had sent it: a
// rewrite the schema refuses is refused (kind denied, the schema named),
// and the call keeps its input; one the schema accepts becomes the call's.
func TestMutation46RewriteValidatedAgainstSchema(t *testing.T) {
	r := rewriteCheck{limit: func(*config.Config) int64 { return 1 << 20 }}
	m := config.Middleware{Rule: "middleware[0]"}
	schema := compileSchema(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	if schema.err != nil {
		t.Fatal(schema.err)
	}
	newInv := func() *invocation {
		inv := &invocation{backend: &wasmBackend{}, tool: &config.Tool{Name: "t"}, schema: schema}
		inv.setInput(`{"n":1}`, map[string]any{"n": float64(1)})
		return inv
	}
	inv := newInv()
	done, err := r.check(context.Background(), inv, m, `{"n":"one"}`)
	if err != nil || !done || inv.res.Error == nil || inv.res.Error.Kind != KindDenied || !strings.Contains(inv.res.Error.Message, "the rewritten input does not match the tool's schema") || inv.call.Input != `{"n":1}` {
		t.Fatalf("a rewrite the tool's schema refuses: done %v, err %v, result %+v, input now %s; want denied (does not match the tool's schema), the input kept", done, err, inv.res.Error, inv.call.Input)
	}
	inv = newInv()
	if done, err := r.check(context.Background(), inv, m, `{"n":2}`); err != nil || done || inv.res.Error != nil || inv.call.Input != `{"n":2}` {
		t.Fatalf("a rewrite the schema accepts: done %v, err %v, result %+v, input %s; want it to become the call's", done, err, inv.res.Error, inv.call.Input)
	}
}

// TestMutation46ExpiredApprovalAsksAgain: an approval whose time is up
// releases nothing: the repeated call is not run on it, and a new request
// is put to the human (not an answer naming the expired one).
func TestMutation46ExpiredApprovalAsksAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
expires = "200ms"
[agents.a]
tools = ["t"]
grants = ["tool:invoke t --..."]
`, testkit.Component(t, "echo")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	ctx := context.Background()
	call := Call{Agent: "a", Tool: "t", Input: `{"message":"hi"}`, ApprovalWait: -1}
	res, err := h.Call(ctx, call)
	if err != nil || res.Error == nil || res.Error.Kind != KindPending {
		t.Fatalf("first call: %+v %v; want pending", res.Error, err)
	}
	id := res.Error.Approval
	a, err := decideRequest(ctx, h, id, admin.Answer{Approve: true, By: "operator:test"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(a.Expires) + 20*time.Millisecond) // the clock past the approval's expiry, no goroutine awaited
	res, err = h.Call(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != KindPending || res.Error.Approval == id || res.Error.Approval == "" {
		t.Fatalf("the call repeated after its approval %s expired: OK %v, error %+v; want pending on a new request", id, res.OK, res.Error)
	}
}

// TestMutation46CardRevokedWhileWaiting: the card that let the agent
// invoke the tool is revoked while the call waits for a human; the human
// then approves. The call ends denied (its cards no longer allow it), and
// is neither put to a human again nor run, whatever a human answers.
func TestMutation46CardRevokedWhileWaiting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
[agents.a]
tools = ["t"]
`, testkit.Component(t, "echo")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: 10 * time.Millisecond})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grant.Parse("tool:invoke t --...")
	if err != nil {
		t.Fatal(err)
	}
	card, err := st.Grant(ctx, "a", cards.Spec{LowerPos: cards.Any(g)})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 4)
	done := make(chan Result, 1)
	go func() {
		res, err := h.Call(ctx, Call{Agent: "a", Tool: "t", Input: `{"message":"hi"}`, ApprovalWait: 30 * time.Second,
			OnApproval: func(r ApprovalRequest) { asked <- r.ID }})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var first string
	select {
	case first = <-asked:
	case res := <-done:
		t.Fatalf("the call did not wait for a human: %+v", res.Error)
	}
	if n, err := st.Revoke(ctx, store.Operator(), card.ID); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	if _, err := decideRequest(ctx, h, first, admin.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.OK || res.Error == nil || res.Error.Kind != KindDenied {
			t.Fatalf("the call whose card was revoked while it waited, then approved: OK %v %+v; want denied", res.OK, res.Error)
		}
	case second := <-asked:
		// Asked again: a human who approves now runs what no card allows.
		if _, err := decideRequest(ctx, h, second, admin.Answer{Approve: true, By: "operator:test"}); err != nil {
			t.Fatal(err)
		}
		res := <-done
		t.Fatalf("the call whose card was revoked while it waited was put to a human again (request %s), and once approved ended OK %v, output %q, error %+v; want denied when the first approval came", second, res.OK, res.Output, res.Error)
	}
}

// TestMutation46ConsumedApprovalDoesNotRun: an approval is consumed
// exactly once: a call that found it approved and reaches its run after
// an identical call consumed it (store.ConsumeAndStart refuses it a
// second time) does not run; it ends pending, naming the request, and
// the other call's consumption stands.
func TestMutation46ConsumedApprovalDoesNotRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, cfg := testHost(t, dir, approveConfig46(t), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	ctx := context.Background()
	st, inv, bind := stateAndBinding46(t, h, cfg)
	a, err := st.CreateApproval(ctx, store.Approval{Agent: "a", Tool: "t", Digest: strings.Repeat("0", 64), Middleware: "middleware[0]",
		Binding: bind, Expires: time.Now().Add(time.Hour)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Decide(ctx, a.ID, true, "operator:test", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConsumeAndStart(ctx, a.ID, bind); err != nil { // the identical call that got there first
		t.Fatal(err)
	}
	inv.approval, inv.approvedBinding = a.ID, &bind
	s := approvalStages{state: func(context.Context, *config.Config) (store.Store, error) { return st, nil }, log: slog.New(slog.DiscardHandler)}
	ran := false
	err = s.runApproved(func(context.Context, *invocation) error { ran = true; inv.ran = true; return nil })(ctx, inv)
	if err != nil || ran || inv.res.Error == nil || inv.res.Error.Kind != KindPending || inv.res.Error.Approval != a.ID || !strings.Contains(inv.res.Error.Message, "was used by another identical call or expired") {
		t.Fatalf("a call whose approval %s an identical call consumed first: ran %v, err %v, result %+v; want not run, pending naming it", a.ID, ran, err, inv.res.Error)
	}
	if got, err := st.Approval(ctx, a.ID); err != nil || got.State == store.ApprovalApproved {
		t.Fatalf("the approval is %q (%v) after the refused call; want it to stay consumed", got.State, err)
	}
}

// TestMutation46RecheckConditionFailingDenies: an outer validate layer
// whose condition held false on the agent's input and cannot be evaluated
// on the input an inner component rewrote (paris → Paris) refuses the
// rewritten call when it is asked again (recheckOuter): a condition that
// fails to evaluate denies there too, and the tool does not run.
func TestMutation46RecheckConditionFailingDenies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[middleware.city]
path = %q
[[middleware]]
use = "validate"
when = 'args.city == "Paris" && args.missing == "x"'
check = 'false'
message = "never"
[[middleware]]
use = "city"
`, testkit.Component(t, "echo"), testkit.Middleware(t, "city")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	res, err := h.Call(context.Background(), Call{Tool: "echo", Input: `{"city":"paris","message":"hi"}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, "could not be evaluated") {
		t.Fatalf("an outer validate layer whose condition fails on the rewritten call: OK %v, output %q, error %+v; want refused (could not be evaluated)", res.OK, res.Output, res.Error)
	}
}

// TestMutation46ApprovalUnderOtherCardsAsksAgain: a request approved
// after the agent's cards changed while the call waited does not release
// the call: the human is asked again under the new cards. The wallet's
// revision is a hash of its cards, compared for equality only; the change
// here is made one whose revision is above the request's, so that an
// ordered comparison would be caught too.
func TestMutation46ApprovalUnderOtherCardsAsksAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := testHost(t, dir, approveConfig46(t), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: 10 * time.Millisecond})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 4)
	done := make(chan Result, 1)
	go func() {
		res, err := h.Call(ctx, Call{Agent: "a", Tool: "t", Input: `{"message":"hi"}`, ApprovalWait: 30 * time.Second,
			OnApproval: func(r ApprovalRequest) { asked <- r.ID }})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var first string
	select {
	case first = <-asked:
	case res := <-done:
		t.Fatalf("the call did not wait for a human: %+v", res.Error)
	}
	req, err := st.Approval(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grant.Parse("tool:invoke t --message=other")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := st.Grant(ctx, "a", cards.Spec{LowerPos: cards.Any(g)}); err != nil {
			t.Fatal(err)
		}
		w, err := st.Wallet(ctx, "a", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if w.Revision() > req.CardGeneration {
			break
		}
		if i == 50 {
			t.Fatal("no card change gave a higher revision")
		}
	}
	if _, err := decideRequest(ctx, h, first, admin.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case second := <-asked:
		if second == first {
			t.Fatalf("asked again with the same request %s", first)
		}
		if _, err := decideRequest(ctx, h, second, admin.Answer{Approve: false, By: "operator:test"}); err != nil {
			t.Fatal(err)
		}
		<-done
	case res := <-done:
		t.Fatalf("the call approved under cards that changed while it waited: OK %v, output %q, error %+v; want it asked again", res.OK, res.Output, res.Error)
	}
}

// TestMutation46FailedConsumptionGivesBackOnlyItsOwn: a call two approve
// layers released holds two approvals; the second was consumed by another
// call first. The call does not run; the approval it consumed itself is
// given back (approved, unconsumed), and the other call's stays consumed:
// giving that one back too would let it release a third run.
func TestMutation46FailedConsumptionGivesBackOnlyItsOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, cfg := testHost(t, dir, approveConfig46(t), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	ctx := context.Background()
	st, inv, bind := stateAndBinding46(t, h, cfg)
	var ids []string
	for _, rule := range []string{"middleware[0]", "middleware[1]"} {
		a, err := st.CreateApproval(ctx, store.Approval{Agent: "a", Tool: "t", Digest: strings.Repeat("0", 64), Middleware: rule,
			Binding: bind, Expires: time.Now().Add(time.Hour)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Decide(ctx, a.ID, true, "operator:test", ""); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	if _, err := st.ConsumeAndStart(ctx, ids[1], bind); err != nil { // another call's
		t.Fatal(err)
	}
	inv.approval, inv.extraApprovals, inv.approvedBinding = ids[0], ids[1:], &bind
	s := approvalStages{state: func(context.Context, *config.Config) (store.Store, error) { return st, nil }, log: slog.New(slog.DiscardHandler)}
	ran := false
	err := s.runApproved(func(context.Context, *invocation) error { ran = true; inv.ran = true; return nil })(ctx, inv)
	if err != nil || ran || inv.res.Error == nil || inv.res.Error.Kind != KindPending || inv.res.Error.Approval != ids[1] {
		t.Fatalf("a call whose second approval another call consumed: ran %v, err %v, result %+v; want not run, pending naming %s", ran, err, inv.res.Error, ids[1])
	}
	if a, err := st.Approval(ctx, ids[0]); err != nil || a.State != store.ApprovalApproved {
		t.Errorf("its own approval %s is %q (%v); want it given back (approved)", ids[0], a.State, err)
	}
	if a, err := st.Approval(ctx, ids[1]); err != nil || a.State == store.ApprovalApproved {
		t.Errorf("the other call's approval %s is %q (%v) after this call gave back its own; want it still consumed", ids[1], a.State, err)
	}
}

// approveConfig46 is agent.toml of tool t (echo) behind one approve layer,
// agent a allowed to invoke it.
func approveConfig46(t *testing.T) string {
	return fmt.Sprintf(`version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
[agents.a]
tools = ["t"]
grants = ["tool:invoke t --..."]
`, testkit.Component(t, "echo"))
}

// stateAndBinding46 is h's store, an invocation of agent a's call of t,
// and that call's approval binding (as the approve layer stores it).
func stateAndBinding46(t *testing.T, h *Host, cfg *config.Config) (store.Store, *invocation, store.Binding) {
	t.Helper()
	st, _, err := h.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := cfg.Tool("t")
	if !ok {
		t.Fatal("no tool t")
	}
	inv := &invocation{cfg: cfg, agent: "a", tool: &tool, backend: &wasmBackend{}}
	return st, inv, approvalBinding(inv)
}
