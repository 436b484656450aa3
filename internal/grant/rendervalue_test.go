package grant

import (
	"encoding/json"
	"errors"
	"reflect"
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
