package callegress

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// TestDecisionsPerRequest: concurrent http-fetches of one call (a JS tool
// can issue several at once) each get the wallet's decisions about their
// own request, as Decide returned them, and the tool sees only the
// refusal's kind and message. The wallet holds no network card, so every
// request is refused before any DNS lookup or byte is sent.
func TestDecisionsPerRequest(t *testing.T) {
	const n = 16
	var hosts []string
	for i := range n {
		hosts = append(hosts, fmt.Sprintf("h%d.example.com", i))
	}
	pol, err := egress.NewPolicy("t", egress.Rules{Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	w := cards.NewWallet("a", time.Now(), nil)
	fetch := Fetch(egress.New(nil), pol, nil, "t", "a", w)
	got := make([][]api.Decision, n)
	errs := make([]*sandbox.FetchError, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, decided := Decisions(context.Background())
			<-start
			_, errs[i] = fetch(ctx, sandbox.FetchRequest{Method: "GET", URL: "https://" + hosts[i] + "/"})
			got[i] = decided()
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		d := decide.Decide(decide.Basis{Wallet: w}, decide.Connect(hosts[i], 443))
		if len(got[i]) != 1 || got[i][0] != d.API() {
			t.Errorf("request %d: decisions %+v, want Decide's %+v", i, got[i], d.API())
		}
		want := sandbox.FetchError{Kind: sandbox.FetchDenied, Message: d.Reason + " (rule: " + RuleNetworkCard + ")"}
		if errs[i] == nil || *errs[i] != want {
			t.Errorf("request %d: the tool got %+v, want %+v", i, errs[i], want)
		}
	}

	// A request made without a list notes nothing and is refused the same.
	if _, ferr := fetch(context.Background(), sandbox.FetchRequest{Method: "GET", URL: "https://h0.example.com/"}); ferr == nil || ferr.Kind != sandbox.FetchDenied {
		t.Errorf("without a list: %+v", ferr)
	}
}
