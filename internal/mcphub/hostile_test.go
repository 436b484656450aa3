//lint:file-ignore SA1019 the test sends MCP log messages, deprecated upstream (SEP-2577) but still relayed

package mcphub

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/mcpimport"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallLogsBounded: an upstream that floods log messages during a call
// (each under the 16 KiB message cap, as many as it likes until the
// deadline) must not make the host hold them all: a call's log is kept
// within a byte budget, as a WebAssembly tool's is (64 KiB), and says what
// it dropped.
func TestCallLogsBounded(t *testing.T) {
	const lines, size = 5000, 1 << 10
	srv := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "flood", Description: "logs a lot"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			line := strings.Repeat("x", size)
			for i := 0; i < lines; i++ {
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: line}); err != nil {
					return nil, struct{}{}, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, struct{}{}, nil
		})
	hub, imp := hubOver(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	relayed := 0
	out, err := hub.Call(ctx, Call{Import: "flood", Table: imp, Exposed: "flood.flood", Tool: "flood", Input: []byte(`{}`),
		Timeout: 50 * time.Second, Redact: func(s string) string { return s }, OnLog: func(e api.LogEntry) { relayed++ }})
	if err != nil || out.Failure != nil {
		t.Fatalf("call: %+v %v", out.Failure, err)
	}
	kept := 0
	for _, e := range out.Logs {
		kept += len(e.Message)
	}
	t.Logf("%d lines (%d bytes) kept, %d relayed live", len(out.Logs), kept, relayed)
	if kept > 80<<10 {
		t.Errorf("the call's log holds %d lines, %d bytes, of an upstream's flood: want at most the 64 KiB budget (and a marker)", len(out.Logs), kept)
	}
	if last := out.Logs[len(out.Logs)-1]; !strings.Contains(last.Message, "dropped") {
		t.Errorf("the last log line (%d bytes) does not say lines were dropped", len(last.Message))
	}
}

// TestEmptyLogMessagesBounded: a log message costs the budget its bytes
// and logLineCost more, so an upstream sending empty log messages (20,000
// in one call, five times the budget's worth; 200,000 take minutes under
// -race on two cores and prove no more) gets at most (MaxLogBytes-logMarkerRoom)/logLineCost =
// 4,088 kept and relayed to the agent, and one marker counting the rest;
// the log, marker included, costs at most MaxLogBytes. The sandbox's rule
// for a WebAssembly tool's log (TestEmptyLogLinesBounded).
func TestEmptyLogMessagesBounded(t *testing.T) {
	const lines = 20_000
	srv := mcp.NewServer(&mcp.Implementation{Name: "empty", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "empty", Description: "logs empty messages"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			for i := 0; i < lines; i++ {
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: ""}); err != nil {
					return nil, struct{}{}, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, struct{}{}, nil
		})
	hub, imp := hubOver(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	relayed := 0
	out, err := hub.Call(ctx, Call{Import: "empty", Table: imp, Exposed: "empty.empty", Tool: "empty", Input: []byte(`{}`),
		Timeout: 50 * time.Second, Redact: func(s string) string { return s },
		OnLog: func(api.LogEntry) { mu.Lock(); relayed++; mu.Unlock() }})
	if err != nil || out.Failure != nil {
		t.Fatalf("call: %+v %v", out.Failure, err)
	}
	const want = (MaxLogBytes - logMarkerRoom) / logLineCost // 4,088
	if len(out.Logs) == 0 {
		t.Fatal("no log at all: want the upstream's first lines and a marker")
	}
	kept, marker := out.Logs[:len(out.Logs)-1], out.Logs[len(out.Logs)-1]
	mu.Lock()
	gotRelayed := relayed
	mu.Unlock()
	t.Logf("%d of %d empty messages kept, %d relayed; marker %q", len(kept), lines, gotRelayed, marker.Message)
	if len(kept) != want || gotRelayed != want {
		t.Errorf("%d empty log messages: %d kept, %d relayed to the agent; want %d each (MaxLogBytes-logMarkerRoom)/logLineCost",
			lines, len(kept), gotRelayed, want)
	}
	for i, e := range kept {
		if e.Source != api.SourceLog || e.Message != "" {
			t.Fatalf("kept line %d is %+v: want an empty line of the upstream's log", i, e)
		}
	}
	wantMarker := api.LogEntry{Level: api.LevelWarn, Source: api.SourceHost,
		Message: fmt.Sprintf("log truncated: %d more lines (0 bytes) dropped past the %d-byte limit", lines-want, MaxLogBytes)}
	if marker != wantMarker {
		t.Errorf("marker %+v\nwant   %+v", marker, wantMarker)
	}
	cost := 0
	for _, e := range out.Logs {
		cost += len(e.Message) + logLineCost
	}
	if cost > MaxLogBytes {
		t.Errorf("the log, marker included, costs %d bytes: want at most %d", cost, MaxLogBytes)
	}
}

// TestCallOutputBounded: what an upstream answers is held to the output
// limit of every tool (1 MiB, a WebAssembly tool's and a wrapped CLI's
// default), not only to the 4 MiB message cap: its structuredContent, once
// re-encoded (json.Marshal writes '<' as \u003c), may even grow past that.
func TestCallOutputBounded(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "a big answer"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"x": strings.Repeat("x", 3<<19)}, nil
		})
	hub, imp := hubOver(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := hub.Call(ctx, Call{Import: "big", Table: imp, Exposed: "big.big", Tool: "big", Input: []byte(`{}`),
		Timeout: 50 * time.Second, Redact: func(s string) string { return s }})
	if err != nil {
		t.Fatal(err)
	}
	if out.Failure == nil || out.Failure.Kind != api.KindTool || !strings.Contains(out.Failure.Message, "over the 1048576-byte output limit") {
		t.Fatalf("an upstream answer of 1.5 MiB: output %d bytes, failure %+v; want kind tool naming the 1 MiB output limit", len(out.Output), out.Failure)
	}
	t.Logf("failure: %s: %s", out.Failure.Kind, out.Failure.Message)
}

