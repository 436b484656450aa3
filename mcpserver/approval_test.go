package mcpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// approvalTOML serves two tools to agent alice: fetcher, which a human must
// approve (the [[middleware]] rule), and echo, which runs at once. fetcher
// may reach only the counter server, so every execution of it is one hit
// there: the tests count executions, not results.
const approvalTOML = `version = 1

[tools.fetcher]
path = %q
http_allow = ["counter.example"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]

[tools.echo]
path = %q

[[middleware]]
use = "approve"
when = 'tool == "fetcher"'
reason = "fetches from the network"

[agents.alice]
tools = ["fetcher", "echo"]
grants = ["tool:invoke fetcher --...", "tool:invoke echo --...", "network:connect *"]
`

// approvalEnv is a host whose fetcher calls need approval, its MCP server
// over HTTP, and the loopback HTTPS server counting the tool's executions.
type approvalEnv struct {
	*env
	hits    atomic.Int64
	ended   atomic.Int64 // fetcher calls that returned (callObserver)
	counter string       // the URL the tool fetches
	token   string       // alice's bearer token
	srv     *httptest.Server
}

func newApprovalEnv(t *testing.T, o Options) *approvalEnv {
	t.Helper()
	return newApprovalEnvServing(t, o, func(e *approvalEnv) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hit %d", e.hits.Add(1))
		})
	})
}

