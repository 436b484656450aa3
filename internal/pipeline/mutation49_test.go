package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// Tests of the forty-ninth mutation pass (docs/security-tests.md): the
// trace context a tool's request carries, and what a call's span says of
// a failure.

const (
	m49TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	m49Parent  = "00-" + m49TraceID + "-00f067aa0ba902b7-01"
)

// m49TraceWorld is a TLS server on loopback answering as api.example.com
// (listed for propagation), recording every traceparent and tracestate
// header each request carried, and a Host of js/fetcher whose spans are
// recorded in memory.
type m49TraceWorld struct {
	h     *Host
	dir   string
	port  string
	spans *tracetest.InMemoryExporter
	mu    sync.Mutex
	got   []http.Header
}

func newM49TraceWorld(t *testing.T) *m49TraceWorld {
	t.Helper()
	w := &m49TraceWorld{spans: tracetest.NewInMemoryExporter(), dir: t.TempDir()}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.got = append(w.got, http.Header{"Traceparent": r.Header.Values("Traceparent"), "Tracestate": r.Header.Values("Tracestate")})
		w.mu.Unlock()
		fmt.Fprint(rw, "hello")
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	w.port = u.Port()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(w.spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	w.h, _ = testHost(t, w.dir, fmt.Sprintf(`version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]
`, testkit.Component(t, "js/fetcher"), w.port, ca), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t),
		Resolver: testkit.Loopback("api.example.com"), TracerProvider: tp, TracePropagateTo: []string{"api.example.com"}})
	t.Cleanup(func() { _ = w.h.Close(context.Background()) })
	return w
}

// TestMutation49ToolTraceHeadersReplaced: a tool that sets its own
// traceparent and tracestate (in any case) on a request to a host listed
// for propagation has them replaced by the fetch span's: the server
// receives one traceparent, of the client's trace and the fetch span, and
// only the client's tracestate. A tool's header kept beside maiden's would
// let it choose which trace the destination joins the call to.
func TestMutation49ToolTraceHeadersReplaced(t *testing.T) {
	w := newM49TraceWorld(t)
	forged := "00-11111111111111111111111111111111-2222222222222222-01"
	in := fmt.Sprintf(`{"url": "https://api.example.com:%s/", "headers": [["TraceParent", %q], ["TRACESTATE", "evil=1"]]}`, w.port, forged)
	res, err := w.h.Call(context.Background(), Call{Tool: "fetcher", Input: in, TraceParent: m49Parent, TraceState: "vendor=abc"})
	if err != nil || !res.OK {
		t.Fatalf("call: %+v, %v", res, err)
	}
	var fetchSpan string
	for _, s := range w.spans.GetSpans() {
		if s.Name == "maiden.http_fetch" {
			fetchSpan = s.SpanContext.SpanID().String()
		}
	}
	want := "00-" + m49TraceID + "-" + fetchSpan + "-01"
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) != 1 {
		t.Fatalf("%d requests received, want 1", len(w.got))
	}
	if tp := w.got[0]["Traceparent"]; len(tp) != 1 || tp[0] != want {
		t.Errorf("the listed host received traceparent %q; want only maiden's [%q]", tp, want)
	}
	if ts := w.got[0]["Tracestate"]; len(ts) != 1 || ts[0] != "vendor=abc" {
		t.Errorf("the listed host received tracestate %q; want only the client's [\"vendor=abc\"]", ts)
	}
}

// TestMutation49CallSpanStatusIsAKind: a call's span names how it failed
// by kind, never by the message: an input that does not fit the schema
// (whose message quotes the agent's property name) has status "input"; a
// call refused by the host (an unknown tool, whose message names the path
// of agent.toml and the tools it defines) has status "host error". No span
// carries either message's text.
func TestMutation49CallSpanStatusIsAKind(t *testing.T) {
	w := newM49TraceWorld(t)
	ctx := context.Background()
	const marker = "zz-agent-marker-49"
	res, err := w.h.Call(ctx, Call{Tool: "fetcher", Input: `{"url": "https://api.example.com/", "` + marker + `": 1}`})
	if err != nil || res.OK || res.Error == nil || res.Error.Kind != KindInput || !strings.Contains(res.Error.Message, marker) {
		t.Fatalf("a call with an undeclared property: %+v, %v; want kind input naming it", res, err)
	}
	if _, err := w.h.Call(ctx, Call{Tool: "nosuchtool"}); !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), w.dir) {
		t.Fatalf("an unknown tool: %v; want ErrUnknownTool naming %s", err, w.dir)
	}
	var calls []string
	for _, s := range w.spans.GetSpans() {
		text := s.Status.Description
		for _, kv := range s.Attributes {
			text += " " + kv.Value.String()
		}
		for _, ev := range s.Events {
			text += " " + ev.Name
			for _, kv := range ev.Attributes {
				text += " " + kv.Value.String()
			}
		}
		if strings.Contains(text, marker) || strings.Contains(text, w.dir) {
			t.Errorf("span %s carries a message's text: %q", s.Name, text)
		}
		if s.Name == "maiden.call" {
			calls = append(calls, s.Status.Description)
		}
	}
	if len(calls) != 2 || calls[0] != "input" || calls[1] != "host error" {
		t.Errorf("maiden.call statuses %q; want [\"input\" \"host error\"]", calls)
	}
}

