package pipeline

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestKindsDecidedOnce: the kind of every name is decided when the
// configuration is set, by its table: a [tools] entry is WebAssembly, a
// [clis] entry a wrapped CLI, an [mcp] import's NAME and NAME.TOOL the
// import, a built-in's name a built-in unless a [tools] entry shadows it,
// and anything else the backend whose exposure refuses it. SetConfig
// decides again; a configuration no longer in force keeps its own kinds.
func TestKindsDecidedOnce(t *testing.T) {
	dir := t.TempDir()
	root := testkit.RepoRoot(t)
	echo := testkit.Component(t, "echo")
	h, cfg := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[tools.cards_list]
path = %q
[clis.git]
path = "/usr/bin/git"
command_file = %q
[mcp.calc]
url = "http://127.0.0.1:1/mcp"
[agents.a]
tools = ["echo", "git", "calc", "cards_revoke", "fs_read"]
`, echo, echo, filepath.Join(root, "examples/git/git.command.json")), &Options{Isolation: api.InProcess})
	defer h.Close(t.Context())
	kind := func(b backend) string {
		switch b := b.(type) {
		case *wasmBackend:
			return "wasm"
		case *cliBackend:
			return "cli"
		case *importBackend:
			return "import"
		case *builtinBackend:
			return "builtin:" + b.name
		}
		return fmt.Sprintf("%T", b)
	}
	k := h.kindsOf(cfg)
	if k != h.kindsOf(cfg) {
		t.Fatal("the kinds of the configuration in force were decided again")
	}
	for name, want := range map[string]string{
		"echo":         "wasm",
		"cards_list":   "wasm", // a [tools] entry shadows the built-in
		"git":          "cli",
		"calc":         "import",
		"calc.add":     "import",
		"cards_revoke": "builtin:cards_revoke",
		"fs_read":      "builtin:fs_read",
		"nope":         "wasm", // exposure refuses it (ErrUnknownTool)
		"echo.x":       "wasm",
	} {
		if got := kind(k.of(name)); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	next := testConfig(t, dir, fmt.Sprintf("version = 1\n[clis.echo]\npath = \"/usr/bin/git\"\ncommand_file = %q\n", filepath.Join(root, "examples/git/git.command.json")))
	h.SetConfig(next)
	if got := kind(h.kindsOf(next).of("echo")); got != "cli" {
		t.Errorf("after SetConfig, echo is %s, want cli", got)
	}
	if got := kind(h.kindsOf(cfg).of("echo")); got != "wasm" {
		t.Errorf("the older configuration's echo is %s, want wasm", got)
	}
}