// newApprovalEnvServing is newApprovalEnv whose counter server is
// counter(e).
func newApprovalEnvServing(t *testing.T, o Options, counter func(e *approvalEnv) http.Handler) *approvalEnv {
	t.Helper()
	e := &approvalEnv{}
	cs, ca := testkit.TLSServer(t, counter(e), "counter.example")
	u, _ := url.Parse(cs.URL)
	e.counter = "https://counter.example:" + u.Port() + "/"
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.toml")
	toml := fmt.Sprintf(approvalTOML, testkit.Component(t, "js/fetcher"), u.Port(), ca, testkit.Component(t, "echo"))
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.db")
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t), StatePath: state, Resolver: testkit.Loopback("counter.example"),
		Observer: callObserver{&e.ended}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 100 * time.Millisecond
	}
	s := New(h, &o)
	if _, err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), state, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.EnsureAgent(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	tok, _, err := st.MintToken(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	e.env = &env{t: t, cfg: path, host: h, server: s}
	e.token = tok
	e.srv = e.httpServer(HTTPOptions{})
	return e
}

// callObserver counts the fetcher calls that returned.
type callObserver struct{ ended *atomic.Int64 }

func (callObserver) Admission(maiden.AdmissionEvent) {}
func (callObserver) Fetch(maiden.FetchEvent)         {}
func (o callObserver) CallDone(ev maiden.CallEvent) {
	if ev.Tool == "fetcher" {
		o.ended.Add(1)
	}
}

// client connects alice over HTTP in the given era.
func (e *approvalEnv) client(era string, opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	cs, err := e.httpClientEra(e.srv.URL, bearer(e.token), era, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

// fetch is the fetcher's arguments for the counter with a query q (calls
// with different q are different calls, each with its own approval).
func (e *approvalEnv) fetch(q string) map[string]any {
	return map[string]any{"url": e.counter + "?" + q}
}

// pendingOne waits until exactly one approval request is pending and
// returns it.
func (e *approvalEnv) pendingOne() maiden.ApprovalRequest {
	e.t.Helper()
	var list []maiden.ApprovalRequest
	waitFor(e.t, 30*time.Second, func() bool {
		var err error
		list, err = e.host.Pending(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		return len(list) > 0
	})
	if len(list) != 1 {
		e.t.Fatalf("%d approval requests pending, want 1: %+v", len(list), list)
	}
	return list[0]
}

func (e *approvalEnv) decide(id string, approve bool, reason string) {
	e.t.Helper()
	if _, err := e.host.Decide(context.Background(), id, maiden.Answer{Approve: approve, By: "operator:test", Reason: reason}); err != nil {
		e.t.Fatalf("deciding %s: %v", id, err)
	}
}

// state is an approval request's state.
func (e *approvalEnv) state(id string) string {
	e.t.Helper()
	a, err := e.host.Approval(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return a.State
}

// callAsync calls a tool in the background.
func callAsync(ctx context.Context, cs *mcp.ClientSession, p *mcp.CallToolParams) <-chan callOutcome {
	ch := make(chan callOutcome, 1)
	go func() {
		r, err := cs.CallTool(ctx, p)
		ch <- callOutcome{r, err}
	}()
	return ch
}

type callOutcome struct {
	res *mcp.CallToolResult
	err error
}

func (o callOutcome) ok(t *testing.T, want string) {
	t.Helper()
	if o.err != nil {
		t.Fatalf("call failed: %v", o.err)
	}
	if o.res.IsError || !strings.Contains(text(o.res), want) {
		t.Fatalf("call result %q (isError %v), want one containing %q", text(o.res), o.res.IsError, want)
	}
}

func recv(t *testing.T, ch <-chan callOutcome, limit time.Duration) callOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(limit):
		t.Fatalf("the call did not return within %v", limit)
		return callOutcome{}
	}
}

// stillWaiting checks that a call has not returned.
func stillWaiting(t *testing.T, ch <-chan callOutcome, d time.Duration) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("the call returned before a human decided: %+v %v", o.res, o.err)
	case <-time.After(d):
	}
}

// checkPending checks a pending result: isError, kind pending, the
// approval's ID and inbox page in _meta and structuredContent.
func checkPending(t *testing.T, r *mcp.CallToolResult, id, inbox string) {
	t.Helper()
	if !r.IsError || r.Meta[MetaErrorKind] != "pending" || !strings.HasPrefix(text(r), "pending: ") {
		t.Fatalf("want a pending result, got isError %v, meta %v, text %q", r.IsError, r.Meta, text(r))
	}
	if r.Meta[MetaApproval] != id {
		t.Errorf("pending result's approval %v, want %s", r.Meta[MetaApproval], id)
	}
	sc, _ := r.StructuredContent.(map[string]any)
	if sc["status"] != "pending" || sc["approval"] != id {
		t.Errorf("structuredContent %v, want status pending and approval %s", r.StructuredContent, id)
	}
	if inbox != "" && (sc["inbox"] != inbox || r.Meta[MetaInbox] != inbox || !strings.Contains(text(r), inbox)) {
		t.Errorf("inbox URL: structured %v, meta %v, text %q; want %s", sc["inbox"], r.Meta[MetaInbox], text(r), inbox)
	}
	if !strings.Contains(text(r), "repeat the same call") {
		t.Errorf("the text does not tell the agent what to do: %q", text(r))
	}
}

// progressLog collects progress messages.
type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *progressLog) handler(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(p.msgs, r.Params.Message)
}

// find returns the first message re matches, and its submatches.
func (p *progressLog) find(re *regexp.Regexp) (string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.msgs {
		if s := re.FindStringSubmatch(m); s != nil {
			return m, s
		}
	}
	return "", nil
}

var waitingRE = regexp.MustCompile(`^waiting for approval (\S+): fetches from the network`)

