package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestHelpCommandTool: maiden help TOOL [COMMAND...] for a WebAssembly
// tool whose schema() is a command tree (testdata/tools/cmdecho.wat) loads
// it and prints its commands; a JSON-input tool and a tool whose
// description does not load are errors that say so, and maiden check
// refuses the latter naming the JSON path of the problem.
func TestHelpCommandTool(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	body := fmt.Sprintf("version = 1\n[tools.cmdecho]\npath = %q\n[tools.echo]\npath = %q\n[tools.badcommand]\npath = %q\n",
		testkit.Component(t, "cmdecho"), testkit.Component(t, "echo"), testkit.Component(t, "badcommand"))
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := testkit.CompileCache(t)
	r := cli(t, "", "help", "-config", cfg, "cmdecho", "add")
	if r.code != exitOK || !strings.Contains(r.stdout, "Usage: cmdecho add") || !strings.Contains(r.stdout, "--times") {
		t.Fatalf("help cmdecho add: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "", "help", "-config", cfg, "cmdecho")
	if r.code != exitOK || !strings.Contains(r.stdout, "remote") || !strings.Contains(r.stdout, "list") {
		t.Fatalf("help cmdecho: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, "", "help", "-config", cfg, "echo"); r.code != exitUsage || !strings.Contains(r.stderr, "echo takes a JSON object, not commands") {
		t.Fatalf("help echo: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	const why = "$.commands[0].options[0].kind"
	if r := cli(t, "", "help", "-config", cfg, "badcommand"); r.code != exitTrap || !strings.Contains(r.stderr, why) {
		t.Fatalf("help badcommand: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "", "check", "-config", cfg, "-cache", cache)
	if r.code == exitOK || !strings.Contains(r.stderr, "tools.badcommand: ") || !strings.Contains(r.stderr, why) || strings.Contains(r.stderr, "tools.cmdecho:") {
		t.Fatalf("check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "", "tools", "-config", cfg, "-cache", cache, "-json")
	var infos []struct {
		Name        string
		InputSchema json.RawMessage `json:"input_schema"`
		Error       *struct{ Kind string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &infos); r.code != exitOK || err != nil || len(infos) != 3 {
		t.Fatalf("tools: exit %d (%v)\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if s := string(infos[1].InputSchema); infos[1].Name != "cmdecho" || infos[1].Error != nil || strings.Contains(s, "maiden_command") || !strings.Contains(s, `"remote show"`) {
		t.Errorf("tools shows cmdecho as %s (error %+v), want the projection", s, infos[1].Error)
	}
	if infos[0].Name != "badcommand" || infos[0].Error == nil || infos[0].Error.Kind != "invalid" {
		t.Errorf("tools shows badcommand with error %+v, want kind invalid", infos[0].Error)
	}
}

// TestNewJSCommand: maiden new js-command makes a JS project whose
// index.js declares a command tree named after the tool, and says how to
// call it with a command.
func TestNewJSCommand(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "wordy")
	r := cli(t, "", "new", "js-command", dir, "-add=false")
	if r.code != exitOK || !strings.Contains(r.stdout, "a JavaScript tool named wordy") || !strings.Contains(r.stdout, `{"command":"count"`) || !strings.Contains(r.stdout, "memory_mb = 128") {
		t.Fatalf("new js-command: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	src, err := os.ReadFile(filepath.Join(dir, "index.js"))
	if err != nil || !strings.Contains(string(src), "maiden_command: 1") || !strings.Contains(string(src), `name: "wordy"`) {
		t.Fatalf("index.js: %v\n%s", err, src)
	}
}
