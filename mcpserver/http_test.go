package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// post sends one raw JSON-RPC body to the streamable HTTP endpoint and
// returns the status, the session header and the whole body.
func post(t testing.TB, url, session string, body io.Reader) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+Path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(data)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// rawSession initializes a session over raw HTTP and returns its id.
func rawSession(t *testing.T, url string) string {
	t.Helper()
	code, session, body := post(t, url, "", strings.NewReader(initializeBody))
	if code != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %q", code, body)
	}
	if code, _, body := post(t, url, session, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %q", code, body)
	}
	return session
}

// onlyReader hides a body's length, so the request is sent chunked and
// only reading can find its size.
type onlyReader struct{ io.Reader }

// TestHTTPInputCap: a body over max_input_bytes plus the envelope is
// refused with 413 and a message naming the key, whether or not it declares
// its length; arguments over the cap are kind input.
func TestHTTPInputCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	e.setMaxInput(1024)
	srv := e.httpServer(HTTPOptions{})
	session := rawSession(t, srv.URL)
	huge := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` +
		strings.Repeat("x", 300<<10) + `"}}}`
	for _, tt := range []struct {
		name string
		body io.Reader
	}{
		{"with length", strings.NewReader(huge)},
		{"chunked", onlyReader{strings.NewReader(huge)}},
		{"endless", onlyReader{zeroes{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := post(t, srv.URL, session, tt.body)
			if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "max_input_bytes 1024") {
				t.Errorf("oversized body: %d %q; want 413 naming max_input_bytes", code, body)
			}
		})
	}
	cs, err := e.httpClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r := call(t, cs, "echo", map[string]any{"message": strings.Repeat("y", 2000)})
	if !r.IsError || !strings.HasPrefix(text(r), "input: ") || !strings.Contains(text(r), "max_input_bytes") {
		t.Errorf("arguments over the cap: %q", text(r))
	}
	if r := call(t, cs, "echo", map[string]any{"message": "small"}); r.IsError {
		t.Errorf("small call: %q", text(r))
	}
}

// zeroes is an endless body.
type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestHTTPIdleSessionsExpire: sessions nobody uses are closed and forgotten
// after the idle time, so they hold no memory and a tool-list change is not
// sent (and warned about) once per dead session.
func TestHTTPIdleSessionsExpire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	var logs testkit.SyncBuffer
	e.server = New(e.host, &Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if _, err := e.server.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := e.httpServer(HTTPOptions{SessionIdle: 2 * time.Second})
	const n = 30
	for range n {
		rawSession(t, srv.URL)
	}
	// A session in use stays.
	cs, err := e.httpClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := countSessions(e.server); got == 0 {
		t.Fatal("no sessions right after creating them")
	}
	deadline := time.Now().Add(60 * time.Second)
	for countSessions(e.server) > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still open 60s after they went idle (idle time 2s)", countSessions(e.server))
		}
		if err := cs.Ping(context.Background(), nil); err != nil {
			t.Fatalf("the session in use expired: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A tool-list change now reaches the one live session, with no warning
	// about dead ones.
	writeAgentTOML(t, e.cfg, []toolLine{{"echo", "echo", ""}, {"echo2", "echo", ""}})
	if _, err := e.server.reload(context.Background(), e.cfg); err != nil {
		t.Fatal(err)
	}
	if r := call(t, cs, "echo2", map[string]any{"message": "new"}); r.IsError {
		t.Errorf("call of the reloaded tool: %q", text(r))
	}
	if s := logs.String(); s != "" {
		t.Errorf("warnings after reload:\n%s", s)
	}
}

func countSessions(s *Server) int {
	n := 0
	for range s.MCP().Sessions() {
		n++
	}
	return n
}

// TestHTTPCancelledGetsNoResponse: over HTTP too, a request cancelled with
// notifications/cancelled gets no response (the SDK wrote an error with
// code 0 on the request's stream).
func TestHTTPCancelledGetsNoResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 60000"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 2})
	srv := e.httpServer(HTTPOptions{})
	session := rawSession(t, srv.URL)
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		code, _, body := post(t, srv.URL, session, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"loop","arguments":{}}}`))
		done <- result{code, body}
	}()
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 1 })
	if code, _, body := post(t, srv.URL, session, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %q", code, body)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled request's stream did not end in 30s")
	}
	if strings.Contains(r.body, `"id":5`) {
		t.Errorf("the cancelled request got a response: %d %q", r.code, r.body)
	}
	// A lone cancellation of a request not running is accepted and ignored.
	if code, _, body := post(t, srv.URL, session, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}}`)); code != http.StatusAccepted {
		t.Fatalf("cancel of nothing: %d %q", code, body)
	}
	if code, _, body := post(t, srv.URL, session, strings.NewReader(`{"jsonrpc":"2.0","id":77,"method":"ping"}`)); code != http.StatusOK || !strings.Contains(body, `"result":{}`) {
		t.Errorf("ping 77 after a stray cancel: %d %q", code, body)
	}
	if n := e.server.httpCalls.len(); n != 0 {
		t.Errorf("%d requests still tracked after all were answered", n)
	}
}

// TestCancelFilterGivesCode: an error response without a code (the SDK's
// code 0) gets the internal-error code on its way out.
func TestCancelFilterGivesCode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, in, want string }{
		{"sse", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":0,\"message\":\"context canceled\"}}\n\n",
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32603,\"message\":\"maiden: context canceled\"}}\n\n"},
		{"json", `{"jsonrpc":"2.0","id":3,"error":{"code":0,"message":"x"}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"maiden: x"}}`},
		{"coded error untouched", "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602,\"message\":\"x\"}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602,\"message\":\"x\"}}\n\n"},
		{"notification untouched", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{header: http.Header{}}
			f := &cancelFilter{ResponseWriter: rec, calls: &inflight{}, session: "s"}
			if n, err := f.Write([]byte(tt.in)); n != len(tt.in) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if got := rec.body.String(); got != tt.want {
				t.Errorf("wrote %q, want %q", got, tt.want)
			}
		})
	}
}

type recorder struct {
	header http.Header
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *recorder) WriteHeader(int)             {}

// TestHTTPRefusedBatchLeavesNoOrphans: a JSON-RPC batch in a session of a
// revision without batches is refused whole by the SDK (400), none of its
// requests run, and none of them is kept as an orphan: one such POST of
// a few thousand ids pushed out the orphans of every other session, whose
// cancellations then no longer reached their calls.
func TestHTTPRefusedBatchLeavesNoOrphans(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	srv := e.httpServer(HTTPOptions{})
	session := rawSession(t, srv.URL)
	var b strings.Builder
	b.WriteString("[")
	for i := range 2 * maxOrphans {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 100+i)
	}
	b.WriteString("]")
	code, _, body := post(t, srv.URL, session, strings.NewReader(b.String()))
	if code != http.StatusBadRequest || !strings.Contains(body, "batching is not supported") {
		t.Errorf("batch in a 2025-06-18 session: %d %q; want 400 refusing batches", code, body)
	}
	e.server.httpCalls.mu.Lock()
	calls, orphans := len(e.server.httpCalls.calls), len(e.server.httpCalls.orphans)
	e.server.httpCalls.mu.Unlock()
	if calls != 0 || orphans != 0 {
		t.Errorf("after a refused batch: %d requests tracked and %d orphans kept, want none", calls, orphans)
	}
	// The session still serves.
	if code, _, body := post(t, srv.URL, session, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)); code != http.StatusOK || !strings.Contains(body, `"result":{}`) {
		t.Errorf("ping after the batch: %d %q", code, body)
	}
}
