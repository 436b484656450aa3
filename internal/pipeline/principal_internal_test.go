package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestWaitedCallRechecksCredential: a call that waited for a human's
// approval asks, before it goes on, whether the credential it was made
// with still holds: a live token's call runs; a token revoked during the
// wait, or one the store does not know, is denied naming why, and the
// approval is left unconsumed; a call with no credential (an embedder's)
// or stdio's is not asked about a token and runs.
func TestWaitedCallRechecksCredential(t *testing.T) {
	dir := t.TempDir()
	body := fmt.Sprintf(`version = 1
[tools.t]
path = %q
[[middleware]]
use = "approve"
[agents.a]
tools = ["t"]
grants = ["tool:invoke t --..."]
`, testkit.Component(t, "logger"))
	h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), ApprovalPoll: time.Hour})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, _, err := h.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := st.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	revoked, revokedInfo, err := st.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		name, credential string
		during           func()
		want             string // "" runs
	}{
		{name: "live token", credential: TokenCredential(live)},
		{name: "revoked token", credential: TokenCredential(revoked), during: func() {
			if err := st.RevokeToken(ctx, revokedInfo.ID); err != nil {
				t.Fatal(err)
			}
		}, want: "token revoked: the agent token this call was made with (ID " + revokedInfo.ID + ") was revoked"},
		{name: "unknown token", credential: "token:0123456789abcdef", want: "token unknown: the agent token this call was made with (ID 0123456789abcdef)"},
		{name: "no credential", credential: ""},
		{name: "stdio", credential: "stdio"},
	} {
		t.Run(c.name, func(t *testing.T) {
			asked := make(chan string, 1)
			done := make(chan Result, 1)
			go func() {
				// Each case its own input, so its own request.
				res, err := h.Call(ctx, Call{Agent: "a", Tool: "t", Input: "{" + strings.Repeat(" ", i) + "}", Credential: c.credential,
					ApprovalWait: time.Hour, OnApproval: func(r ApprovalRequest) { asked <- r.ID }})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			var id string
			select {
			case id = <-asked:
			case res := <-done: // ended without asking a human: fail, not hang
				t.Fatalf("the call ended without announcing its request: %+v", res.Error)
			}
			if c.during != nil {
				c.during()
			}
			if _, err := decideRequest(ctx, h, id, admin.Answer{Approve: true, By: "operator:test"}); err != nil {
				t.Fatal(err)
			}
			res := <-done
			a, err := st.Approval(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if !res.OK || a.State != "done" {
					t.Fatalf("%+v (request %s), want run", res.Error, a.State)
				}
				return
			}
			if res.OK || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, c.want) {
				t.Fatalf("%+v, want denied: %s", res.Error, c.want)
			}
			if a.State != "approved" {
				t.Errorf("the request is %s after a call that did not run, want approved", a.State)
			}
		})
	}
}
