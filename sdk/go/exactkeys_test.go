//go:build !wasip1

package maiden_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	maiden "github.com/maiden-run/maiden/sdk/go"
)

type exactCity struct {
	City string `json:"city"`
}

type exactBase struct {
	City string `json:"city,omitempty"`
}

type ExactOther struct {
	City string `json:"city"`
}

type exactInput struct {
	exactBase
	*ExactOther `json:"other,omitempty"`
	Kind        string `json:"kind"`
	Untagged    string // named by its Go name
	Skipped     string `json:"-"`
	//lint:ignore SA5008 the tag names the field "-" (encoding/json's rule for "-,"), which this test covers
	Dash   string                       `json:"-,"`
	Trip   *struct{ Stops []exactCity } `json:"trip,omitempty"`
	Labels map[string]string            `json:"labels,omitempty"`
	ByName map[string]exactCity         `json:"by_name,omitempty"`
	Raw    json.RawMessage              `json:"raw,omitempty"`
	When   *time.Time                   `json:"when,omitempty"`
	Extra  any                          `json:"extra,omitempty"`
	Pair   [2]exactCity                 `json:"pair,omitzero"`
	Upper  string                       `json:"Town"`
	Lower  string                       `json:"town"`
}

// TestDecodeKeysExactly: a key fills a field only when it is the field's
// JSON name exactly; one that differs only in case (under Unicode folding,
// as encoding/json would have matched it) is refused with an error naming
// both, at any depth; keys that match no field are ignored as before.
func TestDecodeKeysExactly(t *testing.T) {
	for _, c := range []struct {
		name, input string
		want        string // an error containing this, or "" for success
		check       func(exactInput) bool
	}{
		{"exact", `{"city":"x","kind":"k"}`, "", func(in exactInput) bool { return in.exactBase.City == "x" && in.Kind == "k" }},
		{"upper", `{"CITY":"x"}`, `key "CITY" is not the field "city"`, nil},
		{"title", `{"City":"x"}`, `key "City" is not the field "city"`, nil},
		{"kelvin sign", `{"\u212aind":"x"}`, `key "\u212aind" is not the field "kind"`, nil},
		{"long s", `{"\u017fkipped":"x","trip":{"\u017ftops":[]}}`, `key "\u017ftops" in "trip" is not the field "Stops"`, nil},
		{"exact wins but the other is still refused", `{"city":"x","CITY":"y"}`, `key "CITY"`, nil},
		{"unknown key ignored", `{"town2":"x","nothing":1}`, "", func(in exactInput) bool { return in.exactBase.City == "" }},
		{"untagged by Go name", `{"Untagged":"u"}`, "", func(in exactInput) bool { return in.Untagged == "u" }},
		{"untagged lower case", `{"untagged":"u"}`, `key "untagged" is not the field "Untagged"`, nil},
		{"json:\"-\" skipped, any case", `{"Skipped":"s","skipped":"s"}`, "", func(in exactInput) bool { return in.Skipped == "" }},
		{"json:\"-,\" named -", `{"-":"d"}`, "", func(in exactInput) bool { return in.Dash == "d" }},
		{"two fields differing in case", `{"Town":"T","town":"t"}`, "", func(in exactInput) bool { return in.Upper == "T" && in.Lower == "t" }},
		{"a third spelling of both", `{"TOWN":"x"}`, `key "TOWN" is not the field "Town"`, nil},
		{"pointer, slice, nested", `{"trip":{"Stops":[{"city":"a"},{"CITY":"b"}]}}`, `key "CITY" in "trip.Stops[1]" is not the field "city"`, nil},
		{"nested exact", `{"trip":{"Stops":[{"city":"a"}]}}`, "", func(in exactInput) bool { return in.Trip.Stops[0].City == "a" }},
		{"nested field name itself", `{"trip":{"stops":[]}}`, `key "stops" in "trip" is not the field "Stops"`, nil},
		{"embedded pointer under a tag", `{"other":{"CITY":"x"}}`, `key "CITY" in "other"`, nil},
		{"embedded pointer exact", `{"other":{"city":"x"}}`, "", func(in exactInput) bool { return in.ExactOther.City == "x" }},
		{"array", `{"pair":[{"city":"a"},{"cITY":"b"}]}`, `in "pair[1]"`, nil},
		{"map keys are free", `{"labels":{"CITY":"x","city":"y"}}`, "", func(in exactInput) bool { return in.Labels["CITY"] == "x" }},
		{"map values are checked", `{"by_name":{"A":{"City":"x"}}}`, `key "City" in "by_name.A"`, nil},
		{"raw message is the tool's", `{"raw":{"CITY":1}}`, "", func(in exactInput) bool { return string(in.Raw) == `{"CITY":1}` }},
		{"custom decoder", `{"when":"2026-01-02T03:04:05Z"}`, "", func(in exactInput) bool { return in.When.Year() == 2026 }},
		{"interface is generic", `{"extra":{"CITY":1}}`, "", func(in exactInput) bool { return in.Extra.(map[string]any)["CITY"] == 1.0 }},
		{"type errors as before", `{"city":1}`, "cannot unmarshal number", nil},
		{"invalid JSON as before", `{"city":`, "unexpected end of JSON input", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var in exactInput
			err := maiden.Event{Tool: "t", Input: json.RawMessage(c.input)}.DecodeInput(&in)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("DecodeInput(%s): %v", c.input, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("DecodeInput(%s) = %v, want an error containing %q", c.input, err, c.want)
			case c.check != nil && !c.check(in):
				t.Errorf("DecodeInput(%s) gave %+v", c.input, in)
			}
		})
	}
}

