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
