package pipeline

import (
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
)

// TestEscapedDescriptionKey: an escaped key is read as the description
// loader reads it (command.IsDescription, TestIsDescription in
// internal/command), so a description cannot pass as a JSON Schema by
// spelling its key differently: it is loaded (and here refused) as a
// description.
func TestEscapedDescriptionKey(t *testing.T) {
	if s := compileToolSchema(`{"maiden\u005fcommand":1,"name":"x","type":"object"}`); s.err == nil || !strings.Contains(s.err.Error(), "command description") {
		t.Errorf("escaped key: %v", s.err)
	}
}

// TestSameToolCommand: the version that runs must read the call as the
// version it was authorized with did. A replaced version (the stale-file
// retry) that reads it as another command, or that changed kind (JSON
// input ⇄ command tree), is refused.
func TestSameToolCommand(t *testing.T) {
	load := func(text string) *inputSchema {
		t.Helper()
		s := compileToolSchema(text)
		if s.err != nil {
			t.Fatal(s.err)
		}
		return s
	}
	v1 := load(`{"maiden_command":1,"name":"t","commands":[{"name":"list","options":[{"name":"n","type":"integer"}]},{"name":"rm"}]}`)
	// v2 adds an option with a default: the same input now renders with it.
	v2 := load(`{"maiden_command":1,"name":"t","commands":[{"name":"list","options":[{"name":"n","type":"integer"},{"name":"all","default":"yes"}]},{"name":"rm"}]}`)
	// v3 only adds a command: list reads the same.
	v3 := load(`{"maiden_command":1,"name":"t","commands":[{"name":"list","options":[{"name":"n","type":"integer"}]},{"name":"rm"},{"name":"add"}]}`)
	jsonTool := load(`{"type":"object"}`)

	authorized := func(s *inputSchema, digest, input string) *invocation {
		doc, err := parseInput(input) // as the parse stage decodes it
		if err != nil {
			t.Fatal(err)
		}
		inv := &invocation{call: Call{Input: input}}
		inv.setInput(input, doc)
		if s.cmd == nil {
			return inv
		}
		cmd, err := s.cmd.ParseValue(doc)
		if err != nil {
			t.Fatal(err)
		}
		inv.cmd, inv.toolCmd = cmd, &toolCommand{spec: s.cmd, digest: digest}
		return inv
	}
	tool := func(digest string) *sandbox.Tool { return &sandbox.Tool{LoadInfo: sandbox.LoadInfo{Digest: digest}} }
	const list = `{"command":"list","n":5}`
	for _, c := range []struct {
		name   string
		inv    *invocation
		t      *sandbox.Tool
		s      *inputSchema
		want   bool
		render string // the rendering the call then has
	}{
		{"same version", authorized(v1, "d1", list), tool("d1"), v1, true, "list --n=5"},
		{"new version, same reading", authorized(v1, "d1", list), tool("d3"), v3, true, "list --n=5"},
		{"new version, other reading", authorized(v1, "d1", list), tool("d2"), v2, false, "list --n=5"},
		{"command tree became JSON input", authorized(v1, "d1", list), tool("dj"), jsonTool, false, "list --n=5"},
		{"JSON input became a command tree", authorized(jsonTool, "dj", list), tool("d1"), v1, false, ""},
		{"JSON input both times", authorized(jsonTool, "dj", `{"x":1}`), tool("dk"), jsonTool, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, toolCmd, got := sameCommand(c.inv, c.t, c.s)
			if got != c.want {
				t.Fatalf("sameCommand = %v, want %v", got, c.want)
			}
			if got {
				c.inv.useLoaded(loaded{version: c.t, schema: c.s, cmd: cmd, toolCmd: toolCmd}) // as the load stage writes it
			}
			if c.inv.cmd != nil && c.inv.cmd.String() != c.render {
				t.Errorf("rendering %q, want %q (what was authorized)", c.inv.cmd.String(), c.render)
			}
			if c.want && c.inv.toolCmd != nil && c.inv.toolCmd.digest != c.t.Digest {
				t.Errorf("the call is not bound to the version that runs: %s", c.inv.toolCmd.digest)
			}
		})
	}
}
