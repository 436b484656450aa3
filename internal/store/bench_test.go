package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
)

// BenchmarkWallet measures pinning an agent's wallet from a real SQLite
// file (one SELECT, JSON decoding, grant parsing, indexing), and reading
// the generation counter that lets a caller skip it when nothing changed.
func BenchmarkWallet(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{10, 1000} {
		s, err := Open(ctx, filepath.Join(b.TempDir(), "state.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.EnsureAgent(ctx, "research"); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			g, _ := grant.Parse(fmt.Sprintf("tool:invoke tool%d --city=* --units=metric --...", i))
			if _, err := s.Grant(ctx, "research", cards.Spec{LowerPos: cards.Any(g)}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w, err := s.Wallet(ctx, "research", time.Now())
				if err != nil || len(w.Cards()) != n {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("cards=%d/generation", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Generation(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		s.Close()
	}
}
