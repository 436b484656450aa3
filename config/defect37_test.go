package config

import (
	"os"
	"strings"
	"testing"
)

// Pass 37's defect: [tools] refused two tools whose names differ only by
// case or '-' vs '_' (MCP clients and humans read them as one), but a
// [clis.NAME] or [mcp.NAME] was compared with the names before it
// exactly, so an agent could be given "deploy_prod" (a tool) beside
// "deploy-prod" (a wrapped CLI), and a human approving one could be
// approving the other. Tools, wrapped CLIs and imports are one namespace
// now, every name compared with all the others the same way, and with the
// built-ins' names.
func TestConfusableNamesAcrossSections(t *testing.T) {
	const cli = "command = '{\"maiden_command\": 1, \"name\": \"c\"}'\npath = \"$DIR/prog\"\n"
	for _, tc := range []struct{ name, body, want string }{
		{"a tool and a CLI", "[tools.deploy_prod]\npath = \"w.wasm\"\n[clis.deploy-prod]\n" + cli,
			`clis.deploy-prod: duplicate tool: same name as "deploy_prod" on line `},
		{"two CLIs", "[clis.c-x]\n" + cli + "[clis.c_x]\n" + cli,
			`clis.c_x: duplicate tool: same name as "c-x" on line `},
		{"a tool and an import", "[tools.up_stream]\npath = \"w.wasm\"\n[mcp.up-stream]\nurl = \"https://mcp.example.com/mcp\"\n",
			`mcp.up-stream: duplicate tool: same name as "up_stream" on line `},
		{"a CLI and an import", "[clis.up-x]\n" + cli + "[mcp.up_x]\nurl = \"https://mcp.example.com/mcp\"\n",
			`mcp.up_x: duplicate tool: same name as "up-x" on line `},
		{"two imports", "[mcp.up-stream]\nurl = \"https://mcp.example.com/mcp\"\n[mcp.up_stream]\nurl = \"https://mcp.example.com/mcp\"\n",
			`mcp.up_stream: duplicate tool: same name as "up-stream" on line `},
		{"a tool and a built-in", "[tools.fs-read]\npath = \"w.wasm\"\n",
			`tools.fs-read: duplicate tool: same name as the built-in "fs_read"`},
		{"a CLI and a built-in", "[clis.web-fetch]\n" + cli,
			`clis.web-fetch: duplicate tool: same name as the built-in "web_fetch"`},
		{"the same name exactly, a tool and a CLI", "[tools.x]\npath = \"w.wasm\"\n[clis.x]\n" + cli,
			`clis.x: "x" is also a [tools] name`},
	} {
		cfg, _, err := load37(t, tc.body, map[string]os.FileMode{"w.wasm": 0o644, "prog": 0o755})
		if err == nil {
			var names []string
			for _, tool := range cfg.Tools() {
				names = append(names, tool.Name)
			}
			t.Errorf("%s: accepted with tools %s; want refused: %s", tc.name, strings.Join(names, ", "), tc.want)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	// Names that differ otherwise stay apart; a tool named exactly like a
	// built-in stands in for it (docs/security-tests.md, "shadows").
	if _, _, err := load37(t, "[tools.fs_read]\npath = \"w.wasm\"\n[mcp.fs-write]\nurl = \"https://mcp.example.com/mcp\"\n", map[string]os.FileMode{"w.wasm": 0o644}); err != nil {
		t.Errorf("a tool named fs_read and an import named fs-write: %v; want accepted", err)
	}
	if _, _, err := load37(t, "[tools.up_stream]\npath = \"w.wasm\"\n[clis.up_streams]\n"+cli+"[mcp.upstream]\nurl = \"https://mcp.example.com/mcp\"\n",
		map[string]os.FileMode{"w.wasm": 0o644, "prog": 0o755}); err != nil {
		t.Errorf("up_stream, up_streams and upstream: %v; want accepted", err)
	}
}

// Pass 37 noted that [mcp.NAME] url took plain http to any host although
// its message said "http only to loopback": maiden check passed a file
// that failed when the import connected (internal/mcpimport refuses it).
// Now refused where it is written; http to loopback stays allowed.
func TestMCPURLPlainHTTPOnlyToLoopback(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // "" for accepted
	}{
		{"http://mcp.example.com/mcp", `mcp.up.url: must be an https URL without user:password (http only to loopback), got "http://mcp.example.com/mcp"`},
		{"http://10.0.0.7:8080/mcp", `mcp.up.url: must be an https URL`},
		{"http://localhost.example.com/mcp", `mcp.up.url: must be an https URL`},
		{"http://127.0.0.1:8080/mcp", ""},
		{"http://[::1]:8080/mcp", ""},
		{"http://localhost:8080/mcp", ""},
		{"https://mcp.example.com/mcp", ""},
	} {
		_, _, err := load37(t, "[mcp.up]\nurl = \""+tc.url+"\"\n", nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("url %s: %v; want accepted", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("url %s: %v; want %q", tc.url, err, tc.want)
		}
	}
}
