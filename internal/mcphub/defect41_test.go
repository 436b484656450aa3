package mcphub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/mcpimport"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Pass 41's two defects, both fixed.
//
// TestRedactedAnswerHeldToTheOutputLimit: MaxOutputBytes bounds what
// a call passes on of its upstream's answer, but the success path checked
// the length before redaction and redacted after: an upstream answering
// exactly 1 MiB made of the credential maiden sends it (4 bytes and up)
// had each copy replaced by "[REDACTED:NAME]", and the agent was handed
// 5.25 MiB. Now measured again once redacted, and refused past the limit
// (the error paths already redacted, then cut).
func TestRedactedAnswerHeldToTheOutputLimit(t *testing.T) {
	const secret = "k3y!"
	srv := mcp.NewServer(&mcp.Implementation{Name: "grow", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "answers the credential, 1 MiB of it"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(secret, MaxOutputBytes/len(secret))}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	out := call41(t, ts.URL, "grow", "echo", "GROW_TOKEN", secret)
	if out.Failure == nil || out.Failure.Kind != api.KindTool || !strings.Contains(out.Failure.Message, "bytes once its credentials were redacted, over the 1048576-byte output limit") || out.Output != "" {
		t.Errorf("an answer of %d bytes made of the credential: %d bytes passed on, failure %+v; want it refused: over the output limit once redacted", MaxOutputBytes, len(out.Output), out.Failure)
	}
}

// TestCallUnavailableErrorRedacted: mcpimport's Options.Redact
// is documented to apply to "a call's UnavailableError", but the cause
// Call built when the connection failed during a call ("the connection
// failed during the call: %w") quoted the SDK's error unredacted, and an
// upstream can put its own words there (a JSON-RPC error of code -32005,
// which Call takes for the transport's). The hub redacts the text again,
// so no agent saw it; any other caller of mcpimport, or a log of the
// error, would have. Now redacted where it is made.
func TestCallUnavailableErrorRedacted(t *testing.T) {
	const secret = "Kv9-unavailable-credential-41"
	ts := liar41(t)
	u, err := mcpimport.New(mcpimport.Options{Name: "liar", URL: ts.URL, BackoffInitial: time.Hour,
		Credential: func(context.Context) (string, error) { return "Bearer " + secret, nil },
		Redact:     CredentialRedactor("LIAR_TOKEN", secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = u.Call(ctx, "x", nil, nil, nil)
	if !errors.Is(err, mcpimport.ErrUnavailable) {
		t.Fatalf("call: %v; want it unavailable", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the call's UnavailableError, with Options.Redact set, quotes the credential: %q; want it redacted", err)
	}
}
