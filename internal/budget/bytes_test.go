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

// TestRequestsPayBeforeTheyGo: where a call's chain limits bytes_out, each
// request through http-fetch or web_fetch spends its bytes before it is
// sent; one they do not fit is refused (denied, budget-exhausted) and
// never reaches the send; one the policy refused gives its bytes back at
// the end. Two calls at once share the budget: neither sends past it.
func TestRequestsPayBeforeTheyGo(t *testing.T) {
	ctx := context.Background()
	st, w, id := budgetedCard(t, cards.Budget{"bytes_out": 100})
	var sent int
	fetch := func(_ context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		if strings.Contains(req.URL, "refused") {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchDenied, Message: "not in http_allow"}
		}
		sent++
		return &sandbox.FetchResponse{Status: 200}, nil
	}
	send := func(_ context.Context, _ *egress.Policy, r egress.Request) (*egress.Response, *egress.FetchError) {
		sent++
		return &egress.Response{Status: 200}, nil
	}
	req := func(url string, body int) sandbox.FetchRequest {
		return sandbox.FetchRequest{Method: "GET", URL: url, Body: make([]byte, body)}
	}
	a, _, err := Reserve(ctx, st, w, id, 1, time.Second)
	if err != nil || a == nil {
		t.Fatalf("reserve: %v", err)
	}
	b, _, err := Reserve(ctx, st, w, id, 1, time.Second)
	if err != nil || b == nil {
		t.Fatalf("reserve: %v", err)
	}
	// a sends 40 (3 + 10 + 27), b 40 by web_fetch: 20 left.
	if _, ferr := a.Fetch(fetch)(ctx, req("https://x/", 27)); ferr != nil {
		t.Fatalf("a's first request: %+v", ferr)
	}
	if _, ferr := b.Send(send)(ctx, nil, egress.Request{Method: "GET", URL: "https://y/", Body: make([]byte, 27)}); ferr != nil {
		t.Fatalf("b's request: %+v", ferr)
	}
	// A request of 40 with 20 left: refused unsent, by either way.
	_, ferr := a.Fetch(fetch)(ctx, req("https://x/", 27))
	if ferr == nil || ferr.Kind != sandbox.FetchDenied || !strings.HasPrefix(ferr.Message, "budget-exhausted: card "+id+" has 20 of its bytes_out budget of 100 left, this call needs 40") {
		t.Fatalf("a request of 40 bytes with 20 left: %+v; want denied, budget-exhausted", ferr)
	}
	_, eerr := b.Send(send)(ctx, nil, egress.Request{Method: "GET", URL: "https://y/", Body: make([]byte, 27)})
	if eerr == nil || eerr.Kind != egress.FetchDenied || !strings.Contains(eerr.Message, "has 20 of its bytes_out budget of 100 left, this call needs 40") {
		t.Fatalf("web_fetch's request of 40 bytes with 20 left: %+v; want denied, budget-exhausted", eerr)
	}
	if sent != 2 {
		t.Fatalf("%d requests reached the send; want 2 (the refused ones never)", sent)
	}
	// A request of 20 the policy refuses: paid, not sent, given back.
	if _, ferr := a.Fetch(fetch)(ctx, req("https://refused/", 1)); ferr == nil || ferr.Kind != sandbox.FetchDenied || ferr.Message != "not in http_allow" {
		t.Fatalf("the policy's refusal: %+v", ferr)
	}
	if got := spent(t, st, id, "bytes_out"); got != 100 {
		t.Fatalf("spent %d during the calls; want 100 (40, 40, and the 20 the policy's refusal paid)", got)
	}
	a.End(ctx, nil)
	b.End(ctx, nil)
	if got := spent(t, st, id, "bytes_out"); got != 80 {
		t.Fatalf("spent %d after both ended; want 80 (what was sent)", got)
	}
}