// TestApprovalProgress: a 2025-11-25 call that needs approval waits,
// telling the client with progress notifications what it waits for; the
// tool does not run until a human approves through the host, then runs
// once; a denial is the human's reason, and nothing runs.
func TestApprovalProgress(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{})
	var prog progressLog
	cs := e.client(legacyProtocol, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler})
	// A call no rule sends to a human runs at once.
	call(t, cs, "echo", map[string]any{"message": "no approval needed"})

	p := &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")}
	p.SetProgressToken("approval-progress")
	ch := callAsync(context.Background(), cs, p)
	var msg string
	var m []string
	waitFor(t, 30*time.Second, func() bool { msg, m = prog.find(waitingRE); return m != nil })
	req := e.pendingOne()
	if m[1] != req.ID || req.Agent != "alice" || req.Tool != "fetcher" || !strings.Contains(req.Rendered, "counter.example") {
		t.Fatalf("progress names %q; pending: %+v", m[1], req)
	}
	if u := e.srv.URL + InboxPath + req.ID; !strings.Contains(msg, u) {
		t.Errorf("the progress message does not name the inbox page %s: %q", u, msg)
	}
	stillWaiting(t, ch, 500*time.Millisecond)
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("the tool ran %d times before approval", n)
	}
	e.decide(req.ID, true, "")
	recv(t, ch, 30*time.Second).ok(t, "200 hit 1")
	if n := e.hits.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times, want 1", n)
	}

	// Denied: the human's reason comes back, and nothing runs.
	ch = callAsync(context.Background(), cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("b")})
	req = e.pendingOne()
	e.decide(req.ID, false, "not on a Friday")
	o := recv(t, ch, 30*time.Second)
	if o.err != nil || !o.res.IsError || o.res.Meta[MetaErrorKind] != "denied" || !strings.Contains(text(o.res), "not on a Friday") {
		t.Fatalf("denied call: %+v %v (text %q)", o.res, o.err, text(o.res))
	}
	if o.res.Meta[MetaApproval] != req.ID {
		t.Errorf("the denial names approval %v, want %s", o.res.Meta[MetaApproval], req.ID)
	}
	if n := e.hits.Load(); n != 1 {
		t.Fatalf("after a denial the tool has run %d times, want 1 (the approved call)", n)
	}
}

// elicitLog records the elicitations a client receives and answers them
// with a fixed action.
type elicitLog struct {
	mu        sync.Mutex
	action    string
	got       []*mcp.ElicitParams
	completed []string
	onElicit  func(*mcp.ElicitParams)
}

func (l *elicitLog) handler(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	l.mu.Lock()
	l.got = append(l.got, r.Params)
	action, f := l.action, l.onElicit
	l.mu.Unlock()
	if f != nil {
		f(r.Params)
	}
	return &mcp.ElicitResult{Action: action}, nil
}

func (l *elicitLog) complete(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.completed = append(l.completed, r.Params.ElicitationID)
}

func (l *elicitLog) set(action string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.action = action
}

func (l *elicitLog) elicitations() []*mcp.ElicitParams {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*mcp.ElicitParams(nil), l.got...)
}

func (l *elicitLog) completions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.completed...)
}

func (l *elicitLog) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ElicitationHandler:         l.handler,
		ElicitationCompleteHandler: l.complete,
		Capabilities:               &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
	}
}

