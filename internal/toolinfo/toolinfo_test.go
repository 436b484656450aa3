package toolinfo

import (
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
)

// The hints a client may act on (some run a read-only tool without
// asking) claim read-only only for a tool that can change nothing: a
// wrapped CLI that may write files, or one run without Landlock, and an
// imported server's tools are not read-only.
func TestHintsOf(t *testing.T) {
	yes, no := true, false
	readOnly := api.Hints{ReadOnly: true, Idempotent: true}
	mcpDefaults := api.Hints{Destructive: true, OpenWorld: true}
	for _, tt := range []struct {
		name string
		tool config.Tool
		want api.Hints
	}{
		{"a WebAssembly tool without hosts or files", config.Tool{Name: "local"}, readOnly},
		{"a WebAssembly tool reading the session's files", config.Tool{Name: "reader", FS: config.FSRead}, readOnly},
		{"a WebAssembly tool writing the session's files", config.Tool{Name: "writer", FS: config.FSWrite}, api.Hints{Destructive: true}},
		{"a WebAssembly tool with hosts", config.Tool{Name: "net", HTTPAllow: []string{"api.example.com"}}, mcpDefaults},
		{"a wrapped CLI that only reads", config.Tool{Name: "git", CLI: &config.CLI{ReadPaths: []string{"/srv/repo"}}}, readOnly},
		{"a wrapped CLI with write_paths", config.Tool{Name: "git", CLI: &config.CLI{ReadPaths: []string{"/srv/repo"}, WritePaths: []string{"/srv/repo"}}}, api.Hints{Destructive: true}},
		{"a wrapped CLI run without Landlock", config.Tool{Name: "git", CLI: &config.CLI{Unconfined: true}}, api.Hints{Destructive: true}},
		{"a wrapped CLI with hosts", config.Tool{Name: "gh", HTTPAllow: []string{"api.github.com"}, CLI: &config.CLI{}}, mcpDefaults},
		{"an import over HTTP", config.Tool{Name: "tickets", MCP: &config.MCPImport{URL: "https://mcp.example.com/mcp"}}, mcpDefaults},
		{"an import over stdio", config.Tool{Name: "files", MCP: &config.MCPImport{Command: []string{"/usr/bin/srv"}}}, mcpDefaults},
		{"annotations override", config.Tool{Name: "git", CLI: &config.CLI{WritePaths: []string{"/srv/repo"}},
			Annotations: config.Annotations{ReadOnly: &yes, Destructive: &no}}, api.Hints{ReadOnly: true}},
	} {
		if got := HintsOf(tt.tool); got != tt.want {
			t.Errorf("%s: HintsOf = %+v; want %+v", tt.name, got, tt.want)
		}
	}
}
