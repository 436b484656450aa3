package maiden_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/store"
)

// TestFetchAuditCarriesDecision: the audit record of each http-fetch of a
// declared agent's call carries the decisions its cards made about the
// request (network:connect, then secret:use of the credential), equal to
// what internal/decide gives over the same wallet: the deciding card,
// bound and grant of an allowed one, the rule, reason and fix of a denial.
// The tool still sees only the refusal's kind and message.
func TestFetchAuditCarriesDecision(t *testing.T) {
	t.Parallel()
	w := newCardsWorld(t)
	h := w.host(t, `
[agents.apionly]
tools = ["fetcher"]
grants = ["tool:invoke fetcher --...", "network:connect api.example.com"]
`)
	ctx := context.Background()
	if res := w.fetch(t, h, "apionly", "", "api.example.com", "/", ""); !res.OK {
		t.Fatalf("allowed fetch: %+v", res)
	}
	if res := w.fetch(t, h, "apionly", "", "other.example.com", "/", ""); !denied(res, "rule: network-card") {
		t.Fatalf("fetch no card allows: %+v", res)
	}
	if res := w.fetch(t, h, "apionly", "", "api.example.com", "/", "TOKEN"); !denied(res, "rule: secret-card") {
		t.Fatalf("credential no card allows: %+v", res)
	}

	st, err := store.Open(ctx, h.Config().StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wallet, err := st.Wallet(ctx, "apionly", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(w.port)
	b := decide.Basis{Wallet: wallet}
	want := [][]api.Decision{
		{decide.Decide(b, decide.Connect("api.example.com", port)).API()},
		{decide.Decide(b, decide.Connect("other.example.com", port)).API()},
		{decide.Decide(b, decide.Connect("api.example.com", port)).API(), decide.Decide(b, decide.Use("TOKEN")).API()},
	}
	if d := want[0][0]; !d.Allow || d.Card == "" || d.Bound != api.DecisionLowerPositive || d.Grant == "" {
		t.Fatalf("Decide over the wallet: %+v, want allowed by a card", d)
	}
	if d := want[1][0]; d.Allow || d.Rule == "" || d.Fix == "" {
		t.Fatalf("Decide over the wallet: %+v, want a denial with its rule and fix", d)
	}
	if d := want[2][1]; d.Allow || d.Target != "secret:use TOKEN" {
		t.Fatalf("Decide over the wallet: %+v, want secret:use TOKEN denied", d)
	}

	recs, err := h.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]api.Decision
	for _, r := range recs {
		if r.Kind != store.AuditFetch {
			continue
		}
		var body struct {
			Host      string         `json:"host"`
			Decisions []api.Decision `json:"decisions"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		got = append(got, body.Decisions)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the fetch records' decisions differ from Decide's (-decide +recorded):\n%s", diff)
	}
}
