package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/grant"
)

// The four views of a call's input: the rendering the cards authorized
// (and conditions, approvals and the audit show), the digest an approval
// is bound to, the input the tool receives and, for a command tool, the
// argv a wrapped CLI runs. FuzzFourViews holds them together: for any
// input the schema accepts, all four derive from the one decoded value
// and agree. The pieces it calls are the pipeline's own (input.check's
// parseInput, render, digest, toolInput, a command tool's parse).

// fourViewsSpec is a command description with every kind of option, for
// the command tools' views.
const fourViewsSpec = `{"maiden_command":1,"name":"t","options":[{"name":"quiet","kind":"bool","global":true}],"commands":[
 {"name":"get","end_of_options":"--","options":[
  {"name":"n","short":"n","type":"integer"},{"name":"name"},{"name":"tag","kind":"list"},
  {"name":"v","kind":"count"},{"name":"env","kind":"map"},{"name":"color","kind":"optional","implicit":"always","enum":["always","never"]}],
  "positionals":[{"name":"paths","variadic":true}]},
 {"name":"put","stdin":{"media_type":"text/plain"},"positionals":[{"name":"key"}]}]}`

// readers are JSON readers a tool might use, each giving its value of the
// text the tool receives (numbers as json.Number, for RenderValue): the
// strict one the pipeline uses, encoding/json (the last duplicate wins, as
// JSON.parse), one keeping the first duplicate (hand-written scanners,
// some libraries), and a binary64 one (JSON.parse's numbers, Go's
// float64).
var readers = []struct {
	name string
	read func(string) (any, error)
}{
	{"strict", parseInput},
	{"encoding/json", func(s string) (any, error) {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}},
	{"first duplicate wins", func(s string) (any, error) {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		return firstWins(d)
	}},
	{"binary64 numbers", func(s string) (any, error) {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, err
		}
		return binary64(v), nil
	}},
}

// firstWins decodes the next value keeping the first of duplicate keys.
func firstWins(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := firstWins(d)
			if err != nil {
				return nil, err
			}
			if _, seen := m[k.(string)]; !seen {
				m[k.(string)] = v
			}
		}
		_, err = d.Token()
		return m, err
	case json.Delim('['):
		a := []any{}
		for d.More() {
			v, err := firstWins(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err = d.Token()
		return a, err
	}
	return tok, nil
}

