package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCheckWarnsOfImportCredentialWithoutSecretUse: an import that sends
// its server a credential has every call of its tools refused for an agent
// whose cards do not allow secret:use of that secret, so maiden check warns
// of each agent bound to it whose grants in agent.toml allow no such use
// (naming the binding's line, the import, the secret and the grant to
// add), and of no agent whose grants do (exactly, or by a pattern) or that
// does not bind the import. Not parallel: the credential's value is an
// environment variable (MAIDEN_SECRET_SHOP_TOKEN), process-wide.
func TestCheckWarnsOfImportCredentialWithoutSecretUse(t *testing.T) {
	const token = "check-shop-token-1234"
	t.Setenv("MAIDEN_SECRET_SHOP_TOKEN", token)
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "pay", Description: "pays"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			return nil, struct{}{}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	body := `version = 1

[mcp.shop]
accept_new_tools = true
url = "` + hs.URL + `"
credential = "SHOP_TOKEN"

[agents.nokey]
tools = ["shop"]
grants = ["tool:invoke shop.pay --..."]

[agents.holder]
tools = ["shop"]
grants = ["tool:invoke shop.pay --...", "secret:use SHOP_TOKEN"]

[agents.wild]
tools = ["shop"]
grants = ["tool:invoke shop.pay --...", "secret:* SHOP_*"]

[agents.other]
tools = ["shop"]
grants = ["tool:invoke shop.pay --...", "secret:use OTHER_TOKEN", "secret:reveal SHOP_TOKEN"]

[agents.unbound]
grants = ["tool:invoke shop.pay --..."]
`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "check", "-config", cfg, "-isolation", "process", "-state", filepath.Join(dir, "state.db"))
	if r.code != exitOK {
		t.Fatalf("check: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	want := []string{
		cfg + `:9: warning: agent nokey binds shop, whose credential SHOP_TOKEN maiden sends its server, but none of its grants allows secret:use SHOP_TOKEN: each call of its tools is refused unless a card allows it (add "secret:use SHOP_TOKEN" to grants, or maiden cards grant -agent nokey 'secret:use SHOP_TOKEN')`,
		cfg + `:21: warning: agent other binds shop, whose credential SHOP_TOKEN maiden sends its server, but none of its grants allows secret:use SHOP_TOKEN`,
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("check's stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "warning:"); n != len(want) {
		t.Errorf("%d warnings, want %d (none for holder, wild or unbound):\n%s", n, len(want), r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Errorf("check printed the credential's value:\n%s\n%s", r.stdout, r.stderr)
	}
}
