package inbox

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// boundaryBackend is the fake whose Decide settles a boundary request as
// maiden does: approve → approved (revision + 1) or conflict, deny →
// denied with the operator's reason, always → refused.
type boundaryBackend struct {
	*fakeBackend
	conflict string // an approval ends in conflict with this reason
}

func (b *boundaryBackend) Decide(ctx context.Context, id string, d Answer) (Approval, error) {
	b.mu.Lock()
	a, ok := b.approvals[id]
	b.mu.Unlock()
	if !ok || a.Kind != KindBoundary {
		return b.fakeBackend.Decide(ctx, id, d)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.decided = append(b.decided, d)
	if d.Always {
		return a, fmt.Errorf("%w: a boundary request widens one session once; there is no always for it", ErrRefused)
	}
	a.DecidedBy, a.Decided = d.By, time.Now()
	switch {
	case !d.Approve:
		a.State, a.DecisionReason = "denied", d.Reason
	case b.conflict != "":
		a.State, a.DecisionReason = "conflict", b.conflict
	default:
		a.State, a.DecisionReason, a.Revision = "approved", "applied", a.Revision+1
	}
	b.approvals[id] = a
	return a, nil
}

func boundaryFake() *boundaryBackend {
	f := newFake()
	now := time.Now()
	f.approvals["bnd_1"] = Approval{
		ID: "bnd_1", Kind: KindBoundary, Agent: "bot", Session: "ses_42", Tool: "request_sandbox_boundary",
		Rendered: `{"filesystem":{"entries":[{"path":"/srv/other/b.txt","access":"read","scope":"exact"}]},"network":{"enabled":true}}`,
		Rule:     "request r1", RequestID: "r1", Reason: `I need <script>alert(1)</script> "b.txt"`,
		Entries: []BoundaryEntry{{Path: "/srv/other/b.txt", Access: "read", Scope: "exact"}, {Path: "/srv/out", Access: "write", Scope: "subtree"}},
		Network: true, Revision: 3, Hosts: []string{}, Secrets: []string{},
		Created: now.Add(-time.Minute), Expires: now.Add(24 * time.Hour), State: "pending",
	}
	return &boundaryBackend{fakeBackend: f}
}

func newTestServer(t *testing.T, b Backend) *httptest.Server {
	srv := httptest.NewServer(New(b, nil))
	t.Cleanup(srv.Close)
	return srv
}

// loggedIn returns a client logged in as alice and the pending page.
func loggedIn(t *testing.T, b Backend) (*client, string) {
	t.Helper()
	srv := newTestServer(t, b)
	c := newClient(t, srv)
	if resp, body := c.login(operatorToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d\n%s", resp.StatusCode, body)
	}
	resp, page := c.do("GET", "/ui", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("pending page: %d\n%s", resp.StatusCode, page)
	}
	return c, page
}

// article is request id's part of a page.
func article(t *testing.T, page, id string) string {
	t.Helper()
	start := strings.Index(page, `id="req-`+id+`"`)
	if start < 0 {
		t.Fatalf("no request %s on the page:\n%s", id, page)
	}
	end := strings.Index(page[start:], "</article>")
	return page[start : start+end]
}

// TestBoundaryRequestShown: a boundary request is shown as one: what it
// asks for (each entry's access, scope and path; network), the agent's
// justification as text, the session and the agent's request ID, the
// boundary revision; no "always" form, no input digest, no hosts or
// credentials of a tool, no tool arguments. A tool call's request keeps
// all of those.
func TestBoundaryRequestShown(t *testing.T) {
	_, page := loggedIn(t, boundaryFake())
	a := article(t, page, "bnd_1")
	for _, want := range []string{
		`<td class="access">read</td><td class="scope">exact</td><td><code class="path">/srv/other/b.txt</code>`,
		`<td class="access">write</td><td class="scope">subtree</td><td><code class="path">/srv/out</code>`,
		`yes: enable network access`,
		`<span class="justification"><code class="v">I need &lt;script&gt;alert(1)&lt;/script&gt; &#34;b.txt&#34;</code></span>`,
		`<code>ses_42</code>`, `<code>r1</code>`, `<dd class="revision">3`,
		`class="approve">Approve for this session</button>`, `<form method="post" action="/ui/approvals/bnd_1" class="deny">`,
	} {
		if !strings.Contains(a, want) {
			t.Errorf("the boundary request does not show %s:\n%s", want, a)
		}
	}
	for _, not := range []string{`class="always"`, "Input digest", `class="digest"`, `class="hosts"`, `class="secrets"`, `class="args"`, "<script>", "Approve once"} {
		if strings.Contains(a, not) {
			t.Errorf("the boundary request shows %s:\n%s", not, a)
		}
	}
	call := article(t, page, "ap1")
	for _, want := range []string{`class="always"`, `class="digest"`, `class="hosts"`, `class="args"`, "Approve once"} {
		if !strings.Contains(call, want) {
			t.Errorf("a tool call's request lost %s:\n%s", want, call)
		}
	}
}

// TestBoundaryDecisions: approving says the session's new revision (or,
// when the boundary cannot take the request, that nothing was applied and
// why); denying passes the reason; "always" posted anyway is refused by the
// backend and shown; the decided request shows who decided and why.
func TestBoundaryDecisions(t *testing.T) {
	for _, tc := range []struct {
		name, action, reason, conflict string
		status                         int
		notice, outcome                string
	}{
		{name: "approve", action: "approve", status: http.StatusSeeOther,
			notice: "Approved: session ses_42&#39;s boundary is now revision 4, for this session only.", outcome: "approved by operator:alice"},
		{name: "conflict", action: "approve", conflict: "explicit_deny", status: http.StatusSeeOther,
			notice: "Not applied: session ses_42&#39;s boundary cannot take this request (explicit_deny)", outcome: "conflict by operator:alice"},
		{name: "deny", action: "deny", reason: "not for this task", status: http.StatusSeeOther,
			notice: "Denied; the agent is told the reason.", outcome: "“not for this task”"},
		{name: "always", action: "always", status: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := boundaryFake()
			b.conflict = tc.conflict
			c, page := loggedIn(t, b)
			resp, body := c.do("POST", "/ui/approvals/bnd_1", url.Values{"csrf": {csrf(t, page)}, "action": {tc.action}, "reason": {tc.reason}}, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("POST %s: %d, want %d\n%s", tc.action, resp.StatusCode, tc.status, body)
			}
			if tc.status != http.StatusSeeOther {
				if !strings.Contains(body, "no always") {
					t.Errorf("the refusal is not shown:\n%s", body)
				}
				if a, _ := b.Approval(context.Background(), "bnd_1"); a.State != "pending" {
					t.Errorf("after a refused always the request is %s", a.State)
				}
				return
			}
			if loc := resp.Header.Get("Location"); loc != "/ui/approvals/bnd_1" {
				t.Errorf("redirect to %q", loc)
			}
			_, shown := c.do("GET", "/ui/approvals/bnd_1", nil, nil)
			if !strings.Contains(shown, tc.notice) {
				t.Errorf("notice: want %q in\n%s", tc.notice, shown)
			}
			a := article(t, shown, "bnd_1")
			if !strings.Contains(a, tc.outcome) || strings.Contains(a, `class="actions"`) {
				t.Errorf("the decided request: want %q and no actions in\n%s", tc.outcome, a)
			}
			if d := b.decisions(); len(d) != 1 || d[0].By != "operator:alice" || d[0].Always || d[0].Reason != tc.reason {
				t.Errorf("decisions %+v", d)
			}
		})
	}
}
