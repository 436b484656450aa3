package maiden_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// calls reads the audit trail's records of kind (all kinds if "").
func trail(t *testing.T, h *maiden.Host, kind string) []maiden.AuditRecord {
	t.Helper()
	recs, err := h.AuditTail(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []maiden.AuditRecord
	for _, r := range recs {
		if kind == "" || r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// rulesOf lists the rule and verdict of each layer in an audit record.
func rulesOf(t *testing.T, r maiden.AuditRecord) string {
	t.Helper()
	var body struct {
		Middleware []struct{ Rule, Use, Verdict string }
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, m := range body.Middleware {
		s = append(s, m.Rule+":"+m.Verdict)
	}
	return strings.Join(s, " ")
}

func mustCall(t *testing.T, h *maiden.Host, c maiden.Call) maiden.Result {
	t.Helper()
	res, err := h.Call(context.Background(), c)
	if err != nil {
		t.Fatalf("%s %s: %v", c.Tool, c.Input, err)
	}
	return res
}

func wantKind(t *testing.T, res maiden.Result, kind maiden.ErrorKind, msg string) {
	t.Helper()
	if res.OK || res.Error == nil || res.Error.Kind != kind || !strings.Contains(res.Error.Message, msg) {
		t.Fatalf("result %+v (error %+v), want kind %s containing %q", res, res.Error, kind, msg)
	}
}

// TestMiddlewareChainOrder: CARDS.md A13 — universal U1, then the tool's
// M1, M2, then the binding's, then the tool; A15 — a layer that rejects
// means the tool never runs (no call-admitted record, only a refusal).
func TestMiddlewareChainOrder(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
middleware = [{ use = "validate", check = 'args.message != "m1"', message = "M1 says no" },
              { use = "validate", check = 'args.message != "m2"', message = "M2 says no" }]

[[middleware]]
use = "validate"
check = 'args.message != "u1"'
message = "U1 says no"

[agents.a]
grants = ["tool:invoke echo --..."]
[agents.a.tools.echo]
middleware = [{ use = "validate", check = 'args.message != "b1"', message = "B1 says no" }]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"hi"}`})
	if !res.OK {
		t.Fatalf("%+v", res.Error)
	}
	adm := trail(t, h, "call-admitted")
	if len(adm) != 1 {
		t.Fatalf("%d call-admitted records, want 1", len(adm))
	}
	want := "middleware[1]:pass tools.echo.middleware[1]:pass tools.echo.middleware[2]:pass agents.a.tools.echo.middleware[1]:pass"
	if got := rulesOf(t, adm[0]); got != want {
		t.Errorf("order %q\nwant  %q", got, want)
	}
	// Each layer rejects its own word, and the layers after it never run.
	for _, tc := range []struct{ word, msg, verdicts string }{
		{"u1", "U1 says no", "middleware[1]:reject"},
		{"m1", "M1 says no", "middleware[1]:pass tools.echo.middleware[1]:reject"},
		{"m2", "M2 says no", "middleware[1]:pass tools.echo.middleware[1]:pass tools.echo.middleware[2]:reject"},
		{"b1", "B1 says no", "middleware[1]:pass tools.echo.middleware[1]:pass tools.echo.middleware[2]:pass agents.a.tools.echo.middleware[1]:reject"},
	} {
		res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"` + tc.word + `"}`})
		wantKind(t, res, maiden.KindInput, tc.msg)
		if strings.Contains(res.Error.Message, "middleware") || strings.Contains(res.Error.Message, "args.") {
			t.Errorf("rejection shows the chain to the agent: %q", res.Error.Message)
		}
		refused := trail(t, h, "call-refused")
		if got := rulesOf(t, refused[len(refused)-1]); got != tc.verdicts {
			t.Errorf("%s: verdicts %q, want %q", tc.word, got, tc.verdicts)
		}
	}
	if n := len(trail(t, h, "call-admitted")); n != 1 {
		t.Errorf("%d call-admitted records after four rejections, want 1: a rejected call ran", n)
	}
	if n, _, err := h.VerifyAudit(context.Background()); err != nil || n == 0 {
		t.Errorf("VerifyAudit = %d, %v", n, err)
	}
}