// TestApprovalElicitation: a 2025-11-25 client that declared URL
// elicitation is asked to open the request's inbox page (on this server,
// whatever a client claims in a header); accepting is not approving; the
// completion is notified once a human decided. Declining ends the wait
// (pending) and approves nothing; after a human approves, repeating the
// same call runs it once, and the approval is spent.
func TestApprovalElicitation(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	el := &elicitLog{action: "accept"}
	// A client that says where the inbox is: ignored.
	hc := &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + e.token}, inboxHeader: {"https://evil.example"}}}}
	cs, err := e.httpClientEra(e.srv.URL, hc, legacyProtocol, el.options())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	ch := callAsync(context.Background(), cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	req := e.pendingOne()
	waitFor(t, 30*time.Second, func() bool { return len(el.elicitations()) == 1 })
	got := el.elicitations()[0]
	if want := e.srv.URL + InboxPath + req.ID; got.Mode != "url" || got.URL != want || got.ElicitationID != req.ID {
		t.Fatalf("elicitation mode %q url %q id %q; want url mode, %s, %s", got.Mode, got.URL, got.ElicitationID, want, req.ID)
	}
	// The URL is the inbox's page of the request (behind its login).
	if resp, err := http.Get(got.URL); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		t.Logf("GET %s: %d (after redirects: %s)", got.URL, resp.StatusCode, resp.Request.URL)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.String(), e.srv.URL+"/ui") {
			t.Errorf("the elicitation's URL %s answers %d at %s", got.URL, resp.StatusCode, resp.Request.URL)
		}
	}
	// Accepted on the client; still nothing runs.
	stillWaiting(t, ch, 500*time.Millisecond)
	if n, s := e.hits.Load(), e.state(req.ID); n != 0 || s != "pending" {
		t.Fatalf("after the client accepted: %d executions, request %s; want 0 and pending", n, s)
	}
	if c := el.completions(); len(c) != 0 {
		t.Fatalf("completion notified before a decision: %v", c)
	}
	e.decide(req.ID, true, "")
	recv(t, ch, 30*time.Second).ok(t, "200 hit 1")
	waitFor(t, 10*time.Second, func() bool { return len(el.completions()) == 1 })
	if c := el.completions(); c[0] != req.ID {
		t.Errorf("completion of %v, want %s", c, req.ID)
	}

	// Declined: the call returns pending, nothing is approved or run.
	el.set("decline")
	args := e.fetch("b")
	start := time.Now()
	o := recv(t, callAsync(context.Background(), cs, &mcp.CallToolParams{Name: "fetcher", Arguments: args}), 30*time.Second)
	if o.err != nil {
		t.Fatal(o.err)
	}
	req = e.pendingOne()
	checkPending(t, o.res, req.ID, e.srv.URL+InboxPath+req.ID)
	if !strings.Contains(text(o.res), "declined on the client, which decides nothing") {
		t.Errorf("the pending text does not say the decline decided nothing: %q", text(o.res))
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a declined elicitation did not end the wait (%v)", d)
	}
	if n, s := e.hits.Load(), e.state(req.ID); n != 1 || s != "pending" {
		t.Fatalf("after a decline: %d executions, request %s; want 1 (the first call) and pending", n, s)
	}
	// An operator approves; the agent repeats the call: it runs, once.
	e.decide(req.ID, true, "")
	recv(t, callAsync(context.Background(), cs, &mcp.CallToolParams{Name: "fetcher", Arguments: args}), 30*time.Second).ok(t, "200 hit 2")
	if n := e.hits.Load(); n != 2 {
		t.Fatalf("%d executions, want 2", n)
	}
	// The approval is spent: the same call asks again.
	o = recv(t, callAsync(context.Background(), cs, &mcp.CallToolParams{Name: "fetcher", Arguments: args}), 30*time.Second)
	if o.err != nil || o.res.Meta[MetaErrorKind] != "pending" || o.res.Meta[MetaApproval] == req.ID {
		t.Fatalf("repeating a spent approval: %+v %v", o.res, o.err)
	}
	if n := e.hits.Load(); n != 2 {
		t.Fatalf("a spent approval ran the call again: %d executions", n)
	}
}

// TestApprovalWaitEnds: a call whose wait ends undecided returns pending
// with the request's ID; after a human approves, the same call runs once.
func TestApprovalWaitEnds(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: 300 * time.Millisecond})
	cs := e.client(legacyProtocol, nil)
	args := e.fetch("a")
	r := call(t, cs, "fetcher", args)
	req := e.pendingOne()
	checkPending(t, r, req.ID, e.srv.URL+InboxPath+req.ID)
	if e.hits.Load() != 0 {
		t.Fatal("the tool ran without approval")
	}
	e.decide(req.ID, true, "")
	if r := call(t, cs, "fetcher", args); r.IsError || !strings.Contains(text(r), "200 hit 1") {
		t.Fatalf("the repeated call after approval: %q", text(r))
	}
	if n := e.hits.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}

