package budget

import (
	"context"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// BenchmarkFetchPays is what paying bytes_out before each request costs
// an http-fetch (a SQLite store in a temporary directory, synchronous FULL,
// the default): a call on a card limiting bytes_out (each request a store
// transaction under the write lock) against the same call on a card
// limiting calls only (no payment), the fetch itself a no-op. Read the
// difference of the two rows as the per-request price.
//
//	go test ./internal/budget -run '^$' -bench FetchPays -benchtime 2000x -count 3
func BenchmarkFetchPays(b *testing.B) {
	for _, c := range []struct {
		name   string
		budget cards.Budget
	}{
		{"calls-only", cards.Budget{"calls": cards.MaxBudget}},
		{"bytes_out", cards.Budget{"bytes_out": cards.MaxBudget}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			st, w, id := budgetedCard(b, c.budget)
			m, denial, err := Reserve(ctx, st, w, id, 1, time.Minute)
			if err != nil || m == nil || denial != "" {
				b.Fatalf("reserve: %v %q %v", m, denial, err)
			}
			fetch := m.Fetch(func(context.Context, sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
				return &sandbox.FetchResponse{Status: 200}, nil
			})
			req := sandbox.FetchRequest{Method: "POST", URL: "https://api.example.com/x", Body: make([]byte, 512)}
			b.ResetTimer()
			for range b.N {
				if _, ferr := fetch(ctx, req); ferr != nil {
					b.Fatal(ferr)
				}
			}
			b.StopTimer()
			m.End(ctx, nil)
		})
	}
}
