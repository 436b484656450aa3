package maiden_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
	_ "modernc.org/sqlite"
)

// TestBudgetReservationIsTheTimeoutAndASecond guards what a call reserves
// of a wall_ms budget with plenty left: its tool's timeout and a second
// for the stages after the run (budgetSlack), named in its call-admitted
// record; what it did not use is given back at its end.
func TestBudgetReservationIsTheTimeoutAndASecond(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
timeout_ms = 1500
[agents.a]
tools = ["echo"]
grants = [{ grant = "tool:invoke echo --...", budget = "wall_ms=100000" }]
`, maiden.Options{}, "echo")
	ctx := context.Background()
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"x"}`}); !res.OK {
		t.Fatalf("echo: %+v", res.Error)
	}
	recs, err := h.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var budgets []string
	for _, r := range recs {
		var body struct {
			Budget string `json:"budget"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "call-admitted" && r.Tool == "echo" {
			budgets = append(budgets, body.Budget)
		}
	}
	if len(budgets) != 1 || !strings.Contains(budgets[0], "wall_ms=97500 left") || !strings.Contains(budgets[0], "(wall_ms=2500 reserved: the most it may run)") {
		t.Fatalf("the call-admitted record's budget %q; want 2500 ms reserved (the 1.5 s timeout and a second)", budgets)
	}
	if spent := budgetSpent(t, h, "a", "wall_ms"); spent < 1 || spent >= 2500 {
		t.Fatalf("the card spent %d ms of wall time after the call; want what it ran, the rest of its 2500 given back", spent)
	}
}

// TestBudgetCallersDeadlineIsNotTheBudgets guards the budget stage's
// reading of its deadline: a call its caller gave up on (the caller's
// context ended) before its budget's reservation ran out is not reported
// as ended by the budget.
func TestBudgetCallersDeadlineIsNotTheBudgets(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.loop]
path = %q
timeout_ms = 5000
[agents.a]
tools = ["loop"]
grants = [{ grant = "tool:invoke loop --...", budget = "wall_ms=3000" }]
`, maiden.Options{}, "loop")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "loop", Input: `{}`})
	if res.Error != nil && strings.Contains(res.Error.Message, "its card's budget had left") {
		t.Fatalf("a call whose caller's deadline (0.5 s) came before its budget's (3 s): %+v, %v; want it not blamed on the budget", res.Error, err)
	}
}

