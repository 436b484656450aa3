package whatif_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/whatif"
	"github.com/maiden-run/maiden/internal/whatif/whatiftest"
)

// This file is the fourteenth mutation pass's (docs/security-tests.md,
// "Fourteenth pass"): what the report says of records it cannot blame on
// the change.

// TestChangedSinceCountsOnlyTheChanged: of the records made on another
// revision of the wallet (stale), only those today's cards decide
// otherwise are counted as changed since; a stale record decided the same
// today is not.
func TestChangedSinceCountsOnlyTheChanged(t *testing.T) {
	cs := world(t)
	old := newTrail(t, cs[:1], now.Add(-time.Hour)) // only c_pay then
	old.Call("research", "pay", "--to=alice")       // allowed then and now
	old.Call("research", "search", "--q=cats")      // refused then, allowed now
	old.Call("research", "rm", "--path=/tmp/x")     // refused then, allowed now
	tr := newTrail(t, cs, now)                      // replayed on every card of world
	tr.Recs = old.Recs
	rep := tr.replay(t, api.WhatIfChange{})
	if rep.Stale != 3 || rep.ChangedSince != 2 || rep.Verified != 0 || rep.Flips != 0 {
		t.Errorf("stale %d, changed since %d, verified %d, flips %d: want 3 stale, 2 changed since (search and rm), none verified, no flip",
			rep.Stale, rep.ChangedSince, rep.Verified, rep.Flips)
	}
}

// TestUnversionedRecordsAreNotStale: a record whose decision names no
// wallet revision (made before decisions named one) is counted as
// unversioned: neither verified nor stale, and never changed since.
func TestUnversionedRecordsAreNotStale(t *testing.T) {
	tr := calls(t, world(t))
	tr.Recs = tr.Recs[:1] // research's pay --to=alice, allowed by c_pay
	var body map[string]any
	json.Unmarshal(tr.Recs[0].Body, &body)
	delete(body["decision"].(map[string]any), "wallet")
	tr.Recs[0].Body, _ = json.Marshal(body)
	rep := tr.replay(t, api.WhatIfChange{Revoke: []string{"c_pay"}})
	if rep.Replayed != 1 || rep.Unversioned != 1 || rep.Stale != 0 || rep.Verified != 0 || rep.ChangedSince != 0 || rep.Flips != 1 {
		t.Errorf("replayed %d, unversioned %d, stale %d, verified %d, changed since %d, flips %d: want the one record unversioned (and flipped by revoking c_pay)",
			rep.Replayed, rep.Unversioned, rep.Stale, rep.Verified, rep.ChangedSince, rep.Flips)
	}
}

// TestAlteredDecisionIsInexact: a record made on today's wallet whose
// recorded decision names another bound, grant or target than the replay
// makes is listed as inexact (maiden audit whatif then refuses to
// answer), not counted as verified.
func TestAlteredDecisionIsInexact(t *testing.T) {
	for _, tc := range []struct {
		name, field, value string
		rec                int // in calls' trail
	}{
		{"bound", "bound", "tool=sha256:ab policy=sha256:cd", 0}, // pay --to=alice, allowed by c_pay (bound to nothing)
		{"grant", "grant", "tool:invoke pay --...", 0},           // allowed by c_pay's tool:invoke pay --to=alice
		{"target", "target", "tool:invoke pay --to=alice", 2},    // pay --to=bob, refused
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := calls(t, world(t))
			var body map[string]any
			json.Unmarshal(tr.Recs[tc.rec].Body, &body)
			body["decision"].(map[string]any)[tc.field] = tc.value
			tr.Recs[tc.rec].Body, _ = json.Marshal(body)
			rep := tr.replay(t, api.WhatIfChange{})
			if len(rep.Inexact) != 1 || rep.Inexact[0].Seq != int64(tc.rec+1) || rep.Verified != rep.Replayed-1 {
				t.Errorf("a record whose decision names %s %q: inexact %+v, verified %d of %d; want that record inexact, the rest verified",
					tc.field, tc.value, rep.Inexact, rep.Verified, rep.Replayed)
			}
		})
	}
}

// TestSecretUseNotTheCardsIsNotReplayed: a call's record whose secret_use
// was not the cards' decision (here the tool's binding refused the
// credential: no card, no "no card" rule) is passed over, not replayed as
// the cards' refusal that a grant of secret:use would lift.
func TestSecretUseNotTheCardsIsNotReplayed(t *testing.T) {
	cs := []cards.Card{card(t, "c_ops", "ops", cards.Spec{LowerPos: gs(t, "tool:invoke shop.pay --...")})}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	if out := tr.CallWith(plan{Agent: "ops", Tool: "shop.pay", Rendered: []string{"--to=carol"}, Credential: "SHOP_TOKEN"}); out != "refused" {
		t.Fatalf("ops's call: %s", out)
	}
	var body map[string]any
	json.Unmarshal(tr.Recs[0].Body, &body)
	use := body["secret_use"].(map[string]any)
	if use["rule"] != "no card" {
		t.Fatalf("the record's secret_use: %v", use)
	}
	use["rule"], use["reason"] = "tools.shop.pay.secrets", "the tool's binding does not hold SHOP_TOKEN"
	tr.Recs[0].Body, _ = json.Marshal(body)
	rep := tr.replay(t, api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "ops", Grant: "secret:use SHOP_TOKEN"}}})
	if rep.Replayed != 0 || rep.Skipped != 1 || rep.Flips != 0 {
		t.Errorf("replayed %d, skipped %d, flips %d %+v: want the record passed over, no flip", rep.Replayed, rep.Skipped, rep.Flips, rep.Groups)
	}
}

