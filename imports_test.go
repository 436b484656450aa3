package maiden_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

type leakOut struct {
	Got string `json:"got"`
}

// TestImportedMCPTools: an upstream MCP server (the Go SDK over streamable
// HTTP on loopback, behind a bearer token the host attaches from a secret)
// re-exposed as calc.TOOL: listed for the agent that binds the import,
// each call through its cards (argument-level), the upstream's schema
// (checked by maiden before anything is sent), middleware and the audit
// trail; a call the card denies never reaches the upstream.
func TestImportedMCPTools(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "adds two integers"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			calls.Add(1)
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "leak", Description: "echoes the credential it was sent"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, leakOut, error) {
			got := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
			//lint:ignore SA1019 MCP logging is deprecated upstream (SEP-2577) but still how servers send logs, which maiden relays
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "the header was " + got})
			if in.A < 0 {
				return nil, leakOut{}, fmt.Errorf("refusing, my token is %s", got)
			}
			return nil, leakOut{Got: "I got " + got}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "sub", Description: "subtracts"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			calls.Add(1)
			return nil, addOut{Sum: in.A - in.B}, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var badAuth atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			badAuth.Add(1)
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // after the Host's cleanup (LIFO), which closes its upstream connection

	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.calc]
accept_new_tools = true
url = "`+hs.URL+`"
credential = "CALC_TOKEN"
middleware = [{ use = "validate", check = 'tool != "calc.add" || args.a != 13', message = "13 is unlucky" }]
[[middleware]]
use = "validate"
check = 'tool != "calc.add" || args.a < 1000'
message = "a is too big"
[agents.a]
tools = ["calc"]
grants = ["tool:invoke calc.add --a=* --b=2", "tool:invoke calc.leak --...", "secret:use CALC_TOKEN"]
[agents.b]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return "s3cret", name == "CALC_TOKEN" }}, "echo")
	ctx := context.Background()
	infos, err := h.ToolsFor(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	if strings.Join(names, ",") != "calc.add,calc.leak,calc.sub" {
		t.Fatalf("agent a sees %v", names)
	}
	if infos, _ := h.ToolsFor(ctx, "b"); len(infos) != 1 || infos[0].Name != "echo" {
		t.Fatalf("agent b sees %+v", infos)
	}
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":40,"b":2}`})
	if !res.OK || !strings.Contains(res.Output, `"sum":42`) {
		t.Fatalf("calc.add: %+v %+v", res, res.Error)
	}
	var live []string
	res0 := mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.leak", Input: `{"a":1,"b":1}`, OnLog: func(e maiden.LogEntry) { live = append(live, e.Message) }})
	if strings.Contains(res0.Output, "s3cret") || !strings.Contains(res0.Output, "[REDACTED:CALC_TOKEN]") {
		t.Errorf("the upstream's echo of the credential: %+v", res0)
	}
	if l := fmt.Sprint(live, res0.Logs); strings.Contains(l, "s3cret") || !strings.Contains(l, "[REDACTED:CALC_TOKEN]") {
		t.Errorf("the upstream's log of the credential: live %q, result %+v", live, res0.Logs)
	}
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.leak", Input: `{"a":-1,"b":1}`}); res.OK || strings.Contains(res.Error.Message, "s3cret") {
		t.Errorf("the upstream's error with the credential: %+v", res.Error)
	}
	before := calls.Load()
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":40,"b":3}`}), maiden.KindDenied, "no card")
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.sub", Input: `{"a":40,"b":2}`}), maiden.KindDenied, "no card")
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":"x","b":2}`}), maiden.KindInput, "")
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":5000,"b":2}`}), maiden.KindInput, "a is too big")
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":13,"b":2}`}), maiden.KindInput, "13 is unlucky")
	if n := calls.Load() - before; n != 0 {
		t.Errorf("refused calls reached the upstream %d times", n)
	}
	if _, err := h.Call(ctx, maiden.Call{Agent: "b", Tool: "calc.add", Input: `{"a":1,"b":2}`}); err == nil {
		t.Error("an agent that does not bind the import called its tool")
	}
	if _, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "calc", Input: `{}`}); err == nil {
		t.Error("the import itself was callable as a tool")
	}
	if badAuth.Load() != 0 {
		t.Errorf("%d requests reached the upstream without the credential", badAuth.Load())
	}
	if adm := trail(t, h, "call-admitted"); len(adm) != 3 || adm[0].Tool != "calc.add" {
		t.Errorf("audit: %+v", adm)
	}
}

