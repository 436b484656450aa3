package command

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/grant"
)

func loadGit(t testing.TB) *Spec {
	t.Helper()
	b, err := os.ReadFile("../../examples/git/git.command.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(b)
	if err != nil {
		t.Fatalf("examples/git/git.command.json: %v", err)
	}
	return s
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ in, path, why string }{
		{`[]`, "$", "JSON object"},
		{`{"name":"x"}`, "$.maiden_command", "missing"},
		{`{"maiden_command":2,"name":"x"}`, "$.maiden_command", "version 2 is not supported"},
		{`{"maiden_command":1,"name":"x","nmae":1}`, "$.nmae", "unknown key"},
		{`{"maiden_command":1,"name":"x","name":"y"}`, "$", "duplicate property"},
		{`{"maiden_command":1,"name":"-x"}`, "$.name", "must be a letter or digit"},
		{`{"maiden_command":1,"name":"x","commands":[{"name":"a"},{"name":"b","aliases":["a"]}]}`, "$.commands[1].name", `"a" names another command`},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","kind":"flag"}]}`, "$.options[0].kind", "must be value, optional"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","type":"float"}]}`, "$.options[0].type", "string or integer"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","kind":"bool","type":"integer"}]}`, "$.options[0].type", "no value type"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","kind":"optional"}]}`, "$.options[0].implicit", "needs the value"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","type":"integer","default":"5"}]}`, "$.options[0].default", "want an integer"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","type":"integer","default":5,"maximum":4}]}`, "$.options[0].default", "above the maximum"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","required":true,"default":"v"}]}`, "$.options[0].default", "required option has no default"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","kind":"list","env":"A"}]}`, "$.options[0].env", "only a value option"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","short":"ab"}]}`, "$.options[0].short", "one ASCII letter"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a"},{"name":"a"}]}`, "$.options", `option "a": the name is taken`},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","short":"s"},{"name":"b","short":"s"}]}`, "$.options", "-s is another option's"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"x","kind":"bool"},{"name":"no-x","kind":"bool"}]}`, "$.options", "renders as --x"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"command"}]}`, "$.options", "reserved"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"g","global":true}],"commands":[{"name":"c","options":[{"name":"g"}]}]}`, "$.commands[0].options", "a global option of"},
		{`{"maiden_command":1,"name":"x","positionals":[{"name":"a","variadic":true},{"name":"b"}]}`, "$.positionals[1].name", "variadic positional must be the last"},
		{`{"maiden_command":1,"name":"x","positionals":[{"name":"a"},{"name":"b","required":true}]}`, "$.positionals[1].required", "cannot follow an optional"},
		{`{"maiden_command":1,"name":"x","positionals":[{"name":"a"}],"commands":[{"name":"c"}]}`, "$.positionals", "cannot have positionals"},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a"}],"constraints":[{"one_of":["a","zz"]}]}`, "$.constraints[0].one_of[1]", `"zz" is not an option`},
		{`{"maiden_command":1,"name":"x","options":[{"name":"a","default":"1"},{"name":"b"}],"constraints":[{"exclusive":["a","b"]}]}`, "$.constraints[0].exclusive[0]", "has a default"},
		{`{"maiden_command":1,"name":"x","constraints":[{}]}`, "$.constraints[0]", "needs one_of"},
		{`{"maiden_command":1,"name":"x","end_of_options":"-"}`, "$.end_of_options", `must be "--"`},
		{`{"maiden_command":1,"name":"x","stdin":{"media_type":"text"}}`, "$.stdin.media_type", "media type"},
		{`{"maiden_command":1,"name":"x","errors":[{"name":"e","exit_code":0}]}`, "$.errors[0].exit_code", "1..255"},
		{`{"maiden_command":1,"name":"x","errors":[{"name":"e","exit_code":2},{"name":"f","exit_code":2}]}`, "$.errors[1].name", "same name or exit code"},
		{`{"maiden_command":1,"name":"x","result":"string"}`, "$.result", "JSON Schema object"},
	} {
		t.Run(tc.path+" "+tc.why, func(t *testing.T) {
			_, err := Load([]byte(tc.in))
			var se *SpecError
			if !errors.As(err, &se) || !errors.Is(err, ErrSpec) {
				t.Fatalf("Load(%s) = %v, want a *SpecError", tc.in, err)
			}
			if se.Path != tc.path || !strings.Contains(se.Why, tc.why) {
				t.Fatalf("Load(%s): %v; want path %s and %q", tc.in, err, tc.path, tc.why)
			}
		})
	}
}

