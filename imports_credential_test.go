package maiden_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
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
	t.Parallel()
	const secret = "tok3n-Of-Calc/Upstream+x"
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
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
	h := credentialEchoHost(t, srv, secret)
	forms := []string{strings.ToUpper(secret), base64.StdEncoding.EncodeToString([]byte(secret)), hex.EncodeToString([]byte(secret)), url.QueryEscape(secret)}
	for i, form := range forms {
		res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "up.leak", Input: `{"a":` + string(rune('0'+i)) + `,"b":0}`})
		if !res.OK {
			t.Fatalf("form %d: %+v", i, res.Error)
		}
		if strings.Contains(res.Output, form) || !strings.Contains(res.Output, "[REDACTED:UP_TOKEN]") {
			t.Errorf("form %d: the upstream's encoded echo of the credential reached the agent: %s", i, res.Output)
		}
	}
}

// TestImportedCredentialRedactedInEscapedForms: the credential maiden sends
// an upstream is redacted from what the upstream answers in the forms a
// secret of the egress gate is (JSON and HTML escapes, percent and base64
// encodings), not only as its raw bytes. An upstream that echoes it in
// structuredContent has it re-encoded by maiden itself (encoding/json
// writes & as \u0026), and one that answers JSON text written by another
// encoder (PHP's json_encode writes / as \/) escapes it on its own; a
// plain search for the value found neither, and the agent read the token.
func TestImportedCredentialRedactedInEscapedForms(t *testing.T) {
	t.Parallel()
	const token = "s3cret&tok/en"
	srv := mcp.NewServer(&mcp.Implementation{Name: "echoer", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "structured", Description: "echoes the credential as structured content"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, leakOut, error) {
			return nil, leakOut{Got: req.Extra.Header.Get("Authorization")}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "text", Description: "echoes the credential as JSON text with / escaped"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			got := strings.ReplaceAll(req.Extra.Header.Get("Authorization"), "/", `\/`)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"headers":{"Authorization":"` + got + `"}}`}}}, nil, nil
		})
	h := credentialEchoHost(t, srv, token)
	for _, tool := range []string{"up.structured", "up.text"} {
		res := mustCall(t, h, maiden.Call{Agent: "a", Tool: tool, Input: `{"a":1,"b":1}`})
		if !res.OK {
			t.Fatalf("%s: %+v", tool, res.Error)
		}
		var decoded any
		if err := json.Unmarshal([]byte(res.Output), &decoded); err != nil {
			t.Fatalf("%s: output %q is not JSON: %v", tool, res.Output, err)
		}
		if again, _ := json.Marshal(decoded); strings.Contains(string(again), "tok") || strings.Contains(fmt.Sprint(decoded), token) {
			t.Errorf("%s: the agent reads the credential: output %s (decoded %v)", tool, res.Output, decoded)
		}
		if !strings.Contains(res.Output, "[REDACTED:UP_TOKEN]") {
			t.Errorf("%s: output %s, want the credential [REDACTED:UP_TOKEN]", tool, res.Output)
		}
	}
}

// credentialEchoHost serves srv over loopback HTTP, answering only requests
// that carry the credential (Bearer secret), and returns a host importing
// it as [mcp.up] with credential UP_TOKEN = secret, whose agent a may call
// every tool of it.
func credentialEchoHost(t *testing.T, srv *mcp.Server, secret string) *maiden.Host {
	t.Helper()
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return newHostWith(t, `version = 1
[mcp.up]
accept_new_tools = true
url = "`+hs.URL+`"
credential = "UP_TOKEN"
[agents.a]
tools = ["up"]
grants = ["tool:invoke up.* --...", "secret:use UP_TOKEN"]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return secret, name == "UP_TOKEN" }})
}

// TestImportedCredentialHeldToItsBinding: an import sends its credential
// itself ("Authorization: Bearer VALUE" to its url), so a [secrets.NAME]
// binding of that secret must allow the url, as a bearer token. A secret
// bound to one API (here GH_TOKEN, bound to api.example.com for the tool
// that uses it), named as the credential of an import whose url is another
// server, is refused when the configuration is read, naming the binding,
// and that server never receives it; so is a signing key (kind hmac),
// which the import would otherwise send as a bearer token.
func TestImportedCredentialHeldToItsBinding(t *testing.T) {
	t.Parallel()
	const secret = "gh-token-bound-to-api-example-0123"
	var mu sync.Mutex
	var got []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "adds two integers"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	for _, tt := range []struct{ name, binding, want string }{
		{"another host", "hosts = [\"api.example.com\"]\n",
			`mcp.up.credential: the credential "GH_TOKEN" may not be sent to this import's url: its host "127.0.0.1" is not in the hosts of [secrets.GH_TOKEN]`},
		{"signing key", "hosts = [\"127.0.0.1\"]\nkind = \"hmac\"\nalgorithm = \"sha256\"\n",
			`mcp.up.credential: the credential "GH_TOKEN" is of kind "hmac"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			path := filepath.Join(t.TempDir(), "agent.toml")
			body := fmt.Sprintf(`version = 1
[tools.echo]
path = %q
secrets = ["GH_TOKEN"]
[secrets.GH_TOKEN]
`+tt.binding+`
[mcp.up]
accept_new_tools = true
url = "`+hs.URL+`"
credential = "GH_TOKEN"
[agents.a]
tools = ["up"]
grants = ["tool:invoke up.* --...", "secret:use GH_TOKEN"]
`, testkit.Component(t, "echo"))
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err == nil {
				// The configuration was taken: call the import and see
				// where the secret went.
				h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t),
					LookupSecret: func(name string) (string, bool) { return secret, name == "GH_TOKEN" }})
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close(context.Background())
				res, err := h.Call(context.Background(), maiden.Call{Agent: "a", Tool: "up.add", Input: `{"a":1,"b":2}`})
				t.Logf("call: %+v, %v", res, err)
			}
			mu.Lock()
			for _, a := range got {
				if strings.Contains(a, secret) {
					t.Errorf("the upstream at %s received GH_TOKEN (%q), which [secrets.GH_TOKEN] does not allow there", hs.URL, a)
					break
				}
			}
			mu.Unlock()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("config.Load: %v; want an error containing %s", err, tt.want)
			}
		})
	}
}
