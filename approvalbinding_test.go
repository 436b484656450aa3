package maiden_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bindingFixture is a loopback HTTPS server that counts requests and
// remembers the Authorization it saw, and the pieces of an agent.toml
// whose tool t is first a component with no network (logger) and later
// a fetcher with http_allow and a secret.
type bindingFixture struct {
	hits   atomic.Int32
	auth   atomic.Value
	port   string
	ca     string
	dir    string
	secret string
}

func newBindingFixture(t *testing.T) *bindingFixture {
	f := &bindingFixture{dir: t.TempDir(), secret: "tok-" + strings.Repeat("9", 12)}
	f.auth.Store("")
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		f.auth.Store(r.Header.Get("Authorization"))
		fmt.Fprint(w, "private data")
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	f.port, f.ca = u.Port(), ca
	return f
}

const bindingHead = `version = 1
[[middleware]]
use = "approve"
reason = "every call of t needs a human"
[agents.a]
tools = ["t"]
grants = ["tool:invoke t --...", "network:connect *", "secret:use *"]
`

// config writes agent.toml with tool t as body describes it (a TOML table
// body after [tools.t]) and loads it.
func (f *bindingFixture) config(t *testing.T, tool string) *config.Config {
	t.Helper()
	return writeConfigAt(t, filepath.Join(f.dir, "agent.toml"), bindingHead+"[tools.t]\n"+tool, nil...)
}

// noNetwork is t as a component that reaches nothing.
func (f *bindingFixture) noNetwork(t *testing.T) string {
	return fmt.Sprintf("path = %q\n", testkit.Component(t, "logger"))
}

// credentialed is t as a fetcher that may reach api.example.com with the
// secret TOKEN (secrets lists it unless noSecret).
func (f *bindingFixture) credentialed(t *testing.T, noSecret bool) string {
	s := fmt.Sprintf("path = %q\nhttp_allow = [\"api.example.com\"]\nhttp_ports = [%s]\nhttp_allow_cidrs = [\"127.0.0.0/8\"]\nhttp_ca_files = [%q]\ntimeout_ms = 20000\n",
		testkit.Component(t, "js/fetcher"), f.port, f.ca)
	if !noSecret {
		s += "secrets = [\"TOKEN\"]\n"
	}
	return s
}

