package inbox

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestForeignLinkDoesNotPrefillAlwaysGrant: the approval page's ?grant=
// preview fills the "Always allow" form with the grant previewed. A link
// from another site (an agent's message: "approve it here") naming a
// wildcard grant must not reach that form: the operator who clicks
// "Always allow" on the page it opens would install a card for every call
// of the tool, not the one shown. The cross-site navigation (which, with
// the Strict cookie missing, goes through the reload page and arrives
// same-origin) loses the query; a request marked cross-site that does
// carry a session previews nothing but the request's own grant.
func TestForeignLinkDoesNotPrefillAlwaysGrant(t *testing.T) {
	f := &newlyFake{fakeBackend: newFake()}
	srv := httptest.NewServer(New(f, nil))
	t.Cleanup(srv.Close)
	c := newClient(t, srv)
	c.login(operatorToken)
	wide := "approve:always weather --..."
	link := "/ui/approvals/ap1?grant=" + url.QueryEscape(wide)
	nav := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}

	// The browser's cross-site navigation: no Strict cookie. Whatever
	// page comes next (the reload from this origin) must not be the link's.
	bare := &client{t: t, base: srv.URL, c: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	resp, body := bare.do("GET", link, nil, nav)
	if loc := resp.Header.Get("Location"); strings.Contains(loc, "grant") || (resp.StatusCode == 200 && !strings.Contains(body, "url=/ui/approvals/ap1\"")) {
		t.Errorf("a cross-site link's query survives into the operator's page: %d Location %q\n%s", resp.StatusCode, loc, body)
	}

	// A request that carries the session but is marked cross-site.
	_, body = c.do("GET", link, nil, nav)
	if strings.Contains(body, `name="grant" value="`+wide+`"`) {
		t.Errorf("a cross-site link prefilled the always form with %q", wide)
	}
	// The page's own preview form still works.
	_, body = c.do("GET", link, nil, nil)
	if !strings.Contains(body, `name="grant" value="`+wide+`"`) {
		t.Errorf("the same-origin preview no longer carries its grant:\n%s", body)
	}
}

// TestOutsideLinkDoesNotPrefillAlwaysGrant: the links an agent can hand an
// operator are not only other sites' pages. A link opened from a native
// MCP client, a terminal or a chat app reaches the browser as a
// navigation the user started (Sec-Fetch-Site: none), which sends the
// Strict cookie; a browser without Fetch Metadata sends no Sec-Fetch-Site
// at all; and a link to the login form comes back, after the operator
// logs in, as a redirect from this origin. None of them may choose the
// grant the "Always allow" form carries: only the page's own preview form
// (same-origin) previews another grant.
func TestOutsideLinkDoesNotPrefillAlwaysGrant(t *testing.T) {
	f := &newlyFake{fakeBackend: newFake()}
	srv := httptest.NewServer(New(f, nil))
	t.Cleanup(srv.Close)
	c := newClient(t, srv)
	c.login(operatorToken)
	wide := "approve:always weather --..."
	link := "/ui/approvals/ap1?grant=" + url.QueryEscape(wide)
	own := `name="grant" value="approve:always weather --city=Oslo"`

	for _, site := range []string{"none", ""} {
		c.site = site
		_, body := c.do("GET", link, nil, nil)
		if strings.Contains(body, `value="`+wide+`"`) || !strings.Contains(body, own) {
			t.Errorf("a link opened with Sec-Fetch-Site %q chose the always form's grant (want the request's own, %s):\n%s", site, own, body)
		}
	}

	// The detour through the login form: a link to it naming the page to
	// come back to. Logged in, the form sends the operator on at once;
	// logged out (or opened from another site, without the Strict
	// cookie), after the operator logs in. (A grant without "..": safeNext
	// refuses a next holding two dots.)
	link = "/ui/approvals/ap1?grant=" + url.QueryEscape("approve:always weather --city=*")
	c.site = "none"
	resp, _ := c.do("GET", "/ui/login?next="+url.QueryEscape(link), nil, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/approvals/ap1" {
		t.Errorf("a link to the login form sends a logged-in operator to %d %q, want /ui/approvals/ap1 without its grant", resp.StatusCode, loc)
	}
	fresh := newClient(t, srv)
	_, page := fresh.do("GET", "/ui/login?next="+url.QueryEscape(link), nil, nil)
	resp, _ = fresh.do("POST", "/ui/login", url.Values{"csrf": {csrf(t, page)}, "token": {operatorToken}, "next": {link}}, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || loc != "/ui/approvals/ap1" {
		t.Fatalf("logging in from a link to the login form sends the operator to %d %q, want /ui/approvals/ap1 without its grant", resp.StatusCode, loc)
	}
	if _, body := fresh.do("GET", loc, nil, nil); strings.Contains(body, `value="approve:always weather --city=*"`) || !strings.Contains(body, own) {
		t.Errorf("the page the login came back to prefilled the always form with another grant than %s:\n%s", own, body)
	}
}

// TestLinkTextEscapedOnErrorPages: a link's path is repeated on the page
// that says it leads nowhere (the not-found page, which needs no login,
// and a request ID that names no request). Whoever wrote the link chose
// that text: its bidi and zero-width characters are escapes and a long
// one is cut, so it cannot put a sentence of its own on the inbox.
func TestLinkTextEscapedOnErrorPages(t *testing.T) {
	_, c := newInbox(t, newFake(), nil)
	c.login(operatorToken)
	spoof := "x\u202e\u200b" + strings.Repeat(" maiden verified this request as safe", 20)
	for _, p := range []string{"/ui/nope/", "/ui/approvals/"} {
		_, body := c.do("GET", p+url.PathEscape(spoof), nil, nil)
		if i := strings.IndexAny(body, "\u202e\u200b"); i >= 0 || !strings.Contains(body, `x\u202e\u200b maiden verified`) {
			t.Errorf("%s: the link's text is shown raw:\n%s", p, body)
		}
		// (The backend's not-found error quotes an unknown ID whole.)
		if p == "/ui/nope/" && strings.Count(body, "maiden verified") > 10 {
			t.Errorf("%s: the link's text is shown whole:\n%s", p, body)
		}
	}
}
