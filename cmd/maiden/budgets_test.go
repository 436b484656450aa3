package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestCardsBudgets: the interface of issue 24 as scripts use it. cards
// grant -budget; calls through maiden call spend it; cards derive with a
// budget wider than the parent has left exits non-zero with
// budget-too-broad, one within it succeeds and spends the parent too;
// cards show prints spent and left (and -json the same numbers); an
// exhausted budget denies the call naming the card, the budget and what is
// left; a malformed budget is a usage error.
func TestCardsBudgets(t *testing.T) {
	t.Parallel()
	cfg, cache := agentsConfig(t), t.TempDir()
	hi := `{"message":"hi"}`
	a := jsonID(t, op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-budget", "calls=3,wall_ms=600000", "-json", "tool:invoke echo --...").stdout)
	if r := callAs(t, cfg, cache, "research", hi); r.code != exitOK {
		t.Fatalf("a call within the budget: exit %d, %s", r.code, r.stderr)
	}

	r := op(t, exitDenied, cfg, "cards", "derive", a, "-to", "helper", "-budget", "calls=3", "tool:invoke echo --...")
	if want := "budget-too-broad: the child's calls=3 is more than card " + a + " has left (2 of 3)"; !strings.Contains(r.stderr, want) {
		t.Fatalf("derive calls=3 with 2 left: %q; want %q", r.stderr, want)
	}
	r = op(t, exitOK, cfg, "cards", "derive", a, "-to", "helper", "-budget", "calls=1", "tool:invoke echo --...")
	// wall_ms is filled in with what the parent has left after its call.
	if m := regexp.MustCompile(`, budget calls=1,wall_ms=(\d+)\n$`).FindStringSubmatch(r.stdout); m == nil || m[1] == "600000" || len(m[1]) != 6 {
		t.Fatalf("derive text %q: want the child's budgets, wall_ms filled in with what the parent has left", r.stdout)
	}
	child := strings.Fields(r.stdout)[1]
	if r := callAs(t, cfg, cache, "helper", hi); r.code != exitOK {
		t.Fatalf("the child's call: exit %d, %s", r.code, r.stderr)
	}
	// The child's call spent the parent's too: 1 of 3 left.
	r = op(t, exitOK, cfg, "cards", "show", a)
	if !strings.Contains(r.stdout, "budget   calls     1 left of 3 (2 spent)\n") || !strings.Contains(r.stdout, "wall_ms   ") {
		t.Fatalf("cards show of the parent:\n%s", r.stdout)
	}
	var shown struct {
		Budgets []struct {
			Key                string
			Limit, Spent, Left int64
		}
	}
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "cards", "show", child, "-json").stdout), &shown); err != nil ||
		len(shown.Budgets) != 2 || shown.Budgets[0].Key != "calls" || shown.Budgets[0].Limit != 1 || shown.Budgets[0].Spent != 1 || shown.Budgets[0].Left != 0 {
		t.Fatalf("cards show -json of the child: %+v, %v", shown, err)
	}
	r = callAs(t, cfg, cache, "helper", hi)
	if r.code != exitDenied || !strings.Contains(r.stderr, "budget-exhausted: card "+child+" has 0 of its calls budget of 1 left") {
		t.Fatalf("the child's second call: exit %d, %q", r.code, r.stderr)
	}
	if r := callAs(t, cfg, cache, "research", hi); r.code != exitOK {
		t.Fatalf("the parent's third call: exit %d, %s", r.code, r.stderr)
	}
	r = callAs(t, cfg, cache, "research", hi)
	if r.code != exitDenied || !strings.Contains(r.stderr, "budget-exhausted: card "+a+" has 0 of its calls budget of 3 left") {
		t.Fatalf("the parent's fourth call: exit %d, %q", r.code, r.stderr)
	}

	r = op(t, exitUsage, cfg, "cards", "grant", "-agent", "research", "-budget", "calls=1,tokens=5", "tool:invoke echo --...")
	if !strings.Contains(r.stderr, `unknown key "tokens"`) {
		t.Fatalf("a malformed budget: %q", r.stderr)
	}
}
