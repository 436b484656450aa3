package chain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/condition"
	"github.com/maiden-run/maiden/internal/redact"
	"github.com/maiden-run/maiden/internal/store"
)

func cond(t *testing.T, expr string) *condition.Condition {
	t.Helper()
	c, err := condition.Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func costOf(t *testing.T, expr string) *condition.Condition {
	t.Helper()
	c, err := condition.CompileInt(expr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var call = Call{Tool: "pay", Agent: "a", Input: map[string]any{"amount": 5.0}, InputText: `{"amount":5}`, Rendered: "amount=5"}

func TestApplies(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		when    string
		applies bool
		verdict string
		refused bool
	}{
		{"always", "", true, "", false},
		{"true", "args.amount > 1", true, "", false},
		{"false", "args.amount > 10", false, "skip", false},
		// A condition that cannot be evaluated (no such key) denies:
		// the layer is not skipped.
		{"error denies", "args.missing > 1", false, "reject", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := config.Middleware{Rule: "r", Use: config.UseValidate}
			if tc.when != "" {
				m.When = cond(t, tc.when)
			}
			ok, s := Applies(ctx, m, call)
			if ok != tc.applies || s.Verdict.Verdict != tc.verdict || (s.Refused != nil) != tc.refused {
				t.Fatalf("Applies = %v, %+v; want %v, %q, refused %v", ok, s, tc.applies, tc.verdict, tc.refused)
			}
			if tc.refused && (s.Refused.Kind != api.KindDenied || strings.Contains(s.Refused.Message, "args.missing")) {
				t.Fatalf("refusal %+v: want denied, without the expression", s.Refused)
			}
		})
	}
}

// limitsStore is the buckets and windows of one agent, answering from a
// fixed allowance and recording what it was asked.
type limitsStore struct {
	allow bool
	err   error
	costs []int64
}

func (l *limitsStore) Take(_ context.Context, _ store.BucketKey, _ store.Rate, cost int64, now time.Time) (bool, time.Time, error) {
	l.costs = append(l.costs, cost)
	return l.allow, now.Add(3 * time.Second), l.err
}

func (l *limitsStore) Spend(_ context.Context, _ store.QuotaKey, _ int64, _ time.Duration, cost int64, now time.Time) (bool, time.Time, error) {
	l.costs = append(l.costs, cost)
	return l.allow, now.Add(time.Hour), l.err
}

var errState = errors.New("state unavailable")

func layers(l *limitsStore) Layers {
	return Layers{State: func(context.Context, *config.Config) (Limits, error) { return l, nil }, ErrState: errState}
}

func TestValidate(t *testing.T) {
	m := config.Middleware{Rule: "r", Use: config.UseValidate, Check: cond(t, "args.amount <= 3"), Message: "too much"}
	s, handled, err := layers(&limitsStore{}).Before(context.Background(), m, call)
	if err != nil || !handled || s.Refused == nil || s.Refused.Kind != api.KindInput || s.Refused.Message != "too much" || s.Verdict.Verdict != "reject" {
		t.Fatalf("validate over the limit: %+v, %v, %v", s, handled, err)
	}
	m.Check = cond(t, "args.amount <= 5")
	if s, _, _ := layers(&limitsStore{}).Before(context.Background(), m, call); s.Refused != nil || s.Verdict.Verdict != "pass" {
		t.Fatalf("validate within the limit: %+v", s)
	}
	m.Check = cond(t, "args.missing <= 5")
	if s, _, _ := layers(&limitsStore{}).Before(context.Background(), m, call); s.Refused == nil || s.Refused.Kind != api.KindDenied {
		t.Fatalf("validate that cannot be evaluated: %+v", s)
	}
}

func TestQuota(t *testing.T) {
	ctx := context.Background()
	m := config.Middleware{Rule: "q", Use: config.UseQuota, Limit: 10, Window: time.Hour, Cost: costOf(t, "int(args.amount)")}

	l := &limitsStore{allow: true}
	s, _, err := layers(l).Before(ctx, m, call)
	if err != nil || s.Refused != nil || s.Verdict.Detail != "cost 5" || len(l.costs) != 1 || l.costs[0] != 5 {
		t.Fatalf("allowed: %+v, %v, spent %v", s, err, l.costs)
	}

	l = &limitsStore{}
	s, _, _ = layers(l).Before(ctx, m, call)
	if s.Refused == nil || !strings.HasPrefix(s.Refused.Message, "quota exceeded: this call costs 5 of 10") {
		t.Fatalf("exceeded: %+v", s)
	}

	// A negative cost is refused before anything is spent (it would
	// give units back).
	m.Cost = costOf(t, "-int(args.amount)")
	l = &limitsStore{allow: true}
	s, _, _ = layers(l).Before(ctx, m, call)
	if s.Refused == nil || s.Refused.Kind != api.KindDenied || len(l.costs) != 0 {
		t.Fatalf("negative cost: %+v, spent %v", s, l.costs)
	}

	m.Cost = nil
	l = &limitsStore{err: errors.New("disk full")}
	if _, _, err := layers(l).Before(ctx, m, call); !errors.Is(err, errState) {
		t.Fatalf("store failure: %v, want it wrapped in ErrState", err)
	}
}

func TestRateLimit(t *testing.T) {
	m := config.Middleware{Rule: "rl", Use: config.UseRateLimit, Limit: 2, Burst: 2, Per: time.Minute}
	s, _, err := layers(&limitsStore{}).Before(context.Background(), m, call)
	if err != nil || s.Refused == nil || s.Refused.Kind != api.KindDenied || s.Verdict.Detail != "wait 3.0 s" {
		t.Fatalf("over the rate: %+v, %v", s, err)
	}
	if s, _, _ := layers(&limitsStore{allow: true}).Before(context.Background(), m, call); s.Refused != nil {
		t.Fatalf("within the rate: %+v", s)
	}
	if _, handled, _ := layers(&limitsStore{}).Before(context.Background(), config.Middleware{Use: config.UseRedact}, call); handled {
		t.Fatal("a redact layer is the caller's before the run")
	}
}

func TestRedact(t *testing.T) {
	r, err := redact.New([]redact.Pattern{{Name: "code", Expr: `code-[0-9]+`}}, false)
	if err != nil {
		t.Fatal(err)
	}
	outer := config.Middleware{Rule: "outer", Use: config.UseRedact, Redactor: r}
	out, failure := "a code-1 and code-2", &api.ToolError{Message: "code-3"}
	logs := []api.LogEntry{{Message: "code-4"}}
	s := Redact(outer, &out, failure, logs)
	for _, got := range []string{out, failure.Message, logs[0].Message} {
		if strings.Contains(got, "code-") {
			t.Fatalf("not redacted: %q", got)
		}
	}
	if s.Verdict.Detail != "2 redacted" {
		t.Fatalf("verdict %+v", s.Verdict)
	}

	var seen []string
	onLog := LiveLogs([]config.Middleware{outer}, func(e api.LogEntry) { seen = append(seen, e.Message) })
	onLog(api.LogEntry{Message: "live code-5"})
	if len(seen) != 1 || strings.Contains(seen[0], "code-") {
		t.Fatalf("live log: %q", seen)
	}
}

// TestQuotaCostRefusedWhenNotCounted: a cost that cannot be evaluated
// (the agent left out the argument it reads) or is negative, even by one,
// refuses the call before anything is spent: neither is a free call, nor
// one that gives units back.
func TestQuotaCostRefusedWhenNotCounted(t *testing.T) {
	for _, tc := range []struct{ cost, want string }{
		{"int(args.missing)", "refused by policy: the cost of this call could not be evaluated ("},
		{"int(args.amount) - 6", "refused by policy: the cost of this call is negative (-1)"},
	} {
		m := config.Middleware{Rule: "q", Use: config.UseQuota, Limit: 10, Window: time.Hour, Cost: costOf(t, tc.cost)}
		l := &limitsStore{allow: true}
		s, handled, err := layers(l).Before(context.Background(), m, call)
		if err != nil || !handled || s.Refused == nil || s.Refused.Kind != api.KindDenied || !strings.HasPrefix(s.Refused.Message, tc.want) || len(l.costs) != 0 {
			t.Errorf("cost %s: step %+v (refused %+v), %v, spent %v; want it refused (%q) with nothing spent", tc.cost, s.Verdict, s.Refused, err, l.costs, tc.want)
		}
	}
}