// TestDecodeKeysEmbedded: fields promoted from embedded structs are matched
// exactly too, and a name two embedded structs share at one depth (which
// encoding/json fills in neither) is no field at all.
func TestDecodeKeysEmbedded(t *testing.T) {
	type a struct {
		City string `json:"city"`
		Zip  string `json:"zip"`
	}
	type b struct {
		City string `json:"city"`
	}
	type both struct {
		a
		*b
	}
	var in both
	decode := func(s string) error { return maiden.Event{Input: json.RawMessage(s)}.DecodeInput(&in) }
	if err := decode(`{"zip":"1","CITY":"x","city":"y"}`); err != nil || in.Zip != "1" || in.a.City != "" {
		t.Errorf("ambiguous city: %v, %+v", err, in)
	}
	if err := decode(`{"ZIP":"1"}`); err == nil || !strings.Contains(err.Error(), `key "ZIP" is not the field "zip"`) {
		t.Errorf("promoted zip: %v", err)
	}
}

// TestDecodeKeysIntoHeldPointer: DecodeInput decodes into what an interface
// already points to, as encoding/json does, so the keys are checked against
// that type.
func TestDecodeKeysIntoHeldPointer(t *testing.T) {
	held := &exactCity{}
	in := struct {
		Opts any `json:"opts"`
	}{Opts: held}
	err := maiden.Event{Input: json.RawMessage(`{"opts":{"CITY":"x"}}`)}.DecodeInput(&in)
	if err == nil || !strings.Contains(err.Error(), `key "CITY" in "opts"`) || held.City != "" {
		t.Errorf("DecodeInput = %v, held %+v", err, held)
	}
}

// TestFuncRefusesKeyCase: Func's input goes through the same matching, and a
// refused key is a tool error like any input that does not decode.
func TestFuncRefusesKeyCase(t *testing.T) {
	var got []string
	tool := maiden.Func("d", func(_ context.Context, in exactCity) (exactCity, error) {
		got = append(got, in.City)
		return in, nil
	})
	ctx := context.Background()
	if _, err := tool.Execute(ctx, []byte(`{"CITY":"Berlin"}`)); err == nil || err.Error() != `invalid input: key "CITY" is not the field "city": keys must match a field's name exactly, case included` {
		t.Errorf("Execute(CITY) = %v", err)
	}
	if out, err := tool.Execute(ctx, []byte(`{"city":"Paris"}`)); err != nil || string(out) != `{"city":"Paris"}` {
		t.Errorf("Execute(city) = %s, %v", out, err)
	}
	if diff := cmp.Diff([]string{"Paris"}, got); diff != "" {
		t.Errorf("the function ran with (-want +got):\n%s", diff)
	}
}

// FuzzDecodeKeys: on any input, DecodeInput either refuses a key for its
// case or decodes exactly what encoding/json decodes; it never panics.
func FuzzDecodeKeys(f *testing.F) {
	for _, s := range []string{`{"city":"x","CITY":"y"}`, `{"trip":{"Stops":[{"city":"a"}]}}`, `{"by_name":{"A":{"City":"x"}}}`,
		`{"other":{"city":"x"},"pair":[{},{"cITY":1}]}`, `{"Town":"T","town":"t","extra":{"k":[1]}}`, `[1]`, `{"city":`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		var got, want exactInput
		err := maiden.Event{Input: json.RawMessage(input)}.DecodeInput(&got)
		wantErr := json.Unmarshal([]byte(input), &want)
		switch {
		case err != nil && strings.Contains(err.Error(), "keys must match a field's name exactly"):
		case (err == nil) != (wantErr == nil):
			t.Fatalf("DecodeInput: %v; json.Unmarshal: %v", err, wantErr)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("DecodeInput gave %+v, json.Unmarshal %+v", got, want)
		}
	})
}