// TestParseArgv: what each argv renders as (the canonical rendering grants
// match) and what a wrapped git is given.
func TestParseArgv(t *testing.T) {
	s := loadGit(t)
	for _, tc := range []struct {
		argv   []string
		render string
		argv2  []string // Argv(StyleEquals)
	}{
		{[]string{"log"}, "log", []string{"log"}},
		{[]string{"log", "-n", "5"}, "log --max-count=5", []string{"log", "--max-count=5"}},
		{[]string{"log", "-n5", "--oneline"}, "log --max-count=5 --oneline", []string{"log", "--max-count=5", "--oneline"}},
		{[]string{"log", "--max-count", "05"}, "log --max-count=5", []string{"log", "--max-count=5"}},
		{[]string{"log", "--max-count=+5"}, "log --max-count=5", []string{"log", "--max-count=5"}},
		{[]string{"--no-pager", "log", "--no-merges"}, "log --no-merges --no-pager", []string{"--no-pager", "log", "--no-merges"}},
		{[]string{"log", "--no-pager"}, "log --no-pager", []string{"--no-pager", "log"}}, // a global option goes where git reads it
		{[]string{"log", "-vvv"}, "log --verbose=3", []string{"log", "--verbose", "--verbose", "--verbose"}},
		{[]string{"log", "-v", "--verbose=2"}, "log --verbose=3", []string{"log", "--verbose", "--verbose", "--verbose"}},
		{[]string{"log", "--color"}, "log --color=always", []string{"log", "--color=always"}},
		{[]string{"log", "--color=never"}, "log --color=never", []string{"log", "--color=never"}},
		{[]string{"log", "--author", "b", "--author=a"}, "log --author=b --author=a", []string{"log", "--author=b", "--author=a"}},
		{[]string{"log", "--author", "--upload-pack=x"}, "log --author=--upload-pack=x", []string{"log", "--author=--upload-pack=x"}}, // a value, inert
		{[]string{"log", "--", "a b", "-x"}, `log -- "a b" -x`, []string{"log", "--", "a b", "-x"}},
		{[]string{"log", "README.md", "--oneline"}, "log --oneline -- README.md", []string{"log", "--oneline", "--", "README.md"}},
		{[]string{"show", "HEAD~1"}, "show -- HEAD~1", []string{"show", "--end-of-options", "HEAD~1"}},
		{[]string{"show", "--", "-x"}, "show -- -x", []string{"show", "--end-of-options", "-x"}},
		{[]string{"st", "-sb"}, "status --branch --short", []string{"status", "--branch", "--short"}}, // an alias renders as the name
		{[]string{"diff", "-U", "-3x"}, "", nil},                                                      // not an integer
	} {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			inv, err := s.ParseArgv(tc.argv)
			if tc.render == "" {
				if err == nil {
					t.Fatalf("ParseArgv(%q) = %q, want an error", tc.argv, inv)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inv.String() != tc.render {
				t.Fatalf("rendering %q, want %q", inv.String(), tc.render)
			}
			if got := inv.Argv(StyleEquals); !slices.Equal(got, tc.argv2) {
				t.Fatalf("Argv %q, want %q", got, tc.argv2)
			}
			again, err := s.ParseArgv(inv.Words())
			if err != nil || again.String() != inv.String() {
				t.Fatalf("Words %q parse back as %v, %v", inv.Words(), again, err)
			}
			fromJSON, err := s.ParseJSON(inv.JSON())
			if err != nil || fromJSON.String() != inv.String() {
				t.Fatalf("JSON %s parses back as %v, %v", inv.JSON(), fromJSON, err)
			}
		})
	}
}