// TestMiddlewareConditionErrorDenies: a condition that fails at run time
// (a missing argument) denies, it does not skip the layer.
func TestMiddlewareConditionErrorDenies(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
when = 'args.amount > 100'
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"no amount"}`})
	wantKind(t, res, maiden.KindDenied, "could not be evaluated")
	if n := len(trail(t, h, "call-admitted")); n != 0 {
		t.Errorf("the call ran (%d admitted records)", n)
	}
}

// TestMiddlewareRewriteIsReauthorized: a component that rewrites the input
// (paris → Paris) cannot broaden what the agent's cards allow: the
// rewritten call is authorized again and denied; with a card that allows
// it, it runs rewritten. A component that rejects, traps, loops or
// hogs memory refuses the call, and the host keeps serving.
func TestMiddlewareRewriteIsReauthorized(t *testing.T) {
	t.Parallel()
	city := testkit.Middleware(t, "city")
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[middleware.city]
path = "`+city+`"
[middleware.trap]
path = "`+testkit.Middleware(t, "trap")+`"
[middleware.loop]
path = "`+testkit.Middleware(t, "loop")+`"
timeout_ms = 300
[middleware.memhog]
path = "`+testkit.Middleware(t, "memhog")+`"
memory_mb = 2
[middleware.fetcher]
path = "`+testkit.Middleware(t, "fetcher")+`"
[[middleware]]
use = "city"
[[middleware]]
use = "trap"
when = 'args.message == "trap"'
[[middleware]]
use = "loop"
when = 'args.message == "loop"'
[[middleware]]
use = "memhog"
when = 'args.message == "memhog"'
[[middleware]]
use = "fetcher"
when = 'args.message == "fetcher"'

[agents.narrow]
tools = ["echo"]
grants = ["tool:invoke echo --message=* --city=paris"]
[agents.wide]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	res := mustCall(t, h, maiden.Call{Agent: "narrow", Tool: "echo", Input: `{"message":"x","city":"paris"}`})
	wantKind(t, res, maiden.KindDenied, "the rewritten call is not allowed")
	res = mustCall(t, h, maiden.Call{Agent: "wide", Tool: "echo", Input: `{"message":"x","city":"paris"}`})
	if !res.OK || !strings.Contains(res.Output, `"Paris"`) {
		t.Fatalf("rewritten call: %+v %+v", res, res.Error)
	}
	res = mustCall(t, h, maiden.Call{Agent: "wide", Tool: "echo", Input: `{"message":"x","city":"Atlantis"}`})
	wantKind(t, res, maiden.KindDenied, "Atlantis is not a city")
	for _, word := range []string{"trap", "loop", "memhog", "fetcher"} {
		res := mustCall(t, h, maiden.Call{Agent: "wide", Tool: "echo", Input: `{"message":"` + word + `"}`})
		wantKind(t, res, maiden.KindDenied, "a check on this call failed")
		if strings.Contains(res.Error.Message, ".wasm") || strings.Contains(res.Error.Message, "trap") || strings.Contains(res.Error.Message, "deadline") {
			t.Errorf("%s: the agent sees the component's failure: %q", word, res.Error.Message)
		}
	}
	res = mustCall(t, h, maiden.Call{Agent: "wide", Tool: "echo", Input: `{"message":"still serving"}`})
	if !res.OK {
		t.Fatalf("after hostile middleware: %+v", res.Error)
	}
}

// TestRateLimitSurvivesRestart: 2 calls per minute per agent and tool; the
// third is denied with the time to wait, also by a new Host on the same
// store (the bucket is durable), and another tool has its own bucket.
func TestRateLimitSurvivesRestart(t *testing.T) {
	t.Parallel()
	body := `version = 1