// TestApprovalCancelWhileWaiting: a client that gives up (or goes away)
// while its call waits gets no result, and an approval given afterwards
// runs nothing by itself; the repeated call runs once.
func TestApprovalCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	cs := e.client(legacyProtocol, nil)
	args := e.fetch("a")
	ctx, cancel := context.WithCancel(context.Background())
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: args})
	req := e.pendingOne()
	cancel()
	if o := recv(t, ch, 10*time.Second); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled call: %+v %v", o.res, o.err)
	}
	// The server's call returns when the cancellation reaches it.
	waitFor(t, 10*time.Second, func() bool { return e.ended.Load() == 1 })
	e.decide(req.ID, true, "")
	time.Sleep(500 * time.Millisecond)
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("an approval of a cancelled call ran it by itself (%d executions)", n)
	}
	if r := call(t, cs, "fetcher", args); r.IsError || !strings.Contains(text(r), "200 hit 1") {
		t.Fatalf("the repeated call after approval: %q", text(r))
	}

	// A client that goes away (its session closed) while its call waits.
	gone := e.client(legacyProtocol, nil)
	args = e.fetch("b")
	ch = callAsync(context.Background(), gone, &mcp.CallToolParams{Name: "fetcher", Arguments: args})
	req = e.pendingOne()
	// The session's end, as a client leaving sends it (the Go SDK's client
	// sends it only once its calls returned).
	start := time.Now()
	del, _ := http.NewRequest(http.MethodDelete, e.srv.URL+Path, nil)
	del.Header.Set("Mcp-Session-Id", gone.ID())
	if resp, err := bearer(e.token).Do(del); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE of the session: %d", resp.StatusCode)
	}
	recv(t, ch, 10*time.Second)
	waitFor(t, 10*time.Second, func() bool { return e.ended.Load() == 3 })
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the call of a closed session waited on for %v", d)
	}
	e.decide(req.ID, true, "")
	time.Sleep(500 * time.Millisecond)
	if n := e.hits.Load(); n != 1 {
		t.Fatalf("an approval of a call whose client left ran it by itself (%d executions, want 1)", n)
	}
	if r := call(t, cs, "fetcher", args); r.IsError || !strings.Contains(text(r), "200 hit 2") {
		t.Fatalf("the repeated call after approval: %q", text(r))
	}
}

