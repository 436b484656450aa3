package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The forty-seventh pass (docs/security-tests.md): what a call does once
// it is admitted, held here where only the root package's tests held it.

// TestMutation47JSONInputHeldToSchema: a JSON-input tool's input is
// checked against its schema before it runs; an input the schema refuses
// is kind input, naming the problem, and the tool never sees it.
func TestMutation47JSONInputHeldToSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := testHost(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\n",
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	for _, in := range []string{`{"message":3}`, `{}`} {
		res, err := h.Call(ctx, Call{Tool: "echo", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		if res.OK || res.Error == nil || res.Error.Kind != KindInput {
			t.Errorf("echo (message: a required string) given %s: ok %v, output %q, error %+v; want kind input, the tool not run", in, res.OK, res.Output, res.Error)
		}
	}
	if res, err := h.Call(ctx, Call{Tool: "echo", Input: `{"message":"hi"}`}); err != nil || !res.OK {
		t.Errorf("a fitting input: %v %+v; want it run", err, res.Error)
	}
}

// TestMutation47MiddlewareIsNoTool: a component of the middleware world
// declared under [tools] never runs as a tool: every call is refused, kind
// invalid, saying what it is.
func TestMutation47MiddlewareIsNoTool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := testHost(t, t.TempDir(), "version = 1\n[tools.mw]\npath = \""+testkit.Middleware(t, "pass")+"\"\n",
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	res, err := h.Call(ctx, Call{Tool: "mw", Input: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != KindInvalid || !strings.Contains(res.Error.Message, "not a tool") {
		t.Errorf("a middleware under [tools] called: ok %v, error %+v; want kind invalid, \"... not a tool ...\"", res.OK, res.Error)
	}
}

// TestMutation47BuiltinApprovalPolicy: what a built-in's approval is
// bound to carries every grant of authority its binding makes: web_fetch's
// allowed CIDRs and its proxy secret beside its hosts; a file built-in's
// path, as a write for fs_write and a read for fs_read.
func TestMutation47BuiltinApprovalPolicy(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), `version = 1
[agents.a]
[agents.a.tools.fs_write]
[agents.a.tools.fs_read]
[agents.a.tools.web_fetch]
http_allow = ["api.example.com"]
http_allow_cidrs = ["10.0.0.0/8"]
proxy_secret = "PROXY_KEY"
`)
	policy := func(name, input string, sess *store.Session) ApprovalPolicy {
		t.Helper()
		b := &builtinBackend{name: name, op: builtins[name]}
		inv := &invocation{cfg: cfg, agent: "a", tool: &config.Tool{Name: name, Timeout: config.DefaultTimeout}, sess: sess, call: Call{Tool: name, Agent: "a", Input: input}}
		return b.approvalPolicy(inv)
	}
	p := policy("web_fetch", `{"url":"https://api.example.com/"}`, nil)
	if !slices.Contains(p.Secrets, "PROXY_KEY") {
		t.Errorf("web_fetch's approval policy secrets %q; want its proxy_secret PROXY_KEY among them", p.Secrets)
	}
	if !slices.Equal(p.CIDRs, []string{"10.0.0.0/8"}) {
		t.Errorf("web_fetch's approval policy CIDRs %q; want [10.0.0.0/8]", p.CIDRs)
	}
	sess := &store.Session{Boundary: boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.WorkspaceWrite, Workspace: "/work/ws"}}
	w := policy("fs_write", `{"path":"notes.txt","content":"x"}`, sess)
	if !slices.Equal(w.WritePaths, []string{"/work/ws/notes.txt"}) || len(w.ReadPaths) != 0 {
		t.Errorf("fs_write of notes.txt in workspace /work/ws: approval write paths %q, read paths %q; want write [/work/ws/notes.txt], no read", w.WritePaths, w.ReadPaths)
	}
	r := policy("fs_read", `{"path":"notes.txt"}`, sess)
	if !slices.Equal(r.ReadPaths, []string{"/work/ws/notes.txt"}) || len(r.WritePaths) != 0 {
		t.Errorf("fs_read of notes.txt in workspace /work/ws: approval read paths %q, write paths %q; want read [/work/ws/notes.txt], no write", r.ReadPaths, r.WritePaths)
	}
}

// TestMutation47RecordedDecisions: a record carries an allowed decision
// with the component it was asked about (a replay asks it again), and an
// fs or credential decision whole: a refusal with its rule, an allowed one
// without it.
func TestMutation47RecordedDecisions(t *testing.T) {
	t.Parallel()
	asked := grant.Target{Class: "tool", Name: "echo", Component: "sha256:abc"}
	inv := &invocation{decision: &cards.Decision{Allow: true, Card: "c1", Bound: "lower-positive", Asked: asked, Wallet: "w1"}}
	if d := inv.recordedDecision(); d == nil || d.Component != "sha256:abc" {
		t.Errorf("recordedDecision of an allowed call asked about sha256:abc = %+v; want Component sha256:abc", d)
	}
	deny := cards.Decision{Reason: "no card allows it", Asked: asked}
	if d := recordedWhole(&deny); d == nil || d.Rule == "" || d.Allow {
		t.Errorf("recordedWhole(a refusal) = %+v; want its rule (%q)", d, deny.Rule())
	}
	allow := cards.Decision{Allow: true, Card: "c1", Bound: "lower-positive", Asked: asked}
	if d := recordedWhole(&allow); d == nil || d.Rule != "" || d.Target == "" {
		t.Errorf("recordedWhole(an allowed decision) = %+v; want no rule, its target", d)
	}
}

// TestMutation47ToolSecretsRedacted: the value of a secret the tool's
// policy names never leaves the host in its output, whoever put it there.
func TestMutation47ToolSecretsRedacted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const value = "s3cr3t-value-47-abcdef"
	h, _ := testHost(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\nsecrets = [\"KEY\"]\nhttp_allow = [\"api.example.com\"]\n",
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), LookupSecret: func(name string) (string, bool) {
			return value, name == "KEY"
		}})
	defer h.Close(ctx)
	res, err := h.Call(ctx, Call{Tool: "echo", Input: `{"message":"` + value + `"}`})
	if err != nil || !res.OK {
		t.Fatalf("echo: %v %+v", err, res.Error)
	}
	if strings.Contains(res.Output, value) {
		t.Errorf("echo of its own secret KEY's value: output %q; want the value redacted", res.Output)
	}
}

