package maiden_test

import (
	"strings"
	"testing"

	maiden "github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestInputKeysDifferingOnlyInCaseRefused (security reviews of middleware
// and of approvals): Go's encoding/json fills a struct field from any key
// equal to its name under case folding, the last one winning, while the
// cards, a middleware's CEL conditions and a JavaScript tool read keys
// exactly. So {"amount":1,"AMOUNT":100000} skipped an approve layer asking
// a human when args.amount > 100 while a Go tool paid 100000, and a Go
// middleware component judged another value than the tool ran. Such an
// input is refused as kind input before any layer or component runs,
// naming the key; the same keys with no fold collision still run.
func TestInputKeysDifferingOnlyInCaseRefused(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[middleware.guard]
path = "`+testkit.Middleware(t, "pass")+`"
[[middleware]]
use = "guard"
when = 'tool == "echo"'
[[middleware]]
use = "approve"
when = 'args.message == "pay" && args.amount > 100'
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	for _, in := range []string{
		`{"message":"pay","amount":1,"AMOUNT":100000}`,
		`{"message":"rm -rf","MESSAGE":"hello"}`,
		`{"message":"hi","x":{"kind":1,"\u212aind":2}}`,
	} {
		res := mustCall(t, h, maiden.Call{Tool: "echo", Input: in})
		wantKind(t, res, maiden.KindInput, "only in case")
		if len(res.Logs) != 0 || strings.Contains(res.Error.Message, "approv") {
			t.Errorf("%s: a layer ran: %+v", in, res)
		}
	}
	res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"pay","Messages":2,"amount":1}`})
	if !res.OK {
		t.Fatalf("keys that only look alike were refused: %+v", res.Error)
	}
}

// TestRewriteKeysDifferingOnlyInCaseRefused: a middleware's rewrite is
// checked as the agent's input is, so a layer cannot hand the tool what the
// input stage refuses: foldrewrite rewrites every call to
// {"message":"hi","MESSAGE":"evil"}, and the call is refused, kind denied,
// naming the keys, before the tool runs.
func TestRewriteKeysDifferingOnlyInCaseRefused(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[middleware.fold]
path = "`+testkit.Middleware(t, "foldrewrite")+`"
[[middleware]]
use = "fold"
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
	wantKind(t, res, maiden.KindDenied, "differs from an earlier key of the object only in case")
	if n := len(trail(t, h, "call-admitted")); n != 0 {
		t.Errorf("the tool ran on the rewritten input (%d admitted records)", n)
	}
}
