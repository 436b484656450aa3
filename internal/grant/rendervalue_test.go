package grant

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/jsonparse"
)

// renderBoth renders in as text (Render) and as the value a strict
// decoder reads from it (jsonparse.ParseStrict, then RenderValue), and
// fails t unless both agree: the same arguments, or both refused.
func renderBoth(t *testing.T, in string) {
	t.Helper()
	want, werr := Render([]byte(in))
	var got []Arg
	v, err := jsonparse.ParseStrict(in)
	if err == nil {
		got, err = RenderValue(v)
		if err != nil && !errors.Is(err, ErrRender) {
			t.Fatalf("RenderValue of %q: error %v is not ErrRender", in, err)
		}
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: Render's error %v, the decoded value's %v", in, werr, err)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: RenderValue %q, Render %q", in, Rendering(got), Rendering(want))
	}
	if err != nil {
		return
	}
	// For a tool reading JSON: what RenderJSONInput renders is the same,
	// and a binary64 reader (JSON.parse; encoding/json into float64) reads
	// it back to the same rendering; what it refuses, such a reader reads
	// as another number.
	forTool, err := RenderJSONInput(v)
	var f any
	ferr := json.Unmarshal([]byte(in), &f)
	var again []Arg
	if ferr == nil {
		again, ferr = RenderValue(shortest(f))
	}
	readAlike := ferr == nil && Rendering(again) == Rendering(want)
	switch {
	case err == nil && (!reflect.DeepEqual(forTool, want) || !readAlike):
		t.Fatalf("%q: rendered for a JSON tool as %q; a binary64 reader reads %q (%v)", in, Rendering(forTool), Rendering(again), ferr)
	case err != nil && readAlike:
		t.Fatalf("%q: refused for a JSON tool (%v), but a binary64 reader reads it as rendered, %q", in, err, Rendering(want))
	case err != nil && (!errors.Is(err, ErrRender) || !strings.Contains(err.Error(), "binary64")):
		t.Fatalf("%q: refused for a JSON tool for another reason than its numbers: %v", in, err)
	}
}

