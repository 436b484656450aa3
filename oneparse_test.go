package maiden_test

import (
	"context"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestAmbiguousInputIsRefused: input that JSON readers read differently is
// refused before anything checks or runs it, naming what and where. The
// tool here, jsonfield.wat, reads its input with a hand-written scanner
// that takes the first "target" it meets; the schema check (and
// encoding/json, JSON.parse) take the last. Before the one parse, with no
// agents declared, {"target":"first","target":"second"} had the schema
// check "second" and the tool run on "first".
func TestAmbiguousInputIsRefused(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, "version = 1\n[tools.jsonfield]\npath = %q\n", maiden.Options{Isolation: maiden.InProcess}, "jsonfield")
	ctx := context.Background()
	res, err := h.Call(ctx, maiden.Call{Tool: "jsonfield", Input: `{"target":"second"}`})
	if err != nil || !res.OK || res.Output != `"second"` {
		t.Fatalf("a plain call: %v %+v", err, res)
	}
	for _, c := range []struct{ name, input, want string }{
		{"duplicate key", `{"target":"first","target":"second"}`, `duplicate key "target" at byte offset 18`},
		{"duplicate key spelt with an escape", `{"t\u0061rget":"first","target":"second"}`, `duplicate key "target" at byte offset 23`},
		{"nested duplicate key", `{"target":"x","o":{"k":1,"k":2}}`, `duplicate key "k" at byte offset 25`},
		{"invalid UTF-8", "{\"target\":\"a\xffb\"}", "invalid UTF-8 in string at byte offset 12"},
		{"lone surrogate", `{"target":"\ud800"}`, `lone UTF-16 surrogate \ud800 in string at byte offset 11`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := h.Call(ctx, maiden.Call{Tool: "jsonfield", Input: c.input})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.Error == nil || res.Error.Kind != maiden.KindInput || !strings.Contains(res.Error.Message, c.want) {
				t.Fatalf("got %+v (output %q), want kind input naming %q", res.Error, res.Output, c.want)
			}
		})
	}
}

// TestRoundedNumberIsNotAuthorized: a card pinned to a number a binary64
// reader rounds does not let the call through as that number: a
// JavaScript tool (JSON.parse) would run on 9007199254740992, which no
// card allows. Before, the rendering kept the exact number and the card
// allowed the call.
func TestRoundedNumberIsNotAuthorized(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[agents.pinned]
tools = ["echo"]
grants = ["tool:invoke echo --message=hi --n=9007199254740993", "tool:invoke echo --message=hi --n=0.1"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	res, err := h.Call(ctx, maiden.Call{Agent: "pinned", Tool: "echo", Input: `{"message":"hi","n":0.1}`})
	if err != nil || !res.OK {
		t.Fatalf("a number binary64 holds: %v %+v", err, res.Error)
	}
	res, err = h.Call(ctx, maiden.Call{Agent: "pinned", Tool: "echo", Input: `{"message":"hi","n":9007199254740993}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != maiden.KindInput || !strings.Contains(res.Error.Message, "it reads 9007199254740992") || !strings.Contains(res.Error.Message, "(at /n)") {
		t.Fatalf("got %+v (output %q), want kind input naming the rounding and where", res.Error, res.Output)
	}
}
