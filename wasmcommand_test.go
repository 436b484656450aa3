package maiden_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// These tests are WebAssembly tools whose schema() is a command description
// (wasmcommand.go): testdata/tools/cmdecho.wat returns the call it is given,
// so they see exactly what the host passes; badcommand.wat's description
// does not load; examples/textkit is the Go SDK's example.

// TestCommandToolCall: tools/list serves the description's JSON Schema
// projection; a call is validated as a command (errors name the argument)
// and the tool receives the validated call, built from the invocation
// (defaults filled in), never the text the agent sent. In both isolations.
func TestCommandToolCall(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			h := newHostWith(t, "version = 1\n[tools.cmdecho]\npath = %q\n", maiden.Options{Isolation: iso.iso}, "cmdecho")
			ctx := context.Background()
			infos, err := h.Tools(ctx)
			if err != nil || len(infos) != 1 || infos[0].Error != nil {
				t.Fatalf("tools: %+v %v", infos, err)
			}
			var schema struct {
				Type       string
				Properties map[string]struct{ Enum []string }
				OneOf      []any
			}
			if err := json.Unmarshal([]byte(infos[0].InputSchema), &schema); err != nil {
				t.Fatalf("input schema %s: %v", infos[0].InputSchema, err)
			}
			if schema.Type != "object" || strings.Join(schema.Properties["command"].Enum, ",") != "add,list,remote show" || len(schema.OneOf) != 3 || strings.Contains(infos[0].InputSchema, "maiden_command") {
				t.Errorf("tools/list shows %s, want the description's projection", infos[0].InputSchema)
			}

			call := func(in string) maiden.Result {
				t.Helper()
				res, err := h.Call(ctx, maiden.Call{Tool: "cmdecho", Input: in})
				if err != nil {
					t.Fatalf("%s: %v", in, err)
				}
				return res
			}
			res := call(`{"command":"add","text":"hi","more":["a","-b"],"tag":["x","y"],"no-color":true,"label":{"k":"v"},"verbose":2,"stdin":"S"}`)
			want := `{"command":["add"],"options":{"label":{"k":"v"},"no-color":true,"tag":["x","y"],"times":1,"verbose":2},"positionals":["hi","a","-b"],"stdin":"S"}`
			if !res.OK || res.Output != want {
				t.Fatalf("add: %+v %+v\n got %s\nwant %s", res, res.Error, res.Output, want)
			}
			// Same call, other spelling (key order, spaces): the tool gets
			// the same bytes.
			if res := call(`{ "verbose":2, "stdin":"S", "label":{"k":"v"}, "no-color":true, "tag":["x","y"], "more":["a","-b"], "text":"hi", "command":"add", "times": 1 }`); res.Output != want {
				t.Errorf("respelled: %s", res.Output)
			}
			if res := call(`{"command":"remote show","name":"origin"}`); res.Output != `{"command":["remote","show"],"options":{},"positionals":["origin"]}` {
				t.Errorf("remote show: %+v %+v", res.Output, res.Error)
			}
			for in, name := range map[string]string{
				`{"command":"list","colour":1}`:            "colour",
				`{"command":"add","text":"x","times":10}`:  "times",
				`{"command":"add","text":"x","times":"2"}`: "times",
				`{"command":"push"}`:                       "push",
				`{"command":"remote"}`:                     "remote",
				`{"command":"add"}`:                        "text",
				`{"text":"x"}`:                             "text",
				// The command cannot be smuggled past the parser.
				`{"command":"list","command":"add","text":"x"}`: "duplicate",
				`{"command":"list","limit":1,"limit":2}`:        "duplicate",
				`{"command":"list\u0000"}`:                      "command",
				`{"command":"remote  show","name":"x"}`:         "command",
			} {
				wantKind(t, call(in), maiden.KindInput, name)
			}
		})
	}
}

