package cards

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Tests of the twenty-fifth mutation pass (docs/security-tests.md,
// docs/mutation/grant-cards.tsv): each holds a promise no earlier test
// pinned, and names the plant it kills.

// forR is g's grants for recipient r.
func forR(r string, g []Grant) []Grant {
	out := make([]Grant, len(g))
	for i := range g {
		out[i] = Grant{Grant: g[i].Grant, Recipient: r}
	}
	return out
}

// TestDeriveUnderStarRecipient: a grant for recipient "*" is for whichever
// agent holds the card, as "" is, so it covers a child's grant for any
// recipient, and a child's prohibition for "*" keeps a parent's for one
// agent (CARDS.md "Derivation": a narrower child is accepted). Kills c04
// ("*" covering only "*": the narrower child refused).
func TestDeriveUnderStarRecipient(t *testing.T) {
	parent := Card{ID: "P", Spec: Spec{
		LowerPos: forR("*", gs(t, "tool:invoke search --...")),
		LowerNeg: forR("sub", gs(t, "tool:invoke search --q=secret")),
	}}
	for _, child := range []Spec{
		{LowerPos: forR("sub", gs(t, "tool:invoke search --q=x")), LowerNeg: forR("sub", gs(t, "tool:invoke search --q=secret"))},
		{LowerPos: gs(t, "tool:invoke search --q=x"), LowerNeg: forR("*", gs(t, "tool:invoke search --q=secret"))},
		{LowerPos: forR("*", gs(t, "tool:invoke search --q=x")), UpperNeg: gs(t, "tool:invoke search --q=secret")},
	} {
		if err := CheckDerive(parent, child, t0); err != nil {
			t.Errorf("CheckDerive(child %v) = %v, want nil", child.LowerPos, err)
		}
	}
	child := Spec{LowerPos: forR("*", gs(t, "tool:invoke rm"))}
	if err := CheckDerive(parent, child, t0); !errors.Is(err, ErrLowerBoundTooBroad) {
		t.Errorf("CheckDerive(tool:invoke rm) = %v, want lower-bound-too-broad", err)
	}
}

// TestBoundsForAnotherAgentIgnored: a wallet drops the grants whose
// recipient is another agent (CARDS.md "Decision": drop grants whose
// recipient does not cover the caller), the exceptions and ceilings as
// much as the allowances: a card's lower-negative for agent "other" does
// not except research's call (A2 is for that agent), and a ceiling for
// "other" does not cap research's wallet (A4 likewise). Kills w02 (the
// lower-negatives kept for every agent) and w03 (the ceilings kept).
func TestBoundsForAnotherAgentIgnored(t *testing.T) {
	x := toolT(t, "x", `{"q":"1"}`)
	for _, tc := range []struct {
		name  string
		cards []Card
		rule  string
	}{
		{"a lower-negative for another agent", []Card{{ID: "c1", Spec: Spec{
			LowerPos: gs(t, "tool:invoke x --..."), LowerNeg: forR("other", gs(t, "tool:invoke x --..."))}}},
			"card c1: lower-positive tool:invoke x --..."},
		{"a ceiling for another agent", []Card{
			{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x --...")}},
			{ID: "c2", Spec: Spec{UpperPos: forR("other", gs(t, "tool:invoke y --..."))}}},
			"card c1: lower-positive tool:invoke x --..."},
	} {
		d := NewWallet("research", t0, tc.cards).Decide(x)
		if !d.Allow || d.Rule() != tc.rule {
			t.Errorf("%s: Decide = allow %v by %q (%s); want allowed by %q", tc.name, d.Allow, d.Rule(), d.Reason, tc.rule)
		}
		// The same cards do bind "other".
		if d := NewWallet("other", t0, tc.cards).Decide(x); d.Allow {
			t.Errorf("%s: agent other allowed by %q; want denied", tc.name, d.Rule())
		}
	}
}

// TestGrantsForOtherAgentsAllDropped: a card holding several grants for
// other agents gives the wallet's agent none of them, whichever comes
// first (CARDS.md "Decision": drop grants whose recipient does not cover
// the caller; "a grant for another recipient allow[s] nothing", package
// doc). Kills w11 (forAgent keeping every grant after the first it
// drops: research allowed by a grant for agent "b").
func TestGrantsForOtherAgentsAllDropped(t *testing.T) {
	lower := append(forR("a", gs(t, "tool:invoke x --...")), forR("b", gs(t, "tool:invoke y --..."))...)
	lower = append(lower, gs(t, "tool:invoke z --...")...)
	lower = append(lower, forR("c", gs(t, "tool:invoke w --..."))...)
	w := NewWallet("research", t0, []Card{{ID: "c1", Spec: Spec{LowerPos: lower}}})
	for tool, want := range map[string]bool{"x": false, "y": false, "z": true, "w": false} {
		if d := w.Decide(toolT(t, tool, `{}`)); d.Allow != want {
			t.Errorf("research's call of %s: allow %v by %q; want %v", tool, d.Allow, d.Rule(), want)
		}
	}
	if d := NewWallet("b", t0, []Card{{ID: "c1", Spec: Spec{LowerPos: lower}}}).Decide(toolT(t, "y", `{}`)); !d.Allow {
		t.Errorf("agent b's call of y: %s; want allowed by its own grant", d.Reason)
	}
}

// TestNextExpiryIsTheEarliest: a caller that caches a pinned wallet must
// pin a new one at its earliest expiry, when a card stops counting
// (CARDS.md "Decision": drop expired cards); cards that never expire do
// not count. Kills w09 (the latest expiry: a cached wallet would keep an
// expired card allowing for an hour).
func TestNextExpiryIsTheEarliest(t *testing.T) {
	card := func(id string, exp time.Time) Card {
		return Card{ID: id, Spec: Spec{LowerPos: gs(t, "tool:invoke x"), Expires: exp}}
	}
	w := NewWallet("research", t0, []Card{card("never", time.Time{}), card("late", t0.Add(2*time.Hour)), card("soon", t0.Add(time.Hour)), card("mid", t0.Add(90*time.Minute))})
	if got, want := w.NextExpiry(), t0.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("NextExpiry = %v, want %v (card soon)", got, want)
	}
	if got := NewWallet("research", t0, []Card{card("never", time.Time{})}).NextExpiry(); !got.IsZero() {
		t.Fatalf("NextExpiry of a wallet whose cards never expire = %v, want zero", got)
	}
}

// TestExceptionIsPerCard: a lower-negative excepts only its own card's
// allowance (CARDS.md A3), so when two cards allow the call by the same
// literal grant and the first excepts it, the second allows it; and when
// every allowing card excepts it, the denial names the first of them in
// wallet order. Kills w19 (the first exception ending the search among
// the grants of that name) and w20 (the last excepting card named).
func TestExceptionIsPerCard(t *testing.T) {
	x := toolT(t, "x", `{"q":"secret"}`)
	excepting := func(id string) Card {
		return Card{ID: id, Spec: Spec{LowerPos: gs(t, "tool:invoke x --..."), LowerNeg: gs(t, "tool:invoke x --q=secret")}}
	}
	clean := Card{ID: "c2", Spec: Spec{LowerPos: gs(t, "tool:invoke x --q=*")}}
	d := NewWallet("research", t0, []Card{excepting("c1"), clean}).Decide(x)
	if !d.Allow || d.Rule() != "card c2: lower-positive tool:invoke x --q=*" {
		t.Fatalf("A3: Decide = allow %v by %q (%s); want allowed by card c2's tool:invoke x --q=*", d.Allow, d.Rule(), d.Reason)
	}
	d = NewWallet("research", t0, []Card{excepting("c1"), excepting("c3")}).Decide(x)
	if d.Allow || d.Card != "c1" || d.Bound != "lower-negative" || d.GrantText() != "tool:invoke x --q=secret" {
		t.Fatalf("A2: Decide = allow %v, card %q, %q %q; want denied by card c1's lower-negative tool:invoke x --q=secret", d.Allow, d.Card, d.Bound, d.GrantText())
	}
}

// TestBudgetBounds: a budget's value is a whole number from 0 to
// MaxBudget, both included, and only the keys BudgetKeys names, whether it
// is parsed or checked as the store reads it. Kills b02 (MaxBudget+1
// parsed) and b05 (Check accepting an unknown key).
func TestBudgetBounds(t *testing.T) {
	if b, err := ParseBudget(fmt.Sprintf("calls=%d", int64(MaxBudget))); err != nil || b[BudgetCalls] != MaxBudget {
		t.Fatalf("ParseBudget(calls=MaxBudget) = %v, %v", b, err)
	}
	if b, err := ParseBudget(fmt.Sprintf("calls=%d", int64(MaxBudget)+1)); !errors.Is(err, ErrBadBudget) {
		t.Fatalf("ParseBudget(calls=MaxBudget+1) = %v, %v; want bad budget", b, err)
	}
	if err := (Budget{"calls": 1, "tokens": 5}).Check(); !errors.Is(err, ErrBadBudget) || !strings.Contains(err.Error(), `"tokens"`) {
		t.Fatalf("Check of a budget with the key tokens = %v; want bad budget naming it", err)
	}
	if err := (Budget{"calls": MaxBudget, "cost": 0}).Check(); err != nil {
		t.Fatalf("Check of calls=MaxBudget,cost=0 = %v; want nil", err)
	}
}

// TestDenialNamesTheChangedComponent: a call that a grant pinned to
// another component would allow is denied naming both digests, and its
// fix is the grant of exactly this call pinned to the component it runs
// now, never one dropping the pin (package grant, "Grants naming a
// component"). Kills w23b (the denial saying only that no card allows it,
// with a fix that allows every component).
func TestDenialNamesTheChangedComponent(t *testing.T) {
	a, b := "sha256:"+strings.Repeat("a1", 32), "sha256:"+strings.Repeat("b2", 32)
	w := NewWallet("research", t0, []Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke echo@"+a+" --message=*")}}})
	call := toolT(t, "echo", `{"message":"hi"}`)
	call.Component = b
	d := w.Decide(call)
	if d.Allow {
		t.Fatalf("a call of component %s allowed by %q", b, d.Rule())
	}
	if !strings.Contains(d.Reason, "the tool's component is "+b+", not "+a) || !strings.Contains(d.Reason, "card c1's grant") {
		t.Fatalf("Reason = %q; want it to name component %s, the pinned %s and card c1", d.Reason, b, a)
	}
	if want := "maiden cards grant -agent research 'tool:invoke echo@" + b + " --message=hi'"; d.Fix != want {
		t.Fatalf("Fix = %q, want %q", d.Fix, want)
	}
}

// TestFillBudgetKeepsTheChildsOwn: FillBudget gives a derived card every
// budget its chain limits and the child leaves out, at what the chain has
// left, and keeps what the child asks itself, which CheckBudget then
// judges (a child asking more is refused, not silently narrowed; a key
// no card of the chain limits is the child's own). Kills b15 (the child's
// values clamped: cost=5 under a chain without a cost budget became 0).
func TestFillBudgetKeepsTheChildsOwn(t *testing.T) {
	chain := []Metered{{ID: "P", Budget: Budget{BudgetCalls: 10}, Spent: Budget{BudgetCalls: 4}}}
	got := FillBudget(Budget{BudgetCost: 5}, chain)
	if got.String() != "calls=6,cost=5" {
		t.Fatalf("FillBudget(cost=5) under P (6 calls left) = %s, want calls=6,cost=5", got)
	}
	got = FillBudget(Budget{BudgetCalls: 20}, chain)
	if got.String() != "calls=20" {
		t.Fatalf("FillBudget(calls=20) under P (6 calls left) = %s, want calls=20 (then refused)", got)
	}
	if err := CheckBudget(got, chain); !errors.Is(err, ErrBudgetTooBroad) {
		t.Fatalf("CheckBudget(calls=20) under 6 left = %v, want budget-too-broad", err)
	}
}

// TestRevisionIsTheSetOfCards: a wallet's revision identifies its live
// cards whatever order the store returned them in (an approval asked under
// one revision is not asked again because the same cards came back in
// another order), and changes when a card goes. Kills w28b (the IDs
// hashed unsorted).
func TestRevisionIsTheSetOfCards(t *testing.T) {
	card := func(id string) Card { return Card{ID: id, Spec: Spec{LowerPos: gs(t, "tool:invoke x")}} }
	abc := NewWallet("research", t0, []Card{card("a"), card("b"), card("c")})
	cab := NewWallet("research", t0, []Card{card("c"), card("a"), card("b")})
	if abc.RevisionText() != cab.RevisionText() {
		t.Fatalf("revision of cards a, b, c = %s; of c, a, b = %s; want the same", abc.RevisionText(), cab.RevisionText())
	}
	if ab := NewWallet("research", t0, []Card{card("a"), card("b")}); ab.RevisionText() == abc.RevisionText() {
		t.Fatalf("revision of cards a, b = that of a, b, c (%s)", ab.RevisionText())
	}
}

// TestDeriveCeilingForANamedRecipient: a child's ceiling is checked for
// every agent a grant of it names, not only for agents the parent names:
// a child capping "any agent" under the parent's ceiling but adding, for
// agent "sub", a ceiling grant over everything gives sub a wider ceiling
// than the parent's (CARDS.md A6, upper-bound-too-broad). Kills x07 (the
// child's recipients left out of the agents checked).
func TestDeriveCeilingForANamedRecipient(t *testing.T) {
	parent := Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke * --..."), UpperPos: gs(t, "tool:invoke search --...")}}
	child := Spec{
		LowerPos: gs(t, "tool:invoke search --q=x"),
		UpperPos: append(gs(t, "tool:invoke search --q=*"), forR("sub", gs(t, "tool:invoke * --..."))...),
	}
	err := CheckDerive(parent, child, t0)
	if !errors.Is(err, ErrUpperBoundTooBroad) || !strings.Contains(err.Error(), `for agent "sub"`) {
		t.Fatalf("CheckDerive = %v; want upper-bound-too-broad for agent \"sub\"", err)
	}
	child.UpperPos = append(gs(t, "tool:invoke search --q=*"), forR("sub", gs(t, "tool:invoke search --q=a*"))...)
	if err := CheckDerive(parent, child, t0); err != nil {
		t.Fatalf("CheckDerive with sub's ceiling under the parent's = %v, want nil", err)
	}
}

// TestCascadeCycleThroughTheRoot: a malformed lineage whose cycle leads
// back to the card revoked lists that card once, so the revocation
// reports each card once (CARDS.md A8: revoking reports how many). Kills
// x08b (the root not marked seen: [A B A]).
func TestCascadeCycleThroughTheRoot(t *testing.T) {
	got, err := Cascade("A", childFunc(map[string][]string{"A": {"B"}, "B": {"A", "C"}, "C": {"A"}}))
	if err != nil || !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Fatalf("Cascade(A) = %v, %v; want [A B C]", got, err)
	}
}