// binary64 writes each float64 back as the shortest text that reads as it
// (as JavaScript prints a number).
func binary64(v any) any {
	switch v := v.(type) {
	case float64:
		return json.Number(strconv.FormatFloat(v, 'g', -1, 64))
	case []any:
		for i := range v {
			v[i] = binary64(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = binary64(v[k])
		}
	}
	return v
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// fourViews checks the views of input for a JSON-input tool and, if it
// is a call of fourViewsSpec, for a wrapped CLI and a command-tree tool.
func fourViews(t *testing.T, schema *inputSchema, spec *command.Spec, input string) {
	t.Helper()
	// input.check scans the text; the schema check reads the scan (the
	// value is decoded later, by whichever stage needs it first).
	inv := &invocation{call: Call{Input: input}}
	if err := inv.scanInput(); err != nil {
		// What ParseStrict refuses, with its error; besides, two keys of
		// an object that differ only in case, which readers that fold
		// case (Go's encoding/json) take one for the other.
		_, perr := parseInput(input)
		if perr == nil && !strings.Contains(err.Error(), "only in case") || perr != nil && perr.Error() != err.Error() {
			t.Fatalf("%q: the input stage's scan refuses with %v, ParseStrict with %v", input, err, perr)
		}
		return
	}
	if inv.validateInput(context.Background(), schema, 0) != nil {
		return
	}
	rerr := inv.render() // authorize, or the middleware
	doc, err := parseInput(input)
	if v, verr := inv.value(); err != nil || verr != nil || !reflect.DeepEqual(v, doc) {
		t.Fatalf("%q: the value decoded lazily (%v) is not ParseStrict's of the text (%v)", input, verr, err)
	}
	// The text path (what authorize did before the one parse) agrees, but
	// for numbers a binary64 reader rounds, which it rendered exactly and
	// a JSON tool's reader may not read so (grant.RenderJSONInput).
	textArgs, terr := grant.Render([]byte(input))
	if (rerr == nil) != (terr == nil) && (terr != nil || !strings.Contains(rerr.Error(), "binary64 reader")) {
		t.Fatalf("%q: the value's rendering fails with %v, the text's with %v", input, rerr, terr)
	}
	if rerr == nil {
		authorized := inv.renderText()
		if want := grant.Rendering(textArgs); authorized != want {
			t.Fatalf("%q: rendered %q from the value, %q from the text", input, authorized, want)
		}
		got := inv.toolInput()
		if d := inv.digest(); d != sha256Hex(got) {
			t.Fatalf("%q: the approval digest %s is not the digest of what the tool receives, %q", input, d, got)
		}
		for _, r := range readers {
			v, err := r.read(got)
			if err != nil {
				t.Fatalf("%q: the tool receives %q, which a %s reader refuses: %v", input, got, r.name, err)
			}
			args, err := grant.RenderValue(v)
			if err != nil {
				t.Fatalf("%q: what a %s reader reads of the tool's input cannot be rendered: %v", input, r.name, err)
			}
			if again := grant.Rendering(args); again != authorized {
				t.Fatalf("%q: authorized as %q; a tool with a %s reader reads %q", input, authorized, r.name, again)
			}
		}
	}
	// A command tool: its parse reads the same value, and a wrapped CLI's
	// argv and a command-tree tool's input read back as the rendering.
	// The call's own parse stage and a wrapped CLI's backend (parse, then
	// useCommand), as a call runs them.
	inv = &invocation{call: Call{Input: input}, backend: &cliBackend{},
		tool: &config.Tool{Name: "t", CLI: &config.CLI{Command: spec}}}
	if err := inv.scanInput(); err != nil {
		t.Fatalf("%q: scanned once, refused again: %v", input, err)
	}
	err = parse(func(context.Context, *invocation) error { return nil })(context.Background(), inv)
	if err != nil {
		t.Fatalf("%q: the parse stage failed: %v", input, err)
	}
	if inv.res.Error != nil {
		err = errors.New(inv.res.Error.Message)
	} else if inv.cmd == nil {
		t.Fatalf("%q: the parse stage refused nothing and parsed no command", input)
	}
	if cerr := func() error { _, err := spec.ParseJSON([]byte(input)); return err }(); (err == nil) != (cerr == nil) {
		t.Fatalf("%q: the value reads as a command call with error %v, the text with %v", input, err, cerr)
	}
	if err != nil {
		return
	}
	cmd := inv.cmd
	inv.toolCmd = &toolCommand{spec: spec}
	authorized := inv.renderText()
	for _, style := range []command.Style{command.StyleSeparate, command.StyleEquals} {
		argv := cmd.Argv(style)
		back, err := spec.ParseArgv(argv)
		// Its stdin is not an argument: the program reads it as its stdin.
		read := ""
		if err == nil {
			args := back.Render()
			if in, ok := cmd.Stdin(); ok {
				args = append(args, grant.Arg{Name: "stdin", Value: in})
			}
			read = grant.CommandRendering(back.Path(), args, back.Positionals())
		}
		if err != nil || read != authorized || !slices.Equal(back.Positionals(), cmd.Positionals()) {
			t.Fatalf("%q: authorized as %q; the CLI runs %q, which reads %q (%v)", input, authorized, argv, read, err)
		}
	}
	toolCall := inv.toolInput()
	if d := inv.digest(); d != sha256Hex(input) {
		t.Fatalf("%q: the approval digest is not the input's", input)
	}
	if _, err := parseInput(toolCall); err != nil {
		t.Fatalf("%q: the command-tree tool receives %q, which is not JSON: %v", input, toolCall, err)
	}
}

var fourViewsSeeds = []string{
	`{}`, `{"message":"hi"}`, " {\"message\":\"hi\"}\n", "\t{ \"a\" : [ 1 , 2 ] }\r\n", `{"a":[1,"x",true],"b":{"k":null},"no-x":false,"y":true}`,
	`{"s":"a b \" * \\ =","n":-1.5e-9}`, `{"n":1.0,"m":1e2,"z":-0}`, `{"id":9007199254740993}`,
	`{"big":1e400}`, `{"x":0.1}`, `{"x":123456789012345678901234567890}`, `{"x":1.00000000000000000001}`,
	`{"a":1,"a":2}`, `{"o":{"k":1,"K":2}}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a":"\ud83d\ude00\u0000"}`,
	`{"command":"get","n":5,"name":"x y","tag":["a","-b"],"v":2,"env":{"K":"V"},"color":"never","paths":["-rf","a"],"quiet":true}`,
	`{"command":"get","n":-0,"paths":["--"]}`, `{"command":"get","n":1e1}`, `{"command":"put","key":"k","stdin":"line\n"}`,
	`{"command":"get","tag":[],"env":{}}`, `{"command":"get","name":"=x","color":"always"}`,
}

// TestFourViews runs the fuzz test's seeds (FuzzFourViews explores from
// them: go test -run '^$' -fuzz FuzzFourViews -fuzztime 3m ./internal/pipeline).
func TestFourViews(t *testing.T) {
	schema, spec := fourViewsFixtures(t)
	for _, in := range fourViewsSeeds {
		fourViews(t, schema, spec, in)
	}
}

func FuzzFourViews(f *testing.F) {
	schema, spec := fourViewsFixtures(f)
	for _, in := range fourViewsSeeds {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		fourViews(t, schema, spec, in)
	})
}

func fourViewsFixtures(t testing.TB) (*inputSchema, *command.Spec) {
	schema := compileSchema(`{"type":"object"}`)
	if schema.err != nil {
		t.Fatal(schema.err)
	}
	spec, err := command.Load([]byte(fourViewsSpec))
	if err != nil {
		t.Fatal(err)
	}
	return schema, spec
}