// TestMutation49MetricsTokenIsNoOperator: a scraper's metrics token reads
// /metrics (AuthenticateMetrics) but never signs in as its operator
// (AuthenticateOperator, which the inbox and deciding approvals take); an
// agent's token is neither; and once its operator is removed from
// agent.toml (another operator still declared), the metrics token and the
// operator's own token read /metrics no more.
func TestMutation49MetricsTokenIsNoOperator(t *testing.T) {
	ctx := context.Background()
	write, h, st := operatorsHost(t)
	scrape, _, err := st.MintOperatorToken(ctx, "alice", admin.RoleMetrics)
	if err != nil {
		t.Fatal(err)
	}
	human, _, err := st.MintOperatorToken(ctx, "alice", admin.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	agentTok, _, err := st.MintToken(ctx, "research")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.AuthenticateOperator(ctx, scrape); !errors.Is(err, ErrBadOperatorToken) || n != "" {
		t.Errorf("AuthenticateOperator(alice's metrics token) = %q, %v; want ErrBadOperatorToken", n, err)
	}
	for _, tok := range []string{scrape, human} {
		if n, err := h.AuthenticateMetrics(ctx, tok); err != nil || n != "alice" {
			t.Errorf("AuthenticateMetrics(alice's token) = %q, %v; want alice", n, err)
		}
	}
	if n, err := h.AuthenticateMetrics(ctx, agentTok); !errors.Is(err, ErrBadMetricsToken) || n != "" {
		t.Errorf("AuthenticateMetrics(an agent's token) = %q, %v; want ErrBadMetricsToken", n, err)
	}
	h.SetConfig(write("\n[operators.bob]\n"))
	for _, tok := range []string{scrape, human} {
		if n, err := h.AuthenticateMetrics(ctx, tok); !errors.Is(err, ErrBadMetricsToken) || n != "" {
			t.Errorf("AuthenticateMetrics(a token of alice, removed from agent.toml) = %q, %v; want ErrBadMetricsToken", n, err)
		}
	}
}

// TestMutation49ImportTableIsNoTool: an [mcp.NAME] table is an import, not a
// tool: a call naming NAME itself is ErrUnknownTool, with no [agents] as
// for an agent bound to the import (its tools are NAME.TOOL), and nothing
// of the import is started for it.
func TestMutation49ImportTableIsNoTool(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, body, agent string }{
		{"implicit", "version = 1\n[mcp.local]\ncommand = [\"/bin/true\"]\n", ""},
		{"bound", "version = 1\n[mcp.local]\ncommand = [\"/bin/true\"]\n[agents.a]\ntools = [\"local\"]\ngrants = [\"tool:invoke local --...\"]\n", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			h, _ := testHost(t, dir, tc.body, &Options{Isolation: api.InProcess, CacheDir: "off", StatePath: filepath.Join(dir, "state.db")})
			defer h.Close(ctx)
			res, err := h.Call(ctx, Call{Agent: tc.agent, Tool: "local", Input: `{}`})
			if !errors.Is(err, ErrUnknownTool) {
				t.Errorf("a call of the import table [mcp.local] itself: %+v, %v; want ErrUnknownTool", res, err)
			}
		})
	}
}