// TestApprovalModern: a 2026-07-28 client that declared URL elicitation
// gets an input-required result (no server-to-client request); the Go SDK
// fulfils it with its elicitation handler, where the "human" approves, and
// retries with the request state: the call runs once. A decline, and a
// client without URL elicitation, get the pending result at once; a
// forged or foreign request state counts for nothing.
func TestApprovalModern(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	el := &elicitLog{action: "accept"}
	var approvedBy sync.Once
	el.onElicit = func(p *mcp.ElicitParams) {
		// The human opens the page and approves there.
		approvedBy.Do(func() { e.decide(p.ElicitationID, true, "") })
	}
	cs := e.client(ModernProtocol, el.options())
	r := call(t, cs, "fetcher", e.fetch("a"))
	if r.IsError || !strings.Contains(text(r), "200 hit 1") {
		t.Fatalf("modern call after approval: %q", text(r))
	}
	got := el.elicitations()
	if len(got) != 1 || got[0].Mode != "url" || !strings.HasPrefix(got[0].URL, e.srv.URL+InboxPath) {
		t.Fatalf("elicitations: %+v", got)
	}
	if s := e.state(got[0].ElicitationID); s != "done" {
		t.Errorf("the approval is %s after the call, want done", s)
	}
	if n := e.hits.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}

	// The client's user opens the page (accept) and the human decides a
	// moment later: the retry waits for the decision.
	el.onElicit = func(p *mcp.ElicitParams) {
		go func() {
			time.Sleep(300 * time.Millisecond)
			e.decide(p.ElicitationID, true, "")
		}()
	}
	if r := call(t, cs, "fetcher", e.fetch("b")); r.IsError || !strings.Contains(text(r), "200 hit 2") {
		t.Fatalf("modern call approved during the retry: %q", text(r))
	}

	// Declined: pending at once, nothing approved.
	el.set("decline")
	el.onElicit = nil
	start := time.Now()
	r = call(t, cs, "fetcher", e.fetch("c"))
	req := e.pendingOne()
	checkPending(t, r, req.ID, e.srv.URL+InboxPath+req.ID)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("declined modern call took %v", d)
	}
	if n, s := e.hits.Load(), e.state(req.ID); n != 2 || s != "pending" {
		t.Fatalf("after a decline: %d executions, request %s", n, s)
	}
	e.decide(req.ID, false, "no")

	// Without URL elicitation: the pending result, then approve and repeat.
	plain := e.client(ModernProtocol, nil)
	args := e.fetch("d")
	start = time.Now()
	r = call(t, plain, "fetcher", args)
	req = e.pendingOne()
	checkPending(t, r, req.ID, e.srv.URL+InboxPath+req.ID)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a modern call without elicitation waited %v", d)
	}
	e.decide(req.ID, true, "")
	if r := call(t, plain, "fetcher", args); r.IsError || !strings.Contains(text(r), "200 hit 3") {
		t.Fatalf("repeated modern call after approval: %q", text(r))
	}

	// A request state the server did not issue, or issued for another
	// tool, is no retry: the answer is a fresh input-required result.
	noRetry := e.client(ModernProtocol, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}})
	first, err := noRetry.CallTool(context.Background(), &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("e")})
	if err != nil || !first.NeedsInput() || first.RequestState == "" {
		t.Fatalf("first modern call: %+v %v", first, err)
	}
	id := e.pendingOne().ID
	for _, state := range []string{
		id + ".AAAAAAAAAAAAAAAAAAAAAA",
		e.server.states.seal("alice", "echo", id),
		e.server.states.seal("bob", "fetcher", id),
	} {
		r, err := noRetry.CallTool(context.Background(), &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("e"), RequestState: state,
			InputResponses: mcp.InputResponseMap{approvalInput: &mcp.ElicitResult{Action: "accept"}}})
		if err != nil || !r.NeedsInput() {
			t.Errorf("state %q: %+v %v; want input required again", state, r, err)
		}
	}
	if n := e.hits.Load(); n != 3 {
		t.Fatalf("%d executions, want 3", n)
	}
}

// TestApprovalStdio: over stdio there is no inbox URL unless configured:
// a client with URL elicitation gets progress only; with PublicURL, the
// elicitation points there.
func TestApprovalStdio(t *testing.T) {
	t.Parallel()
	for _, public := range []string{"", "https://maiden.example:8443/"} {
		e := newApprovalEnv(t, Options{ApprovalWait: time.Minute, PublicURL: public})
		el := &elicitLog{action: "accept"}
		var prog progressLog
		opts := el.options()
		opts.ProgressNotificationHandler = prog.handler
		ct, st := mcp.NewInMemoryTransports()
		ss, err := e.server.serverFor(context.Background(), "alice").mcp.Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "0"}, opts).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol})
		if err != nil {
			t.Fatal(err)
		}
		p := &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")}
		p.SetProgressToken(1)
		ch := callAsync(context.Background(), cs, p)
		waitFor(t, 30*time.Second, func() bool { _, m := prog.find(waitingRE); return m != nil })
		req := e.pendingOne()
		if public != "" {
			waitFor(t, 10*time.Second, func() bool { return len(el.elicitations()) == 1 })
			if got, want := el.elicitations()[0].URL, "https://maiden.example:8443"+InboxPath+req.ID; got != want {
				t.Errorf("elicitation URL %q, want %q", got, want)
			}
		}
		e.decide(req.ID, true, "")
		recv(t, ch, 30*time.Second).ok(t, "200 hit 1")
		if public == "" && len(el.elicitations()) != 0 {
			t.Errorf("an elicitation without an inbox URL: %+v", el.elicitations()[0])
		}
		cs.Close()
		ss.Close()
	}
}

