package maiden_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shopUpstream is a Go SDK MCP server on loopback over streamable HTTP
// whose tool pay adds: it counts every HTTP request it receives, keeps
// each request's Authorization header, and counts the calls of pay.
type shopUpstream struct {
	url   string
	mu    sync.Mutex
	auths []string // the Authorization header of each request, in order
	pays  int
}

func newShopUpstream(t *testing.T) *shopUpstream {
	t.Helper()
	u := &shopUpstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "pay", Description: "pays a plus b"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			u.mu.Lock()
			u.pays++
			u.mu.Unlock()
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // after the Host's cleanup (LIFO), which closes its upstream connection
	u.url = hs.URL
	return u
}

// seen is how many requests reached the upstream, how many of them carried
// value (as the bearer token, or anywhere in the header), and how many
// calls of pay ran.
func (u *shopUpstream) seen(value string) (requests, withValue, pays int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.auths {
		if strings.Contains(a, value) {
			withValue++
		}
	}
	return len(u.auths), withValue, u.pays
}

// shopHost is a host importing up as [mcp.shop] with credential
// SHOP_TOKEN = secret, whose agents all bind it and may call shop.pay:
// nokey holds no secret:use of SHOP_TOKEN, holder does (a system card),
// carded only through cards of the store.
func shopHost(t *testing.T, up *shopUpstream, secret string) *maiden.Host {
	t.Helper()
	return newHostWith(t, `version = 1
[mcp.shop]
accept_new_tools = true
url = "`+up.url+`"
credential = "SHOP_TOKEN"
[agents.nokey]
tools = ["shop"]
grants = ["tool:invoke shop.pay --..."]
[agents.holder]
tools = ["shop"]
grants = ["tool:invoke shop.pay --...", "secret:use SHOP_TOKEN"]
[agents.carded]
tools = ["shop"]
grants = ["tool:invoke shop.pay --..."]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return secret, name == "SHOP_TOKEN" }})
}

// noKeyRefusal is the refusal of agent's call of shop.pay for want of
// secret:use SHOP_TOKEN.
func noKeyRefusal(agent string) string {
	return `no card of agent "` + agent + `" allows secret:use SHOP_TOKEN, the credential import shop sends its server (grant it: maiden cards grant -agent ` + agent + ` 'secret:use SHOP_TOKEN')`
}

// TestImportCredentialNeedsSecretUse: an import's credential (a secret the
// host sends the import's server on every request, outside the egress
// gate) is the calling agent's use of that secret, so its cards must allow
// secret:use of it, as they must for an http-fetch's credential. An agent
// whose card allows tool:invoke shop.pay but no secret:use SHOP_TOKEN is
// refused (kind denied, naming the agent, the secret, the import and the
// grant to paste), and nothing reaches the upstream: not one request, not
// the credential; the refusal is a call-refused record carrying the
// denial. An agent with the grant calls it, the upstream sees the bearer
// credential, and the call-admitted record carries the allowed secret:use.
func TestImportCredentialNeedsSecretUse(t *testing.T) {
	t.Parallel()
	const secret = "shop-s3cret-token-4711"
	up := newShopUpstream(t)
	h := shopHost(t, up, secret)

	// Adversarial: tool:invoke allowed, secret:use not. The host is
	// fresh: nothing has started the upstream yet.
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "nokey", Tool: "shop.pay", Input: `{"a":40,"b":2}`}), maiden.KindDenied, noKeyRefusal("nokey"))
	if n, withSecret, pays := up.seen(secret); n != 0 || withSecret != 0 || pays != 0 {
		t.Fatalf("the refused call reached the upstream: %d requests, %d with the credential, %d calls of pay; want none", n, withSecret, pays)
	}
	refused := trail(t, h, store.AuditCallRefused)
	if len(refused) != 1 || refused[0].Agent != "nokey" || len(trail(t, h, store.AuditCallAdmitted)) != 0 {
		t.Fatalf("records: refused %+v, admitted %+v; want nokey's one refusal and no admission", refused, trail(t, h, store.AuditCallAdmitted))
	}
	var rb struct {
		Decision  *api.Decision `json:"decision"`
		SecretUse *api.Decision `json:"secret_use"`
		Kind      string        `json:"kind"`
		Message   string        `json:"message"`
	}
	if err := json.Unmarshal(refused[0].Body, &rb); err != nil {
		t.Fatal(err)
	}
	if rb.Decision == nil || !rb.Decision.Allow || rb.SecretUse == nil || rb.SecretUse.Allow || rb.SecretUse.Target != "secret:use SHOP_TOKEN" ||
		rb.SecretUse.Rule != "no card" || rb.SecretUse.Fix != "maiden cards grant -agent nokey 'secret:use SHOP_TOKEN'" || rb.Kind != "denied" || rb.Message != noKeyRefusal("nokey") {
		t.Fatalf("the refusal's record: %s", refused[0].Body)
	}

	// With the grant: the call runs and the upstream gets the credential.
	res := mustCall(t, h, maiden.Call{Agent: "holder", Tool: "shop.pay", Input: `{"a":40,"b":2}`})
	if !res.OK || !strings.Contains(res.Output, `"sum":42`) {
		t.Fatalf("holder's call: %+v %+v", res, res.Error)
	}
	n, withSecret, pays := up.seen(secret)
	if pays != 1 || n == 0 || withSecret != n {
		t.Fatalf("holder's call: %d requests, %d with the credential, %d calls of pay; want every request with it, one call", n, withSecret, pays)
	}
	admitted := trail(t, h, store.AuditCallAdmitted)
	var ab struct {
		SecretUse *api.Decision `json:"secret_use"`
	}
	if len(admitted) != 1 || json.Unmarshal(admitted[0].Body, &ab) != nil || ab.SecretUse == nil || !ab.SecretUse.Allow ||
		ab.SecretUse.Target != "secret:use SHOP_TOKEN" || ab.SecretUse.Card == "" || ab.SecretUse.Grant != "secret:use SHOP_TOKEN" {
		t.Fatalf("holder's call-admitted record: %+v", admitted)
	}

	// nokey again, with the upstream up: still refused, pay not called.
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "nokey", Tool: "shop.pay", Input: `{"a":1,"b":2}`}), maiden.KindDenied, noKeyRefusal("nokey"))
	if _, _, p := up.seen(secret); p != 1 {
		t.Fatalf("nokey's second call ran pay: %d calls, want 1", p)
	}
}

// TestImportCredentialRevoked: an agent holding secret:use of an import's
// credential on a card of the store calls the import's tool; once the card
// is revoked its next call is refused, and a prohibition (upper-negative)
// card added over another agent's wallet refuses its next call though its
// system card allows the use; neither reaches the upstream's tool.
func TestImportCredentialRevoked(t *testing.T) {
	t.Parallel()
	const secret = "shop-revoked-token-0042"
	up := newShopUpstream(t)
	h := shopHost(t, up, secret)
	ctx := context.Background()
	// The store holds the agents once the host has made its first call.
	if res := mustCall(t, h, maiden.Call{Agent: "holder", Tool: "shop.pay", Input: `{"a":1,"b":1}`}); !res.OK {
		t.Fatalf("holder's call: %+v", res.Error)
	}
	st, err := store.Open(ctx, h.Config().StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	use, err := grant.Parse("secret:use SHOP_TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Grant(ctx, "carded", cards.Spec{LowerPos: cards.Any(use)})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustCall(t, h, maiden.Call{Agent: "carded", Tool: "shop.pay", Input: `{"a":1,"b":1}`}); !res.OK {
		t.Fatalf("carded, with its card: %+v", res.Error)
	}
	if k, err := st.Revoke(ctx, store.Operator(), c.ID); err != nil || k != 1 {
		t.Fatalf("revoke: %d, %v", k, err)
	}
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "carded", Tool: "shop.pay", Input: `{"a":1,"b":1}`}), maiden.KindDenied, noKeyRefusal("carded"))
	deny, err := st.Grant(ctx, "holder", cards.Spec{UpperNeg: cards.Any(use)})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "holder", Tool: "shop.pay", Input: `{"a":1,"b":1}`}), maiden.KindDenied,
		`card `+deny.ID+` of agent "holder" forbids secret:use SHOP_TOKEN, the credential import shop sends its server (its upper-negative grant "secret:use SHOP_TOKEN"; only revoking that card lifts it: maiden cards revoke `+deny.ID+`)`)
	if _, _, p := up.seen(secret); p != 2 {
		t.Fatalf("%d calls of pay, want 2 (holder's first and carded's while it held the card)", p)
	}
}

// TestImportCredentialRevokedDuringApproval: a call of an imported tool
// waiting for a human is decided again on the agent's wallet pinned anew
// once approved, secret:use of the import's credential too: revoked
// while the human decided, the call is refused, naming the secret, and
// pay never runs.
func TestImportCredentialRevokedDuringApproval(t *testing.T) {
	t.Parallel()
	const secret = "shop-approval-token-7"
	up := newShopUpstream(t)
	h := newHostWith(t, `version = 1
[mcp.shop]
accept_new_tools = true
url = "`+up.url+`"
credential = "SHOP_TOKEN"
middleware = [{ use = "approve", reason = "payments need a human" }]
[agents.carded]
tools = ["shop"]
grants = ["tool:invoke shop.pay --..."]
`, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond,
		LookupSecret: func(name string) (string, bool) { return secret, name == "SHOP_TOKEN" }})
	ctx := context.Background()
	// The store holds the agent once the host has made its first call.
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "carded", Tool: "shop.pay", Input: `{"a":0,"b":0}`}), maiden.KindDenied, noKeyRefusal("carded"))
	st, err := store.Open(ctx, h.Config().StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	use, err := grant.Parse("secret:use SHOP_TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Grant(ctx, "carded", cards.Spec{LowerPos: cards.Any(use)})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 1)
	type outcome struct {
		res maiden.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.Call(ctx, maiden.Call{Agent: "carded", Tool: "shop.pay", Input: `{"a":1,"b":1}`, ApprovalWait: 20 * time.Second,
			OnApproval: func(r maiden.ApprovalRequest) {
				select {
				case asked <- r.ID:
				default:
				}
			}})
		done <- outcome{res, err}
	}()
	var id string
	select {
	case id = <-asked:
	case o := <-done:
		t.Fatalf("the call ended without asking a human: %+v %v", o.res, o.err)
	}
	if k, err := st.Revoke(ctx, store.Operator(), c.ID); err != nil || k != 1 {
		t.Fatalf("revoke: %d, %v", k, err)
	}
	if _, err := h.Decide(ctx, id, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	wantKind(t, o.res, maiden.KindDenied, noKeyRefusal("carded"))
	if _, _, p := up.seen(secret); p != 0 {
		t.Fatalf("pay ran %d times, want none", p)
	}
}

// TestImportCredentialWhatIf: the import credential's secret:use recorded
// with a real Host's calls is replayed by maiden audit whatif: with no
// change every decision is reproduced and nothing flips; a prohibition of
// secret:use SHOP_TOKEN flips the admitted call (allowed -> denied, by
// secret:use), revoking the card that allowed it too, and a grant of it
// flips the refused ones.
func TestImportCredentialWhatIf(t *testing.T) {
	t.Parallel()
	const secret = "shop-whatif-token-9000"
	up := newShopUpstream(t)
	h := shopHost(t, up, secret)
	ctx := context.Background()
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "nokey", Tool: "shop.pay", Input: `{"a":1,"b":2}`}), maiden.KindDenied, noKeyRefusal("nokey"))
	if res := mustCall(t, h, maiden.Call{Agent: "holder", Tool: "shop.pay", Input: `{"a":40,"b":2}`}); !res.OK {
		t.Fatalf("holder's call: %+v", res.Error)
	}
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "nokey", Tool: "shop.pay", Input: `{"a":3,"b":4}`}), maiden.KindDenied, noKeyRefusal("nokey"))
	// Every record in the store first (AuditTail flushes the journal).
	if recs := trail(t, h, ""); len(recs) < 3 {
		t.Fatalf("the trail: %+v", recs)
	}
	adm, err := admin.Open(ctx, h.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	since := time.Now().Add(-time.Hour)
	whatIf := func(change api.WhatIfChange) api.WhatIfReport {
		t.Helper()
		rep, err := adm.WhatIf(ctx, change, since)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := whatIf(api.WhatIfChange{}); rep.Flips != 0 || rep.Replayed != 3 || rep.Verified != 3 || len(rep.Inexact) != 0 {
		t.Fatalf("what-if, no change: %d flips, %d replayed, %d verified, inexact %+v; want 3 verified, no flip", rep.Flips, rep.Replayed, rep.Verified, rep.Inexact)
	}
	holderFlips := func(name string, rep api.WhatIfReport) {
		t.Helper()
		if rep.Flips != 1 || len(rep.Groups) != 1 || rep.Groups[0].Agent != "holder" || rep.Groups[0].Tool != "shop.pay" || rep.Groups[0].AllowedToDenied != 1 ||
			rep.Groups[0].Examples[0].Target != "secret:use SHOP_TOKEN" || rep.Groups[0].Examples[0].After.Allow {
			t.Fatalf("what-if %s: %d flips %+v; want holder's call allowed -> denied by secret:use SHOP_TOKEN", name, rep.Flips, rep.Groups)
		}
	}
	holderFlips("-deny 'secret:use SHOP_TOKEN'", whatIf(api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "holder", Grant: "secret:use SHOP_TOKEN", As: api.WhatIfDeny}}}))
	// Revoking the system card that allowed it (one per grant).
	var ab struct {
		SecretUse *api.Decision `json:"secret_use"`
	}
	if admitted := trail(t, h, store.AuditCallAdmitted); len(admitted) != 1 || json.Unmarshal(admitted[0].Body, &ab) != nil || ab.SecretUse == nil {
		t.Fatalf("holder's call-admitted record: %+v", admitted)
	}
	holderFlips("-revoke "+ab.SecretUse.Card, whatIf(api.WhatIfChange{Revoke: []string{ab.SecretUse.Card}}))
	rep := whatIf(api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "nokey", Grant: "secret:use SHOP_TOKEN"}}})
	if rep.Flips != 2 || len(rep.Groups) != 1 || rep.Groups[0].Agent != "nokey" || rep.Groups[0].DeniedToAllowed != 2 {
		t.Fatalf("what-if of granting nokey secret:use SHOP_TOKEN: %d flips %+v; want its 2 refused calls denied -> allowed", rep.Flips, rep.Groups)
	}
}

// TestImportCredentialImplicitAgent: a configuration without [agents] has
// one implicit agent, which holds every card: its calls of an import that
// sends a credential are not asked secret:use (as its http-fetches are
// not), and record nothing.
func TestImportCredentialImplicitAgent(t *testing.T) {
	t.Parallel()
	const secret = "implicit-shop-token-0815"
	up := newShopUpstream(t)
	h := newHostWith(t, `version = 1
[mcp.shop]
accept_new_tools = true
url = "`+up.url+`"
credential = "SHOP_TOKEN"
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return secret, name == "SHOP_TOKEN" }})
	if res := mustCall(t, h, maiden.Call{Tool: "shop.pay", Input: `{"a":2,"b":3}`}); !res.OK || !strings.Contains(res.Output, `"sum":5`) {
		t.Fatalf("the implicit agent's call: %+v %+v", res, res.Error)
	}
	if n, withSecret, pays := up.seen(secret); pays != 1 || withSecret != n {
		t.Fatalf("%d requests, %d with the credential, %d calls of pay", n, withSecret, pays)
	}
}
