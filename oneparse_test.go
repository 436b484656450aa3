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