[tools.echo]
path = %q
[tools.echo2]
path = %q
[[middleware]]
use = "ratelimit"
limit = 2
per = "1m"
`
	dir := t.TempDir()
	cfg := writeConfigAt(t, filepath.Join(dir, "agent.toml"), body, "echo", "echo")
	newHost := func() *maiden.Host {
		h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := newHost()
	for i := 0; i < 2; i++ {
		if res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"x"}`}); !res.OK {
			t.Fatalf("call %d: %+v", i, res.Error)
		}
	}
	wantKind(t, mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"x"}`}), maiden.KindDenied, "try again in")
	if res := mustCall(t, h, maiden.Call{Tool: "echo2", Input: `{"message":"x"}`}); !res.OK {
		t.Fatalf("other tool: %+v", res.Error)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h2 := newHost()
	defer h2.Close(context.Background())
	wantKind(t, mustCall(t, h2, maiden.Call{Tool: "echo", Input: `{"message":"x"}`}), maiden.KindDenied, "rate limit: at most 2 calls of echo per 1m0s")
}

// TestQuotaCost: a quota of 5 units per hour with the cost an expression
// of the call.
func TestQuotaCost(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "quota"
limit = 5
window = "1h"
cost = 'size(args.message)'
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	if res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"abc"}`}); !res.OK {
		t.Fatalf("%+v", res.Error)
	}
	wantKind(t, mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"abc"}`}), maiden.KindDenied, "quota exceeded: this call costs 3 of 5 units")
	if res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"ab"}`}); !res.OK {
		t.Fatalf("a call within the rest of the quota: %+v", res.Error)
	}
}

// TestRedactMiddleware: the output and the logs (live and in the result)
// lose what the redact layer's patterns and the built-in detectors match.
func TestRedactMiddleware(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "redact"
patterns = [{ name = "ticket", expr = "TCK-[0-9]+" }]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	key := "AKIA" + "IOSFODNN7EXAMPLE"
	res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"key ` + key + ` ticket TCK-1234"}`})
	if !res.OK {
		t.Fatal(res.Error)
	}
	if strings.Contains(res.Output, key) || strings.Contains(res.Output, "TCK-1234") || !strings.Contains(res.Output, "REDACTED") {
		t.Errorf("output not redacted: %s", res.Output)
	}
}

// approvalHost is a host with an approve rule on echo messages that start
// with "pay".
func approvalHost(t *testing.T, extra string) *maiden.Host {
	return newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
when = 'args.message.startsWith("pay")'
reason = "payments need a human"
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`+extra, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond}, "echo")
}

// callAndDecide starts a call that waits for approval, decides it as d
// once the request is stored, and returns the call's result.
func callAndDecide(t *testing.T, h *maiden.Host, input string, d maiden.Answer) (maiden.Result, maiden.ApprovalRequest) {
	t.Helper()
	var (
		req  maiden.ApprovalRequest
		once sync.Once
		got  = make(chan struct{})
	)
	type out struct {
		res maiden.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := h.Call(context.Background(), maiden.Call{Agent: "a", Tool: "echo", Input: input, ApprovalWait: 20 * time.Second,
			OnApproval: func(r maiden.ApprovalRequest) { req = r; once.Do(func() { close(got) }) }})
		done <- out{res, err}
	}()
	select {
	case <-got:
	case o := <-done:
		t.Fatalf("call ended without asking: %+v %v", o.res, o.err)
	}
	if _, err := h.Decide(context.Background(), req.ID, d); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.res, req
}

