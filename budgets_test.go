package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestBudgetsOnCalls: system grants with budgets (agent.toml) through
// Host.Call: each call spends one call and its tool's cost on the card
// that allowed it; a call that would overspend is denied naming the card,
// the budget and what is left, and never runs; a call that runs into its
// deadline is charged its wall time, so the next is denied; the
// call-admitted record names the budget the call spent.
func TestBudgetsOnCalls(t *testing.T) {
	t.Parallel()
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

	// The loop's card has 100 ms of wall time, less than its 1.5 s
	// timeout: the call reserves the 100 ms and is ended when they run
	// out, told so; the next call is denied before it runs. (The timeout
	// is long enough for the tool's schema() at load, which runs under it
	// and before the budget: 50 ms was missed on a loaded machine.)
	budgetEnd := regexp.MustCompile(`^the call ran for the 100ms of wall time its card's budget had left \(wall_ms; card card_[0-9a-f]+ or an ancestor: maiden cards show card_[0-9a-f]+\)$`)
	if res := call("loop"); res.OK || res.Error.Kind != maiden.KindDeadline || !budgetEnd.MatchString(res.Error.Message) {
		t.Fatalf("loop: %+v; want a deadline naming the budget", res)
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

// TestBudgetWallTimeInParallel: calls made at once cannot together run
// past their card's wall_ms budget. Four calls at once of a tool that
// never returns (timeout 1.5 s) on a card of wall_ms=400: the first to
// start reserves the 400 ms and runs them out, the three others find them
// reserved and are denied; the card ends with about 400 ms spent. (Each
// admitted while some wall time was left, the four ran 1.5 s each: 6 s
// charged to a budget of 0.4 s.)
func TestBudgetWallTimeInParallel(t *testing.T) {
	t.Parallel()
	for _, iso := range []maiden.Isolation{maiden.InProcess, maiden.Workers} {
		t.Run(map[maiden.Isolation]string{maiden.InProcess: "process", maiden.Workers: "workers"}[iso], func(t *testing.T) {
			t.Parallel()
			testBudgetWallTimeInParallel(t, iso)
		})
	}
}

func testBudgetWallTimeInParallel(t *testing.T, iso maiden.Isolation) {
	h := newHostWith(t, `version = 1
[tools.loop]
path = %q
timeout_ms = 1500
[agents.a]
tools = ["loop"]
grants = [{ grant = "tool:invoke loop --...", budget = "wall_ms=400" }]
[agents.warm]
tools = ["loop"]
grants = ["tool:invoke loop --..."]
`, maiden.Options{Isolation: iso}, "loop")
	ctx := context.Background()
	// A version's first call runs alone (the calls after it wait for its
	// end): made first, by an agent without a budget, so that the four
	// below run at once.
	if res, err := h.Call(ctx, maiden.Call{Agent: "warm", Tool: "loop", Input: `{}`}); err != nil || res.Error == nil || res.Error.Kind != maiden.KindDeadline {
		t.Fatalf("the first call: %+v, %v", res, err)
	}
	results := make(chan maiden.Result, 4)
	for range 4 {
		go func() {
			res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "loop", Input: `{}`})
			if err != nil {
				res.Error = &maiden.ToolError{Message: err.Error()}
			}
			results <- res
		}()
	}
	var ended, denied int
	for range 4 {
		res := <-results
		switch {
		case res.Error != nil && res.Error.Kind == maiden.KindDeadline && strings.Contains(res.Error.Message, "its card's budget had left"):
			ended++
		case res.Error != nil && res.Error.Kind == maiden.KindDenied && strings.Contains(res.Error.Message, "of its wall_ms budget of 400 left"):
			denied++
		default:
			t.Errorf("a call: %+v", res)
		}
	}
	if ended+denied != 4 || ended < 1 {
		t.Fatalf("%d calls ended by the budget, %d denied; want every call one or the other, one at least ended", ended, denied)
	}
	cs, err := h.Cards(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var spent int64 = -1
	for _, c := range cs {
		for _, b := range c.Budgets {
			if b.Key == "wall_ms" && b.Limit == 400 {
				spent = b.Spent
			}
		}
	}
	// Each call's end comes a little after its reservation runs out (the
	// kill, the teardown): a second at most, on a loaded machine.
	if spent < 400 || spent > 400+int64(ended)*1000 {
		t.Fatalf("the card spent %d ms of its 400 with %d calls ended by it; want 400 and each call's teardown at most", spent, ended)
	}
}

// TestBudgetBytesOutWebFetch: the bytes a web_fetch call sends (method,
// URL, headers and body, as an http-fetch's) are spent on the bytes_out
// budget of the card that allowed it before the request goes, and a
// request they do not fit is refused unsent. Five calls at once, each
// posting 4,000 bytes, on bytes_out=10000: two reach the server, three are
// refused (budget-exhausted, naming what the request needs), and the card
// has spent what the two sent. (Metered only for http-fetch, web_fetch's
// requests were charged nothing; charged at the end, every call admitted
// while some bytes were left sent its body: five reached the server.)
func TestBudgetBytesOutWebFetch(t *testing.T) {
	t.Parallel()
	hits, got, port, ca := uploadServer(t)
	h := newHostWith(t, `version = 1
[agents.a]
grants = [{ grant = "tool:invoke web_fetch --...", budget = "bytes_out=10000" }, "network:connect api.example.com"]
[agents.a.tools.web_fetch]
http_allow = ["api.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
`, maiden.Options{Resolver: testkit.Loopback("api.example.com")})
	ctx := context.Background()
	in, _ := json.Marshal(map[string]any{"url": "https://api.example.com:" + port + "/upload", "method": "POST", "body": strings.Repeat("x", 4000)})
	call := func() maiden.Result {
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "web_fetch", Input: string(in)})
		if err != nil {
			res.Error = &maiden.ToolError{Message: err.Error()}
		}
		return res
	}
	results := make(chan maiden.Result, 5)
	for range 5 {
		go func() { results <- call() }()
	}
	refusedAtSend := regexp.MustCompile(`budget-exhausted: card card_[0-9a-f]+ has \d+ of its bytes_out budget of 10000 left, this call needs (\d+) \(maiden cards show card_[0-9a-f]+\)`)
	var ok, refused int
	var need int64
	for range 5 {
		res := <-results
		switch m := refusedAtSend.FindStringSubmatch(fmt.Sprint(res.Error)); {
		case res.OK:
			ok++
		case res.Error != nil && res.Error.Kind == maiden.KindDenied && m != nil:
			refused++
			need, _ = strconv.ParseInt(m[1], 10, 64)
		default:
			t.Errorf("a call: %+v", res)
		}
	}
	if ok != 2 || refused != 3 || hits.Load() != 2 || got.Load() != 8000 {
		t.Fatalf("five calls of 4,000 bytes at once on bytes_out=10000: %d ran, %d refused, the server reached %d times with %d bytes; want 2, 3, 2, 8000", ok, refused, hits.Load(), got.Load())
	}
	// What the two sent, each request whole (body, method, URL, headers).
	if charged := budgetSpent(t, h, "a", "bytes_out"); charged != 2*need || need < int64(4000+len("POST")+len("https://api.example.com:"+port+"/upload")) {
		t.Fatalf("bytes_out spent %d, a request needing %d; want two requests' worth", charged, need)
	}
}

