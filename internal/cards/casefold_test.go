package cards

import (
	"errors"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
)

// TestProhibitionCaseVariantA4: a wallet-wide prohibition and a card's
// exception forbid the call a Go tool reads as the forbidden one, whatever
// the case the agent spells the argument's name in (CARDS.md A2, A4;
// docs/cards.md "Prohibiting a tool"). encoding/json, which Go tools and
// maiden's Go SDK decode their input with, fills the field message from
// "MESSAGE" too, the last key winning, so without this the agent turns
// the operator's -deny into an allow by changing the case of one letter.
func TestProhibitionCaseVariantA4(t *testing.T) {
	allow := Card{ID: "allow", Spec: Spec{LowerPos: gs(t, "tool:invoke greet --...")}}
	deny := Card{ID: "deny", Spec: Spec{UpperNeg: gs(t, "tool:invoke greet --message=hello --...")}}
	except := Card{ID: "except", Spec: Spec{LowerPos: gs(t, "tool:invoke greet --..."), LowerNeg: gs(t, "tool:invoke greet --message=hello --...")}}
	for _, in := range []string{`{"message":"hello"}`, `{"MESSAGE":"hello"}`, `{"message":"hi","MESSAGE":"hello"}`, `{"Message":"hello","loud":true}`} {
		d := NewWallet("a", t0, []Card{allow, deny}).Decide(toolT(t, "greet", in))
		if d.Allow || d.Card != "deny" || d.Bound != api.DecisionUpperNegative {
			t.Errorf("A4: upper-negative %q and input %s: allow=%v rule %q; want denied by card deny's upper-negative grant",
				"tool:invoke greet --message=hello --...", in, d.Allow, d.Rule())
		}
		d = NewWallet("a", t0, []Card{except}).Decide(toolT(t, "greet", in))
		if d.Allow || d.Card != "except" || d.Bound != api.DecisionLowerNegative {
			t.Errorf("A2: lower-negative %q and input %s: allow=%v rule %q; want denied by card except's exception",
				"tool:invoke greet --message=hello --...", in, d.Allow, d.Rule())
		}
	}
	// A call no reader takes for the forbidden one is still allowed.
	if d := NewWallet("a", t0, []Card{allow, deny}).Decide(toolT(t, "greet", `{"MESSAGE":"hi"}`)); !d.Allow {
		t.Errorf(`{"MESSAGE":"hi"} refused: %s`, d.Reason)
	}
}

// TestDeriveCaseVariantWidens: a child naming a case variant of an
// argument its parent pins is refused with lower-bound-too-broad (CARDS.md
// A5's rule): the parent "--city=Paris --..." refuses {"city":"Paris",
// "CITY":"Berlin"} (a Go tool reads city=Berlin), so a child allowing it
// would let the agent that derives it call weather for Berlin.
func TestDeriveCaseVariantWidens(t *testing.T) {
	parent := Card{ID: "p", Spec: Spec{LowerPos: gs(t, "tool:invoke weather --city=Paris --...")}}
	for _, c := range []string{"tool:invoke weather --CITY=Berlin --city=Paris", "tool:invoke weather --CITY=* --city=Paris --..."} {
		child := Spec{LowerPos: gs(t, c)}
		err := CheckDerive(parent, child, t0)
		if !errors.Is(err, ErrLowerBoundTooBroad) || !strings.Contains(err.Error(), "CITY") {
			w := NewWallet("a", t0, []Card{parent, {ID: "c", Parents: []string{"p"}, Spec: child}})
			d := w.Decide(toolT(t, "weather", `{"city":"Paris","CITY":"Berlin"}`))
			t.Errorf("derive %q from %q: err %v, want lower-bound-too-broad (with it, the wallet allows {\"city\":\"Paris\",\"CITY\":\"Berlin\"}: %v by %s)",
				c, "tool:invoke weather --city=Paris --...", err, d.Allow, d.Rule())
		}
	}
}

// TestCeilingRefusesCaseVariant: a ceiling (upper-positive) is met only by
// a call it allows as spelt, never by one a case-folding reader would take
// for an allowed call: {"CITY":"Paris"} is not under "--city=Paris" (a
// reader that does not fold gets no city and an argument the ceiling never
// named), so the ceiling refuses it, naming its card.
func TestCeilingRefusesCaseVariant(t *testing.T) {
	w := NewWallet("a", t0, []Card{
		{ID: "all", Spec: Spec{LowerPos: gs(t, "tool:invoke weather --...")}},
		{ID: "cap", Spec: Spec{UpperPos: gs(t, "tool:invoke weather --city=Paris")}},
	})
	if d := w.Decide(toolT(t, "weather", `{"city":"Paris"}`)); !d.Allow {
		t.Fatalf(`{"city":"Paris"} refused under the ceiling that names it: %s`, d.Reason)
	}
	d := w.Decide(toolT(t, "weather", `{"CITY":"Paris"}`))
	if d.Allow || d.Card != "cap" || d.Bound != api.DecisionUpperPositive {
		t.Errorf(`{"CITY":"Paris"} under ceiling "tool:invoke weather --city=Paris": allow=%v rule %q; want refused by card cap's ceiling`, d.Allow, d.Rule())
	}
}