// TestApprovalFlow: approve once, deny (remembered), always (a card),
// pending then repeated after the approval (runs once), and the request
// shows what the human needs.
func TestApprovalFlow(t *testing.T) {
	t.Parallel()
	h := approvalHost(t, "")
	ctx := context.Background()
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"hello"}`}); !res.OK {
		t.Fatalf("a call the rule does not match: %+v", res.Error)
	}

	res, req := callAndDecide(t, h, `{"message":"pay 10"}`, maiden.Answer{Approve: true, By: "operator:test"})
	if !res.OK {
		t.Fatalf("approved call: %+v", res.Error)
	}
	if req.Agent != "a" || req.Tool != "echo" || req.Rendered != `--message="pay 10"` && !strings.Contains(req.Rendered, "pay") || req.Reason != "payments need a human" || req.Rule != "middleware[1]" || !req.AllowAlways {
		t.Errorf("request %+v", req)
	}
	// Approved once: the same call asks again.
	res, _ = callAndDecide(t, h, `{"message":"pay 10"}`, maiden.Answer{Approve: false, Reason: "not today", By: "operator:test"})
	wantKind(t, res, maiden.KindDenied, "not today")
	// The denial is remembered: no new request, denied at once.
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 10"}`, ApprovalWait: -1,
		OnApproval: func(maiden.ApprovalRequest) { t.Error("asked again after a denial") }})
	wantKind(t, res, maiden.KindDenied, "refused until")

	// Pending, then approved, then repeated: runs exactly once.
	var id string
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 20"}`, ApprovalWait: -1})
	wantKind(t, res, maiden.KindPending, "repeat the same call")
	id = res.Error.Approval
	pend, err := h.Pending(ctx)
	if err != nil || len(pend) != 1 || pend[0].ID != id {
		t.Fatalf("Pending = %+v, %v", pend, err)
	}
	// Repeating while pending asks nothing new.
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 20"}`, ApprovalWait: -1})
	if res.Error == nil || res.Error.Approval != id {
		t.Fatalf("repeat while pending: %+v", res.Error)
	}
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true}); !errors.Is(err, maiden.ErrApprovalDecided) {
		t.Errorf("deciding twice: %v", err)
	}
	if _, err := h.Decide(ctx, "apr_nope", maiden.Answer{Approve: true}); !errors.Is(err, maiden.ErrUnknownApproval) {
		t.Errorf("unknown ID: %v", err)
	}
	before := len(trail(t, h, "call-admitted"))
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 20"}`, ApprovalWait: -1}); !res.OK {
		t.Fatalf("repeated after approval: %+v", res.Error)
	}
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 20"}`, ApprovalWait: -1})
	wantKind(t, res, maiden.KindPending, "")
	if n := len(trail(t, h, "call-admitted")) - before; n != 1 {
		t.Errorf("the approved call ran %d times, want 1", n)
	}

	// Always: a card, and the same call no longer asks.
	res, req = callAndDecide(t, h, `{"message":"pay 30"}`, maiden.Answer{Approve: true, Always: true})
	if !res.OK {
		t.Fatal(res.Error)
	}
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 30"}`, ApprovalWait: -1})
	if !res.OK {
		t.Fatalf("after always: %+v", res.Error)
	}
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 31"}`, ApprovalWait: -1})
	wantKind(t, res, maiden.KindPending, "")
	if !strings.HasPrefix(req.AlwaysGrant, "approve:always echo ") {
		t.Errorf("always grant %q", req.AlwaysGrant)
	}
	// Revoking the always-card: the call asks again (the one-time approval
	// the card was minted from was used up by the waiting call's run).
	list, err := h.Cards(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	revoked := 0
	for _, c := range list {
		if len(c.LowerPos) == 1 && strings.HasPrefix(c.LowerPos[0].Grant, "approve:always") && c.Revoked.IsZero() {
			n, err := h.RevokeCard(ctx, c.ID, "operator:test")
			if err != nil {
				t.Fatal(err)
			}
			revoked += n
		}
	}
	if revoked != 1 {
		t.Fatalf("revoked %d always-cards, want 1 (cards %+v)", revoked, list)
	}
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 30"}`, ApprovalWait: -1})
	wantKind(t, res, maiden.KindPending, "")
	if n, _, err := h.VerifyAudit(ctx); err != nil {
		t.Errorf("VerifyAudit = %d, %v", n, err)
	}
}

