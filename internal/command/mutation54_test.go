package command

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestMutation54LoadRefusesUnsafeDescriptions: whoever writes a
// description (a [clis] entry, a tool's schema()) is held at load to the
// rules a call's argv relies on: every name a command word, no spelling
// that renders as a flag or an assignment, no rule the call checks would
// silently ignore (an enum on an integer, a range on a string), no two
// parts sharing a name or a short spelling, no unknown key.
func TestMutation54LoadRefusesUnsafeDescriptions(t *testing.T) {
	const h = `{"maiden_command":1,"name":"x",`
	for _, tc := range []struct{ in, path, why string }{
		// names an argv or a grant shows must be command words
		{h + `"commands":[{"name":"c","aliases":["-rf"]}]}`, "$.commands[0].aliases[0]", "must be a letter or digit"},
		{h + `"options":[{"name":"x=y"}]}`, "$.options[0].name", "must be a letter or digit"},
		{h + `"options":[{"name":"-exec"}]}`, "$.options[0].name", "must be a letter or digit"},
		{h + `"options":[{"name":"a","short":"-"}]}`, "$.options[0].short", "one ASCII letter or digit"},
		{h + `"options":[{"name":"a","short":"="}]}`, "$.options[0].short", "one ASCII letter or digit"},
		{h + `"positionals":[{"name":"-x"}]}`, "$.positionals[0].name", "must be a letter or digit"},
		{h + `"aliases":["y"]}`, "$.aliases", "the top command has no aliases"},
		// a short-only option needs its short spelling: else argv is "-"+VALUE
		{h + `"options":[{"name":"a","short_only":true}]}`, "$.options[0].short_only", "needs a short spelling"},
		// an environment variable's name cannot hold '='
		{h + `"options":[{"name":"a","env":"PATH=/evil"}]}`, "$.options[0].env", "not a variable name"},
		// rules the call would ignore are refused, not dropped
		{h + `"options":[{"name":"n","type":"integer","enum":["1","2"]}]}`, "$.options[0].enum", "only string values have an enum"},
		{h + `"options":[{"name":"s","minimum":0}]}`, "$.options[0].minimum", "only integer values have a range"},
		{h + `"options":[{"name":"s","enum":[]}]}`, "$.options[0].enum", "at least one value"},
		{h + `"options":[{"name":"n","type":"integer","minimum":5,"maximum":4}]}`, "$.options[0].maximum", "is below minimum"},
		{h + `"options":[{"name":"m","kind":"map","type":"integer"}]}`, "$.options[0].type", "a map's values are strings"},
		{h + `"options":[{"name":"b","kind":"bool","required":true}]}`, "$.options[0].required", "cannot be required"},
		{h + `"options":[{"name":"l","kind":"list","default":"v"}]}`, "$.options[0].default", "only a value or optional option has a default"},
		{h + `"options":[{"name":"o","kind":"optional","enum":["a","b"],"implicit":"--exec=sh"}]}`, "$.options[0].implicit", `"--exec=sh" is not one of a, b`},
		{h + `"options":[{"name":"o","kind":"optional","type":"integer","maximum":3,"implicit":4}]}`, "$.options[0].implicit", "above the maximum"},
		// no two parts share a name or a short spelling
		{h + `"positionals":[{"name":"p"},{"name":"p"}]}`, "$.positionals", `positional "p": the name is taken by a positional`},
		{h + `"options":[{"name":"g","short":"s","global":true}],"commands":[{"name":"c","options":[{"name":"h","short":"s"}]}]}`, "$.commands[0].options", "-s is another option's"},
		// constraints
		{h + `"options":[{"name":"a"}],"constraints":[{"one_of":["a"]}]}`, "$.constraints[0].one_of", "at least two"},
		{h + `"options":[{"name":"a","default":"1"},{"name":"b"}],"constraints":[{"one_of":["a","b"]}]}`, "$.constraints[0].one_of[0]", "has a default"},
		{h + `"options":[{"name":"a"},{"name":"b"}],"constraints":[{"exclusive":["a","b"],"nmae":1}]}`, "$.constraints[0].nmae", "unknown key"},
		// a misspelt key is refused, never ignored: "enmu" would leave the
		// value open to anything
		{h + `"options":[{"name":"s","enmu":["a"]}]}`, "$.options[0].enmu", "unknown key"},
		{h + `"positionals":[{"name":"p","enmu":["a"]}]}`, "$.positionals[0].enmu", "unknown key"},
		{h + `"stdin":{"media_type":"text/plain","requried":true}}`, "$.stdin.requried", "unknown key"},
		{h + `"options":[{"name":"s","enum":["a",5]}]}`, "$.options[0].enum[1]", "want a string, got the number 5"},
		// the rest of the format
		{h + `"errors":[{"name":"e","exit_code":256}]}`, "$.errors[0].exit_code", "1..255"},
		{h + `"errors":[{"name":"","exit_code":3}]}`, "$.errors[0].name", "must not be empty"},
		{`{"maiden_command":0,"name":"x"}`, "$.maiden_command", "version 0 is not supported"},
	} {
		_, err := LoadProgram([]byte(tc.in))
		var se *SpecError
		if !errors.As(err, &se) || !errors.Is(err, ErrSpec) {
			t.Errorf("LoadProgram(%s) = %v; want refused at %s: %q", tc.in, err, tc.path, tc.why)
			continue
		}
		if se.Path != tc.path || !strings.Contains(se.Why, tc.why) {
			t.Errorf("LoadProgram(%s): %v; want refused at %s: %q", tc.in, err, tc.path, tc.why)
		}
	}
}

