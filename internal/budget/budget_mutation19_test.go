package budget

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// TestPayWhenTheStoreCannotSay guards that a request whose bytes the store
// could not spend is never sent unpaid: through http-fetch, web_fetch or
// Pay it fails as the store's failure (FetchFailed, failed=true: not a
// budget's denial, which would tell the agent its budget is spent), and
// nothing reaches the send.
func TestPayWhenTheStoreCannotSay(t *testing.T) {
	ctx := context.Background()
	st, w, id := budgetedCard(t, cards.Budget{"bytes_out": 1000})
	m, _, err := Reserve(ctx, st, w, id, 1, time.Second)
	if err != nil || m == nil {
		t.Fatalf("reserve: %v", err)
	}
	st.Close()
	var sent int
	fetch := func(context.Context, sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		sent++
		return &sandbox.FetchResponse{Status: 200}, nil
	}
	send := func(context.Context, *egress.Policy, egress.Request) (*egress.Response, *egress.FetchError) {
		sent++
		return &egress.Response{Status: 200}, nil
	}
	const why = "the bytes_out budget could not be checked: "
	_, ferr := m.Fetch(fetch)(ctx, sandbox.FetchRequest{Method: "GET", URL: "https://x/"})
	if ferr == nil || ferr.Kind != sandbox.FetchFailed || !strings.HasPrefix(ferr.Message, why) {
		t.Fatalf("http-fetch with the store closed: %+v; want FetchFailed %q...", ferr, why)
	}
	_, eerr := m.Send(send)(ctx, nil, egress.Request{Method: "GET", URL: "https://y/"})
	if eerr == nil || eerr.Kind != egress.FetchFailed || !strings.HasPrefix(eerr.Message, why) {
		t.Fatalf("web_fetch with the store closed: %+v; want FetchFailed %q...", eerr, why)
	}
	if refusal, failed := m.Pay(ctx, 10); !failed || !strings.HasPrefix(refusal, why) {
		t.Fatalf("Pay with the store closed: %q, failed %v; want %q..., failed", refusal, failed, why)
	}
	if sent != 0 {
		t.Fatalf("%d requests reached the send unpaid; want none", sent)
	}
}

// TestReservationAsTheMeterSeesIt guards what the Meter makes of a wall
// time reservation: the ask is the call's most in whole milliseconds,
// rounded up; Deadline is ok only where the budget reserved less than was
// asked (the reservation's end), not where it reserved all of it (the
// call's own deadline ends it); Reserved and the audit record name what
// was reserved.
func TestReservationAsTheMeterSeesIt(t *testing.T) {
	ctx := context.Background()
	st, w, id := budgetedCard(t, cards.Budget{"wall_ms": 500})
	m, _, err := Reserve(ctx, st, w, id, 1, 1500*time.Microsecond)
	if err != nil || m == nil {
		t.Fatalf("reserve: %v", err)
	}
	if d, card := m.Reserved(); d != 2*time.Millisecond || card != id {
		t.Fatalf("a call of at most 1.5 ms reserved %v on %s; want 2ms (rounded up) on %s", d, card, id)
	}
	if _, ok := m.Deadline(); ok {
		t.Fatal("a call that reserved all it asked for has a budget deadline; want its own deadline only")
	}
	m.End(ctx, nil)

	big, _, err := Reserve(ctx, st, w, id, 1, 2*time.Second)
	if err != nil || big == nil {
		t.Fatalf("reserve: %v", err)
	}
	d, _ := big.Reserved()
	at, ok := big.Deadline()
	if !ok || d >= 2*time.Second || at.Sub(big.start) != d {
		t.Fatalf("a call asking 2s of a card with %v left: deadline %v after its start (ok %v); want ok, at what it reserved", d, at.Sub(big.start), ok)
	}
	if rec := big.Record(); !strings.Contains(rec, "(wall_ms="+strings.TrimSuffix(d.String(), "ms")+" reserved: the most it may run); wall_ms settled and bytes_out charged when it ends") {
		t.Fatalf("the audit record %q; want it to name the %v reserved", rec, d)
	}
}
