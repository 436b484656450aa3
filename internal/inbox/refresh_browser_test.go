package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// TestBrowserRefreshWaitsForQuiet: the pending list's 15-second reload
// (static/refresh.js) skips a tick in which the operator moved the pointer
// or pressed a key, and goes on once a whole interval was quiet. A reload
// while the operator aimed at a button moved the list under the pointer
// (a request decided or expired, another arrived), and the click landed on
// another request's Approve. The test asks the page's own tick decision
// (maidenRefreshDue) around real input events, in real Chromium.
func TestBrowserRefreshWaitsForQuiet(t *testing.T) {
	exe := chromium(t)
	e := newBrowserEnv(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.url+"/ui"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), e.operator), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS("a.refresh")),
		// refresh.js is a deferred script: the page can show its list
		// before the script has run (full run 169, under load).
		chromedp.Poll[chromedp.Void](`typeof window.maidenRefreshDue === "function"`)); err != nil {
		t.Fatalf("logging in: %v", err)
	}
	tick := func() bool {
		t.Helper()
		due, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.maidenRefreshDue()`))
		if err != nil {
			t.Fatalf("the page's tick: %v", err)
		}
		return due
	}
	do := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	tick() // whatever the login's page left behind
	if !tick() {
		t.Fatal("a quiet interval does not reload the list")
	}
	do("move the pointer", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 40, 60))
	if tick() {
		t.Error("the list reloads in a tick in which the operator moved the pointer")
	}
	if !tick() {
		t.Error("the list does not reload after a quiet interval that followed the pointer's move")
	}
	do("press a key", chromedp.KeyEvent("j"))
	if tick() {
		t.Error("the list reloads in a tick in which the operator pressed a key")
	}
}