// TestApprovalNeverAlways: a rule with allow_always = false refuses an
// always-approval (nothing decided), and approves once.
func TestApprovalNeverAlways(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
allow_always = false
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"x"}`, ApprovalWait: -1})
	wantKind(t, res, maiden.KindPending, "")
	id := res.Error.Approval
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true, Always: true}); !errors.Is(err, maiden.ErrAlwaysRefused) {
		t.Fatalf("always on a never-always rule: %v", err)
	}
	if r, err := h.Approval(ctx, id); err != nil || r.State != "pending" {
		t.Fatalf("after a refused always: %+v %v", r, err)
	}
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
}

// TestApprovalAlwaysAfterRulesReordered: a rule is named by its position
// (middleware[1]), so once agent.toml's rules are reordered the name of
// an allow_always = false rule that asked can stand for another rule. A
// pending request keeps what its own rule said: "always" stays refused,
// whatever the rule of that name now allows.
func TestApprovalAlwaysAfterRulesReordered(t *testing.T) {
	t.Parallel()
	const never = `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
allow_always = false
reason = "payments: once at a time"
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`
	path := filepath.Join(t.TempDir(), "agent.toml")
	h := newHost(t, writeConfigAt(t, path, never, "echo"))
	ctx := context.Background()
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 30"}`, ApprovalWait: -1})
	wantKind(t, res, maiden.KindPending, "")
	id := res.Error.Approval
	// A rule inserted before it: middleware[1] is now a rule that allows
	// always, and the never-always rule is middleware[2].
	h.SetConfig(writeConfigAt(t, path, strings.Replace(never, "[[middleware]]", `[[middleware]]
use = "approve"
[[middleware]]`, 1), "echo"))
	if r, err := h.Approval(ctx, id); err != nil || r.AllowAlways {
		t.Errorf("the request of a never-always rule shows allow_always %v after its rules were reordered (%v)", r.AllowAlways, err)
	}
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true, Always: true}); !errors.Is(err, maiden.ErrAlwaysRefused) {
		t.Fatalf("always on a never-always rule's request after its rules were reordered: %v, want %v", err, maiden.ErrAlwaysRefused)
	}
	if r, err := h.Approval(ctx, id); err != nil || r.State != "pending" {
		t.Fatalf("after a refused always: %+v %v", r, err)
	}
	// The other way round: a request of a rule that allows always, whose
	// name now stands for the never-always rule, is refused too.
	res = mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 40"}`, ApprovalWait: -1})
	wantKind(t, res, maiden.KindPending, "")
	if r, err := h.Approval(ctx, res.Error.Approval); err != nil || !r.AllowAlways || r.Rule != "middleware[1]" {
		t.Fatalf("the first rule's request: %+v %v", r, err)
	}
	h.SetConfig(writeConfigAt(t, path, never, "echo"))
	if _, err := h.Decide(ctx, res.Error.Approval, maiden.Answer{Approve: true, Always: true}); !errors.Is(err, maiden.ErrAlwaysRefused) {
		t.Fatalf("always on a request whose rule's name is now a never-always rule: %v, want %v", err, maiden.ErrAlwaysRefused)
	}
}

