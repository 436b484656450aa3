package mcpserver

import (
	"testing"

	"github.com/maiden-run/maiden/config"
)

// TestConfigChangesNamesTrace: a reload that changes [trace] says it
// applies at the next start (the exporter is built once); one that moves
// the table without changing it says nothing changed.
func TestConfigChangesNamesTrace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	parse := func(src string) *config.Config {
		t.Helper()
		c, err := config.Parse("agent.toml", []byte(src), dir)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
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