// TestCommandToolCards: cards decide on the command rendering, the grammar
// of wrapped CLIs: a card for `cmdecho list` lets list through and nothing
// else (not add, not list with an option it does not grant); one for `add
// --times=* -- hi` allows exactly that positional. Middleware conditions
// see the same rendering.
func TestCommandToolCards(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.cmdecho]
path = %q
[[middleware]]
use = "validate"
check = '!rendered.contains("--limit=13")'
message = "13 is unlucky"
[agents.lister]
tools = ["cmdecho"]
grants = ["tool:invoke cmdecho list", "tool:invoke cmdecho list --limit=1*"]
[agents.adder]
tools = ["cmdecho"]
grants = ["tool:invoke cmdecho add --times=* -- hi"]
`, maiden.Options{Isolation: maiden.InProcess}, "cmdecho")
	ctx := context.Background()
	call := func(agent, in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "cmdecho", Input: in})
		if err != nil {
			t.Fatalf("%s %s: %v", agent, in, err)
		}
		return res
	}
	if res := call("lister", `{"command":"list"}`); !res.OK || res.Output != `{"command":["list"],"options":{},"positionals":[]}` {
		t.Fatalf("list: %+v %+v", res, res.Error)
	}
	if res := call("lister", `{"command":"list","limit":12}`); !res.OK {
		t.Fatalf("list --limit=12: %+v", res.Error)
	}
	wantKind(t, call("lister", `{"command":"list","limit":13}`), maiden.KindInput, "13 is unlucky")
	wantKind(t, call("lister", `{"command":"list","limit":2}`), maiden.KindDenied, "tool:invoke cmdecho list --limit=2")
	wantKind(t, call("lister", `{"command":"add","text":"hi"}`), maiden.KindDenied, "tool:invoke cmdecho add --times=1 -- hi")
	wantKind(t, call("lister", `{"command":"list","verbose":1}`), maiden.KindDenied, "")

	if res := call("adder", `{"command":"add","text":"hi","times":3}`); !res.OK {
		t.Fatalf("add hi: %+v", res.Error)
	}
	wantKind(t, call("adder", `{"command":"add","text":"ho"}`), maiden.KindDenied, "")
	wantKind(t, call("adder", `{"command":"add","text":"hi","more":["x"]}`), maiden.KindDenied, "")
	wantKind(t, call("adder", `{"command":"add","text":"hi","tag":["x"]}`), maiden.KindDenied, "")
	wantKind(t, call("adder", `{"command":"list"}`), maiden.KindDenied, "")
	// A call that does not fit is refused as input before any card.
	wantKind(t, call("adder", `{"command":"add","text":"hi","force":true}`), maiden.KindInput, "force")

	infos, err := h.ToolsFor(ctx, "lister")
	if err != nil || len(infos) != 1 || !strings.Contains(infos[0].InputSchema, `"oneOf"`) {
		t.Fatalf("tools/list for lister: %+v %v", infos, err)
	}
}

// TestBadCommandDescription: a tool whose schema() is a command
// description that does not load is refused by maiden check (naming the
// JSON path of the problem), listed with kind invalid, and never runs,
// whatever the agent's cards allow.
func TestBadCommandDescription(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.badcommand]
path = %q
[agents.all]
tools = ["badcommand"]
grants = ["tool:invoke badcommand --...", "tool:invoke badcommand x --..."]
`, maiden.Options{Isolation: maiden.InProcess}, "badcommand")
	ctx := context.Background()
	reps, err := h.Check(ctx)
	if err != nil || len(reps) != 1 || reps[0].Err == nil {
		t.Fatalf("check: %+v %v", reps, err)
	}
	const why = `$.commands[0].options[0].kind`
	if msg := reps[0].Err.Error(); !strings.Contains(msg, "command description") || !strings.Contains(msg, why) {
		t.Errorf("check says %q, want the command description's problem at %s", msg, why)
	}
	infos, err := h.Tools(ctx)
	if err != nil || len(infos) != 1 || infos[0].Error == nil || infos[0].Error.Kind != maiden.KindInvalid || !strings.Contains(infos[0].Error.Message, why) {
		t.Fatalf("tools: %+v %v", infos, err)
	}
	for _, in := range []string{`{"command":"x"}`, `{"command":"x","o":true}`, `{}`} {
		res, err := h.Call(ctx, maiden.Call{Agent: "all", Tool: "badcommand", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Output, "ran anyway") {
			t.Fatalf("%s: the tool ran: %+v", in, res)
		}
		wantKind(t, res, maiden.KindInvalid, why)
	}
	if _, err := h.CommandHelp(ctx, "badcommand"); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("help: %v", err)
	}
}

// TestCommandHelp: the help of a command-tree tool, of its commands, and
// the errors for a JSON tool and an unknown one.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, "version = 1\n[tools.cmdecho]\npath = %q\n[tools.echo]\npath = %q\n", maiden.Options{Isolation: maiden.InProcess}, "cmdecho", "echo")
	ctx := context.Background()
	top, err := h.CommandHelp(ctx, "cmdecho")
	if err != nil || !strings.Contains(top, "add") || !strings.Contains(top, "remote") {
		t.Fatalf("help cmdecho: %q %v", top, err)
	}
	add, err := h.CommandHelp(ctx, "cmdecho", "add")
	if err != nil || !strings.Contains(add, "--times") || !strings.Contains(add, "TEXT") || add == top {
		t.Fatalf("help cmdecho add: %q %v", add, err)
	}
	if _, err := h.CommandHelp(ctx, "echo"); !errors.Is(err, maiden.ErrNoCommands) {
		t.Errorf("help echo: %v", err)
	}
	if _, err := h.CommandHelp(ctx, "nope"); !errors.Is(err, maiden.ErrUnknownTool) {
		t.Errorf("help nope: %v", err)
	}
}

