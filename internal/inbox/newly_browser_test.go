package inbox_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
)

// TestBrowserNewlyPossible drives an "always" approval's page in headless
// Chromium against the real stack: before the human mints a card, the
// page shows what it would newly allow beyond the agent's cards and the
// recorded calls of the last week that asked a human and that it would
// have let through; a broader grant previewed shows more of them; once it
// is installed, another request it covers says the card is redundant.
func TestBrowserNewlyPossible(t *testing.T) {
	exe := chromium(t)
	e := newBrowserEnv(t)

	// Two calls ask a human (recorded as approval requests); neither waits.
	for _, m := range []string{"alice", "bob"} {
		if r := e.callNow(t, m); r.OK || r.Error == nil || r.Error.Kind != maiden.KindPending {
			t.Fatalf("call %q: %+v (it should ask a human)", m, r)
		}
	}
	idAlice, idBob := e.pending(t, "alice"), e.pending(t, "bob")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\n%s", what, err, html)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	do("log in on bob's request",
		chromedp.Navigate(e.url+"/ui/approvals/"+idBob), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), e.operator), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("newly-"+idBob)))

	// The request's own always-grant: exactly this call, which asked.
	got := text("#newly-" + idBob)
	for _, want := range []string{"approve:always echo with --message=bob (today nothing of echo)",
		"Of the calls recorded in the last 7 days, 1 refused or asked would have been allowed",
		"approve:always echo --message=bob", "asked a human"} {
		if !strings.Contains(got, want) {
			t.Fatalf("bob's page lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "--message=alice") {
		t.Fatalf("bob's own always-grant would not have let alice's call through, yet the page lists it:\n%s", got)
	}

	// The same broader grant in a link opened from outside the page (an
	// agent's "approve it here", opened from an MCP client or typed in):
	// Chromium sends it as a navigation the user started, with the Strict
	// cookie, but the always form keeps the request's own grant.
	do("open a link naming a broader grant",
		chromedp.Navigate(e.url+"/ui/approvals/"+idBob+"?grant="+url.QueryEscape("approve:always echo --message=*")),
		chromedp.WaitVisible(chromedp.ID("newly-"+idBob)))
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#req-"+idBob+" form.always input[name=grant]"))); err != nil || v != "approve:always echo --message=bob" {
		t.Fatalf("a link from outside the page chose the always form's grant: %q (%v), want the request's own", v, err)
	}

	// A broader grant, previewed: both asked calls.
	do("preview a broader grant",
		chromedp.SetValue(chromedp.CSS("#newly-"+idBob+" form.preview input[name=grant]"), "approve:always echo --message=*"),
		chromedp.Click(chromedp.CSS("#newly-"+idBob+" form.preview button")),
		chromedp.WaitVisible(chromedp.Search(`//section[@id="newly-`+idBob+`"]//p[contains(., " 2 ")]`)))
	got = text("#newly-" + idBob)
	for _, want := range []string{"approve:always echo with any --message= (today nothing of echo)",
		"approve:always echo --message=alice", "approve:always echo --message=bob"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the preview of approve:always echo --message=* lacks %q:\n%s", want, got)
		}
	}
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#req-"+idBob+" form.always input[name=grant]"))); err != nil || v != "approve:always echo --message=*" {
		t.Fatalf("the always form should carry the previewed grant, has %q (%v)", v, err)
	}

	// Approve always with it; alice's request is then covered: redundant,
	// and no recorded call is newly allowed.
	do("always allow", chromedp.Click(chromedp.CSS("#req-"+idBob+" form.always button")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	do("alice's request", chromedp.Navigate(e.url+"/ui/approvals/"+idAlice), chromedp.WaitVisible(chromedp.ID("newly-"+idAlice)))
	got = text("#newly-" + idAlice)
	for _, want := range []string{"Redundant", "nothing new: approve:always echo --message=alice is covered by approve:always echo --message=*",
		"None of the calls recorded in the last 7 days"} {
		if !strings.Contains(got, want) {
			t.Fatalf("alice's page after the card lacks %q:\n%s", want, got)
		}
	}

	// A call the card lets skip the human is recorded as such, and the
	// replay reads it back: revoking the card would make it ask again.
	if r := e.callNow(t, "carol"); !r.OK {
		t.Fatalf("a call the always-card covers: %+v %+v", r, r.Error)
	}
	if _, err := e.host.AuditTail(context.Background(), 0, 1); err != nil { // the Host's journaled records into the trail
		t.Fatal(err)
	}
	st, err := admin.OpenStore(context.Background(), e.state, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs, err := st.Cards(context.Background(), "bot")
	if err != nil {
		t.Fatal(err)
	}
	var always string
	for _, c := range cs {
		if len(c.LowerPos) == 1 && c.LowerPos[0].String() == "approve:always echo --message=*" {
			always = c.ID
		}
	}
	rep, err := st.WhatIf(context.Background(), api.WhatIfChange{Revoke: []string{always}}, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var flipped []string
	for _, g := range rep.Groups {
		for _, ex := range g.Examples {
			flipped = append(flipped, ex.Target+" "+ex.Recorded.Rule)
		}
	}
	// (The asked calls of alice and bob flip too: today's card would let
	// them through, without it they ask.)
	want := []string{"approve:always echo --message=alice " + api.RuleAsked, "approve:always echo --message=bob " + api.RuleAsked,
		"approve:always echo --message=carol " + api.RuleApprovedAlways}
	if rep.Standing != 1 || strings.Join(flipped, "\n") != strings.Join(want, "\n") {
		t.Fatalf("revoking the always-card %q: standing %d, flips %q; want %q (carol's call, approved always, would ask again)", always, rep.Standing, flipped, want)
	}
}
