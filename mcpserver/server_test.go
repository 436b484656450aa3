//lint:file-ignore SA1019 the tests exercise MCP logging, deprecated upstream but still served

package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// env is a maiden host and MCP server over a generated agent.toml.
type env struct {
	t      *testing.T
	cfg    string // agent.toml path
	host   *maiden.Host
	server *Server
}

// toolLine is one [tools.NAME] table: the test tool it runs and extra keys.
type toolLine struct{ name, fixture, extra string }

func writeAgentTOML(t testing.TB, path string, tools []toolLine) {
	t.Helper()
	var b strings.Builder
	b.WriteString("version = 1\n")
	for _, tl := range tools {
		p := tl.fixture
		if !filepath.IsAbs(p) {
			p = testkit.Component(t, tl.fixture)
		}
		fmt.Fprintf(&b, "\n[tools.%s]\npath = %q\n%s\n", tl.name, p, tl.extra)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newEnv(t *testing.T, tools []toolLine, hostOpts *maiden.Options) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.toml")
	writeAgentTOML(t, path, tools)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if hostOpts == nil {
		hostOpts = &maiden.Options{Isolation: maiden.InProcess}
	}
	hostOpts.CacheDir = testkit.CompileCache(t)
	h, err := maiden.New(cfg, hostOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	s := New(h, &Options{ProgressEvery: 200 * time.Millisecond})
	if _, err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, cfg: path, host: h, server: s}
}

// client connects an SDK client over in-memory transports.
func (e *env) client(opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := e.server.MCP().Connect(ctx, st, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: protocol error %v", tool, err)
	}
	return r
}

func TestListTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{
		{"echo", "echo", `http_allow = ["api.example.com"]`},
		{"logger", "logger", ""},
		{"broken", "badimport", ""},
		{"stringy", "badschema", ""},
	}, nil)
	cs := e.client(nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Name == "echo" {
			if !strings.Contains(tool.Description, "Echoes") {
				t.Errorf("description %q", tool.Description)
			}
			schema, _ := tool.InputSchema.(map[string]any)
			if schema["type"] != "object" || schema["required"] == nil {
				t.Errorf("input schema %v", tool.InputSchema)
			}
			if tool.Annotations == nil || tool.Annotations.OpenWorldHint == nil || !*tool.Annotations.OpenWorldHint {
				t.Errorf("echo has http_allow; annotations %+v", tool.Annotations)
			}
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "echo,logger" {
		t.Errorf("served %v; the broken tools must not be served", names)
	}
}

func TestCallResults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{
		{"echo", "echo", ""},
		{"toolerr", "toolerr", ""},
		{"loop", "loop", "timeout_ms = 200"},
		{"memgrow", "memgrow", "memory_mb = 8"},
		{"trap", "trap", ""},
	}, nil)
	cs := e.client(nil)

	ok := call(t, cs, "echo", map[string]any{"message": "hi"})
	if ok.IsError || text(ok) != `{"message":"hi"}` {
		t.Fatalf("echo: %+v", ok)
	}
	if sc, _ := ok.StructuredContent.(map[string]any); sc["message"] != "hi" {
		t.Errorf("structured content %v", ok.StructuredContent)
	}

	for tool, kind := range map[string]string{"toolerr": "tool", "loop": "deadline", "memgrow": "memory", "trap": "trap"} {
		r := call(t, cs, tool, map[string]any{})
		if !r.IsError || !strings.HasPrefix(text(r), kind+": ") || r.Meta[MetaErrorKind] != kind {
			t.Errorf("%s: isError=%v text=%q meta=%v, want kind %s", tool, r.IsError, text(r), r.Meta, kind)
		}
	}

	bad := call(t, cs, "echo", map[string]any{"message": 42})
	if !bad.IsError || !strings.Contains(text(bad), "input: input does not match the tool's schema") || !strings.Contains(text(bad), "/message") {
		t.Errorf("schema violation: %q", text(bad))
	}

	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown tool: %v", err)
	}
}

func TestLogsAndProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"logger", "logger", ""}, {"loop", "loop", "timeout_ms = 700"}}, nil)
	var mu sync.Mutex
	var levels []string
	var progress int
	cs := e.client(&mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			if r.Params.Logger == "logger" {
				levels = append(levels, string(r.Params.Level))
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if r.Params.ProgressToken == "tok-1" && strings.Contains(r.Params.Message, "loop running for") {
				progress++
			}
		},
	})
	// Clients on older protocol versions set the level for the session;
	// newer ones send it with each request. Do both.
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	logged := &mcp.CallToolParams{Name: "logger", Arguments: map[string]any{}, Meta: mcp.Meta{"io.modelcontextprotocol/logLevel": "debug"}}
	if _, err := cs.CallTool(context.Background(), logged); err != nil {
		t.Fatal(err)
	}
	// The server sends them before the result; the client may hand them to
	// its handler a moment later.
	deadline := time.Now().Add(2 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		mu.Lock()
		got = strings.Join(levels, ",")
		mu.Unlock()
		if len(got) >= len("debug,info,warning,error") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got != "debug,info,warning,error" {
		t.Errorf("log notifications at levels %q", got)
	}

	params := &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if progress < 2 {
		t.Errorf("%d progress notifications during a 700ms call reporting every 200ms", progress)
	}
}

// TestCancellationStopsTool: a client cancelling its request interrupts the
// running tool at its next epoch check; with one call slot, the next call
// proves the slot is free again. Not parallel: its bounds (a second to
// start, half a second to stop) are for an otherwise idle test binary.
func TestCancellationStopsTool(t *testing.T) {
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 60000"}, {"echo", "echo", ""}},
		&maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 1, MaxQueued: -1})
	cs := e.client(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{}})
		done <- err
	}()
	waitFor(t, time.Second, func() bool { return e.host.Active() == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	start := time.Now()
	waitFor(t, time.Second, func() bool { return e.host.Active() == 0 })
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("the tool kept running %v after cancellation", took)
	}
	if r := call(t, cs, "echo", map[string]any{"message": "free"}); r.IsError {
		t.Errorf("next call: %q", text(r))
	}
}