// TestToolBecomesCommandTree: a tool file replaced by a command-tree
// version is read as one at the next call, and back (the kind of tool is
// the version's, decided per call before authorization).
func TestToolBecomesCommandTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tool.wasm")
	put := func(name string) {
		t.Helper()
		b, err := os.ReadFile(testkit.Component(t, name))
		if err != nil {
			t.Fatal(err)
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	put("echo")
	h := newHostWith(t, "version = 1\n[tools.t]\npath = \""+path+"\"\n[agents.a]\ntools = [\"t\"]\ngrants = [\"tool:invoke t --message=*\", \"tool:invoke t list\"]\n", maiden.Options{Isolation: maiden.InProcess})
	ctx := context.Background()
	call := func(in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "t", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(`{"message":"hi"}`); !res.OK || res.Output != `{"message":"hi"}` {
		t.Fatalf("json: %+v %+v", res, res.Error)
	}
	put("cmdecho")
	if res := call(`{"command":"list"}`); !res.OK || res.Output != `{"command":["list"],"options":{},"positionals":[]}` {
		t.Fatalf("command: %+v %+v", res, res.Error)
	}
	wantKind(t, call(`{"message":"hi"}`), maiden.KindInput, "message")
	put("echo")
	if res := call(`{"message":"hi"}`); !res.OK {
		t.Fatalf("json again: %+v", res.Error)
	}
}

// TestTextkitExample is examples/textkit (Go SDK, maiden.Commands) through
// the Host: its projection in tools/list, a card for one command, an
// option out of range and an undeclared one refused by name, and help.
func TestTextkitExample(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.textkit]
path = %q
[agents.counter]
tools = ["textkit"]
grants = ["tool:invoke textkit count --unit=* -- *"]
`, maiden.Options{Isolation: maiden.InProcess}, "examples/textkit")
	ctx := context.Background()
	infos, err := h.Tools(ctx)
	if err != nil || len(infos) != 1 || infos[0].Error != nil {
		t.Fatalf("tools: %+v %v", infos, err)
	}
	for _, c := range []string{`"count"`, `"case"`, `"repeat"`, `"base64 encode"`, `"base64 decode"`} {
		if !strings.Contains(infos[0].InputSchema, c) {
			t.Errorf("tools/list: no command %s in %s", c, infos[0].InputSchema)
		}
	}
	call := func(agent, in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "textkit", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call("counter", `{"command":"count","unit":"words","text":"one two three"}`); !res.OK || res.Output != `{"count":3,"unit":"words"}` {
		t.Fatalf("count: %+v %+v", res, res.Error)
	}
	if res := call("counter", `{"command":"count","text":"héllo"}`); !res.OK || res.Output != `{"count":5,"unit":"chars"}` {
		t.Fatalf("count (default unit): %+v %+v", res, res.Error)
	}
	wantKind(t, call("counter", `{"command":"repeat","times":2,"text":"x"}`), maiden.KindDenied, "tool:invoke textkit repeat")
	wantKind(t, call("counter", `{"command":"base64 encode","text":"x"}`), maiden.KindDenied, "tool:invoke textkit base64 encode")
	wantKind(t, call("counter", `{"command":"count","unit":"bytes","text":"x"}`), maiden.KindInput, "unit")
	wantKind(t, call("counter", `{"command":"count","shout":true,"text":"x"}`), maiden.KindInput, "shout")

	// The implicit agent of a configuration without [agents] may call
	// every command.
	h2 := newHostWith(t, "version = 1\n[tools.textkit]\npath = %q\n", maiden.Options{Isolation: maiden.InProcess}, "examples/textkit")
	for in, want := range map[string]string{
		`{"command":"repeat","times":3,"text":"ab","separator":"-"}`: `{"text":"ab-ab-ab"}`,
		`{"command":"case","to":"title","text":"hello big world"}`:   `{"text":"Hello Big World"}`,
		`{"command":"base64 encode","url":true,"text":"??>"}`:        `{"text":"Pz8-"}`,
		`{"command":"base64 decode","text":"aGk+"}`:                  `{"text":"hi>"}`,
		`{"command":"count","unit":"lines","text":"-a\nb"}`:          `{"count":2,"unit":"lines"}`,
	} {
		res, err := h2.Call(ctx, maiden.Call{Tool: "textkit", Input: in})
		if err != nil || !res.OK || res.Output != want {
			t.Errorf("%s: %+v %+v %v, want %s", in, res, res.Error, err, want)
		}
	}
	wantKind(t, mustCall(t, h2, maiden.Call{Tool: "textkit", Input: `{"command":"repeat","times":101,"text":"x"}`}), maiden.KindInput, "times")
	wantKind(t, mustCall(t, h2, maiden.Call{Tool: "textkit", Input: `{"command":"base64 decode","text":"!!"}`}), maiden.KindTool, "illegal base64")

	help, err := h.CommandHelp(ctx, "textkit", "repeat")
	if err != nil || !strings.Contains(help, "--times") || !strings.Contains(help, "--separator") {
		t.Fatalf("help: %q %v", help, err)
	}
}

// BenchmarkCommandToolCall is a declared agent's in-process call (one card
// each) of the tiny WAT tools: "json" is echo.wat with a JSON Schema,
// "command" is cmdecho.wat, whose schema() is a command description, so
// the call is parsed as a command, rendered for the card, and rebuilt as
// the call the tool receives. Compare their ns/op in one run (-count 6).
func BenchmarkCommandToolCall(b *testing.B) {
	for _, c := range []struct{ name, tool, input string }{
		{"json", "echo", `{"message":"hi"}`},
		{"command", "cmdecho", `{"command":"list","limit":3}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newHostWith(b, `version = 1
[tools.echo]
path = %q
[tools.cmdecho]
path = %q
[agents.bench]
tools = ["echo", "cmdecho"]
grants = ["tool:invoke echo --message=*", "tool:invoke cmdecho list --limit=*"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo", "cmdecho")
			ctx := context.Background()
			call := maiden.Call{Agent: "bench", Tool: c.tool, Input: c.input}
			for range 50 { // compile, open the store, warm the caches
				if res, err := h.Call(ctx, call); err != nil || !res.OK {
					b.Fatal(res.Error, err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if res, err := h.Call(ctx, call); err != nil || !res.OK {
					b.Fatal(res.Error, err)
				}
			}
		})
	}
}

// TestCommandToolSecretHandle: {"$secret": NAME} as a command's argument is
// the marker $secret:NAME in the rendering the cards decide on, and the
// call's handle (never the value) in the call the tool receives.
func TestCommandToolSecretHandle(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.cmdecho]
path = %q
secrets = ["API_TOKEN"]
[agents.a]
tools = ["cmdecho"]
grants = ["tool:invoke cmdecho add --times=* -- $secret:API_TOKEN"]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(string) (string, bool) { return "s3cr3t-value", true }}, "cmdecho")
	ctx := context.Background()
	res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "cmdecho", Input: `{"command":"add","text":{"$secret":"API_TOKEN"}}`})
	if err != nil || !res.OK {
		t.Fatalf("%+v %v", res.Error, err)
	}
	var got struct{ Positionals []string }
	if err := json.Unmarshal([]byte(res.Output), &got); err != nil || len(got.Positionals) != 1 || !strings.HasPrefix(got.Positionals[0], maiden.SecretHandlePrefix) {
		t.Fatalf("the tool received %s, want a secret handle as the positional", res.Output)
	}
	if strings.Contains(res.Output, "s3cr3t-value") || strings.Contains(res.Output, maiden.SecretMarkerPrefix) {
		t.Fatalf("the tool received %s", res.Output)
	}
	// The card names the marker: another text is another call.
	res, err = h.Call(ctx, maiden.Call{Agent: "a", Tool: "cmdecho", Input: `{"command":"add","text":"API_TOKEN"}`})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, res, maiden.KindDenied, "")
}

// TestCommandToolRewriteIsReauthorized: a middleware component's rewrite
// of a command-tree call (testdata/middleware/city: "paris" → "Paris") is
// parsed with the description again, decided by the cards on its new
// rendering, and is what the tool receives; a card that allowed the
// original call but not the rewritten one refuses it.
func TestCommandToolRewriteIsReauthorized(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.cmdecho]
path = %q
[middleware.city]
path = "`+testkit.Middleware(t, "city")+`"
[[middleware]]
use = "city"
[agents.capital]
tools = ["cmdecho"]
grants = ["tool:invoke cmdecho list --city=Paris", "tool:invoke cmdecho list --city=paris"]
[agents.lower]
tools = ["cmdecho"]
grants = ["tool:invoke cmdecho list --city=paris"]
`, maiden.Options{Isolation: maiden.InProcess}, "cmdecho")
	ctx := context.Background()
	in := `{"command":"list","city":"paris"}`
	res, err := h.Call(ctx, maiden.Call{Agent: "capital", Tool: "cmdecho", Input: in})
	if err != nil || !res.OK || res.Output != `{"command":["list"],"options":{"city":"Paris"},"positionals":[]}` {
		t.Fatalf("rewritten call: %+v %+v %v", res, res.Error, err)
	}
	res, err = h.Call(ctx, maiden.Call{Agent: "lower", Tool: "cmdecho", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, res, maiden.KindDenied, "tool:invoke cmdecho list --city=Paris")
}
