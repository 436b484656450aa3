package grant

import (
	"encoding/json"
	"testing"
)

// TestCoversRefusesCaseVariantOfParentName: a child grant that names an
// argument differing only by case from one its parent pins is not under
// the parent. The parent refuses every call carrying such a variant (even
// under --...: foldsOnto), because a Go tool reads {"city":"Paris",
// "CITY":"Berlin"} as city=Berlin; a child naming CITY itself allowed that
// call, so an agent holding card:derive on "--city=Paris --..." could
// derive a card for city=Berlin (CARDS.md "Derivation": a child is under
// its parent only if every call the child allows, the parent allows).
func TestCoversRefusesCaseVariantOfParentName(t *testing.T) {
	for _, tc := range []struct{ parent, child, tool, call string }{
		{"tool:invoke weather --city=Paris --...", "tool:invoke weather --CITY=Berlin --city=Paris", "weather", `{"city":"Paris","CITY":"Berlin"}`},
		{"tool:invoke weather --city=Paris --...", "tool:invoke weather --CITY=Berlin --city=Paris --...", "weather", `{"city":"Paris","CITY":"Berlin"}`},
		{"tool:invoke t --ask=x --...", "tool:invoke t --ask=x --aſk=y", "t", `{"ask":"x","aſk":"y"}`}, // 'ſ' folds onto 's'
	} {
		parent, child := mustParse(t, tc.parent), mustParse(t, tc.child)
		tg := toolTarget(t, tc.tool, tc.call)
		if !child.Allows(tg) || parent.Allows(tg) {
			t.Fatalf("premise: child %q allows %s = %v, parent %q = %v", tc.child, tc.call, child.Allows(tg), tc.parent, parent.Allows(tg))
		}
		if parent.Covers(child) {
			t.Errorf("%q covers %q, which allows %s %s that the parent refuses: lower-bound-too-broad expected (a Go tool reads the variant's value)",
				tc.parent, tc.child, tc.tool, tc.call)
		}
	}
	// A name that is no case variant of the parent's stays derivable.
	if !mustParse(t, "tool:invoke weather --city=Paris --...").Covers(mustParse(t, "tool:invoke weather --city=Paris --units=c")) {
		t.Errorf("an unrelated extra argument under the parent's --... must stay derivable")
	}
}

// TestProhibitionForbidsCaseVariant: a prohibition (a -deny card's
// upper-negative grant, a card's lower-negative exception) forbids a call
// that a JSON reader folding case (Go's encoding/json, the SDK's decoder)
// reads as the forbidden call: {"MESSAGE":"hello"} and {"message":"hi",
// "MESSAGE":"hello"} reach a Go tool as message=hello. docs/cards.md,
// "Prohibiting a tool": "tool:invoke greet --message=hello --..." forbids
// every call of greet with --message=hello, whatever else it passes.
func TestProhibitionForbidsCaseVariant(t *testing.T) {
	var v struct {
		Message string `json:"message"`
	}
	for _, tc := range []struct {
		deny, input string
		want        bool
	}{
		{"tool:invoke greet --message=hello --...", `{"message":"hello"}`, true},
		{"tool:invoke greet --message=hello --...", `{"MESSAGE":"hello"}`, true},
		{"tool:invoke greet --message=hello --...", `{"message":"hi","MESSAGE":"hello"}`, true},
		{"tool:invoke greet --message=hello --...", `{"Message":"hello","loud":true}`, true},
		{"tool:invoke greet --message=hello", `{"MESSAGE":"hello"}`, true},
		{"tool:invoke greet --message=hello", `{"message":"hi","MESSAGE":"hello"}`, true},
		// No reading of these is the forbidden call: not forbidden.
		{"tool:invoke greet --message=hello --...", `{"MESSAGE":"hi"}`, false},
		{"tool:invoke greet --message=hello --...", `{"message":"hi","MESSAGE":"bye"}`, false},
		{"tool:invoke greet --message=hello", `{"MESSAGE":"hello","loud":true}`, false},
		{"tool:invoke other --message=hello --...", `{"MESSAGE":"hello"}`, false},
	} {
		g := mustParse(t, tc.deny)
		tg := toolTarget(t, "greet", tc.input)
		if got := g.ForbidsRef(&tg); got != tc.want {
			if tc.want {
				v.Message = ""
				_ = json.Unmarshal([]byte(tc.input), &v)
				t.Errorf("prohibition %q does not forbid %s, which a Go tool reads as message=%q", tc.deny, tc.input, v.Message)
			} else {
				t.Errorf("prohibition %q forbids %s = %v, want %v", tc.deny, tc.input, got, tc.want)
			}
		}
	}
}