// TestMutation49ToolsForShowsTheBinding: ToolsFor lists to an agent only the
// tools bound to it, with the policy its binding narrows to (its own
// http_allow, no secrets), and to an agent agent.toml does not declare
// nothing at all: ErrUnknownAgent, not the whole list.
func TestMutation49ToolsForShowsTheBinding(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[tools.fetcher]
path = %q
http_allow = ["api.example.com", "other.example.com"]
secrets = ["TOKEN"]
[agents.research]
tools = ["echo"]
[agents.narrow]
[agents.narrow.tools.fetcher]
http_allow = ["api.example.com"]
secrets = []
`, testkit.Component(t, "echo"), testkit.Component(t, "js/fetcher")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), StatePath: filepath.Join(dir, "state.db")})
	defer h.Close(ctx)
	names := func(infos []ToolInfo) []string {
		var out []string
		for _, i := range infos {
			out = append(out, i.Name)
		}
		return out
	}
	if infos, err := h.ToolsFor(ctx, "research"); err != nil || len(infos) != 1 || infos[0].Name != "echo" {
		t.Errorf("ToolsFor(research) = %q, %v; want [echo] only", names(infos), err)
	}
	infos, err := h.ToolsFor(ctx, "narrow")
	if err != nil || len(infos) != 1 || infos[0].Name != "fetcher" {
		t.Fatalf("ToolsFor(narrow) = %q, %v; want [fetcher] only", names(infos), err)
	}
	if p := infos[0].Policy; len(p.HTTPAllow) != 1 || p.HTTPAllow[0] != "api.example.com" || len(p.Secrets) != 0 {
		t.Errorf("narrow's fetcher shows http_allow %q, secrets %q; want its binding's [api.example.com] and none", p.HTTPAllow, p.Secrets)
	}
	if infos, err := h.ToolsFor(ctx, "mallory"); !errors.Is(err, ErrUnknownAgent) || len(infos) != 0 {
		t.Errorf("ToolsFor(mallory, not declared) = %q, %v; want ErrUnknownAgent", names(infos), err)
	}
}

// TestMutation49OperatorStoreFailureIsErrState: a store that cannot answer
// (its operator_tokens table gone under the Host: anyone who can write the
// file) is ErrState for AuthenticateOperator, as its doc comment promises,
// not ErrBadOperatorToken: a front end answers "try again", not "your
// token is bad", and the operator is not told to mint another.
func TestMutation49OperatorStoreFailureIsErrState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "version = 1\n\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\n\n[agents.research]\ntools = [\"echo\"]\n\n[operators.alice]\n")
	state := filepath.Join(dir, "state.db")
	h, err := New(cfg, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), StatePath: state})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	st, err := admin.Open(ctx, cfg, &admin.Options{State: state})
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := st.MintOperatorToken(ctx, "alice", admin.RoleOperator)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.AuthenticateOperator(ctx, tok); err != nil || n != "alice" {
		t.Fatalf("alice's token: %q, %v", n, err)
	}
	db, err := sql.Open("sqlite", state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `DROP TABLE operator_tokens`); err != nil {
		t.Fatal(err)
	}
	if n, err := h.AuthenticateOperator(ctx, tok); !errors.Is(err, ErrState) || errors.Is(err, ErrBadOperatorToken) || n != "" {
		t.Errorf("AuthenticateOperator with the store unable to answer = %q, %v; want ErrState", n, err)
	}
}

// TestMutation49ToolsListUnusableSchemas: Tools lists a tool whose input
// schema, or whose declared output schema, is unusable with an Error of
// kind invalid, and Check reports both: an agent's front end never
// offers as usable a tool whose calls are all refused.
func TestMutation49ToolsListUnusableSchemas(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf("version = 1\n[tools.badschema]\npath = %q\n[tools.badoutschema]\npath = %q\n",
		testkit.Component(t, "badschema"), testkit.Component(t, "badoutschema")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	infos, err := h.Tools(ctx)
	if err != nil || len(infos) != 2 {
		t.Fatalf("Tools = %+v, %v", infos, err)
	}
	for _, info := range infos {
		if info.Error == nil || info.Error.Kind != KindInvalid {
			t.Errorf("Tools lists %s with Error %+v; want kind invalid (its schema is unusable)", info.Name, info.Error)
		}
	}
	reps, err := h.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.Err == nil {
			t.Errorf("Check reports %s as loaded without error; want its schema's problem", r.Tool)
		}
	}
}

// TestMutation49NoCallAfterClose: once Close began, no call of any kind is
// made: a built-in (which runs in no worker and needs no engine) and a
// WebAssembly tool are ErrClosed, through Call as through CallBuiltin, and
// Tools is ErrClosed too.
func TestMutation49NoCallAfterClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n[agents.lead]\ntools = [\"cards_list\", \"echo\"]\ngrants = [\"card:inspect *\", \"tool:invoke echo --...\"]\n",
		testkit.Component(t, "echo")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), StatePath: filepath.Join(dir, "state.db")})
	list := Call{Agent: "lead", Tool: "cards_list", Input: `{}`}
	if res, err := h.CallBuiltin(ctx, list); err != nil || !res.OK {
		t.Fatalf("cards_list before Close: %+v, %v", res, err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := h.Call(ctx, list); !errors.Is(err, ErrClosed) {
		t.Errorf("Call(cards_list) after Close: %+v, %v; want ErrClosed", res, err)
	}
	if res, err := h.CallBuiltin(ctx, list); !errors.Is(err, ErrClosed) {
		t.Errorf("CallBuiltin(cards_list) after Close: %+v, %v; want ErrClosed", res, err)
	}
	if res, err := h.Call(ctx, Call{Agent: "lead", Tool: "echo", Input: `{"message":"hi"}`}); !errors.Is(err, ErrClosed) {
		t.Errorf("Call(echo) after Close: %+v, %v; want ErrClosed", res, err)
	}
	if infos, err := h.Tools(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Tools after Close: %+v, %v; want ErrClosed", infos, err)
	}
}

// TestMutation49BindingNarrowsEgressAlone: a binding that narrows only the
// tool's http_allow, or only its secrets, has the call's egress policy
// compiled from it: the host it leaves out is refused, the secret it
// leaves out is never attached, though the tool's own policy allows both.
func TestMutation49BindingNarrowsEgressAlone(t *testing.T) {
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "auth=%v", r.Header.Get("Authorization") != "")
	}), "api.example.com", "other.example.com")
	u, _ := url.Parse(srv.URL)
	dir := t.TempDir()
	grants := `grants = ["tool:invoke fetcher --...", "network:connect *", "secret:use TOKEN"]`
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com", "other.example.com"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]
secrets = ["TOKEN"]
[agents.hosts]
%s
[agents.hosts.tools.fetcher]
http_allow = ["api.example.com"]
[agents.nosecret]
%s
[agents.nosecret.tools.fetcher]
secrets = []
`, testkit.Component(t, "js/fetcher"), u.Port(), ca, grants, grants), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t),
		Resolver: testkit.Loopback("api.example.com", "other.example.com"), StatePath: filepath.Join(dir, "state.db"),
		LookupSecret: func(name string) (string, bool) { return "tok-value-49", name == "TOKEN" }})
	ctx := context.Background()
	defer h.Close(ctx)
	fetch := func(agent, host, cred string) Result {
		t.Helper()
		in := fmt.Sprintf(`{"url": "https://%s:%s/"}`, host, u.Port())
		if cred != "" {
			in = fmt.Sprintf(`{"url": "https://%s:%s/", "credential": %q}`, host, u.Port(), cred)
		}
		res, err := h.Call(ctx, Call{Agent: agent, Tool: "fetcher", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := fetch("hosts", "api.example.com", "TOKEN"); !res.OK || !strings.Contains(res.Output, "auth=true") {
		t.Fatalf("hosts to api.example.com with TOKEN: %+v", res)
	}
	if res := fetch("hosts", "other.example.com", "TOKEN"); res.OK || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, "http_allow") {
		t.Errorf("hosts to other.example.com (its binding's http_allow leaves it out): %+v; want denied by http_allow", res)
	}
	if res := fetch("nosecret", "other.example.com", ""); !res.OK {
		t.Fatalf("nosecret to other.example.com without a credential: %+v", res)
	}
	if res := fetch("nosecret", "api.example.com", "TOKEN"); res.OK || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, "TOKEN") {
		t.Errorf("nosecret with TOKEN (its binding's secrets are none): %+v; want denied naming TOKEN", res)
	}
}

