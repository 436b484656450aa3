//lint:file-ignore SA1019 the tests exercise MCP logging, deprecated upstream but still served

package mcpserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPBothEras: one endpoint serves a 2025-11-25 client with a session
// and a 2026-07-28 client without one, at the same time.
func TestHTTPBothEras(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	srv := e.httpServer(HTTPOptions{})

	legacy, err := e.httpClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	modern, err := e.httpClientModern(srv.URL, nil, nil)
	if err != nil {
		t.Fatalf("a 2026-07-28 client could not connect: %v", err)
	}
	defer modern.Close()

	if v := legacy.InitializeResult().ProtocolVersion; v != legacyProtocol {
		t.Errorf("legacy client negotiated %q", v)
	}
	if v := modern.InitializeResult().ProtocolVersion; v != ModernProtocol {
		t.Errorf("modern client speaks %q, want %s", v, ModernProtocol)
	}
	if legacy.ID() == "" {
		t.Error("the legacy client got no session id")
	}
	// A modern request's session lives as long as the request (it is closed
	// just after the answer is written).
	waitFor(t, 5*time.Second, func() bool { return countSessions(e.server) == 1 })
	for _, cs := range []*mcp.ClientSession{legacy, modern, legacy} {
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) != 1 {
			t.Fatalf("%s tools/list: %v %+v", cs.InitializeResult().ProtocolVersion, err, tools)
		}
		if r := call(t, cs, "echo", map[string]any{"message": "era " + cs.InitializeResult().ProtocolVersion}); r.IsError || !strings.Contains(text(r), "era ") {
			t.Errorf("%s call: %q", cs.InitializeResult().ProtocolVersion, text(r))
		}
	}
	waitFor(t, 5*time.Second, func() bool { return countSessions(e.server) == 1 })

	// What a modern request may not do: open the GET stream or delete a
	// session (405), and a future revision is answered with the versions
	// supported.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(m, srv.URL+Path, nil)
		req.Header.Set("MCP-Protocol-Version", ModernProtocol)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("modern %s: status %d, want 405", m, resp.StatusCode)
		}
	}
	// The body cap applies to modern requests as to legacy ones.
	e.setMaxInput(1024)
	huge := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("x", 300<<10) + `"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	hreq, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(huge))
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json, text/event-stream")
	hreq.Header.Set("MCP-Protocol-Version", ModernProtocol)
	if hresp, err := http.DefaultClient.Do(hreq); err != nil {
		t.Fatal(err)
	} else {
		hresp.Body.Close()
		if hresp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("an oversized modern request: status %d, want 413", hresp.StatusCode)
		}
	}

	future := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(future))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2099-01-01")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "-32022") || !strings.Contains(string(body), ModernProtocol) {
		t.Errorf("a request for 2099-01-01: %d %s; want UnsupportedProtocolVersion (-32022) listing %s", resp.StatusCode, body, ModernProtocol)
	}
}

// TestHTTPModernCancellation: in the modern era a client cancels by closing
// the response; the running tool is interrupted and its slot freed.
func TestHTTPModernCancellation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 60000"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 1, MaxQueued: -1})
	var logs testkit.SyncBuffer
	e.server = New(e.host, &Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if _, err := e.server.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := e.httpServer(HTTPOptions{})
	cs, err := e.httpClientModern(srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{}})
		done <- err
	}()
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 1 })
	start := time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call returned %v", err)
	}
	waitFor(t, 10*time.Second, func() bool { return e.host.Active() == 0 })
	t.Logf("the tool stopped %v after the client cancelled", time.Since(start).Round(time.Millisecond))
	time.Sleep(200 * time.Millisecond)
	if s := logs.String(); s != "" {
		t.Errorf("a client's cancellation was logged as a problem:\n%s", s)
	}
}

// TestNotAdvertisedMethods: resources, prompts and completions are not
// advertised, so their methods are not found (the SDK answered empty lists).
func TestNotAdvertisedMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	srv := e.httpServer(HTTPOptions{})
	legacy, err := e.httpClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	modern, err := e.httpClientModern(srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer modern.Close()
	for _, cs := range []*mcp.ClientSession{legacy, modern, e.client(nil)} {
		caps := cs.InitializeResult().Capabilities
		if caps.Resources != nil || caps.Prompts != nil || caps.Completions != nil || caps.Tools == nil {
			t.Errorf("capabilities: %+v", caps)
		}
		ctx := context.Background()
		calls := map[string]func() error{
			"resources/list": func() error { _, err := cs.ListResources(ctx, nil); return err },
			"resources/templates/list": func() error {
				_, err := cs.ListResourceTemplates(ctx, nil)
				return err
			},
			"resources/read": func() error {
				_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///etc/passwd"})
				return err
			},
			"prompts/list": func() error { _, err := cs.ListPrompts(ctx, nil); return err },
			"prompts/get":  func() error { _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "x"}); return err },
		}
		for method, f := range calls {
			var rpcErr *jsonrpc.Error
			if err := f(); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeMethodNotFound {
				t.Errorf("%s (%s): %v, want method not found", method, cs.InitializeResult().ProtocolVersion, err)
			}
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Errorf("tools/list: %v", err)
		}
	}
}

// logCollector gathers the levels of the logger tool's notifications.
type logCollector struct {
	mu     sync.Mutex
	levels []string
}

func (c *logCollector) handler(_ context.Context, r *mcp.LoggingMessageRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Params.Logger == "logger" {
		c.levels = append(c.levels, string(r.Params.Level))
	}
}

func (c *logCollector) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.levels, ",")
}

// TestLogsWithoutSetLevel: a 2025-era client that never sent
// logging/setLevel gets tool logs from info up (DefaultLogLevel); a later
// setLevel still rules. A 2026-07-28 request gets logs only if it names a
// level, as that revision requires.
func TestLogsWithoutSetLevel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"logger", "logger", ""}}, nil)
	srv := e.httpServer(HTTPOptions{})
	ctx := context.Background()

	// The logger tool logs debug, info, warn and error, in that order; the
	// notifications arrive before the result.
	check := func(name string, c *logCollector, want string) {
		t.Helper()
		// The client may hand a notification to its handler a moment after
		// the result; and give unwanted ones the same moment to show.
		deadline := time.Now().Add(2 * time.Second)
		for c.get() != want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if got := c.get(); got != want {
			t.Errorf("%s: log notifications at levels %q, want %q", name, got, want)
		}
	}

	var stdio logCollector
	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.server.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{LoggingMessageHandler: stdio.handler}).
		Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call(t, cs, "logger", map[string]any{})
	check("in memory, no setLevel", &stdio, "info,warning,error")

	var legacy logCollector
	lc, err := e.httpClientEra(srv.URL, nil, legacyProtocol, &mcp.ClientOptions{LoggingMessageHandler: legacy.handler})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	call(t, lc, "logger", map[string]any{})
	check("HTTP 2025-11-25, no setLevel", &legacy, "info,warning,error")
	if err := lc.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatal(err)
	}
	call(t, lc, "logger", map[string]any{})
	check("HTTP 2025-11-25, then setLevel error", &legacy, "info,warning,error,error")

	var modern logCollector
	mc, err := e.httpClientModern(srv.URL, nil, &mcp.ClientOptions{LoggingMessageHandler: modern.handler})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	call(t, mc, "logger", map[string]any{})
	check("HTTP 2026-07-28, no level in _meta", &modern, "")
	withLevel := &mcp.CallToolParams{Name: "logger", Arguments: map[string]any{}, Meta: mcp.Meta{"io.modelcontextprotocol/logLevel": "warning"}}
	if _, err := mc.CallTool(ctx, withLevel); err != nil {
		t.Fatal(err)
	}
	check("HTTP 2026-07-28, level warning in _meta", &modern, "warning,error")
}

// TestProblemReportedOnce: a tool that cannot be loaded is logged when it
// is first seen, not at every Sync; once fixed it is served, and a new
// problem is logged again.
func TestProblemReportedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}, {"broken", "notwasm", ""}}, nil)
	var logs testkit.SyncBuffer
	e.server = New(e.host, &Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	for i := range 3 {
		problems, err := e.server.Sync(context.Background())
		if err != nil || len(problems) != 1 || problems[0].Tool != "broken" {
			t.Fatalf("sync %d: %v %+v", i, err, problems)
		}
	}
	if n := strings.Count(logs.String(), "tool not served"); n != 1 {
		t.Errorf("the broken tool was reported %d times in 3 syncs, want 1:\n%s", n, logs.String())
	}
	// Fixed, then broken in another way: reported again.
	writeAgentTOML(t, e.cfg, []toolLine{{"echo", "echo", ""}, {"broken", "echo", ""}})
	if problems, err := e.server.reload(context.Background(), e.cfg); err != nil || len(problems) != 0 {
		t.Fatalf("after the fix: %v %+v", err, problems)
	}
	writeAgentTOML(t, e.cfg, []toolLine{{"echo", "echo", ""}, {"broken", "badimport", ""}})
	if problems, err := e.server.reload(context.Background(), e.cfg); err != nil || len(problems) != 1 {
		t.Fatalf("broken again: %v %+v", err, problems)
	}
	if n := strings.Count(logs.String(), "tool not served"); n != 2 {
		t.Errorf("%d reports after the tool broke a second time, want 2:\n%s", n, logs.String())
	}
}

// TestHTTPExtraHandlers: paths added with HTTPOptions.Handlers sit behind
// the same Origin and token checks as the MCP endpoint.
func TestHTTPExtraHandlers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	hits := 0
	srv := e.httpServer(HTTPOptions{
		AuthToken:      "s3cret-token",
		AllowedOrigins: []string{"https://app.example"},
		Handlers: map[string]http.Handler{"/extra": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits++
			io.WriteString(w, "ok\n")
		})},
	})
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		code int
	}{
		{"no token", nil, http.StatusForbidden},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, http.StatusForbidden},
		{"token, foreign origin", map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "https://evil.example"}, http.StatusForbidden},
		{"token, allowed origin", map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "https://app.example"}, http.StatusOK},
		{"token", map[string]string{"Authorization": "Bearer s3cret-token"}, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/extra", nil)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.code)
		}
	}
	if hits != 2 {
		t.Errorf("the handler ran %d times, want 2 (only the requests that passed the checks)", hits)
	}
	defer func() {
		if recover() == nil {
			t.Error("a handler for " + Path + " was accepted")
		}
	}()
	e.server.HTTPHandler(HTTPOptions{Handlers: map[string]http.Handler{Path: http.NotFoundHandler()}})
}
