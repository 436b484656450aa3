//lint:file-ignore SA1019 the test sends MCP log messages, deprecated upstream (SEP-2577) but still relayed

package mcphub

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
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
