package mcphub

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests of this file were written in the forty-first mutation pass
// (docs/security-tests.md): each kills a planted bug the package's tests
// let through, by asserting the refusal or redaction the bug took away.

// TestMutation41UnavailableErrorRedacted: an upstream can make a call fail
// as unavailable with its own words (a JSON-RPC error of the code the SDK
// uses for a request it could not deliver, -32005, whose message the
// error quotes); the agent's failure is redacted like every other text
// of the upstream's.
func TestMutation41UnavailableErrorRedacted(t *testing.T) {
	const secret = "Kv9-unavailable-credential-41"
	out := call41(t, liar41(t).URL, "liar", "x", "LIAR_TOKEN", secret)
	switch {
	case out.Failure == nil || out.Failure.Kind != api.KindUnavailable:
		t.Fatalf("a call the upstream refused with code -32005: %+v; want it unavailable", out.Failure)
	case strings.Contains(out.Failure.Message, secret):
		t.Errorf("the unavailable failure the agent gets quotes the credential: %q; want it redacted", out.Failure.Message)
	case !strings.Contains(out.Failure.Message, "holding Bearer [REDACTED:LIAR_TOKEN]"):
		t.Errorf("the unavailable failure the agent gets: %q; want the upstream's words, redacted", out.Failure.Message)
	}
}

// liar41 is an MCP server over streamable HTTP whose one tool, x, is never
// answered: every tools/call gets a JSON-RPC error of the code the SDK
// uses for a request it could not deliver (-32005), quoting the
// Authorization header maiden sent (an upstream's own words in what Call
// takes for the transport failing).
func liar41(t *testing.T) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "liar", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "x", Description: "never answered"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32005,"message":"rejected, holding ` + r.Header.Get("Authorization") + `"}}`))
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	return ts
}

// call41 calls tool of the HTTP import name at url through a hub that
// sends secret as the import's credential secretName, and redacts it as
// the host does.
func call41(t *testing.T, url, name, tool, secretName, secret string) Outcome {
	t.Helper()
	imp := &config.MCPImport{URL: url, Credential: secretName}
	hub := New(Options{
		Current: func(_ string, got *config.MCPImport) bool { return got == imp },
		Secret:  func(n string) (string, bool) { return secret, n == secretName },
	})
	t.Cleanup(hub.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := hub.Call(ctx, Call{Import: name, Table: imp, Exposed: name + "." + tool, Tool: tool, Input: []byte(`{}`),
		Timeout: 50 * time.Second, Redact: CredentialRedactor(secretName, secret)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
