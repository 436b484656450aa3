package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestTunnelAuditCarriesDecision: each CONNECT a declared agent's wrapped
// CLI asks maiden's egress proxy for is a fetch record of the trail, as an
// http-fetch is: method CONNECT, HOST:PORT, the gate's outcome and rule,
// and the decisions of the agent's cards equal to what internal/decide
// gives over the same wallet (none when agent.toml's own list refused it
// first). A what-if replays them: granting the card-less host flips its
// refused tunnel.
func TestTunnelAuditCarriesDecision(t *testing.T) {
	t.Parallel()
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "through the tunnel")
	}), "api.example.com", "other.example.com", "evil.example.com")
	u, _ := url.Parse(srv.URL)
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
`+curlCLI(ca, u.Port(), "api.example.com", "other.example.com")+`
[agents.cli]
tools = ["curl"]
grants = ["tool:invoke curl --... -- ...", "network:connect api.example.com"]
`, maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com", "other.example.com", "evil.example.com")}, "echo")
	ctx := context.Background()
	get := func(host string) maiden.Result {
		t.Helper()
		in := `{"cacert":"` + ca + `","silent":true,"show-error":true,"url":"https://` + host + `:` + u.Port() + `/"}`
		res, err := h.Call(ctx, maiden.Call{Agent: "cli", Tool: "curl", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := get("api.example.com"); !res.OK || res.Output != "through the tunnel" {
		t.Fatalf("allowed host: %+v %+v", res, res.Error)
	}
	if res := get("other.example.com"); res.OK || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("a host no card allows: %+v %+v", res, res.Error)
	}
	if res := get("evil.example.com"); res.OK || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("a host off the list: %+v %+v", res, res.Error)
	}

	st, err := store.Open(ctx, h.Config().StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wallet, err := st.Wallet(ctx, "cli", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	b := decide.Basis{Wallet: wallet}
	type tunnel struct {
		Method, Host, Rule string
		Allowed            bool
		Decisions          []api.Decision
	}
	hp := func(h string) string { return h + ":" + u.Port() }
	want := []tunnel{
		{"CONNECT", hp("api.example.com"), "allowed", true, []api.Decision{decide.Decide(b, decide.Connect("api.example.com", port)).API()}},
		{"CONNECT", hp("other.example.com"), "network-card", false, []api.Decision{decide.Decide(b, decide.Connect("other.example.com", port)).API()}},
		{"CONNECT", hp("evil.example.com"), "allowlist", false, nil},
	}
	if d := want[0].Decisions[0]; !d.Allow || d.Card == "" || d.Bound != api.DecisionLowerPositive {
		t.Fatalf("Decide over the wallet: %+v, want allowed by a card", d)
	}
	if d := want[1].Decisions[0]; d.Allow || d.Rule == "" || d.Fix == "" {
		t.Fatalf("Decide over the wallet: %+v, want a denial with its rule and fix", d)
	}
	var got []tunnel
	for _, r := range trail(t, h, store.AuditFetch) {
		var tn tunnel
		if err := json.Unmarshal(r.Body, &tn); err != nil {
			t.Fatal(err)
		}
		if r.Agent != "cli" || r.Tool != "curl" {
			t.Fatalf("a fetch record of %s/%s", r.Agent, r.Tool)
		}
		got = append(got, tn)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the tunnels' records (-want +recorded):\n%s", diff)
	}

	// The what-if: one more card flips the refused tunnel, and only it.
	adm, err := admin.Open(ctx, h.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	rep, err := adm.WhatIf(ctx, api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "cli", Grant: "network:connect other.example.com"}}}, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Flips != 1 || len(rep.Groups) != 1 || rep.Groups[0].Tool != "curl" {
		t.Fatalf("what-if of granting other.example.com: %d flips %+v, want the one refused tunnel", rep.Flips, rep.Groups)
	}
}