func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHotReload: editing a .wasm or agent.toml while serving changes what
// the next call runs, and clients are told the tool list changed.
func TestHotReload(t *testing.T) {
	t.Parallel()
	wasm := testkit.CopyToTemp(t, testkit.Component(t, "echo"))
	e := newEnv(t, []toolLine{{"echo", wasm, ""}}, nil)
	changed := make(chan struct{}, 10)
	cs := e.client(&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.server.Watch(ctx, e.cfg, WatchOptions{Interval: 50 * time.Millisecond, Settle: 100 * time.Millisecond})

	// Replace the component with a different tool, as a build would.
	b, err := os.ReadFile(testkit.Component(t, "toolerr"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wasm+".new", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(wasm+".new", wasm); err != nil {
		t.Fatal(err)
	}
	// The very next call runs the new code, watcher or not.
	if r := call(t, cs, "echo", map[string]any{}); !r.IsError || !strings.HasPrefix(text(r), "tool: the tool refused") {
		t.Fatalf("after replacing the .wasm: %q", text(r))
	}
	expectSignal(t, changed, "list_changed after the .wasm changed")

	// Add a tool in agent.toml.
	writeAgentTOML(t, e.cfg, []toolLine{{"echo", wasm, ""}, {"logger", "logger", ""}})
	expectSignal(t, changed, "list_changed after agent.toml changed")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 2 {
		t.Errorf("after adding a tool: %d tools", len(res.Tools))
	}

	// A broken agent.toml keeps the old configuration in force.
	if err := os.WriteFile(e.cfg, []byte("version = 1\n[tools.x]\nmemory_mb = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if r := call(t, cs, "logger", map[string]any{}); r.IsError {
		t.Errorf("after a broken edit: %q", text(r))
	}
}

func expectSignal(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// TestHostileToolDoesNotHurtOthers: one session running hostile tools
// while another calls a good one; the good session sees only success.
func TestHostileToolDoesNotHurtOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{
		{"echo", "echo", ""},
		{"loop", "loop", "timeout_ms = 300"},
		{"memgrow", "memgrow", "memory_mb = 16"},
		{"trap", "trap", ""},
		{"recursion", "recursion", ""},
	}, nil)
	hostile, good := e.client(nil), e.client(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 3; i++ {
			for _, tool := range []string{"loop", "memgrow", "trap", "recursion"} {
				if r := call(t, hostile, tool, map[string]any{}); !r.IsError {
					t.Errorf("%s succeeded", tool)
				}
			}
		}
	}()
	for i := 0; i < 50; i++ {
		msg := fmt.Sprintf("m%d", i)
		if r := call(t, good, "echo", map[string]any{"message": msg}); r.IsError || !strings.Contains(text(r), msg) {
			t.Fatalf("good session, call %d: %q", i, text(r))
		}
	}
	wg.Wait()
}

// TestOverloadIsAProtocolError: with the one call slot taken and no queue,
// a call is refused as overloaded. Not parallel: the first call must start
// within a second, and still run (for a second) when the second arrives.
func TestOverloadIsAProtocolError(t *testing.T) {
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 1000"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 1, MaxQueued: -1})
	cs := e.client(nil)
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{}})
	waitFor(t, time.Second, func() bool { return e.host.Active() == 1 })
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != CodeOverloaded || !strings.Contains(rpcErr.Message, "retry later") {
		t.Fatalf("got %v", err)
	}
}

// httpEnv serves the MCP handler on a loopback HTTP server.
func (e *env) httpServer(o HTTPOptions) *httptest.Server {
	srv := httptest.NewServer(e.server.HTTPHandler(o))
	e.t.Cleanup(srv.Close)
	return srv
}

// httpClient connects a client of the 2025-11-25 era (initialize, a
// session); httpClientModern one of 2026-07-28 (stateless).
func (e *env) httpClient(url string, hc *http.Client) (*mcp.ClientSession, error) {
	return e.httpClientEra(url, hc, legacyProtocol, nil)
}

func (e *env) httpClientModern(url string, hc *http.Client, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	return e.httpClientEra(url, hc, ModernProtocol, opts)
}

// legacyProtocol is the newest revision with sessions.
const legacyProtocol = "2025-11-25"

func (e *env) httpClientEra(url string, hc *http.Client, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t := &mcp.StreamableClientTransport{Endpoint: url + Path, HTTPClient: hc, MaxRetries: -1}
	return mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "0"}, opts).Connect(context.Background(), t, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

// headerTransport adds headers to every request.
type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestHTTPOriginAndAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	srv := e.httpServer(HTTPOptions{AllowedOrigins: []string{"https://app.example"}, AuthToken: "s3cret-token"})
	with := func(h map[string]string) *http.Client {
		hdr := http.Header{}
		for k, v := range h {
			hdr.Set(k, v)
		}
		return &http.Client{Transport: headerTransport{hdr}}
	}
	tests := []struct {
		name    string
		headers map[string]string
		ok      bool
	}{
		{"token, no origin", map[string]string{"Authorization": "Bearer s3cret-token"}, true},
		{"token, allowed origin", map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "https://app.example"}, true},
		{"token, foreign origin", map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "https://evil.example"}, false},
		{"no token", map[string]string{}, false},
		{"wrong token", map[string]string{"Authorization": "Bearer s3cret-tokeN"}, false},
		{"token as basic", map[string]string{"Authorization": "Basic s3cret-token"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := e.httpClient(srv.URL, with(tc.headers))
			if tc.ok != (err == nil) {
				t.Fatalf("connect: %v, want ok=%v", err, tc.ok)
			}
			if err == nil {
				defer cs.Close()
				if r := call(t, cs, "echo", map[string]any{"message": "over http"}); r.IsError {
					t.Errorf("%q", text(r))
				}
			}
		})
	}
	// The status codes a plain HTTP client sees.
	for _, tc := range []struct {
		hdr  map[string]string
		code int
	}{
		{map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer s3cret-token"}, http.StatusForbidden},
		// 403, not 401: a 401 sends MCP clients into OAuth (see guard).
		{map[string]string{}, http.StatusForbidden},
		{map[string]string{"Authorization": "Bearer wrong"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest("POST", srv.URL+Path, strings.NewReader(`{}`))
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%v: status %d, want %d", tc.hdr, resp.StatusCode, tc.code)
		}
		if tc.hdr["Origin"] == "" && (!strings.Contains(string(body), "Authorization: Bearer <token>") || resp.Header.Get("WWW-Authenticate") != "") {
			t.Errorf("%v: the refusal names no header to configure, or carries an OAuth challenge: %q %q", tc.hdr, body, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// A page served from this very listener on loopback may call it (the
	// conformance suite's dns-rebinding-protection); a rebinding page, whose
	// own name is in Host and Origin, may not, nor another local origin.
	u, _ := url.Parse(srv.URL)
	for _, tc := range []struct {
		name, host, origin string
		refused            bool
	}{
		{"own loopback origin", u.Host, "http://" + u.Host, false},
		{"own origin as localhost", "localhost:" + u.Port(), "http://localhost:" + u.Port(), false},
		{"another local port", u.Host, "http://localhost:1", true},
		{"https on plain http", u.Host, "https://" + u.Host, true},
		{"rebinding page", "evil.example:" + u.Port(), "http://evil.example:" + u.Port(), true},
		{"origin with a path", u.Host, "http://" + u.Host + "/x", true},
	} {
		req, _ := http.NewRequest("POST", srv.URL+Path, strings.NewReader(`{}`))
		req.Host = tc.host
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Authorization", "Bearer s3cret-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.StatusCode == http.StatusForbidden && strings.Contains(string(body), "origin"); got != tc.refused {
			t.Errorf("%s: status %d %q, want refused=%v", tc.name, resp.StatusCode, body, tc.refused)
		}
	}
	// No OAuth protected-resource metadata: it would declare maiden an OAuth
	// resource server.
	for _, p := range []string{"/other", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		if resp, err := http.Get(srv.URL + p); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %v %v", p, resp.StatusCode, err)
		}
	}
}

// TestHTTPConcurrentCalls: 100 calls at once over HTTP, from several
// sessions, all complete.
func TestHTTPConcurrentCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	srv := e.httpServer(HTTPOptions{})
	const sessions, perSession = 4, 25
	var okCount atomic.Int64
	var wg sync.WaitGroup
	for s := 0; s < sessions; s++ {
		cs, err := e.httpClient(srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		for i := 0; i < perSession; i++ {
			wg.Add(1)
			go func(s, i int) {
				defer wg.Done()
				msg := fmt.Sprintf("s%d-c%d", s, i)
				r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
				if err != nil || r.IsError || !strings.Contains(text(r), msg) {
					t.Errorf("%s: %v %+v", msg, err, r)
					return
				}
				okCount.Add(1)
			}(s, i)
		}
	}
	wg.Wait()
	if got := okCount.Load(); got != sessions*perSession {
		t.Errorf("%d of %d calls completed", got, sessions*perSession)
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8700": true, "[::1]:8700": true, "localhost:8700": true, "127.9.9.9:1": true,
		":8700": false, "0.0.0.0:8700": false, "[::]:8700": false, "10.0.0.1:8700": false,
		"example.com:8700": false, "nonsense": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
