package maiden_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestBudgetsOnCalls: system grants with budgets (agent.toml) through
// Host.Call: each call spends one call and its tool's cost on the card
// that allowed it; a call that would overspend is denied naming the card,
// the budget and what is left, and never runs; a call that runs into its
// deadline is charged its wall time, so the next is denied; the
// call-admitted record names the budget the call spent.
func TestBudgetsOnCalls(t *testing.T) {
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
cost = 2
[tools.loop]
path = %q
timeout_ms = 1500
[agents.a]
tools = ["echo", "loop"]
grants = [
	{ grant = "tool:invoke echo --...", budget = "calls=3,cost=5" },
	{ grant = "tool:invoke loop --...", budget = "wall_ms=100" },
]
`, maiden.Options{}, "echo", "loop")
	ctx := context.Background()
	call := func(tool string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: tool, Input: `{"message":"x"}`})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := range 2 {
		if res := call("echo"); !res.OK {
			t.Fatalf("echo call %d within its budget: %+v", i+1, res.Error)
		}
	}
	// 4 of 5 cost units spent: a third call costs 2.
	res := call("echo")
	exhausted := regexp.MustCompile(`^budget-exhausted: card (card_[0-9a-f]+) has 1 of its cost budget of 5 left, this call needs 2 \(agent "a"`)
	if res.OK || res.Error.Kind != maiden.KindDenied || !exhausted.MatchString(res.Error.Message) {
		t.Fatalf("the third echo call (cost 2, 1 left): %+v", res)
	}
	echoCard := exhausted.FindStringSubmatch(res.Error.Message)[1]

	// The loop runs into its 1.5 s deadline: charged at least that, over
	// its 100 ms budget; the next call is denied before it runs. (The
	// deadline is long enough for the tool's schema() at load, which runs
	// under the same timeout: 50 ms was missed on a loaded machine.)
	if res := call("loop"); res.OK || res.Error.Kind != maiden.KindDeadline {
		t.Fatalf("loop: %+v", res)
	}
	res = call("loop")
	if res.OK || res.Error.Kind != maiden.KindDenied || !regexp.MustCompile(`^budget-exhausted: card card_[0-9a-f]+ has 0 of its wall_ms budget of 100 left`).MatchString(res.Error.Message) {
		t.Fatalf("loop after its wall time is spent: %+v", res)
	}

	recs, err := h.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var budgets []string
	refused := 0
	for _, r := range recs {
		var body struct {
			Budget  string `json:"budget"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Kind == "call-admitted" && r.Tool == "echo":
			budgets = append(budgets, body.Budget)
		case r.Kind == "call-refused" && strings.Contains(body.Message, "budget-exhausted"):
			refused++
		}
	}
	want := []string{
		"card " + echoCard + " spent calls=1,cost=2, calls=2,cost=3 left; wall_ms and bytes_out charged when it ends",
		"card " + echoCard + " spent calls=1,cost=2, calls=1,cost=1 left; wall_ms and bytes_out charged when it ends",
	}
	if strings.Join(budgets, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the call-admitted records name the budgets\n%s\nwant\n%s", strings.Join(budgets, "\n"), strings.Join(want, "\n"))
	}
	if refused != 2 {
		t.Fatalf("%d call-refused records name the exhausted budget, want 2", refused)
	}
}