// TestBudgetImportWhenTheStoreCannotSay guards an imported tool's payment
// when the store cannot spend its bytes: the call fails as the state
// store's failure (ErrState), not as a budget's denial, which would tell
// the agent its budget is spent when it is not. The store here refuses
// every write of bytes_out (a trigger), while calls and wall time still
// reserve.
func TestBudgetImportWhenTheStoreCannotSay(t *testing.T) {
	t.Parallel()
	bin := buildMCPStdio(t)
	state := filepath.Join(t.TempDir(), "state.db")
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.local]
accept_new_tools = true
command = ["`+bin+`"]
[agents.a]
tools = ["local"]
grants = [{ grant = "tool:invoke local.read --...", budget = "bytes_out=6000" }]
`, maiden.Options{Isolation: maiden.InProcess, StatePath: state}, "echo")
	in := `{"path": "/nonexistent/x"}`
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "local.read", Input: in}); res.Error != nil && res.Error.Kind == maiden.KindDenied {
		t.Fatalf("the first call: %+v", res.Error)
	}
	refuseBytesOut(t, state)
	res, err := h.Call(context.Background(), maiden.Call{Agent: "a", Tool: "local.read", Input: in})
	if !errors.Is(err, maiden.ErrState) || !strings.Contains(fmt.Sprint(err), "the bytes_out budget could not be checked") {
		t.Fatalf("an imported tool's call whose bytes the store could not spend: %+v %+v, %v; want ErrState naming the bytes_out budget", res, res.Error, err)
	}
}

// TestBudgetCLIDeadlineAfterItsTunnelClosed guards the wrapped CLI's
// reading of a closed tunnel: "its tunnel was closed" (denied) names the
// budget only for a CLI that then failed as a tool; one whose tunnel was
// closed and that then ran into its deadline (a curl retrying) is ended
// by its deadline, and says so. The budget (bytes_out=300) cannot pay for
// curl's ClientHello, so every tunnel it opens is closed.
func TestBudgetCLIDeadlineAfterItsTunnelClosed(t *testing.T) {
	t.Parallel()
	_, _, port, ca := uploadServer(t)
	h := newHostWith(t, budgetedCurl(ca, port, 2500, "bytes_out=300"), maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com")})
	in, _ := json.Marshal(map[string]any{"cacert": ca, "silent": true, "retry": "100", "retry-delay": "1", "retry-all-errors": true, "url": "https://api.example.com:" + port + "/"})
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "curl", Input: string(in)})
	if res.OK || res.Error.Kind != maiden.KindDeadline || strings.Contains(res.Error.Message, "its tunnel was closed") {
		t.Fatalf("a curl retrying after its tunnel was closed, until its deadline: %+v %+v; want a deadline failure, not the tunnel's", res, res.Error)
	}
}

// TestBudgetCLIWhenTheStoreCannotSay guards a wrapped CLI's tunnel payment
// when the store cannot spend its bytes: the tunnel is closed (nothing
// unpaid goes out) and the call fails as the state store's failure
// (ErrState naming the bytes_out budget), as an import's does, not as
// "its tunnel was closed" (denied), which would tell the agent its budget
// is spent when it is not. The store refuses every write of bytes_out (a
// trigger) after a first call that paid.
func TestBudgetCLIWhenTheStoreCannotSay(t *testing.T) {
	t.Parallel()
	hits, _, port, ca := uploadServer(t)
	state := filepath.Join(t.TempDir(), "state.db")
	h := newHostWith(t, budgetedCurl(ca, port, 20000, "bytes_out=100000"), maiden.Options{Isolation: maiden.InProcess, StatePath: state, Resolver: testkit.Loopback("api.example.com")})
	in, _ := json.Marshal(map[string]any{"cacert": ca, "silent": true, "url": "https://api.example.com:" + port + "/"})
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "curl", Input: string(in)}); !res.OK || hits.Load() != 1 {
		t.Fatalf("the first call, which pays: %+v %+v, %d requests served", res, res.Error, hits.Load())
	}
	refuseBytesOut(t, state)
	res, err := h.Call(context.Background(), maiden.Call{Agent: "a", Tool: "curl", Input: string(in)})
	if !errors.Is(err, maiden.ErrState) || !strings.Contains(fmt.Sprint(err), "the bytes_out budget could not be checked") || !strings.Contains(fmt.Sprint(err), "its tunnel was closed") {
		t.Fatalf("a CLI whose tunnel's bytes the store could not spend: %+v %+v, %v; want ErrState naming the bytes_out budget and the closed tunnel", res, res.Error, err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the server saw %d requests, want 1: the unpaid tunnel sent its request", n)
	}
}

// budgetedCurl is an agent.toml wrapping curl (its CA file, retries) for
// api.example.com on port, the agent a allowed it with budget on its card.
func budgetedCurl(ca, port string, timeoutMS int, budget string) string {
	return `version = 1
[clis.curl]
path = "/usr/bin/curl"
option_style = "separate"
command = '{"maiden_command": 1, "name": "curl", "options": [{"name": "cacert"}, {"name": "silent", "kind": "bool"}, {"name": "retry"}, {"name": "retry-delay"}, {"name": "retry-all-errors", "kind": "bool"}], "positionals": [{"name": "url"}]}'
read_paths = ["` + filepath.Dir(ca) + `"]
http_allow = ["api.example.com"]
http_ports = [` + port + `]
http_allow_cidrs = ["127.0.0.0/8"]
timeout_ms = ` + strconv.Itoa(timeoutMS) + `
[agents.a]
tools = ["curl"]
grants = [{ grant = "tool:invoke curl --... -- ...", budget = "` + budget + `" }, "network:connect api.example.com"]
`
}

// refuseBytesOut makes the SQLite store at state refuse every write of
// bytes_out spent (triggers on card_spend): the store failing at a
// payment, while calls and wall time still reserve.
func refuseBytesOut(t *testing.T, state string) {
	t.Helper()
	db, err := sql.Open("sqlite", state+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, op := range []string{"INSERT", "UPDATE"} {
		if _, err := db.Exec(`CREATE TRIGGER refuse_bytes_` + op + ` BEFORE ` + op + ` ON card_spend WHEN NEW.budget = 'bytes_out' BEGIN SELECT RAISE(ABORT, 'no space left (test)'); END`); err != nil {
			t.Fatal(err)
		}
	}
}
