package command

import (
	"strings"
	"testing"
)

// TestIsDescription: only a top-level "maiden_command" key makes
// schema() text a command description, however the key is spelled in
// JSON; a JSON Schema that merely mentions it (a property, a nested
// object) stays a JSON Schema, and text that is not an object is not one.
func TestIsDescription(t *testing.T) {
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
		if got := IsDescription(text); got != want {
			t.Errorf("IsDescription(%s) = %v, want %v", text, got, want)
		}
	}
}

// TestToolCallShape: the JSON a command-tree tool receives, for a
// description with every kind of option, integer positionals and stdin.
func TestToolCallShape(t *testing.T) {
	spec, err := Load([]byte(`{"maiden_command":1,"name":"t","options":[{"name":"v","kind":"count","global":true}],"commands":[{"name":"go","end_of_options":"--",
		"options":[{"name":"l","kind":"list","type":"integer"},{"name":"m","kind":"map"},{"name":"no-x","kind":"bool"},{"name":"o","kind":"optional","implicit":"auto"},{"name":"d","default":"dv"}],
		"positionals":[{"name":"a","type":"integer"},{"name":"rest","variadic":true}],"stdin":{"media_type":"text/plain"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		`{"command":"go","l":[3,1],"m":{"b":"2","a":"1"},"no-x":true,"o":"auto","v":3,"a":7,"rest":["-x","y"],"stdin":""}`: `{"command":["go"],"options":{"d":"dv","l":[3,1],"m":{"a":"1","b":"2"},"no-x":true,"o":"auto","v":3},"positionals":[7,"-x","y"],"stdin":""}`,
		`{"command":"go"}`: `{"command":["go"],"options":{"d":"dv"},"positionals":[]}`,
	} {
		cmd, err := spec.ParseJSON([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := string(cmd.ToolCall()); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}