// TestBudgetBytesOutWrappedCLI: what a wrapped CLI sends through maiden's
// CONNECT proxy (each tunnel's ClientHello and every byte after it) pays
// bytes_out before it goes, as a tool's http-fetches do: on
// bytes_out=50000 a curl posting 30,000 bytes runs, and the next, admitted
// with some 19,000 left, has its tunnel closed when it can pay no more: the
// server gets less than its body, the call fails naming the budget, and
// the card never spends past its 50,000. (The proxy counted nothing: every
// call was admitted; then charged at the end: the second curl sent its
// whole body and the card spent some 62,000.)
func TestBudgetBytesOutWrappedCLI(t *testing.T) {
	t.Parallel()
	hits, got, port, ca := uploadServer(t)
	h := newHostWith(t, `version = 1
[clis.curl]
path = "/usr/bin/curl"
option_style = "separate"
command = '{"maiden_command": 1, "name": "curl", "options": [{"name": "cacert"}, {"name": "silent", "kind": "bool"}, {"name": "show-error", "kind": "bool"}, {"name": "data"}], "positionals": [{"name": "url"}]}'
read_paths = ["`+filepath.Dir(ca)+`"]
http_allow = ["api.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
timeout_ms = 10000
[agents.a]
tools = ["curl"]
grants = [{ grant = "tool:invoke curl --... -- ...", budget = "bytes_out=50000" }, "network:connect api.example.com"]
`, maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com")})
	ctx := context.Background()
	in, _ := json.Marshal(map[string]any{"cacert": ca, "silent": true, "show-error": true, "data": strings.Repeat("x", 30000), "url": "https://api.example.com:" + port + "/upload"})
	call := func() maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "curl", Input: string(in)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(); !res.OK || hits.Load() != 1 || got.Load() != 30000 {
		t.Fatalf("the first curl (50,000 bytes_out left): %+v %+v (hits %d, %d bytes received)", res, res.Error, hits.Load(), got.Load())
	}
	first := budgetSpent(t, h, "a", "bytes_out")
	if first < 30000 || first > 50000 {
		t.Fatalf("the first curl spent %d; want its 30,000 bytes of body and what carried them", first)
	}
	res := call()
	stopped := regexp.MustCompile(`^its tunnel was closed: budget-exhausted: card card_[0-9a-f]+ has \d+ of its bytes_out budget of 50000 left, this call needs \d+ \(maiden cards show card_[0-9a-f]+\) \(the CLI then failed: `)
	if res.OK || res.Error.Kind != maiden.KindDenied || !stopped.MatchString(res.Error.Message) {
		t.Fatalf("a curl of 30,000 bytes with %d left: %+v %+v, want it failed naming the budget", 50000-first, res, res.Error)
	}
	if n := got.Load(); n >= 60000 {
		t.Fatalf("the server received %d bytes of bodies; want less than the second's whole body", n)
	}
	if charged := budgetSpent(t, h, "a", "bytes_out"); charged > 50000 || charged <= first {
		t.Fatalf("bytes_out spent %d after the second curl (%d after the first); want more, and at most the budget's 50,000", charged, first)
	}
}

// TestBudgetBytesOutImportedTool: an imported MCP tool's call sends its
// input to the upstream server, which bytes_out pays for before it goes,
// as a tool's http-fetches are: on bytes_out=6000 a call carrying 4,000
// bytes runs, and the next, admitted (some bytes left) but its input not
// fitting, is refused before it reaches the upstream, naming what it
// needs; the card has spent the first call's bytes only. (Imports were
// charged nothing: every call was admitted; then charged at the end: the
// second call went upstream too.)
func TestBudgetBytesOutImportedTool(t *testing.T) {
	t.Parallel()
	bin := buildMCPStdio(t)
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.local]
accept_new_tools = true
command = ["`+bin+`"]
[agents.a]
tools = ["local"]
grants = [{ grant = "tool:invoke local.read --...", budget = "bytes_out=6000" }]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	in, _ := json.Marshal(map[string]any{"path": "/nonexistent/" + strings.Repeat("x", 4000)})
	need := int64(len("read") + len(in))
	first := mustCall(t, h, maiden.Call{Agent: "a", Tool: "local.read", Input: string(in)})
	if first.Error != nil && first.Error.Kind == maiden.KindDenied {
		t.Fatalf("the first call (6000 bytes_out left): %+v", first.Error)
	}
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "local.read", Input: string(in)})
	exhausted := regexp.MustCompile(`^budget-exhausted: card card_[0-9a-f]+ has ` + strconv.FormatInt(6000-need, 10) + ` of its bytes_out budget of 6000 left, this call needs ` + strconv.FormatInt(need, 10) + ` \(maiden cards show card_[0-9a-f]+\)$`)
	if res.OK || res.Error.Kind != maiden.KindDenied || !exhausted.MatchString(res.Error.Message) {
		t.Fatalf("an imported tool's call whose %d bytes do not fit the %d left: %+v %+v, want denied budget-exhausted before the upstream", need, 6000-need, res, res.Error)
	}
	if charged := budgetSpent(t, h, "a", "bytes_out"); charged != need {
		t.Fatalf("bytes_out spent %d, want the first call's %d only", charged, need)
	}
}

// uploadServer is a TLS server on loopback for api.example.com that
// counts the requests it gets (hits) and the body bytes it reads (got).
func uploadServer(t *testing.T) (hits, got *atomic.Int64, port, ca string) {
	hits, got = new(atomic.Int64), new(atomic.Int64)
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		n, _ := io.Copy(io.Discard, r.Body)
		got.Add(n)
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	return hits, got, u.Port(), ca
}

// budgetSpent is what agent's cards have spent of their budget key (the
// last card that has one).
func budgetSpent(t *testing.T, h *maiden.Host, agent, key string) int64 {
	t.Helper()
	cs, err := h.Cards(context.Background(), agent)
	if err != nil {
		t.Fatal(err)
	}
	var spent int64
	for _, c := range cs {
		for _, b := range c.Budgets {
			if b.Key == key {
				spent = b.Spent
			}
		}
	}
	return spent
}