// TestMutation47RecordedHostCallsExact: a call's http-fetch requests and
// reveals are refused past maxRecordedHostCalls exactly, reveals counted
// as requests are, and a refused one never reaches the host function.
func TestMutation47RecordedHostCallsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hc := &wasmHostCalls{}
	revealed := 0
	hc.revealOnce.Do(func() {
		hc.revealFunc = func(context.Context, string) (string, error) { revealed++; return "v", nil }
	})
	hc.recorded.Store(maxRecordedHostCalls - 1)
	if _, err := hc.reveal(ctx, "h"); err != nil || revealed != 1 {
		t.Errorf("reveal number %d: %v (host function called %d times); want it made", maxRecordedHostCalls, err, revealed)
	}
	if _, err := hc.reveal(ctx, "h"); err == nil || err.Error() != tooManyRecorded || revealed != 1 {
		t.Errorf("reveal number %d: %v (host function called %d times); want %q, unmade", maxRecordedHostCalls+1, err, revealed, tooManyRecorded)
	}
	fetched := 0
	fetch := hc.capRecorded(func(context.Context, sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		fetched++
		return &sandbox.FetchResponse{Status: 200}, nil
	})
	hc.recorded.Store(maxRecordedHostCalls - 1)
	if _, ferr := fetch(ctx, sandbox.FetchRequest{URL: "https://a.example/"}); ferr != nil || fetched != 1 {
		t.Errorf("request number %d: %+v (sent %d); want it sent", maxRecordedHostCalls, ferr, fetched)
	}
	if _, ferr := fetch(ctx, sandbox.FetchRequest{URL: "https://a.example/"}); ferr == nil || ferr.Kind != sandbox.FetchDenied || fetched != 1 {
		t.Errorf("request number %d: %+v (sent %d); want denied unsent", maxRecordedHostCalls+1, ferr, fetched)
	}
}