// TestMutation54IntegersAreDecimal: an integer is read in decimal only,
// so the value the grant sees (canonical) is the value the program is
// given: "0x10" or "1_0" would be checked as 16 or 10 and rendered 0.
func TestMutation54IntegersAreDecimal(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","options":[{"name":"n","type":"integer","maximum":20}]}`)
	for _, v := range []string{"0x10", "0b1", "1_0", "0o7"} {
		inv, err := s.ParseArgv([]string{"--n=" + v})
		if err == nil {
			t.Errorf("--n=%s accepted: argv %q, rendering %q; want refused as not an integer", v, inv.Argv(StyleEquals), inv.String())
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "want an integer") {
			t.Errorf("--n=%s: %v; want refused: want an integer", v, err)
		}
	}
}

// TestMutation54DefaultIsCanonical: an integer default is rendered in its
// one form, as a call's value is: a grant matching --n=0 sees the default
// the program gets, and argv never starts a default with '-' for -0.
func TestMutation54DefaultIsCanonical(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","options":[{"name":"n","type":"integer","default":-0}]}`)
	inv, err := s.ParseArgv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.String(); got != "--n=0" {
		t.Errorf("a default of -0 renders %q (argv %q); want \"--n=0\"", got, inv.Argv(StyleSeparate))
	}
}

// TestMutation54OnlyGlobalOptionsAreInherited: a subcommand's call can
// give its own options and its ancestors' global ones, never an
// ancestor's own: "x --force" does not make "x c --force" callable.
func TestMutation54OnlyGlobalOptionsAreInherited(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","options":[{"name":"force","kind":"bool"},{"name":"g","kind":"bool","global":true}],"commands":[{"name":"c","end_of_options":"--"}]}`)
	inv, err := s.ParseArgv([]string{"c", "--force"})
	if err == nil {
		t.Fatalf("x c --force accepted: argv %q; want refused: c has no option --force", inv.Argv(StyleEquals))
	}
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "has no option --force") {
		t.Fatalf("x c --force: %v; want refused: has no option --force", err)
	}
	if got := refusedWith(s, `{"command":"c","force":true}`, `has no option or positional "force"`); got != "" {
		t.Errorf(`{"command":"c","force":true}: %s; want refused: has no option or positional "force"`, got)
	}
	if _, err := s.ParseArgv([]string{"c", "--g"}); err != nil {
		t.Errorf("x c --g (a global option): %v; want accepted", err)
	}
}

// TestMutation54CommandWordsAreExact: a command is found by its name or an
// alias as written, no other spelling.
func TestMutation54CommandWordsAreExact(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","commands":[{"name":"log"},{"name":"status","aliases":["st"]}]}`)
	for _, w := range []string{"LOG", "Log", "ST", "Status"} {
		if c, ok := s.Lookup(w); ok {
			t.Errorf("Lookup(%q) found %q; want no command", w, c.Path())
		}
	}
}