func (f *bindingFixture) host(t *testing.T, cfg *config.Config) *maiden.Host {
	t.Helper()
	h, err := maiden.New(cfg, &maiden.Options{
		Isolation: maiden.InProcess,
		CacheDir:  testkit.CompileCache(t), Resolver: testkit.Loopback("api.example.com"), ApprovalPoll: 20 * time.Millisecond,
		LookupSecret: func(name string) (string, bool) { return f.secret, name == "TOKEN" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// input is the one call this test makes: a credentialed fetch.
func (f *bindingFixture) input() string {
	return `{"url":"https://api.example.com:` + f.port + `/private","credential":"TOKEN"}`
}

// callPending makes the call without waiting and wants it pending: it
// returns the request's ID.
func (f *bindingFixture) callPending(t *testing.T, h *maiden.Host) (string, string) {
	t.Helper()
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "t", Input: f.input(), ApprovalWait: -1})
	if res.OK || res.Error == nil || res.Error.Kind != maiden.KindPending || res.Error.Approval == "" {
		t.Fatalf("want pending, got %+v %+v", res, res.Error)
	}
	return res.Error.Approval, res.Error.Message
}

func approvalOf(t *testing.T, h *maiden.Host, id string) maiden.ApprovalRequest {
	t.Helper()
	r, err := h.Approval(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestApprovalDoesNotOutliveToolChange (issue 22, 11): a human approved
// tool t when it was a component with no network; agent.toml is then
// changed (SetConfig, as a reload does) so that t is another component
// with http_allow and a secret. The same input by the same agent must not
// run on the old approval: it is pending under a new request, which shows
// the human the new code and policy and says why it asks again; the old
// approval stays approved (unconsumed) and nothing reached the server.
// Approved anew, the call runs once with the credential (the test can
// pass).
func TestApprovalDoesNotOutliveToolChange(t *testing.T) {
	t.Parallel()
	f := newBindingFixture(t)
	h := f.host(t, f.config(t, f.noNetwork(t)))
	ctx := context.Background()
	old, _ := f.callPending(t, h)
	before := approvalOf(t, h, old)
	if before.Policy == nil || before.Policy.Network || len(before.Hosts) != 0 || len(before.Secrets) != 0 || !strings.HasPrefix(before.ToolDigest, "sha256:") {
		t.Fatalf("the first request shows %+v (policy %+v)", before, before.Policy)
	}
	if _, err := h.Decide(ctx, old, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}

	h.SetConfig(f.config(t, f.credentialed(t, false)))
	id, msg := f.callPending(t, h)
	if id == old {
		t.Fatalf("the call after the change waits on the old request %s", old)
	}
	if n := f.hits.Load(); n != 0 {
		t.Fatalf("the changed tool ran on the old approval: %d requests reached the server (Authorization %q)", n, f.auth.Load())
	}
	if !strings.Contains(msg, "the tool's code changed") || !strings.Contains(msg, old) {
		t.Errorf("pending message %q does not say the tool changed since %s", msg, old)
	}
	if r := approvalOf(t, h, old); r.State != "approved" {
		t.Errorf("old request %s is %s, want approved (not consumed by a call it did not approve)", old, r.State)
	}
	now := approvalOf(t, h, id)
	if now.State != "pending" || now.Policy == nil || !now.Policy.Network || strings.Join(now.Hosts, ",") != "api.example.com" ||
		strings.Join(now.Secrets, ",") != "TOKEN" || now.ToolDigest == before.ToolDigest || !strings.HasPrefix(now.ToolDigest, "sha256:") ||
		!strings.Contains(now.Reason, "asks again") {
		t.Fatalf("the new request %+v (policy %+v): want pending, showing the network, the host, the secret and the new code", now, now.Policy)
	}
	pend, err := h.Pending(ctx)
	if err != nil || len(pend) != 1 || pend[0].ID != id {
		t.Fatalf("Pending = %+v, %v; want only %s", pend, err, id)
	}
	// Repeating still waits on the new request, not the old approval.
	if again, _ := f.callPending(t, h); again != id {
		t.Fatalf("repeated call waits on %s, want %s", again, id)
	}

	// The human approves what the tool is now: it runs, once.
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "t", Input: f.input(), ApprovalWait: -1})
	if !res.OK || f.hits.Load() != 1 || f.auth.Load() != "Bearer "+f.secret {
		t.Fatalf("approved for the new tool: %+v %+v, %d requests, Authorization %q", res, res.Error, f.hits.Load(), f.auth.Load())
	}
	if r := approvalOf(t, h, old); r.State != "approved" {
		t.Errorf("old request %s is %s after the new one ran", old, r.State)
	}
}

// TestApprovalAsksAgainWhenPolicyChanges: the same component, restarted
// (a new Host on the same store) with a secret added to its policy: the
// approval given when it had none releases nothing; the new request shows
// the secret and says the policy changed.
func TestApprovalAsksAgainWhenPolicyChanges(t *testing.T) {
	t.Parallel()
	f := newBindingFixture(t)
	h := f.host(t, f.config(t, f.credentialed(t, true)))
	ctx := context.Background()
	old, _ := f.callPending(t, h)
	if r := approvalOf(t, h, old); len(r.Secrets) != 0 || len(r.Hosts) != 1 {
		t.Fatalf("first request %+v", r)
	}
	if _, err := h.Decide(ctx, old, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	h.Close(ctx)

	h = f.host(t, f.config(t, f.credentialed(t, false)))
	id, msg := f.callPending(t, h)
	if id == old || !strings.Contains(msg, "the tool's policy changed") {
		t.Fatalf("after the restart: request %s (old %s), message %q", id, old, msg)
	}
	if n := f.hits.Load(); n != 0 {
		t.Fatalf("ran on the old approval under the new policy: %d requests", n)
	}
	now := approvalOf(t, h, id)
	if now.State != "pending" || strings.Join(now.Secrets, ",") != "TOKEN" || now.ToolDigest != approvalOf(t, h, old).ToolDigest {
		t.Fatalf("new request %+v: want pending, the secret shown, the same code", now)
	}
	if r := approvalOf(t, h, old); r.State != "approved" {
		t.Errorf("old request is %s", r.State)
	}
}

// TestAlwaysCardBoundToTool: an approve:always card minted from an
// approval holds for the tool and policy the human saw: it passes the
// same call while t is unchanged, and after t becomes a credentialed
// fetcher the call is pending under a new request (nothing sent).
func TestAlwaysCardBoundToTool(t *testing.T) {
	t.Parallel()
	f := newBindingFixture(t)
	h := f.host(t, f.config(t, f.noNetwork(t)))
	ctx := context.Background()
	first, _ := f.callPending(t, h)
	if _, err := h.Decide(ctx, first, maiden.Answer{Approve: true, Always: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "t", Input: f.input(), ApprovalWait: -1}); !res.OK || res.Output != "logged" {
			t.Fatalf("under the always-card, t unchanged: %+v %+v", res, res.Error)
		}
	}
	h.SetConfig(f.config(t, f.credentialed(t, false)))
	id, _ := f.callPending(t, h)
	if id == first || f.hits.Load() != 0 {
		t.Fatalf("after the change: request %s (first %s), %d requests sent", id, first, f.hits.Load())
	}
	if r := approvalOf(t, h, id); r.State != "pending" || !r.Policy.Network {
		t.Fatalf("new request %+v", r)
	}
}

// TestApprovalOfInputAKeepsBPending: an approval of input A does not
// release input B of the same agent, tool and rule: B stays pending under
// its own request while A's approval is untouched, and A then runs.
func TestApprovalOfInputAKeepsBPending(t *testing.T) {
	t.Parallel()
	h := approvalHost(t, "")
	ctx := context.Background()
	call := func(msg string) maiden.Result {
		return mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"` + msg + `"}`, ApprovalWait: -1})
	}
	resA, resB := call("pay A"), call("pay B")
	wantKind(t, resA, maiden.KindPending, "")
	wantKind(t, resB, maiden.KindPending, "")
	idA, idB := resA.Error.Approval, resB.Error.Approval
	if idA == idB {
		t.Fatalf("A and B share request %s", idA)
	}
	if _, err := h.Decide(ctx, idA, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	res := call("pay B")
	wantKind(t, res, maiden.KindPending, idB)
	if res.Error.Approval != idB {
		t.Fatalf("B after A's approval: request %q, want %s", res.Error.Approval, idB)
	}
	if r := approvalOf(t, h, idB); r.State != "pending" {
		t.Fatalf("B's request is %s, want pending", r.State)
	}
	if r := approvalOf(t, h, idA); r.State != "approved" {
		t.Fatalf("A's request is %s after B's call, want approved", r.State)
	}
	if res := call("pay A"); !res.OK || !strings.Contains(res.Output, "pay A") {
		t.Fatalf("A after its approval: %+v %+v", res, res.Error)
	}
}

// TestApprovalAsksAgainWhenComponentReplaced: the configuration stays, the
// component's file at the same path is replaced by another component (a
// rebuild): the approval given for the old bytes releases nothing.
func TestApprovalAsksAgainWhenComponentReplaced(t *testing.T) {
	t.Parallel()
	f := newBindingFixture(t)
	path := testkit.CopyToTemp(t, testkit.Component(t, "logger"))
	h := f.host(t, f.config(t, fmt.Sprintf("path = %q\n", path)))
	ctx := context.Background()
	old, _ := f.callPending(t, h)
	if _, err := h.Decide(ctx, old, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(testkit.Component(t, "toolerr"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, other, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	id, msg := f.callPending(t, h)
	if id == old || !strings.Contains(msg, "the tool's code changed") {
		t.Fatalf("after the file was replaced: request %s (old %s), %q", id, old, msg)
	}
	if r := approvalOf(t, h, old); r.State != "approved" {
		t.Errorf("old request is %s", r.State)
	}
}

// TestBuiltinApprovalConsumedOnce: a built-in held by an approve rule runs
// once per approval, like a tool: the approval is consumed with its start,
// and the same call repeated asks again.
func TestBuiltinApprovalConsumedOnce(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
when = 'tool == "cards_list"'
[agents.a]
tools = ["cards_list"]
grants = ["card:inspect *"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func() maiden.Result {
		res, err := h.CallBuiltin(ctx, maiden.Call{Agent: "a", Tool: "cards_list", Input: `{}`, ApprovalWait: -1})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := call()
	wantKind(t, res, maiden.KindPending, "")
	id := res.Error.Approval
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	if res := call(); !res.OK {
		t.Fatalf("approved built-in: %+v", res.Error)
	}
	if r := approvalOf(t, h, id); r.State != "done" {
		t.Errorf("the approval is %s after its run, want done", r.State)
	}
	res = call()
	wantKind(t, res, maiden.KindPending, "")
	if res.Error.Approval == id {
		t.Fatalf("the repeated built-in call waits on the used approval %s", id)
	}
}

// TestWrappedCLIApprovalBoundToCommand: a wrapped CLI's approval holds for
// its program and command configuration and its policy: after a reload
// that changes its environment (code identity) the same call is pending
// under a new request; after one that widens its paths (policy), again.
func TestWrappedCLIApprovalBoundToCommand(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	root := testkit.RepoRoot(t)
	conf := func(env, extra string) string {
		return `version = 1
[tools.echo]
path = %q
[clis.git]
path = "/usr/bin/git"
command_file = "` + filepath.Join(root, "examples/git/git.command.json") + `"
dir = "` + repo + `"
read_paths = ["` + repo + `"]
env = ["GIT_PAGER=cat", "HOME=` + repo + `", "GIT_CONFIG_NOSYSTEM=1"` + env + `]
` + extra + `
[[middleware]]
use = "approve"
[agents.dev]
tools = ["git"]
grants = ["tool:invoke git log --max-count=*"]
`
	}
	h := newHostWith(t, conf("", ""), maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func() maiden.Result {
		return mustCall(t, h, maiden.Call{Agent: "dev", Tool: "git", Input: `{"command":"log","max-count":1}`, ApprovalWait: -1})
	}
	res := call()
	wantKind(t, res, maiden.KindPending, "")
	first := res.Error.Approval
	if r := approvalOf(t, h, first); !strings.HasPrefix(r.ToolDigest, "cli:") || r.Policy == nil || strings.Join(r.Policy.ReadPaths, ",") != repo {
		t.Fatalf("the request shows %+v (policy %+v)", r, r.Policy)
	}
	if _, err := h.Decide(ctx, first, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}

	h.SetConfig(writeConfig(t, conf(`, "GIT_EXEC_PATH=`+repo+`"`, ""), "echo"))
	res = call()
	wantKind(t, res, maiden.KindPending, "the tool's code changed")
	second := res.Error.Approval
	if second == first || approvalOf(t, h, first).State != "approved" {
		t.Fatalf("after the environment changed: request %s (first %s, now %s)", second, first, approvalOf(t, h, first).State)
	}
	if _, err := h.Decide(ctx, second, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}

	h.SetConfig(writeConfig(t, conf(`, "GIT_EXEC_PATH=`+repo+`"`, `write_paths = ["`+repo+`"]`), "echo"))
	res = call()
	wantKind(t, res, maiden.KindPending, "the tool's policy changed")
	third := res.Error.Approval
	if third == second || approvalOf(t, h, second).State != "approved" {
		t.Fatalf("after the paths widened: request %s (second %s, now %s)", third, second, approvalOf(t, h, second).State)
	}
	if r := approvalOf(t, h, third); strings.Join(r.Policy.WritePaths, ",") != repo {
		t.Fatalf("the third request shows write paths %v", r.Policy.WritePaths)
	}
}

type addC struct {
	A int `json:"a"`
	B int `json:"b"`
	C int `json:"c,omitempty"`
}

// TestImportedToolApprovalBoundToUpstream: an imported tool's approval
// holds for its upstream and the input schema the upstream reported: after
// a reload points [mcp.calc] at another server whose add takes another
// schema, the same call is pending under a new request and nothing reaches
// the new server.
func TestImportedToolApprovalBoundToUpstream(t *testing.T) {
	t.Parallel()
	serve := func(calls *atomic.Int32, wider bool) string {
		srv := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
		if wider {
			mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "adds"},
				func(ctx context.Context, req *mcp.CallToolRequest, in addC) (*mcp.CallToolResult, addOut, error) {
					calls.Add(1)
					return nil, addOut{Sum: in.A + in.B + in.C}, nil
				})
		} else {
			mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "adds"},
				func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
					calls.Add(1)
					return nil, addOut{Sum: in.A + in.B}, nil
				})
		}
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	var callsA, callsB atomic.Int32
	urlA, urlB := serve(&callsA, false), serve(&callsB, true)
	conf := func(u string) string {
		return `version = 1
[tools.echo]
path = %q
[mcp.calc]
url = "` + u + `"
accept_new_tools = true
[[middleware]]
use = "approve"
[agents.a]
tools = ["calc"]
grants = ["tool:invoke calc.add --..."]
`
	}
	h := newHostWith(t, conf(urlA), maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func() maiden.Result {
		return mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":1,"b":2}`, ApprovalWait: -1})
	}
	res := call()
	wantKind(t, res, maiden.KindPending, "")
	first := res.Error.Approval
	r := approvalOf(t, h, first)
	if !strings.HasPrefix(r.ToolDigest, "mcp:") || r.Policy == nil || r.Policy.Upstream != urlA {
		t.Fatalf("the request shows %+v (policy %+v)", r, r.Policy)
	}
	if _, err := h.Decide(ctx, first, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	h.SetConfig(writeConfig(t, conf(urlB), "echo"))
	res = call()
	wantKind(t, res, maiden.KindPending, "")
	second := res.Error.Approval
	if second == first || callsB.Load() != 0 || callsA.Load() != 0 {
		t.Fatalf("after the upstream changed: request %s (first %s), calls A %d B %d", second, first, callsA.Load(), callsB.Load())
	}
	if r2 := approvalOf(t, h, second); r2.State != "pending" || r2.ToolDigest == r.ToolDigest || r2.Policy.Upstream != urlB {
		t.Fatalf("the new request %+v (policy %+v)", r2, r2.Policy)
	}
	if approvalOf(t, h, first).State != "approved" {
		t.Fatalf("the first approval is %s", approvalOf(t, h, first).State)
	}
	if _, err := h.Decide(ctx, second, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if res := call(); !res.OK || callsB.Load() != 1 {
		t.Fatalf("approved for the new upstream: %+v, calls B %d", res.Error, callsB.Load())
	}
}

// TestAlwaysCardBoundToCredentialKind (issue 26): how a secret is
// attached is part of what an approval binds. An approve:always card
// given while TOKEN was a bearer token to api.example.com passes the same
// call while that holds; after the operator makes TOKEN another kind (a
// named header), or adds a destination, the call is pending under a new
// request and nothing is sent; back as it was, the card holds again.
func TestAlwaysCardBoundToCredentialKind(t *testing.T) {
	t.Parallel()
	f := newBindingFixture(t)
	bearer := f.credentialed(t, false) + "[secrets.TOKEN]\nhosts = [\"api.example.com\"]\n"
	h := f.host(t, f.config(t, bearer))
	ctx := context.Background()
	first, _ := f.callPending(t, h)
	if _, err := h.Decide(ctx, first, maiden.Answer{Approve: true, Always: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	call := func() maiden.Result {
		return mustCall(t, h, maiden.Call{Agent: "a", Tool: "t", Input: f.input(), ApprovalWait: -1})
	}
	if res := call(); !res.OK || f.auth.Load() != "Bearer "+f.secret {
		t.Fatalf("under the always-card: %+v %+v, Authorization %q", res, res.Error, f.auth.Load())
	}
	sent := f.hits.Load()
	for name, changed := range map[string]string{
		"another kind":          f.credentialed(t, false) + "[secrets.TOKEN]\nhosts = [\"api.example.com\"]\nkind = \"header\"\nheader = \"X-Api-Key\"\n",
		"another destination":   f.credentialed(t, false) + "[secrets.TOKEN]\nhosts = [\"api.example.com\", \"collect.example.net\"]\n",
		"another kind settings": f.credentialed(t, false) + "[secrets.TOKEN]\nhosts = [\"api.example.com\"]\nkind = \"header\"\nheader = \"X-Other\"\n",
	} {
		h.SetConfig(f.config(t, changed))
		id, msg := f.callPending(t, h)
		if id == first || f.hits.Load() != sent {
			t.Fatalf("%s: request %s (first %s), %q, %d requests sent (want %d)", name, id, first, msg, f.hits.Load(), sent)
		}
		if r := approvalOf(t, h, id); r.State != "pending" {
			t.Fatalf("%s: new request %+v", name, r)
		}
	}
	h.SetConfig(f.config(t, bearer))
	if res := call(); !res.OK || f.hits.Load() != sent+1 {
		t.Fatalf("back to the bearer token the human approved: %+v %+v", res, res.Error)
	}
}

// TestFileApprovalBoundToResolvedPath (found by a security review): an
// approval is not bound to the session (a pending call is repeated in a
// new one), so it must be bound to what the call does there. fs_write
// with a relative path writes beneath its session's workspace: a human
// who approved "notes.txt" in session s1 (workspace A) approved writing
// A/notes.txt, not B/notes.txt. The same input in session s2 (workspace B)
// must ask again rather than run on s1's approval, and so must s1's own
// call once an operator resets s1 onto workspace B; the approval still
// runs the call the human saw.
func TestFileApprovalBoundToResolvedPath(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"another session", "the session reset"} {
		t.Run(where, func(t *testing.T) {
			h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
when = 'tool == "fs_write"'
reason = "writes need a human"
[agents.coder]
tools = ["fs_write"]
grants = ["tool:invoke fs_write --...", "fs:write /**"]
`, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond}, "echo")
			ctx := context.Background()
			root := t.TempDir()
			wsA, wsB := filepath.Join(root, "a"), filepath.Join(root, "b")
			for _, d := range []string{wsA, wsB} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			workspace := func(id, ws string) {
				t.Helper()
				if _, err := h.ResetSession(ctx, id, api.Boundary{Kind: api.BoundaryManaged, Filesystem: api.FSWorkspaceWrite, Workspace: ws,
					Entries: []api.BoundaryEntry{}, Deny: []string{}, Protected: []string{}}, "operator:test"); err != nil {
					t.Fatal(err)
				}
			}
			open := func(ws string) string {
				t.Helper()
				id, err := h.OpenSession(ctx, "coder")
				if err != nil {
					t.Fatal(err)
				}
				workspace(id, ws)
				return id
			}
			write := func(session string) maiden.Result {
				return mustCall(t, h, maiden.Call{Agent: "coder", Tool: "fs_write", Session: session, ApprovalWait: -1,
					Input: `{"path":"notes.txt","content":"approved for A"}`})
			}
			s1 := open(wsA)
			res := write(s1)
			wantKind(t, res, maiden.KindPending, "")
			id := res.Error.Approval
			if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
				t.Fatal(err)
			}

			replay := s1
			if where == "another session" {
				replay = open(wsB)
			} else {
				workspace(s1, wsB)
			}
			res = write(replay)
			if _, err := os.Stat(filepath.Join(wsB, "notes.txt")); err == nil {
				t.Fatalf("%s: %s/notes.txt was written on the approval %s given for %s/notes.txt (result ok=%v %+v)", where, wsB, id, wsA, res.OK, res.Error)
			}
			wantKind(t, res, maiden.KindPending, "asks again")
			if res.Error.Approval == id {
				t.Fatalf("%s: the call in workspace B waits on request %s, made for workspace A", where, id)
			}
			if r := approvalOf(t, h, id); r.State != "approved" {
				t.Errorf("request %s is %s after a call it does not cover, want approved (unused)", id, r.State)
			}

			if where == "another session" {
				// The approved call, where it was approved, runs once.
				if res := write(s1); !res.OK {
					t.Fatalf("the approved call in %s: %+v", s1, res.Error)
				}
				if b, err := os.ReadFile(filepath.Join(wsA, "notes.txt")); err != nil || string(b) != "approved for A" {
					t.Fatalf("%s/notes.txt: %q, %v", wsA, b, err)
				}
			}
		})
	}
}