// TestMutation47UnusableOutputSchema: a tool whose output-schema() does
// not compile never runs: each call is refused, kind invalid, naming
// output-schema(), rather than run with its output held to nothing.
func TestMutation47UnusableOutputSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := testHost(t, t.TempDir(), "version = 1\n[tools.bad]\npath = \""+testkit.Component(t, "badoutschema")+"\"\n",
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	res, err := h.Call(ctx, Call{Tool: "bad", Input: `{"n":1}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != KindInvalid || !strings.HasPrefix(res.Error.Message, "output-schema(): ") {
		t.Errorf("a tool whose output schema does not compile: ok %v, output %q, error %+v; want kind invalid \"output-schema(): ...\", nothing run", res.OK, res.Output, res.Error)
	}
}

// TestMutation47HTTPFetchPaysBytesOut: a WebAssembly tool's http-fetch
// requests pay the bytes_out budget of the card that allowed the call
// before they are sent: a request the budget cannot pay is refused unsent,
// naming the budget (a real TLS server on loopback counts requests).
func TestMutation47HTTPFetchPaysBytesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var hits atomic.Int64
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	}), "api.example.com")
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := testHost(t, t.TempDir(), fmt.Sprintf(`version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]
[agents.a]
tools = ["fetcher"]
grants = [{ grant = "tool:invoke fetcher --...", budget = "bytes_out=1000" }, "network:connect api.example.com"]
`, testkit.Component(t, "js/fetcher"), u.Port(), ca), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), Resolver: testkit.Loopback("api.example.com")})
	defer h.Close(ctx)
	in, _ := json.Marshal(map[string]any{"url": "https://api.example.com:" + u.Port() + "/up", "method": "POST", "body": strings.Repeat("x", 4000)})
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "fetcher", Input: string(in)})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || !strings.Contains(res.Error.Message, "budget-exhausted") || !strings.Contains(res.Error.Message, "bytes_out") || hits.Load() != 0 {
		t.Errorf("a 4,000-byte POST on bytes_out=1000: ok %v, output %q, error %+v, the server reached %d times; want refused unsent, naming the bytes_out budget", res.OK, res.Output, res.Error, hits.Load())
	}
}

// TestMutation47SchemaHashIsWhatIsServed: the hash a schema pin compares
// is oci.SchemaDoc's over what tools/list serves: the description, the
// input schema as served (a command description's JSON Schema projection,
// not its raw text) and the output schema; a version whose output schema
// alone differs hashes otherwise.
func TestMutation47SchemaHashIsWhatIsServed(t *testing.T) {
	t.Parallel()
	desc, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "examples/git/git.command.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := command.Load(desc)
	if err != nil {
		t.Fatal(err)
	}
	s := &toolSchemas{}
	const out = `{"type":"object","properties":{"n":{"type":"integer"}}}`
	li := sandbox.LoadInfo{Digest: "d-cmd"}
	li.Description, li.Schema, li.OutputSchema = "git", string(desc), out
	if want, _ := oci.SchemaDoc("git", spec.JSONSchema(), out); s.hash(li) != want {
		t.Errorf("a command tree's definition hash %s; want %s, the hash of its projection as served", s.hash(li), want)
	}
	a := sandbox.LoadInfo{Digest: "d-a"}
	a.Description, a.Schema, a.OutputSchema = "echo", `{"type":"object"}`, out
	b := a
	b.Digest, b.OutputSchema = "d-b", `{"type":"object","properties":{"n":{"type":"string"}}}`
	if s.hash(a) == s.hash(b) {
		t.Errorf("two versions differing only in their output schema hash alike (%s): a pin would not see the change", s.hash(a))
	}
}

// TestMutation47CardBuiltinNeedsItsVerb: a card built-in bound to an
// agent none of whose cards allows its card:VERB is no tool for it: the
// call is ErrUnknownTool, as for a tool that does not exist, and it is not
// listed; with the grant it runs.
func TestMutation47CardBuiltinNeedsItsVerb(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := testHost(t, t.TempDir(), `version = 1
[agents.bare]
tools = ["cards_list"]
[agents.lead]
tools = ["cards_list"]
grants = ["card:inspect *"]
`, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	res, err := h.CallBuiltin(ctx, Call{Agent: "bare", Tool: "cards_list", Input: `{}`})
	if !errors.Is(err, ErrUnknownTool) {
		t.Errorf("cards_list for an agent with no card:inspect grant: %+v, %v; want ErrUnknownTool", res, err)
	}
	if infos, err := h.BuiltinsFor(ctx, "bare"); err != nil || len(infos) != 0 {
		t.Errorf("BuiltinsFor(bare) = %+v, %v; want none", infos, err)
	}
	if res, err := h.CallBuiltin(ctx, Call{Agent: "lead", Tool: "cards_list", Input: `{}`}); err != nil || !res.OK {
		t.Errorf("cards_list for an agent holding card:inspect *: %+v, %v; want it run", res, err)
	}
}

// TestMutation47FailedCallRecordedFailed: an admitted call whose tool
// failed has its outcome recorded as call-failed with the failure's kind,
// never as call-succeeded.
func TestMutation47FailedCallRecordedFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := testHost(t, t.TempDir(), fmt.Sprintf(`version = 1
[tools.toolerr]
path = %q
[agents.a]
tools = ["toolerr"]
grants = ["tool:invoke toolerr --..."]
`, testkit.Component(t, "toolerr")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "toolerr", Input: `{}`})
	if err != nil || res.OK || res.Error.Kind != KindTool {
		t.Fatalf("toolerr: %+v, %v; want kind tool", res, err)
	}
	recs, err := auditTail(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		if r.Tool == "toolerr" {
			kinds = append(kinds, r.Kind)
		}
	}
	if len(kinds) == 0 || kinds[len(kinds)-1] != AuditCallFailed {
		t.Fatalf("records of a call whose tool failed: %q; want the last %s", kinds, AuditCallFailed)
	}
	if b := string(recs[len(recs)-1].Body); !strings.Contains(b, `"kind":"tool"`) {
		t.Errorf("the call-failed record %s; want the failure's kind tool", b)
	}
}
