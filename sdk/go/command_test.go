//go:build !wasip1

package maiden_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/command"
	maiden "github.com/maiden-run/maiden/sdk/go"
)

func ptr(n int64) *int64 { return &n }

// tree is a command tree using every part of the SDK's description.
func tree(got **maiden.Invocation) maiden.Command {
	run := func(_ context.Context, call *maiden.Invocation) (any, error) {
		*got = call
		return map[string]any{"ran": strings.Join(call.Command, " ")}, nil
	}
	return maiden.Command{
		Name:    "kit",
		Summary: "A test kit.",
		Options: []maiden.Option{{Name: "verbose", Short: "v", Kind: maiden.KindCount, Global: true}},
		Commands: []maiden.Command{
			{
				Name: "add", Aliases: []string{"a"}, Summary: "Adds.",
				Options: []maiden.Option{
					{Name: "times", Type: maiden.TypeInteger, Minimum: ptr(1), Maximum: ptr(9), Default: 1},
					{Name: "tag", Kind: maiden.KindList},
					{Name: "label", Kind: maiden.KindMap},
					{Name: "force", Kind: maiden.KindFlag},
					{Name: "color", Kind: maiden.KindOptional, Implicit: "auto", Enum: []string{"auto", "never"}},
				},
				Constraints: []maiden.Constraint{{Exclusive: []string{"force", "color"}}},
				Positionals: []maiden.Positional{{Name: "text", Required: true}, {Name: "more", Variadic: true}},
				Stdin:       &maiden.Stream{MediaType: "text/plain"},
				Run:         run,
			},
			{Name: "remote", Commands: []maiden.Command{{Name: "show", Run: run}, {Name: "bare"}}},
		},
	}
}

// TestCommandsSchemaLoadsInHost: the description Schema returns is one the
// host's command model loads, with the tree as declared (aliases, kinds,
// types, defaults, globals, "--" for commands with positionals).
func TestCommandsSchemaLoadsInHost(t *testing.T) {
	var got *maiden.Invocation
	tool := maiden.Commands(tree(&got))
	if d := tool.Describe(); d != "A test kit." {
		t.Errorf("Describe = %q", d)
	}
	spec, err := command.Load([]byte(tool.Schema()))
	if err != nil {
		t.Fatalf("the host refuses the SDK's description: %v\n%s", err, tool.Schema())
	}
	var paths []string
	for _, c := range spec.Commands() {
		paths = append(paths, strings.Join(c.Path(), " "))
	}
	if strings.Join(paths, ",") != "add,remote show,remote bare" {
		t.Errorf("commands = %v", paths)
	}
	inv, err := spec.ParseArgv([]string{"a", "-vv", "--tag=x", "--tag=y", "--label=k=v", "--color", "--", "-first", "m1", "m2"})
	if err != nil {
		t.Fatalf("ParseArgv: %v", err)
	}
	if want := "add --color=auto --label=k=v --tag=x --tag=y --times=1 --verbose=2 -- -first m1 m2"; inv.String() != want {
		t.Errorf("rendering = %q, want %q", inv.String(), want)
	}
	if _, err := spec.ParseJSON([]byte(`{"command":"add","text":"x","times":10}`)); err == nil || !strings.Contains(err.Error(), "times") {
		t.Errorf("times over its maximum: err = %v", err)
	}
	if _, err := spec.ParseJSON([]byte(`{"command":"add","text":"x","force":true,"color":"never"}`)); err == nil {
		t.Error("the exclusive constraint is not in the description")
	}
}

// TestCommandsExecute: Execute dispatches the call maiden sends to the
// command's Run with typed accessors; what no Run handles is an error.
func TestCommandsExecute(t *testing.T) {
	var got *maiden.Invocation
	tool := maiden.Commands(tree(&got))
	ctx := context.Background()
	out, err := tool.Execute(ctx, []byte(`{"command":["add"],"options":{"times":3,"tag":["x","y"],"label":{"k":"v"},"force":true,"verbose":2},"positionals":["hello",7],"stdin":"in"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"ran":"add"}` {
		t.Errorf("output = %s", out)
	}
	if got.Int("times") != 3 || got.Int("verbose") != 2 || !got.Bool("force") || got.Bool("color") || got.Has("color") ||
		strings.Join(got.List("tag"), ",") != "x,y" || got.Map("label")["k"] != "v" || got.String("times") != "3" ||
		strings.Join(got.Positionals, ",") != "hello,7" || !got.HasStdin || got.Stdin != "in" {
		t.Errorf("invocation = %+v", got)
	}
	var opts struct {
		Times int      `json:"times"`
		Tag   []string `json:"tag"`
	}
	if err := got.DecodeOptions(&opts); err != nil || opts.Times != 3 || len(opts.Tag) != 2 {
		t.Errorf("DecodeOptions = %+v, %v", opts, err)
	}
	var loud struct {
		Times int `json:"TIMES"`
	}
	if err := got.DecodeOptions(&loud); err == nil || !strings.Contains(err.Error(), `key "times" is not the field "TIMES"`) {
		t.Errorf("DecodeOptions(TIMES) = %+v, %v", loud, err)
	}

	if _, err := tool.Execute(ctx, []byte(`{"command":["remote","show"],"options":{},"positionals":[]}`)); err != nil || strings.Join(got.Command, " ") != "remote show" || got.HasStdin {
		t.Errorf("remote show: %v, %+v", err, got)
	}
	for in, want := range map[string]string{
		`{"command":["remote","bare"],"options":{},"positionals":[]}`: `command "kit remote bare" has no Run`,
		`{"command":["remote"],"options":{},"positionals":[]}`:        `command "kit remote" has no Run`,
		`{"command":["push"],"options":{},"positionals":[]}`:          `"kit push" has no command "push"`,
		`{"command":"add"}`: `invalid input`,
	} {
		if _, err := tool.Execute(ctx, []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}

// TestCommandsOutput: a string or []byte result is the output as is,
// anything else JSON.
func TestCommandsOutput(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{{"plain text", "plain text"}, {[]byte("bytes"), "bytes"}, {[]int{1, 2}, "[1,2]"}, {map[string]string{"t": "<a&b>"}, `{"t":"<a&b>"}`}} {
		tool := maiden.Commands(maiden.Command{Name: "one", Run: func(context.Context, *maiden.Invocation) (any, error) { return c.v, nil }})
		if _, err := command.Load([]byte(tool.Schema())); err != nil {
			t.Fatal(err)
		}
		out, err := tool.Execute(context.Background(), []byte(`{"command":[],"options":{},"positionals":[]}`))
		if err != nil || string(out) != c.want {
			t.Errorf("%v: %q, %v", c.v, out, err)
		}
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(maiden.Commands(maiden.Command{Name: "one"}).Schema()), &raw); err != nil || raw["maiden_command"] != float64(1) {
		t.Errorf("schema %v, %v", raw, err)
	}
}
