package maiden

import (
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
)

// TestIsCommandDescription: only a top-level "maiden_command" key makes
// schema() text a command description, however the key is spelled in
// JSON; a JSON Schema that merely mentions it (a property, a nested
// object) stays a JSON Schema, and text that is not an object is not one.
func TestIsCommandDescription(t *testing.T) {
	for text, want := range map[string]bool{
		`{"maiden_command":1,"name":"x"}`:                                  true,
		` { "name":"x", "maiden_command": 1 }`:                             true,
		`{"name":"x","maiden\u005fcommand":1}`:                             true,
		`{"type":"object","properties":{"maiden_command":{"type":"int"}}}`: false,
		`{"type":"object","x":{"maiden_command":1}}`:                       false,
		`["maiden_command"]`:                                               false,
		`"maiden_command"`:                                                 false,
		`{"type":"object"`:                                                 false,
		`{"a":` + strings.Repeat("[", 50) + `, "maiden_command":1}`:        false,
		``: false,
	} {
		if got := isCommandDescription(text); got != want {
			t.Errorf("isCommandDescription(%s) = %v, want %v", text, got, want)
		}
	}
	// An escaped key is read as the description loader reads it, so a
	// description cannot pass as a JSON Schema by spelling its key
	// differently: it is loaded (and here refused) as a description.
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
		inv := &invocation{call: Call{Input: input}}
		if s.cmd == nil {
			return inv
		}
		cmd, err := s.cmd.ParseJSON([]byte(input))
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
			if got := c.inv.sameToolCommand(c.t, c.s); got != c.want {
				t.Fatalf("sameToolCommand = %v, want %v", got, c.want)
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

// TestCommandCallShape: the JSON a command-tree tool receives, for a
// description with every kind of option, integer positionals and stdin.
func TestCommandCallShape(t *testing.T) {
	s := compileToolSchema(`{"maiden_command":1,"name":"t","options":[{"name":"v","kind":"count","global":true}],"commands":[{"name":"go","end_of_options":"--",
		"options":[{"name":"l","kind":"list","type":"integer"},{"name":"m","kind":"map"},{"name":"no-x","kind":"bool"},{"name":"o","kind":"optional","implicit":"auto"},{"name":"d","default":"dv"}],
		"positionals":[{"name":"a","type":"integer"},{"name":"rest","variadic":true}],"stdin":{"media_type":"text/plain"}}]}`)
	if s.err != nil {
		t.Fatal(s.err)
	}
	for in, want := range map[string]string{
		`{"command":"go","l":[3,1],"m":{"b":"2","a":"1"},"no-x":true,"o":"auto","v":3,"a":7,"rest":["-x","y"],"stdin":""}`: `{"command":["go"],"options":{"d":"dv","l":[3,1],"m":{"a":"1","b":"2"},"no-x":true,"o":"auto","v":3},"positionals":[7,"-x","y"],"stdin":""}`,
		`{"command":"go"}`: `{"command":["go"],"options":{"d":"dv"},"positionals":[]}`,
	} {
		cmd, err := s.cmd.ParseJSON([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := string(commandCall(cmd)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}
