package inbox

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// newlyFake is the fake backend that can also say what approving would
// newly allow: it answers for the grant asked, or refuses one.
type newlyFake struct {
	*fakeBackend
	asked []string // the grants Newly was asked about
}

func (f *newlyFake) Newly(_ context.Context, id, grant string) (Newly, error) {
	f.mu.Lock()
	f.asked = append(f.asked, grant)
	f.mu.Unlock()
	if strings.Contains(grant, "other") {
		return Newly{}, ErrRefused
	}
	return Newly{Window: 7 * 24 * time.Hour, Beyond: []string{"approve:always weather with <b>x</b>\x1b[2J (today nothing of weather)"}, Calls: 12,
		NotReplayable: 3, NotReplayableWhy: "not replayable: <i>old</i> records",
		Examples: []NewlyCall{{Seq: 7, At: time.Now(), Target: "approve:always weather --city=<script>alert(1)</script>\u202e", Asked: true}}}, nil
}

// TestNewlyOnTheApprovalPage: an always-able request's own page shows
// what approving would newly allow (what the agent supplied escaped: no
// markup, no terminal or bidi controls), for its own grant or the one
// previewed (which the always form then carries); a refused preview says
// why; the pending list and a decided request show none.
func TestNewlyOnTheApprovalPage(t *testing.T) {
	f := &newlyFake{fakeBackend: newFake()}
	srv := httptest.NewServer(New(f, nil))
	t.Cleanup(srv.Close)
	c := newClient(t, srv)
	c.login(operatorToken)
	_, body := c.do("GET", "/ui/approvals/ap1", nil, nil)
	for _, want := range []string{`id="newly-ap1"`, "What would newly be possible", "Of the calls recorded in the last 7 days, <strong>12</strong>",
		"&lt;b&gt;x&lt;/b&gt;\\x1b[2J", "&lt;script&gt;alert(1)&lt;/script&gt;\\u202e", "asked a human",
		"<strong>3</strong> more recorded calls could not be replayed (not replayable: &lt;i&gt;old&lt;/i&gt; records)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the approval page lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"<script>alert", "<b>x", "\x1b", "\u202e"} {
		if strings.Contains(body, bad) {
			t.Errorf("the approval page shows %q raw", bad)
		}
	}
	_, body = c.do("GET", "/ui/approvals/ap1?grant="+url.QueryEscape("approve:always weather --city=*"), nil, nil)
	if !strings.Contains(body, `name="grant" value="approve:always weather --city=*"`) || !strings.Contains(body, "if calls matching <code class=\"newly-grant\">approve:always weather --city=*</code>") {
		t.Errorf("a previewed grant should be shown and carried by the always form:\n%s", body)
	}
	_, body = c.do("GET", "/ui/approvals/ap1?grant="+url.QueryEscape("approve:always other"), nil, nil)
	if !strings.Contains(body, `class="newly-error"`) || !strings.Contains(body, "refused") {
		t.Errorf("a refused preview should say why:\n%s", body)
	}
	if want := []string{"approve:always weather --city=Oslo", "approve:always weather --city=*", "approve:always other"}; strings.Join(f.asked, "|") != strings.Join(want, "|") {
		t.Errorf("Newly was asked about %q, want %q", f.asked, want)
	}
	if _, body = c.do("GET", "/ui", nil, nil); strings.Contains(body, "newly-ap1") {
		t.Errorf("the pending list should not replay the trail for each request:\n%s", body)
	}
	a := f.approvals["ap1"]
	a.State = "approved"
	f.approvals["ap1"] = a
	if _, body = c.do("GET", "/ui/approvals/ap1", nil, nil); strings.Contains(body, "newly-ap1") {
		t.Errorf("a decided request has nothing left to approve:\n%s", body)
	}
}
