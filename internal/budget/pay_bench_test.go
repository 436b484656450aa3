package budget

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/pgtest"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// BenchmarkFetchPays is what paying bytes_out before each request costs
// an http-fetch: a call on a card limiting bytes_out (each request a store
// transaction under the write lock) against the same call on a card
// limiting calls only (no payment), the fetch itself a no-op, on a SQLite
// store in a temporary directory (synchronous FULL, the default) and on a
// database of the test binary's throwaway PostgreSQL cluster
// (internal/pgtest: fsync and synchronous commit off unless
// MAIDEN_PGTEST_DURABLE=1, which a measurement to compare with SQLite's
// should set). Read the difference of a backend's two rows as its
// per-request price.
//
//	MAIDEN_PGTEST_DURABLE=1 go test ./internal/budget -run '^$' -bench FetchPays -benchtime 2000x -count 3
func BenchmarkFetchPays(b *testing.B) {
	for _, be := range []string{"sqlite", "postgres"} {
		for _, c := range []struct {
			name   string
			budget cards.Budget
		}{
			{"calls-only", cards.Budget{"calls": cards.MaxBudget}},
			{"bytes_out", cards.Budget{"bytes_out": cards.MaxBudget}},
		} {
			b.Run(be+"/"+c.name, func(b *testing.B) { benchmarkFetchPays(b, be == "postgres", c.budget) })
		}
	}
}

func benchmarkFetchPays(b *testing.B, pg bool, budget cards.Budget) {
	ctx := context.Background()
	target := filepath.Join(b.TempDir(), "state.db")
	if pg {
		target = pgtest.URL(b)
	}
	st, w, id := budgetedCardAt(b, target, budget)
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
}

// BenchmarkFetchPaysParallel is BenchmarkFetchPays's bytes_out row with
// four callers at once on one store, each paying for its own requests:
// "one-card", every caller on the same card (their payments wait for each
// other whatever the store), "own-card", each on a card of its own (on
// PostgreSQL, payments on different cards hold no lock in common).
//
//	MAIDEN_PGTEST_DURABLE=1 go test ./internal/budget -run '^$' -bench FetchPaysParallel -benchtime 2000x -count 3
func BenchmarkFetchPaysParallel(b *testing.B) {
	for _, be := range []string{"sqlite", "postgres"} {
		for _, own := range []bool{false, true} {
			name := be + "/one-card"
			if own {
				name = be + "/own-card"
			}
			b.Run(name, func(b *testing.B) { benchmarkFetchPaysParallel(b, be == "postgres", own) })
		}
	}
}

func benchmarkFetchPaysParallel(b *testing.B, pg bool, own bool) {
	perProc := max(1, 4/runtime.GOMAXPROCS(0)) // four callers, or one per P
	callers := perProc * runtime.GOMAXPROCS(0)
	ctx := context.Background()
	target := filepath.Join(b.TempDir(), "state.db")
	if pg {
		target = pgtest.URL(b)
	}
	st, w, id := budgetedCardAt(b, target, cards.Budget{"bytes_out": cards.MaxBudget})
	fetches := make(chan sandbox.FetchFunc, callers)
	for range callers {
		card, wallet := id, w
		if own {
			g, err := grant.Parse("tool:invoke fetcher --...")
			if err != nil {
				b.Fatal(err)
			}
			c, err := st.Grant(ctx, "a", cards.Spec{LowerPos: cards.Any(g), Budget: cards.Budget{"bytes_out": cards.MaxBudget}})
			if err != nil {
				b.Fatal(err)
			}
			if wallet, err = st.Wallet(ctx, "a", time.Now()); err != nil {
				b.Fatal(err)
			}
			card = c.ID
		}
		m, denial, err := Reserve(ctx, st, wallet, card, 1, time.Minute)
		if err != nil || m == nil || denial != "" {
			b.Fatalf("reserve: %v %q %v", m, denial, err)
		}
		b.Cleanup(func() { m.End(ctx, nil) })
		fetches <- m.Fetch(func(context.Context, sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
			return &sandbox.FetchResponse{Status: 200}, nil
		})
	}
	req := sandbox.FetchRequest{Method: "POST", URL: "https://api.example.com/x", Body: make([]byte, 512)}
	b.SetParallelism(perProc)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		fetch := <-fetches
		for pb.Next() {
			if _, ferr := fetch(ctx, req); ferr != nil {
				b.Error(ferr)
				return
			}
		}
	})
}