// TestImportedStdioServerConfined: a stdio MCP server (built from
// testdata/mcpstdio) imported with command = [...] runs under the wrapped
// CLIs' confinement: its tools answer, and it cannot read a file outside
// the import's read_paths.
func TestImportedStdioServerConfined(t *testing.T) {
	t.Parallel()
	bin := buildMCPStdio(t)
	inside, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{inside, outside} {
		if err := os.WriteFile(filepath.Join(d, "f.txt"), []byte("in "+d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.local]
accept_new_tools = true
command = ["`+bin+`"]
read_paths = ["`+inside+`"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	res := mustCall(t, h, maiden.Call{Tool: "local.add", Input: `{"a":1,"b":2}`})
	if !res.OK || !strings.Contains(res.Output, `"sum":3`) {
		t.Fatalf("local.add: %+v %+v", res, res.Error)
	}
	res = mustCall(t, h, maiden.Call{Tool: "local.read", Input: `{"path":"` + filepath.Join(inside, "f.txt") + `"}`})
	if !res.OK || !strings.Contains(res.Output, "in "+inside) {
		t.Fatalf("read inside: %+v %+v", res, res.Error)
	}
	res = mustCall(t, h, maiden.Call{Tool: "local.read", Input: `{"path":"` + filepath.Join(outside, "f.txt") + `"}`})
	if res.OK || !strings.Contains(res.Error.Message, "permission denied") {
		t.Fatalf("read outside read_paths: %+v %+v", res, res.Error)
	}
}

// progressUpstream is an in-process MCP server (the Go SDK over streamable
// HTTP on loopback, behind the bearer token "s3cret-progress") whose tools
// send notifications/progress during a call: "steps" a scripted sequence,
// "flood" n notifications as fast as it can. tokens records, per call,
// whether the call carried a progress token.
func progressUpstream(t *testing.T, n int) (url string, tokens *atomic.Int32) {
	t.Helper()
	tokens = &atomic.Int32{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "prog", Version: "1"}, nil)
	notify := func(ctx context.Context, req *mcp.CallToolRequest, p float64, total float64, msg string) {
		tok := req.Params.GetProgressToken()
		if tok == nil {
			return
		}
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: total, Message: msg})
	}
	type none struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "steps", Description: "reports progress in steps"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, addOut, error) {
			if req.Params.GetProgressToken() != nil {
				tokens.Add(1)
			}
			got := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
			pause := func() { time.Sleep(2 * maiden.ProgressInterval) }
			notify(ctx, req, 1, 4, "step 1 with my token "+got)
			pause()
			notify(ctx, req, 2, 4, "step 2 "+strings.Repeat("é", 5000))
			pause()
			notify(ctx, req, 1.5, 4, "going backwards")
			pause()
			notify(ctx, req, 3, 4, "step 3 ticket TCK-4242")
			pause()
			notify(ctx, req, 3, 4, "step 3 again")
			notify(ctx, req, 4, 4, "done") // within the interval: flushed before the call returns
			return nil, addOut{Sum: 4}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "flood", Description: "floods its caller with progress"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, addOut, error) {
			pad := strings.Repeat("x", 1024)
			for i := 1; i <= n; i++ {
				notify(ctx, req, float64(i), float64(n), pad)
				if i%100 == 0 {
					notify(ctx, req, float64(i-50), float64(n), "backwards") // not an increase: dropped
				}
			}
			return nil, addOut{Sum: n}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-progress" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, tokens
}

// progressSink collects a call's progress reports.
type progressSink struct {
	mu  sync.Mutex
	got []maiden.Progress
	at  []time.Time
}

func (s *progressSink) add(p maiden.Progress) {
	s.mu.Lock()
	s.got = append(s.got, p)
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
}

func (s *progressSink) list() ([]maiden.Progress, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]maiden.Progress{}, s.got...), append([]time.Time{}, s.at...)
}

