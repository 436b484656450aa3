package budget

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// TestMeter: a call on a budgeted card is reserved in a real store, its
// http-fetch bytes counted (a request the policy refused sent nothing),
// its wall time and bytes charged once at the end; a card without a
// budget is not metered; an exhausted card's denial names the card, the
// budget, what is left and the agent.
func TestMeter(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.EnsureAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	g, _ := grant.Parse("tool:invoke fetcher --...")
	limited, err := st.Grant(ctx, "a", cards.Spec{LowerPos: cards.Any(g), Budget: cards.Budget{"calls": 1, "bytes_out": 1000}})
	if err != nil {
		t.Fatal(err)
	}
	free, err := st.Grant(ctx, "a", cards.Spec{LowerPos: cards.Any(g)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Wallet(ctx, "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if m, denial, err := Reserve(ctx, st, w, free.ID, 1, time.Second); m != nil || denial != "" || err != nil {
		t.Fatalf("a card without a budget: %v %q %v", m, denial, err)
	}
	m, denial, err := Reserve(ctx, st, w, limited.ID, 1, time.Second)
	if m == nil || denial != "" || err != nil {
		t.Fatalf("reserve: %v %q %v", m, denial, err)
	}
	clock := m.start
	m.now = func() time.Time { return clock.Add(1500 * time.Microsecond) }
	fetch := m.Fetch(func(_ context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		if strings.Contains(req.URL, "refused") {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchDenied, Message: "no"}
		}
		return &sandbox.FetchResponse{Status: 200}, nil
	})
	req := sandbox.FetchRequest{Method: "POST", URL: "https://api.example.com/x", Headers: []sandbox.Header{{Name: "A", Value: "bc"}}, Body: []byte("hello")}
	fetch(ctx, req)
	fetch(ctx, sandbox.FetchRequest{Method: "GET", URL: "https://refused.example.com/"})
	want := int64(len("POST") + len("https://api.example.com/x") + len("A") + len("bc") + len("hello"))
	if got := m.bytes.Load(); got != want || RequestBytes(req) != want {
		t.Fatalf("bytes counted %d, want %d", got, want)
	}
	m.End(ctx, nil)
	m.End(ctx, nil) // once only
	c, err := st.Card(ctx, limited.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Spent["wall_ms"] != 2 || c.Spent["bytes_out"] != want || c.Spent["calls"] != 1 {
		t.Fatalf("spent %v; want wall_ms 2 (1.5 ms rounded up), bytes_out %d, calls 1", c.Spent, want)
	}
	if !strings.Contains(m.Record(), "card "+limited.ID+" spent calls=1,cost=1, calls=0,bytes_out=1000 left") {
		t.Fatalf("record %q", m.Record())
	}
	m2, denial, err := Reserve(ctx, st, w, limited.ID, 1, time.Second)
	if m2 != nil || err != nil || !strings.HasPrefix(denial, "budget-exhausted: card "+limited.ID+" has 0 of its calls budget of 1 left, this call needs 1 (agent \"a\"") {
		t.Fatalf("the second call: %v %q %v", m2, denial, err)
	}
	var none *Meter
	none.End(ctx, nil)
	if none.Record() != "" || none.Fetch(nil) != nil {
		t.Fatal("a nil Meter meters something")
	}
}