// TestInjection: the arguments an attacker would slip to git are refused
// or reach it as inert values; nothing the description does not declare
// can be expressed.
func TestInjection(t *testing.T) {
	s := loadGit(t)
	for _, tc := range []struct {
		argv []string
		why  string
		idx  int
	}{
		{[]string{"log", "--upload-pack=touch /tmp/x"}, `has no option --upload-pack`, 1},
		{[]string{"-c", "core.sshCommand=touch /tmp/x", "log"}, `has no option -c`, 0},
		{[]string{"log", "-c", "core.sshCommand=x"}, `has no option -c`, 1},
		{[]string{"push"}, `has no command "push"`, 0},
		{[]string{"log", "--output=/etc/passwd"}, "has no option --output", 1},
		{[]string{"log", "-n5", "-nx"}, "given more than once", 2},
		{[]string{"show", "--output=/tmp/x"}, "has no option --output", 1},
		{[]string{"log", "--oneline=yes"}, "a flag takes no value", 1},
		{[]string{"log", "--color=sometimes"}, `is not one of always, never, auto`, 1},
		{[]string{"log", "--oneline", "--format=full"}, "at most one of oneline, format", -1},
		{[]string{"log", "-n", "-1"}, "below the minimum", 1},
		{[]string{"log", "-vv", "--stat"}, "has no option --stat", 2},
		{[]string{"diff", "--no-pager"}, "", 0}, // a global option is fine anywhere
		{[]string{"log", "--max-count"}, "needs a value", 1},
	} {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			inv, err := s.ParseArgv(tc.argv)
			if tc.why == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ae *ArgError
			if !errors.As(err, &ae) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseArgv(%q) = %v, %v; want an *ArgError", tc.argv, inv, err)
			}
			if !strings.Contains(ae.Why, tc.why) || ae.Index != tc.idx {
				t.Fatalf("ParseArgv(%q): %v (index %d); want %q at index %d", tc.argv, err, ae.Index, tc.why, tc.idx)
			}
		})
	}
}