// TestImportedProgress: an imported server's progress notifications for a
// call reach Call.OnProgress before the call returns: each value above the
// last (a value going backwards is dropped), the message redacted (the
// credential maiden sent it, the import's redact middleware) and capped at
// MaxProgressMessage bytes on a character boundary. A call without
// OnProgress asks the upstream for no progress.
func TestImportedProgress(t *testing.T) {
	t.Parallel()
	url, tokens := progressUpstream(t, 0)
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.prog]
accept_new_tools = true
url = "`+url+`"
credential = "PROG_TOKEN"
middleware = [{ use = "redact", patterns = [{ name = "ticket", expr = "TCK-[0-9]+" }] }]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return "s3cret-progress", name == "PROG_TOKEN" }}, "echo")
	var sink progressSink
	res := mustCall(t, h, maiden.Call{Tool: "prog.steps", Input: `{}`, OnProgress: sink.add})
	got, _ := sink.list() // no waiting: every report precedes the return
	if !res.OK {
		t.Fatalf("prog.steps: %+v", res.Error)
	}
	var values []float64
	for _, p := range got {
		values = append(values, p.Progress)
		if p.Total != 4 {
			t.Errorf("report %v: total %v, want 4", p.Progress, p.Total)
		}
		if len(p.Message) > maiden.MaxProgressMessage || !utf8.ValidString(p.Message) {
			t.Errorf("report %v: message of %d bytes (valid UTF-8: %v), cap %d", p.Progress, len(p.Message), utf8.ValidString(p.Message), maiden.MaxProgressMessage)
		}
	}
	if fmt.Sprint(values) != "[1 2 3 4]" {
		t.Fatalf("progress values %v, want [1 2 3 4] (1.5 and the repeated 3 dropped, 4 flushed before the return)", values)
	}
	if m := got[0].Message; strings.Contains(m, "s3cret") || !strings.Contains(m, "[REDACTED:PROG_TOKEN]") {
		t.Errorf("the credential in a progress message: %q", m)
	}
	if m := got[1].Message; !strings.HasSuffix(m, "[truncated by maiden]") || !strings.HasPrefix(m, "step 2 éé") {
		t.Errorf("a 10 KB message: %q", m)
	}
	if m := got[2].Message; strings.Contains(m, "TCK-4242") || !strings.Contains(m, "REDACTED") {
		t.Errorf("the redact middleware on a progress message: %q", m)
	}
	if tokens.Load() != 1 {
		t.Fatalf("%d calls carried a progress token, want 1", tokens.Load())
	}
	if res := mustCall(t, h, maiden.Call{Tool: "prog.steps", Input: `{}`}); !res.OK || tokens.Load() != 1 {
		t.Errorf("a call without OnProgress: %+v; calls with a token %d, want still 1", res.Error, tokens.Load())
	}
}

// TestImportedProgressFlood: an upstream that sends thousands of progress
// notifications (1 KiB each, some going backwards) as fast as it can does
// not flood the caller: at most one report per ProgressInterval (plus the
// last one, flushed at the end), each above the one before, the last being
// the upstream's last.
func TestImportedProgressFlood(t *testing.T) {
	t.Parallel()
	const n = 2000
	url, _ := progressUpstream(t, n)
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.prog]
accept_new_tools = true
url = "`+url+`"
credential = "PROG_TOKEN"
timeout_ms = 60000
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return "s3cret-progress", name == "PROG_TOKEN" }}, "echo")
	var sink progressSink
	start := time.Now()
	res := mustCall(t, h, maiden.Call{Tool: "prog.flood", Input: `{}`, OnProgress: sink.add})
	elapsed := time.Since(start)
	if !res.OK {
		t.Fatalf("prog.flood: %+v", res.Error)
	}
	got, at := sink.list()
	if len(got) == 0 || got[len(got)-1].Progress != n {
		t.Fatalf("%d reports, the last %+v; want the upstream's last (%d)", len(got), got[len(got)-1:], n)
	}
	if limit := int(elapsed/maiden.ProgressInterval) + 2; len(got) > limit {
		t.Errorf("%d reports in %v: more than one per %v (at most %d)", len(got), elapsed, maiden.ProgressInterval, limit)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Progress <= got[i-1].Progress {
			t.Errorf("report %d: %v after %v", i, got[i].Progress, got[i-1].Progress)
		}
		// The last one is flushed at the end of the call, whenever it
		// comes; the others are an interval apart (less the time the
		// caller's clock was read late: redaction, the race detector).
		if i < len(got)-1 && at[i].Sub(at[i-1]) < maiden.ProgressInterval-25*time.Millisecond {
			t.Errorf("reports %d and %d %v apart, less than %v", i-1, i, at[i].Sub(at[i-1]), maiden.ProgressInterval)
		}
	}
	t.Logf("%d notifications from the upstream in %v reached the caller as %d reports", n+n/100, elapsed, len(got))
}

// buildMCPStdio builds testdata/mcpstdio.
func buildMCPStdio(t *testing.T) string {
	t.Helper()
	return testkit.Binary(t, "./testdata/mcpstdio")
}

