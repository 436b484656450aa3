package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestLazyInputSameVerdicts: the schema check of a call whose input is
// only scanned (validateInput on the scan: the fast check on the members,
// the value decoded only if needed) and of one whose value was decoded
// first (as a declared agent's rendering or a secret reference does) give
// the same verdict and message, and the value the first one decoded, if
// any, is the input's.
func TestLazyInputSameVerdicts(t *testing.T) {
	items := `[` + strings.TrimSuffix(strings.Repeat(`{"id":123,"ok":true,"tag":"abc"},`, 500), ",") + `]`
	schemas := []string{
		`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`,
		`{"type":"object","properties":{"data":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}}},"additionalProperties":false}`,
		`{"type":"object","properties":{"message":{"type":"string","pattern":"^m"}}}`, // no fast form
		`{"type":"object","additionalProperties":{"type":"string","maxLength":3}}`,
	}
	inputs := []string{
		`{"message":"m","data":` + items + `}`, `{"message":"hello"}`, `{"message":1}`, `{}`, `{"data":[{"id":1.5}]}`,
		`{"data":[{"id":1},{"tag":"x"}]}`, `{"message":"abcd"}`, `{"x":"\u00e9"}`, `[1]`, `"s"`, `null`,
		`{"message":"m","n":1e5000}`, `{"message":"m","d":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	}
	ctx := context.Background()
	for _, sch := range schemas {
		s := compileSchema(sch)
		if s.err != nil {
			t.Fatal(s.err)
		}
		for _, in := range inputs {
			lazy := &invocation{call: Call{Input: in}}
			full := &invocation{call: Call{Input: in}}
			if err := lazy.scanInput(); err != nil {
				t.Fatal(err)
			}
			if err := full.scanInput(); err != nil {
				t.Fatal(err)
			}
			if _, err := full.value(); err != nil {
				t.Fatal(err)
			}
			got, want := lazy.validateInput(ctx, s, 0), full.validateInput(ctx, s, 0)
			if got != nil && want != nil && got.Error() != want.Error() {
				// The library lists some problems in map order.
				for range 50 {
					if want = full.validateInput(ctx, s, 0); want.Error() == got.Error() {
						break
					}
				}
			}
			if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
				t.Errorf("schema %s, input %.60q: scanned %v; decoded %v", sch, in, got, want)
			}
			if lazy.decoded && fmt.Sprint(lazy.input) != fmt.Sprint(full.input) {
				t.Errorf("schema %s, input %.60q: decoded %v", sch, in, lazy.input)
			}
		}
	}
}

// TestImplicitCallBuildsNoTree: the implicit agent's call of a tool whose
// schema has a fast form, with no secret and no middleware, decodes no
// more of its input than the members the schema names: 30,000 small
// objects beside "message" cost no maps (decoded, they were ~95,000
// allocations).
func TestImplicitCallBuildsNoTree(t *testing.T) {
	dir := t.TempDir()
	src := fmt.Sprintf("version = 1\nmax_input_bytes = %d\n[tools.echo]\npath = %q\n", 4<<20, testkit.Component(t, "echo"))
	h, _ := testHost(t, dir, src, &Options{CacheDir: testkit.CompileCache(t), Isolation: api.InProcess})
	defer h.Close(context.Background())
	in := inputShapes(1 << 20)[1].input
	call := func() {
		res, err := h.Call(context.Background(), Call{Tool: "echo", Input: in})
		if err != nil || !res.OK || len(res.Output) != len(in) {
			t.Fatalf("echo: %v %+v", err, res.Error)
		}
	}
	call()
	n := testing.AllocsPerRun(3, call)
	t.Logf("a call of %d bytes in 30,000 objects allocates %.0f times", len(in), n)
	if n > 1000 {
		t.Errorf("a call of 30,000 small objects allocates %.0f times: its input was decoded", n)
	}
}