// TestMutation49RevealedHostNotInFetchRecord: a tool that reveals a key and
// writes it as the host of its request (a name its http_allow admits, no
// card of its agent does) leaves no copy of the value in the call's fetch
// record: not as the record's host, nor in the text of the cards'
// decisions about it (target, reason, fix), which quote the host.
// testdata/tools/js/revealplace.js is the tool.
func TestMutation49RevealedHostNotInFetchRecord(t *testing.T) {
	const value = "sk-VALUE-49c0ffee"
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.rp]
path = %q
http_allow = ["api.example.com", "*.example.com"]
secrets = ["KEY"]
reveal = ["KEY"]
[agents.a]
tools = ["rp"]
grants = ["tool:invoke rp --...", "network:connect api.example.com:443", "secret:reveal KEY"]
`, testkit.Component(t, "js/revealplace")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t),
		Resolver: testkit.Loopback("api.example.com"), StatePath: filepath.Join(dir, "state.db"),
		LookupSecret: func(name string) (string, bool) { return value, name == "KEY" }})
	ctx := context.Background()
	defer h.Close(ctx)
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "rp", Input: `{"key": {"$secret": "KEY"}, "url": "https://{v}.example.com/"}`})
	if err != nil || res.OK || res.Error.Kind != KindDenied {
		t.Fatalf("call: %+v, %v; want denied (no card allows the host)", res, err)
	}
	recs, err := auditTail(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	var fetch []string
	for _, r := range recs {
		if r.Kind != "fetch" {
			continue
		}
		fetch = append(fetch, string(r.Body))
		if strings.Contains(strings.ToLower(string(r.Body)), strings.ToLower(value)) {
			t.Errorf("the fetch record carries the revealed value: %s", r.Body)
		}
	}
	if len(fetch) != 1 || !strings.Contains(fetch[0], `"decisions"`) || !strings.Contains(fetch[0], "[REDACTED:KEY]") {
		t.Errorf("fetch records %q; want one, with the cards' decisions, naming [REDACTED:KEY]", fetch)
	}
}
