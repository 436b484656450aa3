package mcpserver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/config"
)

// TestConfigChangesNamesTrace: a reload that changes [trace] says it
// applies at the next start (the exporter is built once); one that moves
// the table without changing it says nothing changed.
func TestConfigChangesNamesTrace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	parse := func(src string) *config.Config { return parseConfig(t, dir, src) }
	base := parse("version = 1\n")
	traced := parse("version = 1\n[trace]\notlp_endpoint = \"http://127.0.0.1:4318\"\n")
	moved := parse("version = 1\n\n\n[trace]\notlp_endpoint = \"http://127.0.0.1:4318\"\n")
	if got, want := ConfigChanges(base, traced), "[trace] changed: it applies when maiden serve next starts"; got != want {
		t.Errorf("adding [trace]: %q, want %q", got, want)
	}
	if got, want := ConfigChanges(traced, moved), "no change to tools, agents, middleware or operators"; got != want {
		t.Errorf("moving [trace]: %q, want %q", got, want)
	}
}

// parseConfig parses src as an agent.toml in dir, failing the test if it
// does not.
func parseConfig(t *testing.T, dir, src string) *config.Config {
	t.Helper()
	c, err := config.Parse("agent.toml", []byte(src), dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConfigChangesMovedOperatorsAndMiddleware: [operators.NAME] and
// [middleware.NAME] tables moved are no change (their lines are passed
// over as the tools' and agents' are); an operator added is a change of
// settings other than tools and agents.
func TestConfigChangesMovedOperatorsAndMiddleware(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "guard.wasm"), []byte("\x00asm"), 0o644); err != nil { // named, not loaded
		t.Fatal(err)
	}
	tables := "[operators.alice]\n[middleware.guard]\npath = \"guard.wasm\"\n"
	base := parseConfig(t, dir, "version = 1\n"+tables)
	if got, want := ConfigChanges(base, parseConfig(t, dir, "version = 1\n\n\n"+tables)), "no change to tools, agents, middleware or operators"; got != want {
		t.Errorf("[operators.alice] and [middleware.guard] moved: %q, want %q", got, want)
	}
	if got, want := ConfigChanges(base, parseConfig(t, dir, "version = 1\n"+tables+"[operators.bob]\n")), "settings other than tools and agents changed"; got != want {
		t.Errorf("an operator added: %q, want %q", got, want)
	}
}