// TestInboxBase: the inbox base of an HTTP request is the configured
// public URL, else the request's own address on loopback only.
func TestInboxBase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		public, host string
		local        string // the listener's address the request reached, if known
		tls          bool
		want         string
	}{
		{"", "127.0.0.1:8700", "", false, "http://127.0.0.1:8700"},
		{"", "localhost:8700", "", true, "https://localhost:8700"},
		{"", "[::1]:8700", "", false, "http://[::1]:8700"},
		{"", "maiden.example:8700", "", false, ""},
		{"", "10.0.0.1:8700", "", false, ""},
		{"https://maiden.example/", "10.0.0.1:8700", "", false, "https://maiden.example"},
		// The port is the one the request reached, not one a client's Host
		// names (another local program may answer there: the fourth review).
		{"", "localhost:6666", "127.0.0.1:8700", false, "http://localhost:8700"},
		{"", "127.0.0.1:6666", "127.0.0.1:8700", false, "http://127.0.0.1:8700"},
		{"", "[::1]", "[::1]:8700", false, "http://[::1]:8700"},
		{"", "::1", "", false, "http://[::1]"},
	} {
		s := New(nil, &Options{PublicURL: tc.public})
		r := httptest.NewRequest(http.MethodPost, "http://example.invalid"+Path, nil)
		r.Host = tc.host
		if tc.local != "" {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(tc.local))))
		}
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if got := s.inboxBaseFor(r); got != tc.want {
			t.Errorf("public %q host %q local %q: %q, want %q", tc.public, tc.host, tc.local, got, tc.want)
		}
	}
}

// TestRequestState: a sealed state opens only for the same agent and tool,
// unaltered, under the key that sealed it.
func TestRequestState(t *testing.T) {
	t.Parallel()
	k := newStateKey()
	s := k.seal("alice", "pay", "apr_1.x")
	if id, ok := k.open(s, "alice", "pay"); !ok || id != "apr_1.x" {
		t.Fatalf("open(seal) = %q, %v", id, ok)
	}
	for _, bad := range []struct{ state, agent, tool string }{
		{s, "bob", "pay"}, {s, "alice", "echo"}, {"apr_2" + s[len("apr_1.x"):], "alice", "pay"},
		{s + "A", "alice", "pay"}, {"", "alice", "pay"}, {"apr_1", "alice", "pay"},
		{newStateKey().seal("alice", "pay", "apr_1.x"), "alice", "pay"},
	} {
		if id, ok := k.open(bad.state, bad.agent, bad.tool); ok {
			t.Errorf("open(%q, %s, %s) accepted: %q", bad.state, bad.agent, bad.tool, id)
		}
	}
}

// TestPendingResultOutputSchema: a pending result carries structured
// content only for a tool without an output schema (clients hold
// structuredContent to the tool's outputSchema, error or not); the _meta
// names the request either way.
func TestPendingResultOutputSchema(t *testing.T) {
	t.Parallel()
	s := New(nil, nil)
	as := &agentServer{agent: "alice", served: map[string]servedTool{"typed": {outputSchema: `{"type":"object"}`}, "plain": {}}}
	s.agents["alice"] = as
	for tool, structured := range map[string]bool{"typed": false, "plain": true} {
		r := s.pendingResult(maiden.Call{Agent: "alice", Tool: tool}, "apr_1", "http://127.0.0.1:8700", "waits")
		if (r.StructuredContent != nil) != structured {
			t.Errorf("%s: structuredContent %v", tool, r.StructuredContent)
		}
		if r.Meta[MetaApproval] != "apr_1" || r.Meta[MetaInbox] != "http://127.0.0.1:8700"+InboxPath+"apr_1" || !r.IsError {
			t.Errorf("%s: %+v", tool, r)
		}
	}
	if r := s.pendingResult(maiden.Call{Agent: "alice", Tool: "plain"}, "apr_1", "", "waits"); r.Meta[MetaInbox] != nil || strings.Contains(text(r), "http") {
		t.Errorf("no inbox base, yet a URL: %+v %q", r.Meta, text(r))
	}
}