// TestMiddlewareWrapsBuiltins: the built-in card tools go through the
// universal chain and the audit trail like any tool.
func TestMiddlewareWrapsBuiltins(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "validate"
check = 'tool != "cards_list" || agent != "b"'
message = "b may not list cards"
[agents.a]
tools = ["cards_list"]
grants = ["card:inspect *"]
[agents.b]
tools = ["cards_list"]
grants = ["card:inspect *"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	res, err := h.CallBuiltin(ctx, maiden.Call{Agent: "a", Tool: "cards_list", Input: `{}`})
	if err != nil || !res.OK {
		t.Fatalf("a: %+v %v", res, err)
	}
	res, err = h.CallBuiltin(ctx, maiden.Call{Agent: "b", Tool: "cards_list", Input: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, res, maiden.KindInput, "b may not list cards")
	if adm, ref := trail(t, h, "call-admitted"), trail(t, h, "call-refused"); len(adm) != 1 || len(ref) != 1 || adm[0].Agent != "a" || ref[0].Agent != "b" {
		t.Errorf("audit: admitted %+v refused %+v", adm, ref)
	}
}

// TestMiddlewareWorldsApart: a middleware component declared as a tool is
// refused when called, a tool declared as middleware is a check error (and
// refuses the calls it wraps), and check loads a good component.
func TestMiddlewareWorldsApart(t *testing.T) {
	t.Parallel()
	echo := testkit.Component(t, "echo")
	h := newHostWith(t, `version = 1
[tools.mw]
path = "`+testkit.Middleware(t, "pass")+`"
[tools.echo]
path = %q
[middleware.good]
path = "`+testkit.Middleware(t, "pass")+`"
[middleware.notmw]
path = "`+echo+`"
[[middleware]]
use = "notmw"
when = 'args.message == "wrapped"'
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	res := mustCall(t, h, maiden.Call{Tool: "mw", Input: `{}`})
	wantKind(t, res, maiden.KindInvalid, "not a tool")
	res = mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"wrapped"}`})
	wantKind(t, res, maiden.KindDenied, "a check on this call failed")
	reps, err := h.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range reps {
		got[r.Tool] = fmt.Sprint(r.Err)
	}
	if got["middleware.good"] != "<nil>" || !strings.Contains(got["middleware.notmw"], "not middleware") || !strings.Contains(got["mw"], "not a tool") {
		t.Errorf("check: %v", got)
	}
}

// TestApprovalAsksAgainWhenCardsChange: a card granted to the agent while
// its call waits changes its card revision: the approval given meanwhile
// does not run the call, which asks again (a new request); a card revoked
// so that the call is no longer allowed denies it.
func TestApprovalAsksAgainWhenCardsChange(t *testing.T) {
	t.Parallel()
	h := approvalHost(t, "")
	ctx := context.Background()
	asked := make(chan string, 4)
	type out struct {
		res maiden.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay 5"}`, ApprovalWait: 20 * time.Second,
			OnApproval: func(r maiden.ApprovalRequest) { asked <- r.ID }})
		done <- out{res, err}
	}()
	first := <-asked
	// Another decision's always-card lands in the agent's wallet meanwhile.
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"pay other"}`, ApprovalWait: -1})
	if _, err := h.Decide(ctx, res.Error.Approval, maiden.Answer{Approve: true, Always: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Decide(ctx, first, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	var second string
	select {
	case second = <-asked:
	case o := <-done:
		t.Fatalf("the call ended without asking again: %+v %+v %v", o.res, o.res.Error, o.err)
	}
	if second == first {
		t.Fatalf("asked again with the same request %s", first)
	}
	r, err := h.Approval(ctx, second)
	if err != nil || !strings.Contains(r.Reason, "cards changed") {
		t.Fatalf("second request %+v %v", r, err)
	}
	if _, err := h.Decide(ctx, second, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if o := <-done; o.err != nil || !o.res.OK {
		t.Fatalf("approved under the new cards: %+v %+v %v", o.res, o.res.Error, o.err)
	}
}

// TestAuditUnwritableRefusesCall: when the audit record cannot be written
// (the journal's directory is a file), the call is refused and the tool
// does not run (it would fetch from a loopback server that counts): nothing
// is run unaudited.
func TestAuditUnwritableRefusesCall(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }), "api.example.com")
	u, _ := url.Parse(srv.URL)
	dir := t.TempDir()
	cfg := writeConfigAt(t, filepath.Join(dir, "agent.toml"), `version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
