package config

import (
	"strings"
	"testing"
	"time"
)

const mwTools = `version = 1
[tools.pay]
path = "p.wasm"
middleware = [{ use = "validate", check = 'args.amount <= 100', message = "at most 100" }, { use = "guard" }]
[tools.echo]
path = "e.wasm"
middleware_mode = "replace"
middleware = [{ use = "ratelimit", limit = 10, per = "1m" }]
[tools.free]
path = "f.wasm"
middleware_mode = "prepend"
middleware = [{ use = "quota", limit = 1000, window = "24h", cost = 'args.n * 2' }]
`

func rules(ms []Middleware) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Rule+"="+m.Use)
	}
	return strings.Join(s, " ")
}

// TestMiddlewareChain checks the chain's order (CARDS.md A13: universal U1,
// then the tool's M1, M2, then the binding's) and the three merge modes.
func TestMiddlewareChain(t *testing.T) {
	src := mwTools + `
[[middleware]]
use  = "approve"
when = 'tool == "weather" && args.city != "Paris"'
allow_always = false

[middleware.guard]
path = "guard.wasm"
timeout_ms = 200

[[middleware]]
use = "redact"
patterns = ["TCK-[0-9]+", { name = "ticket", expr = "TIX[0-9]+" }]

[agents.a]
grants = ["tool:invoke *"]
[agents.a.tools.pay]
middleware = [{ use = "approve", reason = "payments" }]
[agents.a.tools.echo]
middleware_mode = "prepend"
middleware = [{ use = "validate", check = 'tool == "echo"' }]
[agents.a.tools.free]
middleware_mode = "replace"
middleware = []
[agents.b.tools.pay]
`
	cfg, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ agent, tool, want string }{
		{"a", "pay", "middleware[1]=approve middleware[2]=redact tools.pay.middleware[1]=validate tools.pay.middleware[2]=guard agents.a.tools.pay.middleware[1]=approve"},
		{"b", "pay", "middleware[1]=approve middleware[2]=redact tools.pay.middleware[1]=validate tools.pay.middleware[2]=guard"},
		{"a", "echo", "agents.a.tools.echo.middleware[1]=validate tools.echo.middleware[1]=ratelimit"},
		{"a", "free", ""},
	} {
		if got := rules(cfg.Chain(tt.agent, tt.tool)); got != tt.want {
			t.Errorf("Chain(%s, %s) = %q\nwant %q", tt.agent, tt.tool, got, tt.want)
		}
	}
	u := cfg.Middleware()
	if u[0].AllowAlways || u[0].When == nil || u[0].Expires != DefaultApprovalExpiry {
		t.Errorf("approve layer %+v", u[0])
	}
	if u[1].Redactor == nil || u[1].Redactor.Redact("id TCK-42 and TIX7") == "id TCK-42 and TIX7" {
		t.Error("redact patterns not compiled")
	}
	pay, _ := cfg.Tool("pay")
	if g := pay.Middleware[1].Component; g == nil || g.Name != "guard" || g.Path != "/cfg/guard.wasm" || g.Timeout != 200*time.Millisecond {
		t.Errorf("component %+v", g)
	}
	if m, ok := cfg.MiddlewareRule("agents.a.tools.pay.middleware[1]"); !ok || m.Reason != "payments" || !m.AllowAlways {
		t.Errorf("MiddlewareRule = %+v, %v", m, ok)
	}
}

// errBase is 9 lines: the snippets of TestMiddlewareErrors start on line 11.
const errBase = `version = 1
[tools.pay]
path = "p.wasm"
#
#
#
#
#
#
`

func TestMiddlewareErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"unknown middleware", "[[middleware]]\nuse = \"aprove\"\n", []string{
			`agent.toml:12: middleware[1].use: unknown middleware "aprove" (did you mean "approve"?): not a built-in`,
		}},
		{"broken CEL", "[[middleware]]\nuse = \"approve\"\nwhen = 'tool == '\n", []string{
			`agent.toml:13: middleware[1].when: CEL column`,
		}},
		{"bool cost", "[[middleware]]\nuse = \"quota\"\nlimit = 5\nwindow = \"1h\"\ncost = 'tool == \"x\"'\n", []string{
			`agent.toml:15: middleware[1].cost: CEL column 1: the result is bool, a cost must be an int`,
		}},
		{"ratelimit without per", "[[middleware]]\nuse = \"ratelimit\"\nlimit = 5\n", []string{
			`agent.toml:11: middleware[1]: ratelimit needs per = the period`,
		}},
		{"ratelimit over 50 years", "[[middleware]]\nuse = \"ratelimit\"\nlimit = 1\nper = \"2200000h\"\n", []string{
			`agent.toml:11: middleware[1]: ratelimit of 1 per 2200000h0m0s in bursts of 1 takes more than 50 years to refill from empty`,
		}},
		{"ratelimit whose bursts span 50 years", "[[middleware]]\nuse = \"ratelimit\"\nlimit = 1\nburst = 110\nper = \"20000h\"\n", []string{
			`agent.toml:11: middleware[1]: ratelimit of 1 per 20000h0m0s in bursts of 110 takes more than 50 years`,
		}},
		{"quota over 50 years", "[[middleware]]\nuse = \"quota\"\nlimit = 1\nwindow = \"438001h\"\n", []string{
			`agent.toml:11: middleware[1]: quota's window of 438001h0m0s is longer than 50 years`,
		}},
		{"key of another kind", "[[middleware]]\nuse = \"approve\"\nlimit = 5\n", []string{
			`agent.toml:13: middleware.limit: unknown key; valid keys here: use, when, reason, allow_always, expires`,
		}},
		{"bad pattern", "[[middleware]]\nuse = \"redact\"\npatterns = [\"(\"]\n", []string{
			`agent.toml:11: middleware[1].patterns: redact pattern 1`,
		}},
		{"bad mode", "[tools.x]\npath = \"x.wasm\"\nmiddleware_mode = \"merge\"\n", []string{
			`agent.toml:13: tools.x.middleware_mode: unknown merge mode "merge"`,
		}},
		{"component without path", "[middleware.g]\ntimeout_ms = 5\n", []string{
			`agent.toml:11: middleware.g: missing key path`,
		}},
		{"component named like a built-in", "[middleware.approve]\npath = \"a.wasm\"\n", []string{
			`agent.toml:11: middleware.approve: invalid middleware component name "approve"`,
		}},
		{"missing use", "[[middleware]]\nwhen = 'true'\n", []string{
			`agent.toml:11: middleware[1]: missing key use`,
		}},
		{"operator named like an agent", "[agents.a]\ntools = [\"pay\"]\n[operators.a]\n", []string{
			`agent.toml:13: operators.a: "a" is also an agent's name`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("agent.toml", []byte(errBase+"\n"+tt.src), "/cfg", fakeFiles(t))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain\n  %s\ngot:\n  %v", w, err)
				}
			}
		})
	}
}

func TestOperators(t *testing.T) {
	cfg, err := parse("agent.toml", []byte(errBase+"\n[operators.zoe]\n[operators.al]\n"), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	ops := cfg.Operators()
	if len(ops) != 2 || ops[0].Name != "al" || ops[1].Name != "zoe" {
		t.Fatalf("Operators = %+v", ops)
	}
	if _, ok := cfg.Operator("zoe"); !ok {
		t.Error("Operator(zoe) not found")
	}
}