// hubOver is a hub of one import: srv, an SDK server over streamable HTTP
// on loopback.
func hubOver(t *testing.T, srv *mcp.Server) (*Hub, *config.MCPImport) {
	t.Helper()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	imp := &config.MCPImport{URL: ts.URL}
	hub := New(Options{
		Current: func(name string, got *config.MCPImport) bool { return got == imp },
		Secret:  func(string) (string, bool) { return "", false },
	})
	t.Cleanup(hub.Close)
	return hub, imp
}

// TestCutNeverKeepsACredentialsBeginning: an upstream's text is cut to a
// limit (a log message at mcpimport.MaxLogMessage, an error at
// MaxOutputBytes). Cut first, a credential straddling the limit would
// lose its end, and redaction, which looks for the whole value, would let
// its beginning through: into the call's log, the agent's error and the
// operator's log. Each is redacted whole, then cut.
func TestCutNeverKeepsACredentialsBeginning(t *testing.T) {
	const secret = "Zq7-upstream-credential-9f31"
	// across puts the credential across a limit, its first before bytes
	// before it, and more text after, so that the message is cut whether
	// or not the credential was redacted first. A cut at the limit itself
	// falls inside it with before 8; one that leaves room for the marker
	// (" [truncated by maiden]", 22 bytes) with before 30.
	across := func(limit, before int) string {
		return strings.Repeat("x", limit-before) + secret + strings.Repeat("y", 64)
	}
	type at struct {
		Before int `json:"before"`
	}
	release := make(chan struct{})
	holding := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "log", Description: "logs the credential across the cut"},
		func(ctx context.Context, req *mcp.CallToolRequest, in at) (*mcp.CallToolResult, struct{}, error) {
			err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: across(mcpimport.MaxLogMessage, in.Before)})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, struct{}{}, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "fails with the credential across the cut"},
		func(ctx context.Context, req *mcp.CallToolRequest, in at) (*mcp.CallToolResult, struct{}, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: across(MaxOutputBytes, in.Before)}}}, struct{}{}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "hold", Description: "waits, so that another call's log is no single call's"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			close(holding)
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, struct{}{}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	imp := &config.MCPImport{URL: ts.URL, Credential: "LEAKY_TOKEN"}
	var oplog testkit.SyncBuffer
	hub := New(Options{
		Current: func(name string, got *config.MCPImport) bool { return got == imp },
		Secret:  func(name string) (string, bool) { return secret, name == "LEAKY_TOKEN" },
		Logger:  slog.New(slog.NewTextHandler(&oplog, nil)),
	})
	t.Cleanup(hub.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	redact := func(s string) string { return RedactCredential(s, "LEAKY_TOKEN", secret) }
	call := func(tool string, before int) Outcome {
		t.Helper()
		out, err := hub.Call(ctx, Call{Import: "leaky", Table: imp, Exposed: "leaky." + tool, Tool: tool, Input: fmt.Appendf(nil, `{"before":%d}`, before),
			Timeout: 50 * time.Second, Redact: redact})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	leaked := func(where, s string) {
		t.Helper()
		if strings.Contains(s, secret[:6]) {
			i := strings.Index(s, secret[:6])
			t.Errorf("%s keeps the credential's beginning: ...%s", where, s[max(0, i-10):min(len(s), i+12)])
		}
	}
	var out Outcome
	for _, before := range []int{8, 30} {
		out = call("log", before)
		if out.Failure != nil || len(out.Logs) != 1 || !strings.HasSuffix(out.Logs[0].Message, "[truncated by maiden]") {
			t.Fatalf("log: %+v, %d lines", out.Failure, len(out.Logs))
		}
		leaked(fmt.Sprintf("the call's log (%d bytes before the limit)", before), out.Logs[0].Message)
		if out = call("fail", before); out.Failure == nil || !strings.HasSuffix(out.Failure.Message, "[truncated by maiden]") {
			t.Fatalf("fail: %+v", out.Failure)
		}
		leaked(fmt.Sprintf("the call's error (%d bytes before the limit)", before), out.Failure.Message)
	}

	// With two calls on the upstream, a log message is no single call's:
	// it goes to the operator's log.
	held := make(chan Outcome, 1)
	go func() {
		out, _ := hub.Call(ctx, Call{Import: "leaky", Table: imp, Exposed: "leaky.hold", Tool: "hold", Input: []byte(`{}`), Timeout: 50 * time.Second, Redact: redact})
		held <- out
	}()
	select {
	case <-holding:
	case out := <-held:
		t.Fatalf("the holding call ended before it held: %+v", out.Failure)
	}
	for _, before := range []int{8, 30} {
		if out = call("log", before); len(out.Logs) != 0 {
			t.Errorf("a log message with two calls in flight went to a call: %d lines", len(out.Logs))
		}
	}
	close(release)
	<-held
	if !strings.Contains(oplog.String(), "MCP upstream log message") {
		t.Fatalf("the operator's log has no upstream message: %q", oplog.String())
	}
	leaked("the operator's log", oplog.String())
}