// TestMutation54OnlyABoolFlagNamedNoXIsX: only a bool flag named no-X is
// the boolean false of X; a value option named no-X renders as itself, so
// the grant sees the name the program is given.
func TestMutation54OnlyABoolFlagNamedNoXIsX(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","options":[{"name":"no-verify"},{"name":"no-pager","kind":"bool"}]}`)
	inv, err := s.ParseArgv([]string{"--no-verify=yes", "--no-pager"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range inv.Render() {
		names = append(names, a.Name)
	}
	if !slices.Contains(names, "no-verify") || !slices.Contains(names, "pager") {
		t.Errorf("--no-verify=yes --no-pager renders %q (grant arguments %q); want no-verify (a value option) and pager (false)", inv.String(), names)
	}
	argv, panicked := func() (argv []string, panicked any) {
		defer func() { panicked = recover() }()
		return inv.Argv(StyleEquals), nil
	}()
	if want := []string{"--no-verify=yes", "--no-pager"}; panicked != nil || !slices.Equal(argv, want) {
		t.Errorf("Argv of --no-verify=yes --no-pager: %q (panic: %v); want %q", argv, panicked, want)
	}
}

// TestMutation54SchemaSaysWhatTheCallChecks: the schema an MCP client is
// given names what the call requires and bounds: required options, the
// count's bound, defaults; ErrorFor names only the declared exit code.
func TestMutation54SchemaSaysWhatTheCallChecks(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","options":[{"name":"r","required":true},{"name":"v","kind":"count"},{"name":"d","type":"integer","default":7}],"errors":[{"name":"busy","exit_code":2}]}`)
	var sch struct {
		Required   []string                  `json:"required"`
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal([]byte(s.JSONSchema()), &sch); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sch.Required, "r") {
		t.Errorf("schema's required = %q; want it to list r", sch.Required)
	}
	if got := sch.Properties["v"]["maximum"]; got != float64(1000) {
		t.Errorf("the count's schema %v; want maximum 1000", sch.Properties["v"])
	}
	if got := sch.Properties["d"]["default"]; got != float64(7) {
		t.Errorf("the defaulted option's schema %v; want default 7", sch.Properties["d"])
	}
	if e, ok := s.Root.ErrorFor(1); ok {
		t.Errorf("ErrorFor(1) = %+v; want none (only exit 2 is declared)", e)
	}
	if e, ok := s.Root.ErrorFor(2); !ok || e.Name != "busy" {
		t.Errorf("ErrorFor(2) = %+v, %v; want busy", e, ok)
	}
}

// TestMutation54EnvNamesAtEveryLevel: every option's variable is named,
// a subcommand's too, so the runtime removes each from the wrapped CLI's
// environment and the CLI never reads a value the grant did not see.
func TestMutation54EnvNamesAtEveryLevel(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","options":[{"name":"a","env":"X_A"}],"commands":[{"name":"c","options":[{"name":"tok","env":"X_TOKEN"}],"commands":[{"name":"d","options":[{"name":"deep","env":"X_DEEP"}]}]}]}`)
	if got, want := s.EnvNames(), []string{"X_A", "X_DEEP", "X_TOKEN"}; !slices.Equal(got, want) {
		t.Errorf("EnvNames() = %q; want %q: a variable left out stays in the CLI's environment", got, want)
	}
}

// TestMutation54DeepSiblingsKeepTheirPaths: each command's path is its
// own, however deep: the grant is matched against the path of the command
// the program is given (Argv), never a sibling's.
func TestMutation54DeepSiblingsKeepTheirPaths(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","commands":[{"name":"a","commands":[{"name":"b","commands":[{"name":"c","commands":[`+
		`{"name":"drop","end_of_options":"--"},{"name":"list","end_of_options":"--"}]}]}]}]}`)
	for _, leaf := range []string{"drop", "list"} {
		words := []string{"a", "b", "c", leaf}
		c, ok := s.Lookup(words...)
		if !ok {
			t.Fatalf("Lookup(%q) found nothing", words)
		}
		if got := c.Path(); !slices.Equal(got, words) {
			t.Errorf("the path of %q is %q", words, got)
		}
		inv, err := s.ParseArgv(words)
		if err != nil {
			t.Fatal(err)
		}
		if got, argv := inv.String(), inv.Argv(StyleEquals); got != strings.Join(words, " ") || !slices.Equal(argv, words) {
			t.Errorf("x %s renders %q for the grant, argv %q; want both %q", strings.Join(words, " "), got, argv, words)
		}
	}
}