http_ports = [`+u.Port()+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
[agents.a]
tools = ["fetcher"]
grants = ["tool:invoke fetcher --...", "network:connect *"]
`, "js/fetcher")
	if err := os.WriteFile(cfg.StatePath()+".audit", []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t), Resolver: testkit.Loopback("api.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	in := `{"url":"https://api.example.com:` + u.Port() + `/"}`
	res, err := h.Call(context.Background(), maiden.Call{Agent: "a", Tool: "fetcher", Input: in})
	if !errors.Is(err, maiden.ErrState) || !strings.Contains(err.Error(), "audit record") || res.OK {
		t.Fatalf("call with an unwritable audit trail: %+v, %v", res, err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the tool ran (%d requests) although its audit record could not be written", n)
	}
	// The same call with a writable trail does run: the test can fail.
	if err := os.Remove(cfg.StatePath() + ".audit"); err != nil {
		t.Fatal(err)
	}
	h2, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t), Resolver: testkit.Loopback("api.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close(context.Background())
	if res, err := h2.Call(context.Background(), maiden.Call{Agent: "a", Tool: "fetcher", Input: in}); err != nil || !res.OK || hits.Load() != 1 {
		t.Fatalf("with a writable trail: %+v %v, %d requests", res, err, hits.Load())
	}
}

// TestApprovalRulesStayApart: each approve layer needs its own approval,
// and an always-card (minted from one rule's request) never passes a rule
// with allow_always = false.
func TestApprovalRulesStayApart(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
reason = "any echo"
[[middleware]]
use = "approve"
allow_always = false
reason = "never auto"
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func() maiden.Result {
		return mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"x"}`, ApprovalWait: -1})
	}
	res := call()
	wantKind(t, res, maiden.KindPending, "any echo")
	if _, err := h.Decide(ctx, res.Error.Approval, maiden.Answer{Approve: true, Always: true}); err != nil {
		t.Fatal(err)
	}
	// The first rule is satisfied (its card); the second asks for itself.
	res = call()
	wantKind(t, res, maiden.KindPending, "never auto")
	second := res.Error.Approval
	if _, err := h.Decide(ctx, second, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if res := call(); !res.OK {
		t.Fatalf("both rules approved: %+v", res.Error)
	}
	// The always-card never satisfies the never-always rule: it asks again.
	wantKind(t, call(), maiden.KindPending, "never auto")
}

// TestRewriteAfterApprovalRefused: a layer after the approve layer that
// rewrites the input voids the approval (the human saw paris, Paris would
// run): the call is refused, and the tool does not run.
func TestRewriteAfterApprovalRefused(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[middleware.city]
path = "`+testkit.Middleware(t, "city")+`"
[[middleware]]
use = "approve"
[[middleware]]
use = "city"
[agents.wide]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	in := `{"message":"x","city":"paris"}`
	res := mustCall(t, h, maiden.Call{Agent: "wide", Tool: "echo", Input: in, ApprovalWait: -1})
	wantKind(t, res, maiden.KindPending, "")
	if _, err := h.Decide(ctx, res.Error.Approval, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	res = mustCall(t, h, maiden.Call{Agent: "wide", Tool: "echo", Input: in, ApprovalWait: -1})
	wantKind(t, res, maiden.KindDenied, "changed after it was approved")
	if n := len(trail(t, h, "call-admitted")); n != 0 {
		t.Errorf("the rewritten call ran (%d admitted records)", n)
	}
}

// TestConditionalRedactLiveLogs: a redact layer with a condition redacts
// the live log lines too, not only the result's copy.
func TestConditionalRedactLiveLogs(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"", "when = 'tool == \"logger\"'\n"} {
		h := newHostWith(t, `version = 1
[tools.logger]
path = %q
[[middleware]]
use = "redact"
`+when+`patterns = [{ name = "ticket", expr = "info line" }]
`, maiden.Options{Isolation: maiden.InProcess}, "logger")
		var mu sync.Mutex
		var live []string
		res := mustCall(t, h, maiden.Call{Tool: "logger", Input: `{}`, OnLog: func(e maiden.LogEntry) {
			mu.Lock()
			live = append(live, e.Message)
			mu.Unlock()
		}})
		mu.Lock()
		joined := strings.Join(live, "|")
		mu.Unlock()
		if len(live) == 0 || strings.Contains(joined, "info line") || !strings.Contains(joined, "[REDACTED:ticket]") {
			t.Errorf("when=%q: live lines %q (result %+v)", when, live, res.Logs)
		}
	}
}

// TestWithheldOutputStillRedacted (security review of the middleware
// chain): a component that withholds a call's output ended the after
// phase, so the redact layers outside it never saw the result: its log
// lines reached `maiden run` and embedders unredacted (the live copy was
// redacted). A withheld call is a failed call, whose message still passes
// every redact layer outside the layer that withheld it; its log lines
// are withheld with its output (the failed phase's review): none in the
// result, none live.
func TestWithheldOutputStillRedacted(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.logger]
path = %q
[middleware.withhold]
path = "`+testkit.Middleware(t, "withhold")+`"
[[middleware]]
use = "redact"
patterns = [{ name = "ticket", expr = "info line" }, { name = "who", expr = "by withhold" }]
[[middleware]]
use = "withhold"
`, maiden.Options{Isolation: maiden.InProcess}, "logger")
	live := newLiveSink()
	res := mustCall(t, h, maiden.Call{Tool: "logger", Input: `{}`, OnLog: live.onLog})
	wantKind(t, res, maiden.KindDenied, "output withheld [REDACTED:who]")
	if lines, _ := live.seen(); len(res.Logs) != 0 || len(lines) != 0 {
		t.Fatalf("the withheld call's log lines reached the caller: result %+v, live %q", res.Logs, lines)
	}
}

