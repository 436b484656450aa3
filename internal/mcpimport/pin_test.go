package mcpimport

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestPinOf: the pin ignores key order and spacing in the schema, and
// counts every byte of the description (an invisible U+202E included) and
// every schema change (a dropped maximum).
func TestPinOf(t *testing.T) {
	base := Tool{Name: "pay", Description: "pays", InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","maximum":10}}}`)}
	same := base
	same.InputSchema = json.RawMessage(`{ "properties": {"amount": {"maximum": 10, "type": "integer"}}, "type": "object" }`)
	if PinOf(base).Digest != PinOf(same).Digest {
		t.Error("key order or spacing changed the pin")
	}
	wide := base
	wide.InputSchema = json.RawMessage(`{"type":"object"}`)
	bidi := base
	bidi.Description = "pays\u202e"
	both := wide
	both.Description = bidi.Description
	for _, c := range []struct {
		t    Tool
		want []string
	}{{wide, []string{"input schema"}}, {bidi, []string{"description"}}, {both, []string{"input schema", "description"}}} {
		if got := PinOf(base).Changes(PinOf(c.t)); !slices.Equal(got, c.want) {
			t.Errorf("changes %v, want %v", got, c.want)
		}
	}
	if PinOf(base).Changes(PinOf(same)) != nil {
		t.Error("an unchanged tool has changes")
	}
}