// A positional that starts with '-' where the command has no end-of-options
// marker is refused (the program would read it as an option); with one it
// is passed after the marker.
func TestLeadingDashPositional(t *testing.T) {
	s, err := Load([]byte(`{"maiden_command":1,"name":"tool","commands":[
		{"name":"nomark","positionals":[{"name":"p","variadic":true}]},
		{"name":"mark","end_of_options":"--","positionals":[{"name":"p","variadic":true}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{`{"command":"nomark","p":["ok","--upload-pack=x"]}`, `{"command":"nomark","p":["-"]}`} {
		_, err := s.ParseJSON([]byte(in))
		var ae *ArgError
		if !errors.As(err, &ae) || !strings.Contains(ae.Why, "starts with '-'") || ae.Name != `positional "p"` {
			t.Fatalf("ParseJSON(%s) = %v; want the leading '-' refused", in, err)
		}
	}
	_, err = s.ParseArgv([]string{"nomark", "--", "ok", "-rf"})
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Index != 3 {
		t.Fatalf("ParseArgv: %v; want the word at index 3 refused", err)
	}
	inv, err := s.ParseJSON([]byte(`{"command":"mark","p":["-rf","x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Argv(StyleSeparate); !slices.Equal(got, []string{"mark", "--", "-rf", "x"}) {
		t.Fatalf("Argv = %q", got)
	}
}

func TestParseJSON(t *testing.T) {
	s := loadGit(t)
	for _, tc := range []struct{ in, render, err string }{
		{`{"command":"log","max-count":5,"oneline":true,"paths":["a"]}`, "log --max-count=5 --oneline -- a", ""},
		{`{"command":"log","oneline":false,"verbose":0}`, "log", ""},
		{`{"command":"log","no-pager":true,"no-merges":true}`, "log --no-merges --no-pager", ""},
		{`{"command":"show","object":"v1.0"}`, "show -- v1.0", ""},
		{`{"command":"status","short":true}`, "status --short", ""},
		{`{"command":"st"}`, "", `has no command "st"`}, // aliases are argv's only
		{`{"command":"log","max-count":"5"}`, "", "want an integer"},
		{`{"command":"log","max-count":5.0}`, "", "want an integer"},
		{`{"command":"log","max-count":1e1}`, "", "want an integer"},
		{`{"command":"log","upload-pack":"x"}`, "", `has no option or positional "upload-pack"`},
		{`{"command":"log","paths":"a"}`, "", "want an array"},
		{`{"command":"log","oneline":"true"}`, "", "want true or false"},
		{`{"command":"log","max-count":5,"max-count":6}`, "", "duplicate property"},
		{`{}`, "", "needs a command"},
		{`{"max-count":5}`, "", `"git" has no option or positional "max-count"`},
		{`{"command":"push"}`, "", `has no command "push"`},
		{`{"command":"log","stdin":"x"}`, "", "reads no stdin"},
		{`{"command":"log","verbose":-1}`, "", "non-negative"},
		{`["log"]`, "", "JSON object"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			inv, err := s.ParseJSON([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseJSON(%s) = %v, %v; want an error with %q", tc.in, inv, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inv.String() != tc.render {
				t.Fatalf("rendering %q, want %q", inv.String(), tc.render)
			}
		})
	}
}

func TestDefaultsEnvConstraints(t *testing.T) {
	s, err := Load([]byte(`{"maiden_command":1,"name":"kc","options":[
		{"name":"context","env":"KC_CONTEXT","enum":["dev","prod"]},
		{"name":"limit","type":"integer","default":10},
		{"name":"a","kind":"bool"},{"name":"b","kind":"bool"},
		{"name":"label","kind":"map"}],
		"constraints":[{"one_of":["a","b"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := s.ParseArgv([]string{"--a", "--label", "z=1", "--label=k=v=w"})
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.String(); got != "--a --label=k=v=w --label=z=1 --limit=10" {
		t.Fatalf("rendering %q: a default is rendered, a map sorted by key", got)
	}
	env := s.WithEnv(func(k string) (string, bool) { return map[string]string{"KC_CONTEXT": "prod"}[k], k == "KC_CONTEXT" })
	inv, err = env.ParseArgv([]string{"--b"})
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.String(); got != "--b --context=prod --limit=10" {
		t.Fatalf("with the environment: %q (a grant must see the value the CLI would read)", got)
	}
	if !slices.Equal(s.EnvNames(), []string{"KC_CONTEXT"}) {
		t.Fatalf("EnvNames = %q", s.EnvNames())
	}
	bad := s.WithEnv(func(string) (string, bool) { return "staging", true })
	if _, err := bad.ParseArgv([]string{"--a"}); err == nil || !strings.Contains(err.Error(), "environment variable KC_CONTEXT") {
		t.Fatalf("a bad environment value: %v", err)
	}
	for argv, why := range map[string]string{
		"":                            "exactly one of a, b",
		"--a --b":                     "exactly one of a, b",
		"--a --label=x":               "want KEY=VALUE",
		"--a --label=k=1 -- x":        "at most 0 positionals",
		"--a --label k=1 --label k=2": `key "k" given more than once`,
	} {
		if _, err := s.ParseArgv(strings.Fields(argv)); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseArgv(%q) = %v, want %q", argv, err, why)
		}
	}
}

// TestGrants: CARDS.md A10/A11 for commands, through the real rendering.
func TestGrants(t *testing.T) {
	s := loadGit(t)
	for _, tc := range []struct {
		grant string
		argv  []string
		want  bool
	}{
		{"tool:invoke git log --max-count=*", []string{"log", "-n", "5"}, true},
		{"tool:invoke git log --max-count=*", []string{"log"}, false}, // the grant names max-count
		{"tool:invoke git log --max-count=*", []string{"log", "-n5", "--author=x"}, false},
		{"tool:invoke git log --max-count=*", []string{"show", "HEAD"}, false},
		{"tool:invoke git log --max-count=*", []string{"log", "-n5", "--", "secrets.txt"}, false},
		{`tool:invoke git log --max-count=\*`, []string{"log", "-n5"}, false},
		{"tool:invoke git log --max-count=* --...", []string{"log", "-n5", "--oneline"}, true},
		{"tool:invoke git log --max-count=* --... -- *.md", []string{"log", "-n5", "README.md"}, true},
		{"tool:invoke git log --max-count=* --... -- *.md", []string{"log", "-n5", "main.go"}, false},
		{"tool:invoke git status --...", []string{"st", "-s"}, true}, // the alias is the same command
		{"tool:invoke git log --no-pager", []string{"--no-pager", "log"}, true},
		{"tool:invoke git log --author=*", []string{"log", "--author", "--upload-pack=x"}, true}, // allowed, and inert (TestGitEndToEnd)
	} {
		t.Run(tc.grant+" "+strings.Join(tc.argv, " "), func(t *testing.T) {
			g, err := grant.Parse(tc.grant)
			if err != nil {
				t.Fatal(err)
			}
			inv, err := s.ParseArgv(tc.argv)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Allows(inv.Target("git")); got != tc.want {
				t.Fatalf("%q allows %q: %v, want %v", tc.grant, inv.Target("git").String(), got, tc.want)
			}
			exact, err := grant.Parse(inv.Target("git").String())
			if err != nil || !exact.Allows(inv.Target("git")) {
				t.Fatalf("the grant printed for the call, %q, does not allow it: %v", inv.Target("git").String(), err)
			}
		})
	}
}

func TestHelpAndDiscovery(t *testing.T) {
	s := loadGit(t)
	var names []string
	for _, c := range s.Commands() {
		names = append(names, strings.Join(c.Path(), " "))
	}
	if !slices.Equal(names, []string{"log", "show", "diff", "status"}) {
		t.Fatalf("Commands = %q", names)
	}
	for path, want := range map[string][]string{
		"":     {"Usage: git COMMAND [OPTIONS]", "status (st)", "--no-pager"},
		"log":  {"Usage: git log [OPTIONS] [--] [PATHS...]", "-n, --max-count=INTEGER", "--color[=STRING]", "(alone: always)", "(global)", "not-a-repository         exit 128"},
		"st":   {"Usage: git status [OPTIONS] [--] [PATHS...]", "-s, --short"},
		"push": {`"git" has no command "push"`, "Usage: git COMMAND"},
		"show": {"[--end-of-options] [OBJECT]"},
	} {
		h := s.Help(strings.Fields(path)...)
		for _, w := range want {
			if !strings.Contains(h, w) {
				t.Errorf("Help(%q) lacks %q:\n%s", path, w, h)
			}
		}
	}
	c, _ := s.Lookup("log")
	if e, ok := c.ErrorFor(128); !ok || e.Name != "not-a-repository" {
		t.Fatalf("ErrorFor(128) = %v, %v", e, ok)
	}
}

func TestJSONSchema(t *testing.T) {
	s := loadGit(t)
	var sch struct {
		Type       string
		Properties map[string]struct{ Enum []string }
		Required   []string
		OneOf      []struct {
			Properties           map[string]map[string]any
			Required             []string
			AdditionalProperties bool
		}
	}
	if err := json.Unmarshal([]byte(s.JSONSchema()), &sch); err != nil {
		t.Fatal(err)
	}
	if sch.Type != "object" || !slices.Equal(sch.Properties["command"].Enum, []string{"log", "show", "diff", "status"}) || len(sch.OneOf) != 4 {
		t.Fatalf("schema: %+v", sch)
	}
	log := sch.OneOf[0]
	if log.Properties["command"]["const"] != "log" || log.Properties["max-count"]["type"] != "integer" ||
		log.Properties["paths"]["type"] != "array" || log.Properties["no-pager"]["type"] != "boolean" || log.AdditionalProperties {
		t.Fatalf("log's branch: %+v", log)
	}
	if _, ok := log.Properties["upload-pack"]; ok {
		t.Fatal("an undeclared option in the schema")
	}
	single, err := Load([]byte(`{"maiden_command":1,"name":"echo","positionals":[{"name":"words","variadic":true,"required":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := single.JSONSchema(); strings.Contains(got, `"command"`) || !strings.Contains(got, `"minItems":1`) {
		t.Fatalf("a tool without subcommands: %s", got)
	}
}

// TestGitEndToEnd runs the real git with Argv in a scratch repository: the
// described calls work, and an injection attempt that validation lets
// through as a value stays a value (git refuses it as an author pattern
// would be, never runs it).
func TestGitEndToEnd(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed (make test installs it, see scripts/deps)")
	}
	dir := t.TempDir()
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gitPath, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q")
	run("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "first")
	if err := os.WriteFile(filepath.Join(dir, "-rf"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	run("add", "--", "-rf")
	run("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "second")
	s := loadGit(t)
	call := func(in string) string {
		inv, err := s.ParseJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		return run(inv.Argv(StyleSeparate)...)
	}
	if out := call(`{"command":"log","max-count":1,"oneline":true,"no-pager":true}`); !strings.Contains(out, "second") || strings.Contains(out, "first") {
		t.Fatalf("git log -n1: %q", out)
	}
	// A path that looks like an option reaches git after "--".
	if out := call(`{"command":"log","oneline":true,"paths":["-rf"]}`); !strings.Contains(out, "second") || strings.Contains(out, "first") {
		t.Fatalf("git log -- -rf: %q", out)
	}
	// An object name that looks like an option, after --end-of-options:
	// git looks it up as a revision and fails; it is not read as an option.
	inv, err := s.ParseJSON([]byte(`{"command":"show","object":"--output=/tmp/owned"}`))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gitPath, inv.Argv(StyleSeparate)...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--output=/tmp/owned") {
		t.Fatalf("git show --end-of-options --output=...: %v %q", err, out)
	}
	if _, err := os.Stat("/tmp/owned"); err == nil {
		t.Fatal("git wrote /tmp/owned: the object was read as an option")
	}
	// An author pattern that looks like --upload-pack is a pattern.
	if out := call(`{"command":"log","author":["--upload-pack=touch owned"],"oneline":true}`); out != "" {
		t.Fatalf("git log --author=--upload-pack=...: %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "owned")); err == nil {
		t.Fatal("--upload-pack ran")
	}
}

func TestShortOnlyArgv(t *testing.T) {
	s, err := Load([]byte(`{"maiden_command":1,"name":"x","options":[
		{"name":"dir","short":"C","short_only":true},{"name":"level","short":"l","short_only":true,"kind":"count"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string][]string{
		`{"dir":"/tmp"}`:          {"-C/tmp"},
		`{"dir":"-rf"}`:           {"-C-rf"}, // attached: never read as an option
		`{"dir":""}`:              {"-C", ""},
		`{"level":2,"dir":"a b"}`: {"-Ca b", "-l", "-l"},
	} {
		inv, err := s.ParseJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := inv.Argv(StyleSeparate); !slices.Equal(got, want) {
			t.Errorf("%s: Argv %q, want %q", in, got, want)
		}
	}
	if _, err := Load([]byte(`{"maiden_command":1,"name":"x","options":[{"name":"c","short":"c","short_only":true,"kind":"optional","implicit":"x"}]}`)); err == nil {
		t.Fatal("short_only optional accepted")
	}
}

// An option refused after parsing (its value, its command) is named by
// its word and index.
func TestLateErrorsNameTheWord(t *testing.T) {
	s := loadGit(t)
	_, err := s.ParseArgv([]string{"log", "--oneline", "--color=sometimes"})
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Index != 2 || ae.Arg != "--color=sometimes" || !strings.Contains(err.Error(), `argument 2 ("--color=sometimes")`) {
		t.Fatalf("got %v", err)
	}
	_, err = s.ParseArgv([]string{"log", "-n", "99999"})
	if !errors.As(err, &ae) || ae.Index != 1 || ae.Arg != "-n" || !strings.Contains(ae.Why, "above the maximum 10000") {
		t.Fatalf("got %v", err)
	}
}

// TestPositionalShapes: a program's (LoadProgram) positional value that
// does not start with '-' but that programs read as something other than
// data (less +!sh, gcc @FILE, env and make NAME=VALUE, tar's bundled
// first word) is refused, naming the positional and the shape,
// end-of-options marker or not, unless the description lists the shape
// in the positional's "accept"; a WebAssembly tool's (Load) is not.
func TestPositionalShapes(t *testing.T) {
	s, err := LoadProgram([]byte(`{"maiden_command":1,"name":"tool","commands":[
		{"name":"mark","end_of_options":"--","positionals":[{"name":"file","variadic":true}]},
		{"name":"open","end_of_options":"--","positionals":[{"name":"expr","accept":["plus","at","assignment"]},{"name":"n","type":"integer","variadic":true}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, why string }{
		{`{"command":"mark","file":["+!sh"]}`, `starts with '+', which less, more and vim read as a command to run (+CMD); refused unless the description lists "plus" in the positional's "accept"`},
		{`{"command":"mark","file":["ok","@/etc/passwd"]}`, `starts with '@', which many programs read as a file of further arguments`},
		{`{"command":"mark","file":["LD_PRELOAD=/tmp/x.so"]}`, `has an '=' before any '/', which make and env read as a variable assignment (NAME=VALUE)`},
		{`{"command":"mark","file":["SHELL=sh"]}`, `refused unless the description lists "assignment"`},
	} {
		_, err := s.ParseJSON([]byte(tc.in))
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Name != `positional "file"` || !strings.Contains(ae.Why, tc.why) {
			t.Errorf("ParseJSON(%s) = %v; want positional \"file\" refused: %s", tc.in, err, tc.why)
		}
	}
	// The same through argv, naming the word.
	_, err = s.ParseArgv([]string{"mark", "--", "a", "+!sh"})
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Index != 3 || ae.Arg != "+!sh" || !strings.Contains(ae.Why, "starts with '+'") {
		t.Errorf("ParseArgv: %v; want the word at index 3 refused for its '+'", err)
	}
	// Not these shapes: a path before the '=', a '+' or '@' inside, and
	// an integer (canonical: "+5" is 5).
	for _, in := range []string{
		`{"command":"mark","file":["./a=b","dir/x=y","a+b","x@y","-x"]}`,
		`{"command":"open","expr":"+!sh","n":[5]}`,
		`{"command":"open","expr":"@args","n":[1]}`,
		`{"command":"open","expr":"A=b"}`,
	} {
		if _, err := s.ParseJSON([]byte(in)); err != nil {
			t.Errorf("ParseJSON(%s): %v", in, err)
		}
	}
	if inv, err := s.ParseArgv([]string{"open", "--", "x", "+5"}); err != nil || inv.Positionals()[1] != "5" {
		t.Errorf("an integer positional +5: %v %v", inv, err)
	}
	// tar's first word: a top-level positional with no end-of-options
	// marker and no option before it is the program's first argument.
	tar, err := LoadProgram([]byte(`{"maiden_command":1,"name":"tar","options":[{"name":"list","short":"t","kind":"bool"}],"positionals":[{"name":"member","variadic":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tar.ParseJSON([]byte(`{"member":["xfI","a.tar","prog"]}`))
	if !errors.As(err, &ae) || ae.Name != `positional "member"` || !strings.Contains(ae.Why, `would be the program's first argument and "tar" has no end-of-options marker, so tar and ar would read it as bundled options (tar xf); declare the command's end_of_options, or list "first-word" in the positional's "accept"`) {
		t.Errorf("tar's first word: %v", err)
	}
	if inv, err := tar.ParseJSON([]byte(`{"list":true,"member":["xfI","a.tar"]}`)); err != nil || !slices.Equal(inv.Argv(StyleEquals), []string{"--list", "xfI", "a.tar"}) {
		t.Errorf("after an option it is not the first word: %v %v", inv, err)
	}
	opted, err := LoadProgram([]byte(`{"maiden_command":1,"name":"hostile","positionals":[{"name":"args","variadic":true,"accept":["first-word"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opted.ParseJSON([]byte(`{"args":["listen"]}`)); err != nil {
		t.Errorf("accept first-word: %v", err)
	}
	for in, why := range map[string]string{
		`{"maiden_command":1,"name":"x","positionals":[{"name":"p","accept":["dash"]}]}`:    `$.positionals[0].accept[0]: must be plus, at, assignment or first-word; got "dash"`,
		`{"maiden_command":1,"name":"x","positionals":[{"name":"p","accept":["at","at"]}]}`: `$.positionals[0].accept[1]: "at" is listed twice`,
		`{"maiden_command":1,"name":"x","positionals":[{"name":"p","accept":"plus"}]}`:      `$.positionals[0].accept: want an array of strings`,
	} {
		if _, err := Load([]byte(in)); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("Load(%s) = %v; want %q", in, err, why)
		}
	}
	// A WebAssembly tool's description (Load): its positionals are JSON
	// values, never a program's argv, so no shape is refused there.
	wasm, err := Load([]byte(`{"maiden_command":1,"name":"tool","positionals":[{"name":"file","variadic":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wasm.ParseJSON([]byte(`{"file":["+x","@y","A=b"]}`)); err != nil {
		t.Errorf("a WebAssembly tool's positionals: %v", err)
	}
}

// TestOptionValueAt: a program's option value that starts with '@' (curl
// -d @FILE, -w @FILE) is refused, named by the option, in JSON and argv
// alike, unless the option's accept lists "at"; a WebAssembly tool's is
// not; accept on an option lists "at" only, and never on a flag.
func TestOptionValueAt(t *testing.T) {
	const desc = `{"maiden_command":1,"name":"curl","options":[
		{"name":"data","short":"d","kind":"list"},
		{"name":"header","short":"H"},
		{"name":"define","kind":"map"},
		{"name":"config","short":"K","short_only":true},
		{"name":"query","accept":["at"]}],
		"positionals":[{"name":"url"}]}`
	s, err := LoadProgram([]byte(desc))
	if err != nil {
		t.Fatal(err)
	}
	const why = `starts with '@', which many programs read as a file to take the value from (curl -d @FILE, -H @FILE, --json @FILE); refused unless the description lists "at" in the option's "accept"`
	for in, name := range map[string]string{
		`{"data":["a=1","@/etc/passwd"],"url":"u"}`: `property "data"`,
		`{"header":"@h.txt","url":"u"}`:             `property "header"`,
		`{"define":{"@k":"v"},"url":"u"}`:           `property "define"`,
		`{"config":"@x","url":"u"}`:                 `property "config"`,
	} {
		_, err := s.ParseJSON([]byte(in))
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Name != name || ae.Why != why {
			t.Errorf("ParseJSON(%s) = %v; want %s refused: %s", in, err, name, why)
		}
	}
	for _, argv := range [][]string{{"-d", "@/etc/passwd", "u"}, {"--data=@/etc/passwd", "u"}, {"-d@/etc/passwd", "u"}, {"-K@x", "u"}} {
		_, err := s.ParseArgv(argv)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Why != why {
			t.Errorf("ParseArgv(%q) = %v; want refused: %s", argv, err, why)
		}
	}
	// Not this shape: an '@' inside, a map's value, an option that
	// accepts it.
	for _, in := range []string{
		`{"data":["user@example.com"],"header":"X: @y","url":"u"}`,
		`{"define":{"k":"@v"},"url":"u"}`,
		`{"query":"@q.txt","url":"u"}`,
	} {
		if _, err := s.ParseJSON([]byte(in)); err != nil {
			t.Errorf("ParseJSON(%s): %v", in, err)
		}
	}
	// A WebAssembly tool's options are JSON values, never argv.
	wasm, err := Load([]byte(desc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wasm.ParseJSON([]byte(`{"data":["@x"],"header":"@y","url":"u"}`)); err != nil {
		t.Errorf("a WebAssembly tool's options: %v", err)
	}
	for in, want := range map[string]string{
		`{"maiden_command":1,"name":"x","options":[{"name":"o","accept":["plus"]}]}`:             `$.options[0].accept[0]: an option's value is refused for one shape only, so its accept can list only "at"; got "plus"`,
		`{"maiden_command":1,"name":"x","options":[{"name":"o","accept":["at","at"]}]}`:          `$.options[0].accept[1]: "at" is listed twice`,
		`{"maiden_command":1,"name":"x","options":[{"name":"o","kind":"bool","accept":["at"]}]}`: `a bool or count flag takes no value`,
	} {
		if _, err := Load([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s) = %v; want %q", in, err, want)
		}
	}
}

// TestHelpShowsAccept: a program's help names the shapes a positional or
// an option accepts (docs/command-model.md), so a caller knows which
// values are refused before sending one; a WebAssembly tool's help does
// not (its command tree refuses no shape).
func TestHelpShowsAccept(t *testing.T) {
	const desc = `{"maiden_command":1,"name":"tool","options":[{"name":"data","accept":["at"]},{"name":"plain"}],
		"positionals":[{"name":"expr","accept":["plus","assignment"]},{"name":"file","variadic":true}]}`
	prog, err := LoadProgram([]byte(desc))
	if err != nil {
		t.Fatal(err)
	}
	help := prog.Help()
	for _, want := range []string{"EXPR", "[accepts: plus, assignment]", "--data=STRING", "[accepts: at]"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if n := strings.Count(help, "[accepts:"); n != 2 {
		t.Errorf("help names accepted shapes %d times, want 2 (expr, data):\n%s", n, help)
	}
	wasm, err := Load([]byte(desc))
	if err != nil {
		t.Fatal(err)
	}
	if h := wasm.Help(); strings.Contains(h, "accepts") {
		t.Errorf("a WebAssembly tool's help names accepted shapes:\n%s", h)
	}
}
