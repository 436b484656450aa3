package decide_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
)

// The components of two builds of a tool named echo.
var (
	compA = "sha256:" + strings.Repeat("a1", 32)
	compB = "sha256:" + strings.Repeat("b2", 32)
)

// echoCall is a call of echo running the component comp ("" not known).
func echoCall(t testing.TB, comp string) grant.Target {
	tg := call(t, "echo", `{"message":"hi"}`)
	tg.Component = comp
	return tg
}

// TestDecideComponent: a grant naming a component allows the call only
// while the call runs that component (issue 25). A call of another
// component is not covered by it and falls through to the other grants
// and to deny by default, the reason naming both digests and the fix the
// grant of this call pinned to the component it runs now. Each row pins
// the whole decision as the audit trail records it, its Component
// included (what a replay asks again). The CARDS.md scenario a row
// extends is named first.
func TestDecideComponent(t *testing.T) {
	pinned := "tool:invoke echo@" + compA + " --message=*"
	for _, tc := range []struct {
		name string
		w    *cards.Wallet
		q    decide.Question
		want api.Decision
	}{
		{"A10 the pinned component is allowed",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, pinned)})),
			decide.Invoke(echoCall(t, compA)),
			api.Decision{Allow: true, Rule: "card c1: lower-positive " + pinned, Card: "c1", Bound: "lower-positive", Grant: pinned,
				Target: "tool:invoke echo --message=hi", Component: compA}},
		{"A10 another component is denied, naming both digests",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, pinned)})),
			decide.Invoke(echoCall(t, compB)),
			api.Decision{Reason: `no card of agent "research" allows tool:invoke echo --message=hi: the tool's component is ` + compB + `, not ` + compA +
				`, which card c1's grant "` + pinned + `" names (the tool's file was rebuilt or its pinned reference changed since that grant; if the new component is trusted, grant it: maiden cards grant -agent research 'tool:invoke echo@` + compB + ` --message=hi')`,
				Rule: "no card", Target: "tool:invoke echo --message=hi", Fix: "maiden cards grant -agent research 'tool:invoke echo@" + compB + " --message=hi'", Component: compB}},
		{"A10 a call whose component is not known is denied by a pinned grant",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, pinned)})),
			decide.Invoke(echoCall(t, "")),
			api.Decision{Reason: `no card of agent "research" allows tool:invoke echo --message=hi: card c1's grant "` + pinned + `" allows it only while the tool's component is ` + compA +
				`, and this call's component is not known (only a WebAssembly tool's component has a digest, known once its file loads) (to allow it whatever component runs it: maiden cards grant -agent research 'tool:invoke echo --message=hi')`,
				Rule: "no card", Target: "tool:invoke echo --message=hi", Fix: "maiden cards grant -agent research 'tool:invoke echo --message=hi'"}},
		{"A3 another card's unpinned grant still allows the other component",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, pinned)}), card("c2", cards.Spec{LowerPos: gs(t, "tool:invoke echo --...")})),
			decide.Invoke(echoCall(t, compB)),
			api.Decision{Allow: true, Rule: "card c2: lower-positive tool:invoke echo --...", Card: "c2", Bound: "lower-positive", Grant: "tool:invoke echo --...",
				Target: "tool:invoke echo --message=hi", Component: compB}},
		{"A4 a prohibition naming a component forbids that component",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke echo --...")}), card("d1", cards.Spec{UpperNeg: gs(t, "tool:invoke echo@"+compA+" --...")})),
			decide.Invoke(echoCall(t, compA)),
			api.Decision{Reason: `card d1 of agent "research" forbids tool:invoke echo --message=hi (its upper-negative grant "tool:invoke echo@` + compA + ` --..."; only revoking that card lifts it: maiden cards revoke d1)`,
				Rule: "card d1: upper-negative tool:invoke echo@" + compA + " --...", Card: "d1", Bound: "upper-negative", Grant: "tool:invoke echo@" + compA + " --...",
				Target: "tool:invoke echo --message=hi", Fix: "maiden cards revoke d1", Component: compA}},
		{"A4 and only that component: another one is allowed",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke echo --...")}), card("d1", cards.Spec{UpperNeg: gs(t, "tool:invoke echo@"+compA+" --...")})),
			decide.Invoke(echoCall(t, compB)),
			api.Decision{Allow: true, Rule: "card c1: lower-positive tool:invoke echo --...", Card: "c1", Bound: "lower-positive", Grant: "tool:invoke echo --...",
				Target: "tool:invoke echo --message=hi", Component: compB}},
		{"A4 and a call whose component is not known is not forbidden by it",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke echo --...")}), card("d1", cards.Spec{UpperNeg: gs(t, "tool:invoke echo@"+compA+" --...")})),
			decide.Invoke(echoCall(t, "")),
			api.Decision{Allow: true, Rule: "card c1: lower-positive tool:invoke echo --...", Card: "c1", Bound: "lower-positive", Grant: "tool:invoke echo --...",
				Target: "tool:invoke echo --message=hi"}},
		{"A2 an exception naming a component excepts that component in its card",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke echo --..."), LowerNeg: gs(t, "tool:invoke echo@"+compB+" --...")})),
			decide.Invoke(echoCall(t, compB)),
			api.Decision{Reason: `no card of agent "research" allows tool:invoke echo --message=hi: card c1 excepts it (its lower-negative grant "tool:invoke echo@` + compB + ` --...") (grant it: maiden cards grant -agent research 'tool:invoke echo --message=hi')`,
				Rule: "card c1: lower-negative tool:invoke echo@" + compB + " --...", Card: "c1", Bound: "lower-negative", Grant: "tool:invoke echo@" + compB + " --...",
				Target: "tool:invoke echo --message=hi", Fix: "maiden cards grant -agent research 'tool:invoke echo --message=hi'", Component: compB}},
		{"A4 a ceiling naming a component caps the wallet at it, saying the call's",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke echo --...")}), card("cap", cards.Spec{UpperPos: gs(t, "tool:invoke echo@"+compA+" --...")})),
			decide.Invoke(echoCall(t, compB)),
			api.Decision{Reason: `card cap of agent "research" caps its wallet at "tool:invoke echo@` + compA + ` --...", which does not cover tool:invoke echo --message=hi (this call's component is ` + compB + `) (only revoking that card lifts it: maiden cards revoke cap)`,
				Rule: "card cap: upper-positive", Card: "cap", Bound: "upper-positive", Target: "tool:invoke echo --message=hi", Fix: "maiden cards revoke cap", Component: compB}},
		{"a malformed component is refused, never compared",
			wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke echo --...")})),
			decide.Invoke(echoCall(t, strings.ToUpper(compA))),
			api.Decision{Reason: `the call cannot be checked against the agent's cards: its component digest "` + strings.ToUpper(compA) + `" is not sha256: and 64 lower-case hex digits`,
				Rule: decide.PolicyTarget, Target: "tool:invoke echo --message=hi", Component: strings.ToUpper(compA)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := decide.Basis{Wallet: tc.w}
			got := withoutWallet(t, b, decide.Decide(b, tc.q).API())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideComponentFixWorks: the fix a denial for another component
// prints, pasted, allows that call and still not a third component's.
func TestDecideComponentFixWorks(t *testing.T) {
	w := wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke echo@"+compA+" --message=*")}))
	d := decide.Decide(decide.Basis{Wallet: w}, decide.Invoke(echoCall(t, compB)))
	g, ok := strings.CutPrefix(d.Fix, "maiden cards grant -agent research ")
	if d.Allow || !ok {
		t.Fatalf("decision %+v", d)
	}
	w2 := wallet(card("c2", cards.Spec{LowerPos: gs(t, strings.Trim(g, "'"))}))
	if !decide.Decide(decide.Basis{Wallet: w2}, decide.Invoke(echoCall(t, compB))).Allow {
		t.Fatalf("the fix %q does not allow the call it was printed for", d.Fix)
	}
	compC := "sha256:" + strings.Repeat("c3", 32)
	if decide.Decide(decide.Basis{Wallet: w2}, decide.Invoke(echoCall(t, compC))).Allow {
		t.Fatalf("the fix %q allows a third component: it must stay pinned", d.Fix)
	}
}

// TestDecidePinnedAllowedAllocatesNothing: comparing the component costs
// an allowed call no allocation.
func TestDecidePinnedAllowedAllocatesNothing(t *testing.T) {
	b := decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke echo@"+compA+" --...")}))}
	q := decide.Invoke(echoCall(t, compA))
	if n := testing.AllocsPerRun(100, func() {
		if !decide.Decide(b, q).Allow {
			t.Fatal("denied")
		}
	}); n != 0 {
		t.Errorf("an allowed pinned decision allocates %v times", n)
	}
}

// BenchmarkDecidePinned is one allowed decision by a grant naming the
// call's component, against the same grant naming none, in the same run
// (the ratio is the cost of comparing the digest).
func BenchmarkDecidePinned(b *testing.B) {
	for _, tc := range []struct{ name, grant string }{
		{"unpinned", "tool:invoke echo --message=*"},
		{"pinned", "tool:invoke echo@" + compA + " --message=*"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			basis := decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(b, tc.grant)}))}
			q := decide.Invoke(echoCall(b, compA))
			b.ReportAllocs()
			for b.Loop() {
				if !decide.Decide(basis, q).Allow {
					b.Fatal("denied")
				}
			}
		})
	}
}