// shortest writes each float64 of v as the shortest text that reads as it.
func shortest(v any) any {
	switch v := v.(type) {
	case float64:
		return json.Number(strconv.FormatFloat(v, 'g', -1, 64))
	case []any:
		for i := range v {
			v[i] = shortest(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = shortest(v[k])
		}
	}
	return v
}

// TestRenderJSONInput: a number a binary64 reader (JSON.parse, a Go
// float64) reads as another is refused for a tool reading JSON, naming
// what it reads instead; numbers binary64 holds render as RenderValue
// renders them.
func TestRenderJSONInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"n":9007199254740992}`, `--n=9007199254740992`},
		{`{"n":0.1}`, `--n=0.1`}, // the binary64 number nearest 0.1 prints as 0.1
		{`{"n":-0}`, `--n=0`},
		{`{"n":5e-324}`, `--n=5e-324`},
		{`{"n":1.7976931348623157e308}`, `--n=1.7976931348623157e+308`},
		{`{"n":12345678901234568000000}`, `--n=1.2345678901234568e+22`},
		{`{"n":123456789012345}`, `--n=123456789012345`},
		{`{"n":9007199254740993}`, "it reads 9007199254740992"},
		{`{"n":12345678901234567890123}`, "it reads 1.2345678901234568e+22"},
		{`{"n":1.00000000000000000001}`, "it reads 1 "},
		{`{"o":{"k":[9007199254740993]}}`, "it reads 9007199254740992"},
		{`{"n":1e400}`, "it reads Infinity"},
		{`{"n":-1e400}`, "it reads -Infinity"},
		{`{"n":1e-400}`, "it reads 0 "},
	} {
		renderBoth(t, tc.in)
		v, err := jsonparse.ParseStrict(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		args, err := RenderJSONInput(v)
		if strings.HasPrefix(tc.want, "--") {
			if err != nil || Rendering(args) != tc.want {
				t.Errorf("RenderJSONInput(%s) = %q, %v; want %s", tc.in, Rendering(args), err, tc.want)
			}
		} else if !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RenderJSONInput(%s) = %q, %v; want ErrRender with %q", tc.in, Rendering(args), err, tc.want)
		}
	}
}

// TestRenderValueSaysWhere: a value's refusal names the place in it.
func TestRenderValueSaysWhere(t *testing.T) {
	v := map[string]any{"o": map[string]any{"a/b": []any{json.Number("1"), json.Number("9007199254740993")}}}
	_, err := RenderJSONInput(v)
	if !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), "it reads 9007199254740992") || !strings.HasSuffix(err.Error(), "(at /o/a~1b/1)") {
		t.Fatalf("RenderValue: %v", err)
	}
}

var renderCases = []string{
	`{}`, `{"city":"Paris"}`, `{"a":[1,"x",true],"b":{"k":null},"no-x":false,"y":true}`,
	`{"s":"a b \" * \\ =","n":-1.5e-9}`, `{"...":true,"=":"=","-":"--..."}`,
	`{"n":1.0}`, `{"n":1e2}`, `{"n":-0}`, `{"n":-0.0e-5}`, `{"n":1e21}`, `{"n":0.0000001}`, `{"n":1e400}`,
	`{"n":1e1234567890}`, `{"n":1e0000000000001}`, `{"n":123456789012345678901234567890}`,
	`{"a":1,"a":2}`, `{"o":{"k":1,"k":2}}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a":"\ude00\ud83d"}`,
	`{"a":"\ud83d\ude00"}`, `{"":1}`, `{"o":{"":1}}`, `[]`, `"x"`, `1`, `null`, ` {"a":1} `, `{"a":1} x`,
	`{"a":[]}`, `{"a":[[1,2],{"b":[]}]}`, `{"a":{"z":1,"b":2,"é":3,"B":4}}`, "{\"\\u0000\":\"\\u001f\\u007f\"}",
	`{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`,
	`{"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
	`{"a":` + strings.Repeat("[", 64) + "1" + strings.Repeat("]", 64) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, 63) + "1" + strings.Repeat("}", 63) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, 64) + "1" + strings.Repeat("}", 64) + `}`,
}

// TestRenderValueIsRender: rendering the decoded value is rendering the
// text, on the documented cases and their edges.
func TestRenderValueIsRender(t *testing.T) {
	for _, in := range renderCases {
		renderBoth(t, in)
	}
}

// TestRenderValueRefusesWhatItCannotCheck: a value no strict decoder
// gives (invalid UTF-8 in a Go string, a Go type JSON has not) is
// refused, never rendered as something else.
func TestRenderValueRefusesWhatItCannotCheck(t *testing.T) {
	for _, v := range []any{
		map[string]any{"a": "\xff"}, map[string]any{"\xff": "a"}, map[string]any{"a": 1.5},
		map[string]any{"a": json.Number("01")}, map[string]any{"a": json.Number("1 ")}, map[string]any{"a": json.Number("")},
		[]any{}, "x", nil,
	} {
		if args, err := RenderValue(v); !errors.Is(err, ErrRender) {
			t.Errorf("RenderValue(%#v) = %q, %v; want ErrRender", v, Rendering(args), err)
		}
	}
}

// FuzzRenderValue: for any input, the text's rendering and the strictly
// decoded value's are the same, or both refused.
func FuzzRenderValue(f *testing.F) {
	for _, in := range renderCases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		renderBoth(t, in)
	})
}

// TestPlainInt: the fast path for integers writes what exactNumber writes.
func TestPlainInt(t *testing.T) {
	for _, n := range []string{"0", "-0", "1", "-1", "10", "100", "-120", "007", "-07", "123456789012345", "1234567890123456", "1.0", "1e2", "-", "1-"} {
		p := &jsonParser{s: []byte(n)}
		v, err := p.exactNumber()
		exact := err == nil && p.i == len(n)
		if plainInt(n) && (!exact || v.str != n) {
			t.Errorf("plainInt(%q), but exactNumber writes %q (%v)", n, v.str, err)
		}
	}
	for _, n := range []string{"0", "1", "-1", "100", "123456789012345", "-999999999999999"} {
		if !plainInt(n) {
			t.Errorf("plainInt(%q) = false", n)
		}
	}
}