// TestStandingApprovalOfARevokedCardRegranted: a standing approval (an
// always-card let the call skip the human) recorded on a card revoked
// since is stale and changed since (today the call would ask a human),
// and a grant of the same approve:always flips it back: the change lets
// the call skip the human again, which the report says.
func TestStandingApprovalOfARevokedCardRegranted(t *testing.T) {
	pay := card(t, "c_pay", "research", cards.Spec{LowerPos: gs(t, "tool:invoke pay --...")})
	always := card(t, "c_always", "research", cards.Spec{LowerPos: gs(t, "approve:always pay --to=alice")})
	old := newTrail(t, []cards.Card{pay, always}, now.Add(-time.Hour))
	if !old.ApproveLayer(whatiftest.Approved{Agent: "research", Tool: "pay", Inputs: []string{"--to=alice"}, Request: "apr_1"}) {
		t.Fatal("c_always did not approve the call")
	}
	always.Revoked = now.Add(-time.Minute)
	tr := newTrail(t, []cards.Card{pay, always}, now)
	tr.Recs = old.Recs
	rep := tr.replay(t, api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "approve:always pay --to=alice"}}})
	if rep.Standing != 1 || rep.Stale != 2 || rep.ChangedSince != 1 {
		t.Errorf("standing %d, stale %d, changed since %d: want the standing approval and its call's tool:invoke stale, the approval changed since (c_always revoked)",
			rep.Standing, rep.Stale, rep.ChangedSince)
	}
	if rep.Flips != 1 || len(rep.Groups) != 1 || rep.Groups[0].DeniedToAllowed != 1 {
		t.Errorf("%d flips %+v: want the standing approval flipped to allowed by the grant", rep.Flips, rep.Groups)
	}
}

// TestRefusedCallWithDirectoriesIsInexact: the session asks the fs
// decisions of its preopens only of a call the cards allowed; a record of
// a call the cards refused that holds some is not what the call path
// writes, and is listed as inexact rather than verified.
func TestRefusedCallWithDirectoriesIsInexact(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_fs", "research", cards.Spec{LowerPos: gs(t, "fs:read /srv/**", "fs:write /srv/work/**")}),
		card(t, "c_build", "research", cards.Spec{LowerPos: gs(t, "tool:invoke build --target=x")}),
	}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	dirs := []preopen{{Dir: "/srv/work", Write: true}, {Dir: "/srv/data"}}
	if out := tr.CallWith(plan{Agent: "research", Tool: "build", Rendered: []string{"--target=x"}, Dirs: dirs}); !strings.HasPrefix(out, "ran ") {
		t.Fatalf("build --target=x: %s", out)
	}
	if out := tr.CallWith(plan{Agent: "research", Tool: "build", Rendered: []string{"--target=y"}, Dirs: dirs}); out != "refused" {
		t.Fatalf("build --target=y: %s", out)
	}
	var ran, refused map[string]any
	json.Unmarshal(tr.Recs[0].Body, &ran)
	json.Unmarshal(tr.Recs[1].Body, &refused)
	refused["fs"] = ran["fs"]
	tr.Recs[1].Body, _ = json.Marshal(refused)
	rep := tr.replay(t, api.WhatIfChange{})
	if len(rep.Inexact) != 1 || rep.Inexact[0].Seq != 2 || rep.Verified != 1 {
		t.Errorf("a refused call's record holding fs decisions: inexact %+v, verified %d of %d; want it inexact, the other verified",
			rep.Inexact, rep.Verified, rep.Replayed)
	}
}

// TestStandingIsAPassOfAnAdmittedCall: an approve verdict naming an
// always-card is a standing approval only when it passed a call that was
// admitted; the same words on a call a later layer refused, or on a
// verdict that did not pass, are no approval the card's revocation would
// take away (no flip).
func TestStandingIsAPassOfAnAdmittedCall(t *testing.T) {
	cs := []cards.Card{
		card(t, "c_pay", "research", cards.Spec{LowerPos: gs(t, "tool:invoke pay --...")}),
		card(t, "c_always", "research", cards.Spec{LowerPos: gs(t, "approve:always pay --to=alice")}),
	}
	for _, tc := range []struct {
		name          string
		kind, verdict string
		standing      int
	}{
		{"admitted, passed", whatif.KindCallAdmitted, "pass", 1},
		{"refused by a later layer", whatif.KindCallRefused, "pass", 0},
		{"a verdict that did not pass", whatif.KindCallAdmitted, "refuse", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTrail(t, cs, now.Add(-time.Minute))
			if !tr.ApproveLayer(whatiftest.Approved{Agent: "research", Tool: "pay", Inputs: []string{"--to=alice"}, Request: "apr_1"}) {
				t.Fatal("c_always did not approve the call")
			}
			var body map[string]any
			json.Unmarshal(tr.Recs[0].Body, &body)
			v := body["middleware"].([]any)[0].(map[string]any)
			if v["detail"] != "approved always by card c_always" {
				t.Fatalf("the verdict: %v", v)
			}
			v["verdict"] = tc.verdict
			tr.Recs[0].Kind = tc.kind
			tr.Recs[0].Body, _ = json.Marshal(body)
			rep := tr.replay(t, api.WhatIfChange{Revoke: []string{"c_always"}})
			if rep.Standing != tc.standing || rep.Flips != tc.standing {
				t.Errorf("standing %d, flips %d %+v on revoking c_always: want %d, %d", rep.Standing, rep.Flips, rep.Groups, tc.standing, tc.standing)
			}
		})
	}
}
