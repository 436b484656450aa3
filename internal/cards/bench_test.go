package cards

import (
	"fmt"
	"testing"

	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
)

// benchWallet is n cards of argument-level tool grants, each for its own
// tool, one in ten with an exception, and one ceiling card over them all:
// the decision for the last tool has to look at every card.
func benchWallet(b *testing.B, n int) *Wallet {
	var cs []Card
	for i := range n {
		spec := Spec{LowerPos: gs(b, fmt.Sprintf("tool:invoke tool%d --city=* --units=metric --...", i))}
		if i%10 == 0 {
			spec.LowerNeg = gs(b, fmt.Sprintf("tool:invoke tool%d --city=Atlantis --...", i))
		}
		cs = append(cs, Card{ID: fmt.Sprintf("card%d", i), Spec: spec})
	}
	cs = append(cs, Card{ID: "ceiling", Spec: Spec{UpperPos: gs(b, "tool:invoke tool* --..."), UpperNeg: gs(b, "tool:invoke tool* --city=Mordor --...")}})
	return NewWallet("research", t0, cs)
}

// BenchmarkDecide measures one decision over a pinned wallet: allowed by
// the last card (every card examined), and denied (no card allows it).
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{10, 1000} {
		w := benchWallet(b, n)
		last := toolT(b, fmt.Sprintf("tool%d", n-1), `{"city":"Berlin","units":"metric","lang":"de"}`)
		denied := toolT(b, "tool5", `{"city":"Berlin","units":"imperial"}`)
		b.Run(fmt.Sprintf("cards=%d/allowed", n), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuclock.Now()
			for b.Loop() {
				if !w.Decide(last).Allow {
					b.Fatal("denied")
				}
			}
			cpuclock.Report(b, cpu)
		})
		b.Run(fmt.Sprintf("cards=%d/denied", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if w.Decide(denied).Allow {
					b.Fatal("allowed")
				}
			}
		})
	}
}

// BenchmarkPin measures pinning a wallet (NewWallet over cards the store
// returned) and rendering a call's input: the other per-call work of a
// decision.
func BenchmarkPin(b *testing.B) {
	for _, n := range []int{10, 1000} {
		w := benchWallet(b, n)
		cs := w.Cards()
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewWallet("research", t0, cs)
			}
		})
	}
	b.Run("render", func(b *testing.B) {
		in := []byte(`{"city":"Berlin","units":"metric","lang":"de","days":[1,2,3]}`)
		b.ReportAllocs()
		for b.Loop() {
			args, err := grant.Render(in)
			if err != nil {
				b.Fatal(err)
			}
			_ = grant.ToolTarget("tool1", args)
		}
	})
}

// BenchmarkDecideGlobs is the worst case for the index: every grant names
// its tool by a glob, so a decision looks at every card.
func BenchmarkDecideGlobs(b *testing.B) {
	for _, n := range []int{10, 1000} {
		var cs []Card
		for i := range n {
			cs = append(cs, Card{ID: fmt.Sprintf("card%d", i), Spec: Spec{LowerPos: gs(b, fmt.Sprintf("tool:invoke *-tool%d --city=* --...", i))}})
		}
		w := NewWallet("research", t0, cs)
		last := toolT(b, fmt.Sprintf("x-tool%d", n-1), `{"city":"Berlin","units":"metric"}`)
		b.Run(fmt.Sprintf("cards=%d/allowed", n), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuclock.Now()
			for b.Loop() {
				if !w.Decide(last).Allow {
					b.Fatal("denied")
				}
			}
			cpuclock.Report(b, cpu)
		})
	}
}