// TestRewriteRecheckedByOuterLayers (review of the middleware chain): a
// layer that rewrites the input after a validate or an approve layer
// cannot carry the call past them. The validate layer's check is asked
// again on the rewritten input and refuses it; an approve layer whose
// condition did not hold on the agent's input and holds on the rewritten
// one refuses the call (a human would have been asked); a quota layer
// that counted the call as it was refuses one rewritten to cost more of it
// (or that it now applies to). Before, the call ran as rewritten (paris →
// Paris) with none of them.
func TestRewriteRecheckedByOuterLayers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, layer, want string }{
		{"validate", `use = "validate"
check = 'args.city != "Paris"'
message = "Paris is closed"`, `refused by policy: the input a middleware rewrote is refused by an earlier rule: Paris is closed`},
		{"approve", `use = "approve"
when = 'args.city == "Paris"'`, `refused by policy: a middleware rewrote the input into a call an earlier approve rule would ask a human about`},
		// A quota counts the call as it saw it: a rewrite into a dearer
		// call, or one the quota now applies to, would spend what was
		// never counted.
		{"quota's cost", `use = "quota"
limit = 100
window = "1h"
cost = 'args.city == "Paris" ? 50 : 1'`, `refused by policy: a middleware rewrote the input into a call that costs 50 of quota middleware[1], where 1 was counted`},
		{"quota's condition", `use = "quota"
when = 'args.city == "Paris"'
limit = 100
window = "1h"`, `refused by policy: a middleware rewrote the input into a call that costs 1 of quota middleware[1], where 0 was counted`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[middleware.city]
path = "`+testkit.Middleware(t, "city")+`"
[[middleware]]
`+tc.layer+`
[[middleware]]
use = "city"
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
			res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"x","city":"paris"}`, ApprovalWait: -1})
			wantKind(t, res, maiden.KindDenied, tc.want)
			if n := len(trail(t, h, "call-admitted")); n != 0 {
				t.Errorf("the rewritten call ran (%d admitted records)", n)
			}
			// Not rewritten: the layers decide as before.
			res = mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"x","city":"Rome"}`, ApprovalWait: -1})
			if !res.OK {
				t.Fatalf("a call no layer minds: %+v %+v", res, res.Error)
			}
		})
	}
}
