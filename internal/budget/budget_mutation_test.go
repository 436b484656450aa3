package budget

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// budgetedCard is a real store in a temporary directory holding agent "a"
// and a card of budget b allowing tool fetcher, with a's wallet.
func budgetedCard(t testing.TB, b cards.Budget) (*store.DB, *cards.Wallet, string) {
	t.Helper()
	return budgetedCardAt(t, filepath.Join(t.TempDir(), "state.db"), b)
}

// budgetedCardAt is budgetedCard's on the store at target (a SQLite file
// or a PostgreSQL URL).
func budgetedCardAt(t testing.TB, target string, b cards.Budget) (*store.DB, *cards.Wallet, string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.EnsureAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	g, err := grant.Parse("tool:invoke fetcher --...")
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Grant(ctx, "a", cards.Spec{LowerPos: cards.Any(g), Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Wallet(ctx, "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st, w, c.ID
}

// spent is what card id has spent of key, read from the store.
func spent(t *testing.T, st *store.DB, id, key string) int64 {
	t.Helper()
	c, err := st.Card(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Spent[key]
}

// TestReserveRefusesWhenTheStoreCannotSay: a budgeted call whose
// reservation the store could not make (here, a store that is closed) is
// an error, so the call is refused; it never runs unmetered, as a card
// without a budget would.
func TestReserveRefusesWhenTheStoreCannotSay(t *testing.T) {
	st, w, id := budgetedCard(t, cards.Budget{"calls": 5})
	st.Close()
	m, denial, err := Reserve(context.Background(), st, w, id, 1, time.Second)
	if err == nil || m != nil || denial != "" {
		t.Fatalf("a budgeted call on a store that cannot answer: meter %v, denial %q, err %v; want the store's error (the call refused, not run unmetered)", m, denial, err)
	}
}

// TestMeterCountsRequestsThatWereSent: a request that was sent counts
// against bytes_out, its headers' names and values included, however it
// ended (a timeout, a failed exchange, a response over the cap), through a
// tool's http-fetch and through a built-in's egress send alike; only one
// the policy refused sent nothing.
func TestMeterCountsRequestsThatWereSent(t *testing.T) {
	ctx := context.Background()
	st, w, id := budgetedCard(t, cards.Budget{"bytes_out": 1_000_000})
	m, denial, err := Reserve(ctx, st, w, id, 1, time.Second)
	if m == nil || denial != "" || err != nil {
		t.Fatalf("reserve: %v %q %v", m, denial, err)
	}
	kinds := []sandbox.FetchErrorKind{sandbox.FetchTimeout, sandbox.FetchFailed, sandbox.FetchTooLarge, sandbox.FetchDenied}
	fetch := m.Fetch(func(_ context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		return nil, &sandbox.FetchError{Kind: sandbox.FetchErrorKind(req.Method), Message: "ended so"}
	})
	var want int64
	for _, k := range kinds {
		req := sandbox.FetchRequest{Method: string(k), URL: "https://api.example.com/upload", Headers: []sandbox.Header{{Name: "X-Note", Value: "a header value"}}, Body: []byte("0123456789")}
		fetch(ctx, req)
		if k != sandbox.FetchDenied {
			want += RequestBytes(req)
		}
	}
	sendKinds := []egress.FetchErrorKind{egress.FetchTimeout, egress.FetchFailed, egress.FetchTooLarge, egress.FetchDenied}
	send := m.Send(func(_ context.Context, _ *egress.Policy, r egress.Request) (*egress.Response, *egress.FetchError) {
		return nil, &egress.FetchError{Kind: egress.FetchErrorKind(r.Method), Message: "ended so"}
	})
	for _, k := range sendKinds {
		r := egress.Request{Method: string(k), URL: "https://api.example.com/upload", Headers: []egress.Header{{Name: "X-Note", Value: "a header value"}}, Body: []byte("abcdefghij")}
		send(ctx, nil, r)
		if k != egress.FetchDenied {
			want += int64(len(r.Method) + len(r.URL) + len("X-Note") + len("a header value") + len(r.Body))
		}
	}
	m.End(ctx, nil)
	if got := spent(t, st, id, "bytes_out"); got != want {
		t.Fatalf("requests sent and ended by a timeout, a failure or an oversized response charged %d bytes_out; want %d (every one sent counts, with its headers; only the refused one is free)", got, want)
	}
}

// TestMeterChargesAtLeastOneMillisecond: a call whose clock shows no time
// passed still charges 1 ms of wall time; a wall_ms budget is never spent
// by calls too short to measure for free.
func TestMeterChargesAtLeastOneMillisecond(t *testing.T) {
	ctx := context.Background()
	st, w, id := budgetedCard(t, cards.Budget{"wall_ms": 1000})
	m, denial, err := Reserve(ctx, st, w, id, 1, time.Second)
	if m == nil || denial != "" || err != nil {
		t.Fatalf("reserve: %v %q %v", m, denial, err)
	}
	m.now = func() time.Time { return m.start }
	m.End(ctx, nil)
	if got := spent(t, st, id, "wall_ms"); got != 1 {
		t.Fatalf("a call of no measurable time charged %d ms; want 1", got)
	}
}
