package maiden_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestImportedCredentialEncodedEcho: an upstream MCP server that echoes
// the credential maiden attached, not verbatim but in one of the forms a
// server commonly re-encodes a header in (upper-cased by a normaliser,
// base64 in a Basic-auth style error, hex in a debug dump, percent-encoded
// in a URL), must not hand it to the agent: a tool's own secrets are
// redacted in all of those forms (egress's redactor), and the credential
// of an import is a secret like them.
func TestImportedCredentialEncodedEcho(t *testing.T) {
	const secret = "tok3n-Of-Calc/Upstream+x"
	srv := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "leak", Description: "echoes the credential it was sent, encoded"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, leakOut, error) {
			got := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
			var form string
			switch in.A {
			case 0:
				form = strings.ToUpper(got)
			case 1:
				form = base64.StdEncoding.EncodeToString([]byte(got))
			case 2:
				form = hex.EncodeToString([]byte(got))
			default:
				form = url.QueryEscape(got)
			}
			return nil, leakOut{Got: "I got " + form}, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	h := newHostWith(t, `version = 1
[mcp.calc]
accept_new_tools = true
url = "`+hs.URL+`"
credential = "CALC_TOKEN"
[agents.a]
tools = ["calc"]
grants = ["tool:invoke calc.leak --..."]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return secret, name == "CALC_TOKEN" }})
	forms := []string{strings.ToUpper(secret), base64.StdEncoding.EncodeToString([]byte(secret)), hex.EncodeToString([]byte(secret)), url.QueryEscape(secret)}
	for i, form := range forms {
		res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.leak", Input: `{"a":` + string(rune('0'+i)) + `,"b":0}`})
		if !res.OK {
			t.Fatalf("form %d: %+v", i, res.Error)
		}
		if strings.Contains(res.Output, form) || !strings.Contains(res.Output, "[REDACTED:CALC_TOKEN]") {
			t.Errorf("form %d: the upstream's encoded echo of the credential reached the agent: %s", i, res.Output)
		}
	}
}