// alive reports whether process pid exists (a reaped process does not).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func pidOf(t *testing.T, h *maiden.Host, tool string) int {
	t.Helper()
	res := mustCall(t, h, maiden.Call{Tool: tool, Input: `{}`})
	var out struct{ PID int }
	if !res.OK || json.Unmarshal([]byte(res.Output), &out) != nil || out.PID <= 0 {
		t.Fatalf("%s: %+v %+v", tool, res, res.Error)
	}
	if !alive(out.PID) {
		t.Fatalf("%s answered with PID %d, which is not running", tool, out.PID)
	}
	return out.PID
}

// TestImportRemovedByReload: a reload (SetConfig) that removes an [mcp.NAME]
// import stops its process once the call in flight on it has returned (that
// call finishes normally); one that changes the table replaces the process;
// the import's timeout_ms bounds its calls.
func TestImportRemovedByReload(t *testing.T) {
	t.Parallel()
	bin := buildMCPStdio(t)
	body := `version = 1
[tools.echo]
path = %q
[mcp.local]
accept_new_tools = true
command = ["` + bin + `"]
timeout_ms = 5000
`
	// Reloads read the same file, as the server's watcher does (an
	// import's table depends on the file's directory).
	path := filepath.Join(t.TempDir(), "agent.toml")
	h := newHost(t, writeConfigAt(t, path, body, "echo"))
	reload := func(body string) { h.SetConfig(writeConfigAt(t, path, body, "echo")) }
	pid := pidOf(t, h, "local.pid")

	// A table that changes: the old process is stopped, a new one answers.
	changed := body + "env = [\"CHANGED=1\"]\n"
	reload(changed)
	waitUntil(t, 5*time.Second, func() bool { return !alive(pid) }, fmt.Sprintf("the old process %d to be gone after its table changed", pid))
	pid2 := pidOf(t, h, "local.pid")
	if pid2 == pid {
		t.Fatalf("the same process %d after its table changed", pid)
	}

	// The deadline: a call past timeout_ms is kind deadline.
	// (timeout_ms is the tool's, not the server's: the process stays.)
	reload(strings.Replace(changed, "timeout_ms = 5000", "timeout_ms = 300", 1))
	start := time.Now()
	wantKind(t, mustCall(t, h, maiden.Call{Tool: "local.sleep", Input: `{"ms":3000}`}), maiden.KindDeadline, "300ms timeout")
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("a call past its 300ms timeout took %v", d)
	}
	if !alive(pid2) {
		t.Errorf("process %d stopped by a reload that changed only timeout_ms", pid2)
	}

	// Removal with a call in flight: the call finishes, then the process
	// is gone.
	reload(body)
	pid3 := pidOf(t, h, "local.pid")
	type outcome struct {
		res maiden.Result
		err error
	}
	done := make(chan outcome, 1)
	// The upstream reports progress as the call reaches it: past admission
	// and the schema check, whatever the machine's load.
	onUpstream := make(chan struct{})
	var once sync.Once
	go func() {
		res, err := h.Call(context.Background(), maiden.Call{Tool: "local.sleep", Input: `{"ms":1500}`,
			OnProgress: func(maiden.Progress) { once.Do(func() { close(onUpstream) }) }})
		done <- outcome{res, err}
	}()
	select {
	case <-onUpstream:
	case o := <-done:
		t.Fatalf("the sleep call returned before the upstream reported it: %v %+v %+v", o.err, o.res, o.res.Error)
	case <-time.After(30 * time.Second):
		t.Fatal("the sleep call did not reach the upstream in 30s")
	}
	reload("version = 1\n[tools.echo]\npath = %q\n")
	time.Sleep(200 * time.Millisecond)
	if !alive(pid3) {
		t.Fatal("the process was stopped under the call in flight")
	}
	o := <-done
	if o.err != nil || !o.res.OK || !strings.Contains(o.res.Output, `"slept":1500`) {
		t.Fatalf("the call in flight across the reload: %v %+v %+v", o.err, o.res, o.res.Error)
	}
	removed := time.Now()
	waitUntil(t, 5*time.Second, func() bool { return !alive(pid3) }, fmt.Sprintf("process %d to be gone after its import was removed", pid3))
	t.Logf("process gone %v after the last call on it returned", time.Since(removed).Round(time.Millisecond))
	if _, err := h.Call(context.Background(), maiden.Call{Tool: "local.pid", Input: `{}`}); !errors.Is(err, maiden.ErrUnknownTool) {
		t.Errorf("a removed import's tool: %v", err)
	}
	if infos, err := h.Tools(context.Background()); err != nil || len(infos) != 1 || infos[0].Name != "echo" {
		t.Errorf("tools after the removal: %v %+v", err, infos)
	}
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
